// display() end to end (mcp::display, lib/run-queue.js storeDisplays): the official SDK client
// calls run_js / run_py whose code shows a PNG, HTML, Markdown, a table and plain text, in
// headless Chromium; each arrives as its MCP content type (image, embedded resource, text), with
// structuredContent.displays, and an image over 96 KiB goes to /out with its download URL.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { attachedExecutor } from "./lib/attached.mjs";
import { waitForLine } from "./lib/browser.mjs";

// A 1x1 PNG.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

let attached;
let client;

before(async () => {
  attached = await attachedExecutor("display");
  client = attached.client;
  await waitForLine(attached.executor.lines, /^Runtimes ready/, 180_000);
});

after(() => attached?.close());

const call = (name, code) => client.callTool({ name, arguments: { code } });
const shown = (result) => JSON.stringify(result.structuredContent ?? result).slice(0, 2000);

test("JavaScript: PNG bytes, a raw HTML bundle, an object with _repr_markdown_, records and a string", async () => {
  // QuickJS has no atob: the code decodes base64 itself.
  const code = `
    const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    function decode(text) {
      const out = [];
      let bits = 0, value = 0;
      for (const c of text.replace(/=+$/, "")) {
        value = ((value << 6) | abc.indexOf(c)) & 0xffffff;
        bits += 6;
        if (bits >= 8) { bits -= 8; out.push((value >> bits) & 255); }
      }
      return Uint8Array.from(out);
    }
    const png = decode(${JSON.stringify(PNG)});
    display(png);
    display({ "text/html": "<b>bold</b>", "text/plain": "bold" }, { raw: true });
    display({ _repr_markdown_: () => "# Title" });
    display([{ city: "Oslo", n: 1 }, { city: "Lima", n: 2 }]);
    display("just text");
    console.log("done");`;
  const result = await call("run_js", code);
  assert.equal(result.isError, false, shown(result));
  const [, image, html, markdown, table, text] = result.content;
  assert.deepEqual(image, { type: "image", data: PNG, mimeType: "image/png" });
  assert.equal(html.type, "resource");
  assert.deepEqual(html.resource.mimeType, "text/html");
  assert.equal(html.resource.text, "<b>bold</b>");
  assert.match(html.resource.uri, /^relay:\/\/runs\/r_\w+\/displays\/1$/);
  assert.equal(markdown.resource.mimeType, "text/markdown");
  assert.equal(markdown.resource.text, "# Title");
  assert.equal(table.text, "| city | n |\n| --- | --- |\n| Oslo | 1 |\n| Lima | 2 |\n");
  assert.deepEqual(text, { type: "text", text: "just text" });
  const displays = result.structuredContent.displays;
  assert.deepEqual(displays.map((d) => d.mimeType), ["image/png", "text/html", "text/markdown", "application/json", "text/plain"]);
  assert.deepEqual(displays[3].table.rows, [{ city: "Oslo", n: 1 }, { city: "Lima", n: 2 }]);
});

test("Python: PNG bytes, _repr_html_, a dict of columns, JSON and a figure-like _repr_png_", async () => {
  const code = `
import base64
png = base64.b64decode(${JSON.stringify(PNG)})
display(png)
class Report:
    def _repr_html_(self):
        return "<table><tr><td>1</td></tr></table>"
display(Report())
display({"x": [1, 2], "y": ["a", "b"]})
display({"nested": {"k": [1, {"a": 2}]}})
class Figure:
    def _repr_png_(self):
        return png
display(Figure())
print("done")`;
  const result = await call("run_py", code);
  assert.equal(result.isError, false, shown(result));
  const [, image, html, table, json, figure] = result.content;
  assert.deepEqual(image, { type: "image", data: PNG, mimeType: "image/png" });
  assert.equal(html.resource.mimeType, "text/html");
  assert.equal(html.resource.text, "<table><tr><td>1</td></tr></table>");
  assert.equal(table.text, "| x | y |\n| --- | --- |\n| 1 | a |\n| 2 | b |\n");
  assert.deepEqual(JSON.parse(json.text), { nested: { k: [1, { a: 2 }] } });
  assert.deepEqual(result.structuredContent.displays[3].value, { nested: { k: [1, { a: 2 }] } });
  assert.deepEqual(figure, { type: "image", data: PNG, mimeType: "image/png" });
});

test("an image over 96 KiB goes to /out and comes back with its URL", async () => {
  const code = `
import base64
png = base64.b64decode(${JSON.stringify(PNG)})
display(png + bytes(200 * 1024))`;
  const result = await call("run_py", code);
  assert.equal(result.isError, false, shown(result));
  const [display] = result.structuredContent.displays;
  assert.equal(display.mimeType, "image/png");
  assert.match(display.path, /^\/out\/display-r_\w+-0\.png$/);
  assert.match(display.url, /^http:\/\/127\.0\.0\.1:\d+\/files\//);
  const file = result.structuredContent.files.find((f) => f.path === display.path);
  assert.equal(file.size, 200 * 1024 + 70);
  assert.ok(!result.content.some((c) => c.type === "image"), "not inline");
  assert.match(result.content[1].text, /too large to show inline, is in \/out/);
  const fetched = await fetch(display.url);
  assert.equal(fetched.status, 200);
  assert.equal((await fetched.arrayBuffer()).byteLength, 200 * 1024 + 70);
});

test("what display() cannot show is said on stderr, and the run goes on", async () => {
  const result = await call("run_py", "display(b'not an image')\nprint('after')");
  assert.equal(result.structuredContent.stdout, "after\n", shown(result));
  assert.match(result.structuredContent.stderr, /display: application\/octet-stream cannot be shown/);
});

test("two charts of 90 KiB: the first inline, the second past the result's budget goes to /out, not lost", async () => {
  const code = `
import base64
png = base64.b64decode(${JSON.stringify(PNG)})
display(png + bytes(90 * 1024))
display(png + bytes(90 * 1024) + b"2")`;
  const result = await call("run_py", code);
  assert.equal(result.isError, false, shown(result));
  const [first, second] = result.structuredContent.displays;
  assert.ok(!first.leftOut && !first.path, shown(result));
  assert.equal(result.content.filter((c) => c.type === "image").length, 1, "the first inline");
  assert.ok(!second.leftOut, `the second was left out of the result: ${shown(result)}`);
  assert.match(second.path, /^\/out\/display-r_\w+-1\.png$/);
  const fetched = await fetch(second.url);
  assert.equal((await fetched.arrayBuffer()).byteLength, 90 * 1024 + 71);
});
