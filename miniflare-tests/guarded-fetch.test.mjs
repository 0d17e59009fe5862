// End to end, what leaves the sandbox: guest fetch in both runtimes, checked by the tab and then
// by the Worker's egress route (which performs it), and the files a run leaves in /out, uploaded
// to R2 with expiring signed download URLs. A loopback HTTP server started here is the target;
// the tenant's policy allows it by the name "localhost" and its port.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { attachedExecutor } from "./lib/attached.mjs";
import { BASE, patchTenant } from "./lib/relay.mjs";

let attached;
let executor;
let client;
let target; // the loopback server
let origin; // http://localhost:<port>
let bigBodyRead = 0; // bytes of /big the server managed to send

before(async () => {
  target = createServer((req, res) => {
    if (req.url === "/hello") return res.writeHead(200, { "content-type": "text/plain", "x-target": "yes" }).end("hello from the target");
    if (req.url === "/echo") {
      let body = "";
      req.on("data", (c) => (body += c));
      return req.on("end", () => res.writeHead(201).end(JSON.stringify({ method: req.method, body, auth: req.headers.authorization ?? null })));
    }
    if (req.url === "/to-hello") return res.writeHead(302, { location: "/hello" }).end();
    if (req.url === "/to-evil") return res.writeHead(302, { location: "https://evil.example/steal" }).end();
    if (req.url === "/big") {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 120);
      const write = () => {
        while (bigBodyRead < 8 * 1024 * 1024) {
          bigBodyRead += chunk.length;
          if (!res.write(chunk)) return res.once("drain", write);
        }
        res.end();
      };
      return write();
    }
    res.writeHead(404).end();
  });
  // Every address (dual stack): "localhost" may resolve to 127.0.0.1 or ::1 for workerd.
  await new Promise((resolve) => target.listen(0, resolve));
  origin = `http://localhost:${target.address().port}`;
  const network = { allowedDomains: [`localhost:${target.address().port}`], blockPrivateRanges: false, denyIpLiterals: false, maxBodyBytes: 1 << 20 };
  attached = await attachedExecutor("guarded-fetch", { policy: { network }, queue: { attachWaitMs: 500 } });
  ({ executor, client } = attached);
});

after(async () => {
  await attached?.close();
  target?.close();
});

const runJs = (code, extra = {}) => client.callTool({ name: "run_js", arguments: { code, ...extra } });
const runPy = (code, extra = {}) => client.callTool({ name: "run_py", arguments: { code, ...extra } });

describe("guest fetch", () => {
  test("run_js: an allowed GET and POST reach the target through the Worker", async () => {
    const code = `
      const r = await fetch("${origin}/hello");
      console.log(r.status, r.ok, r.headers.get("x-target"), await r.text());
      const p = await fetch("${origin}/echo", { method: "POST", body: "payload", headers: { authorization: "Bearer guest" } });
      console.log(p.status, JSON.stringify(await p.json()));
      const followed = await fetch("${origin}/to-hello");
      console.log(followed.url.endsWith("/hello"), await followed.text());`;
    const result = await runJs(code);
    assert.equal(result.structuredContent.exitCode, 0, JSON.stringify(result.structuredContent));
    assert.equal(
      result.structuredContent.stdout,
      '200 true yes hello from the target\n201 {"method":"POST","body":"payload","auth":"Bearer guest"}\ntrue hello from the target\n',
    );
    assert.equal(result.structuredContent.usage.fetches, 3);
    assert.equal(result.structuredContent.usage.denied, 0);
  });

  test("run_py: pyfetch with top-level await", async () => {
    const code = `from pyodide.http import pyfetch\nr = await pyfetch("${origin}/hello")\nprint(r.status, await r.string())`;
    const result = await runPy(code);
    assert.equal(result.structuredContent.stdout, "200 hello from the target\n", JSON.stringify(result.structuredContent));
  });

  test("run_py: urllib.request works over the same guarded fetch, errors included", async () => {
    const code = [
      "import urllib.request, urllib.error",
      `print(urllib.request.urlopen("${origin}/hello").read().decode())`,
      `req = urllib.request.Request("${origin}/echo", data=b"sent", method="PUT")`,
      "with urllib.request.urlopen(req) as r:",
      "    print(r.status, r.read().decode())",
      "try:",
      `    urllib.request.urlopen("${origin}/missing")`,
      "except urllib.error.HTTPError as e:",
      "    print('HTTPError', e.code)",
      "try:",
      '    urllib.request.urlopen("https://evil.example/")',
      "except urllib.error.URLError as e:",
      "    print('URLError', str(e.reason).split(':')[0])",
    ].join("\n");
    const result = await runPy(code);
    assert.equal(
      result.structuredContent.stdout,
      'hello from the target\n201 {"method":"PUT","body":"sent","auth":null}\nHTTPError 404\nURLError PolicyDenied\n',
      JSON.stringify(result.structuredContent),
    );
  });

  test("an unusual but valid method (M-SEARCH) reaches the Worker, whose refusal is raised in the guest, in both runtimes", async () => {
    const js = await runJs(`
      for (const method of ["M-SEARCH", "NOT A METHOD"]) {
        try { await fetch("${origin}/echo", { method }) } catch (e) { console.log(e.name, e.message) }
      }`);
    assert.equal(js.structuredContent.exitCode, 0, JSON.stringify(js.structuredContent));
    const [searched, malformed] = js.structuredContent.stdout.trim().split("\n");
    assert.match(searched, /^ValidationError egress request: method "M-SEARCH" is not supported; use one of /);
    assert.match(malformed, /^TypeError "NOT A METHOD" is not a valid HTTP method/);
    const py = await runPy(
      `from pyodide.http import pyfetch\ntry:\n    await pyfetch("${origin}/echo", method="M-SEARCH")\nexcept Exception as e:\n    print(e)`,
    );
    assert.equal(py.structuredContent.exitCode, 0, JSON.stringify(py.structuredContent));
    assert.match(py.structuredContent.stdout, /^ValidationError: egress request: method "M-SEARCH" is not supported; use one of /);
  });

  test("a host the policy does not list is refused in the tab, named, and counted", async () => {
    const code = `try { await fetch("https://evil.example/x") } catch (e) { console.log(e.name, e.message) }`;
    const result = await runJs(code);
    const { stdout, usage } = result.structuredContent;
    assert.match(stdout, /^PolicyDenied .*evil\.example.*allowedDomains/, stdout);
    assert.equal(usage.denied, 1);
    const py = await runPy(`from pyodide.http import pyfetch\ntry:\n    await pyfetch("https://evil.example/x")\nexcept Exception as e:\n    print(str(e)[:80])`);
    assert.match(py.structuredContent.stdout, /PolicyDenied/, JSON.stringify(py.structuredContent));
  });

  test("each refused fetch and write is a policy_denial on the audit chain, the first 16 of a run", async () => {
    const code = `
      import fs from "fs";
      try { fs.writeFileSync("/host/not-allowed.txt", "x"); } catch (e) { console.log(e.name); }
      for (let i = 0; i < 20; i++) { try { await fetch("https://evil.example/" + i); } catch {} }
    `;
    const result = await runJs(code);
    assert.equal(result.structuredContent.stdout, "PolicyDenied\n", JSON.stringify(result.structuredContent));
    assert.equal(result.structuredContent.usage.denied, 21);
    const py = await runPy('try:\n    open("/host/py.txt", "w")\nexcept PermissionError as e:\n    print("refused")');
    assert.equal(py.structuredContent.stdout, "refused\n", JSON.stringify(py.structuredContent));
    const audit = JSON.parse((await client.readResource({ uri: "relay://audit" })).contents[0].text);
    const lastRun = (tool) => audit.records.filter((r) => r.kind === "tool_call" && r.tool === tool).at(-1).runId;
    const denials = audit.records.filter((r) => r.kind === "policy_denial");
    const ofJs = denials.filter((r) => r.runId === lastRun("run_js"));
    assert.equal(ofJs.length, 16, "a run's denials beyond 16 are counted, not recorded");
    assert.deepEqual(
      { tool: ofJs[0].tool, target: ofJs[0].args.target, error: ofJs[0].errorName },
      { tool: "write", target: "/host/not-allowed.txt", error: "PolicyDenied" },
    );
    assert.deepEqual([ofJs[1].tool, ofJs[1].args.target], ["fetch", "https://evil.example/0"]);
    assert.match(ofJs[1].args.reason, /allowedDomains/);
    const ofPy = denials.filter((r) => r.runId === lastRun("run_py"));
    assert.deepEqual(ofPy.map((r) => [r.tool, r.args.target]), [["write", "/host/py.txt"]]);
  });

  test("the Worker refuses what the tab let through (the tab's check bypassed on purpose)", async () => {
    // Rewrites the page's request to the egress route after the tab checked the allowed URL.
    await executor.page.route("**/egress", async (route) => {
      const body = JSON.parse(route.request().postData());
      await route.continue({ postData: JSON.stringify({ ...body, url: "https://evil.example/x" }) });
    });
    try {
      const result = await runJs(`try { await fetch("${origin}/hello") } catch (e) { console.log(e.name, e.message) }`);
      assert.match(result.structuredContent.stdout, /^PolicyDenied .*evil\.example/, JSON.stringify(result.structuredContent));
    } finally {
      await executor.page.unroute("**/egress");
    }
  });

  test("a redirect to a denied host is refused at that hop", async () => {
    const result = await runJs(`try { await fetch("${origin}/to-evil") } catch (e) { console.log(e.name, e.message) }`);
    assert.match(result.structuredContent.stdout, /^PolicyDenied .*evil\.example/, JSON.stringify(result.structuredContent));
  });

  test("a body over maxBodyBytes is cut off, not read to the end", async () => {
    bigBodyRead = 0;
    const result = await runJs(`try { await (await fetch("${origin}/big")).text() } catch (e) { console.log(e.name, e.message) }`, {
      policy: { network: { maxBodyBytes: 100000 } },
    });
    assert.match(result.structuredContent.stdout, /^PolicyDenied .*maxBodyBytes/, JSON.stringify(result.structuredContent));
    assert.ok(bigBodyRead < 8 * 1024 * 1024, `the target sent ${bigBodyRead} bytes`);
  });
});

describe("a host the tenant's admin allows", () => {
  test("is refused until the admin patches the tenant's defaults as the refusal says, then allowed at once", async () => {
    // The loopback target by its address: the tenant allows IP literals and private ranges, but
    // does not list this host in allowedDomains.
    const url = `http://127.0.0.1:${target.address().port}/hello`;
    const code = `try { console.log(await (await fetch("${url}")).text()) } catch (e) { console.log(e.name, e.message) }`;
    const refused = (await runJs(code)).structuredContent.stdout;
    assert.match(refused, /^PolicyDenied .*"127\.0\.0\.1" is not in network\.allowedDomains/, refused);
    assert.match(refused, /the tenant's admin can add "127\.0\.0\.1[^"]*".*PATCH \/admin\/tenants\/<tenant id>/, refused);
    assert.match(refused, /a call's own policy can only narrow the tenant's/, refused);
    const wanted = /can add "([^"]+)"/.exec(refused)[1]; // what the message says to list
    // What the agent tried first: its own call's policy. Still refused, as the message says.
    const own = await runJs(code, { policy: { network: { allowedDomains: [wanted] } } });
    assert.match(own.structuredContent.stdout, /^PolicyDenied /, JSON.stringify(own.structuredContent));

    const listed = attached.tenant.defaults.policy.network.allowedDomains;
    const allow = (allowedDomains) => patchTenant(attached.tenant.id, { defaults: { policy: { network: { allowedDomains } } } });
    const patched = await allow([...listed, wanted]);
    assert.equal(patched.status, 200, await patched.clone().text());
    try {
      // No wait: the isolate that answered the PATCH uses the new record at once, and wrangler
      // dev runs one isolate (deployed, other isolates follow within the 10 s tenant cache).
      const result = await runJs(code);
      assert.equal(result.structuredContent.stdout, "hello from the target\n", JSON.stringify(result.structuredContent));
    } finally {
      assert.equal((await allow(listed)).status, 200);
    }
  });
});

describe("files left in /out", () => {
  test("are listed with size and sha256, downloadable by signed URL, and images come back as image content", async () => {
    const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>';
    const code = `open('/out/plot.svg', 'w').write('${svg}')\nopen('/out/data.csv', 'w').write('a,b\\n1,2\\n')\nprint('drawn')`;
    const result = await runPy(code);
    const { files, exitCode } = result.structuredContent;
    assert.equal(exitCode, 0, JSON.stringify(result.structuredContent));
    const byPath = Object.fromEntries(files.map((f) => [f.path, f]));
    assert.deepEqual(Object.keys(byPath).sort(), ["/out/data.csv", "/out/plot.svg"]);
    assert.equal(byPath["/out/data.csv"].size, 8);
    assert.match(byPath["/out/data.csv"].sha256, /^[0-9a-f]{64}$/);
    // The URL is absolute: a client downloads with nothing but what the result says.
    assert.ok(byPath["/out/data.csv"].url.startsWith(`${BASE}/files/`), byPath["/out/data.csv"].url);
    const download = await fetch(byPath["/out/data.csv"].url);
    assert.equal(download.status, 200);
    assert.equal(await download.text(), "a,b\n1,2\n");
    const head = await fetch(byPath["/out/plot.svg"].url, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("content-type"), "image/svg+xml");
    const image = result.content.find((c) => c.type === "image");
    assert.equal(image?.mimeType, "image/svg+xml");
    assert.equal(Buffer.from(image.data, "base64").toString(), svg);

    const tampered = new URL(byPath["/out/data.csv"].url);
    tampered.pathname = tampered.pathname.replace("data.csv", "plot.svg");
    assert.equal((await fetch(tampered)).status, 403);
  });

  test("70 images of 90 KB: the result comes, 32 published, 32 more listed as refused, the rest counted, images within the budget", async () => {
    // Every image inlined in the exit event made one line of ~8 MB, past the 4 MiB a batch may
    // be: the exit never reached the relay and the run ended at its deadline with nothing.
    const code = `import fs from "fs";
for (let i = 0; i < 70; i++) fs.writeFileSync("/out/p" + String(i).padStart(2, "0") + ".png", new Uint8Array(90 * 1024).fill(i));
console.log("drawn");`;
    const result = await runJs(code);
    const { files, exitCode, stderr } = result.structuredContent;
    assert.equal(exitCode, 0, JSON.stringify({ ...result.structuredContent, files: files?.length }));
    assert.equal(files.length, 64);
    assert.deepEqual(files.slice(0, 32).map((f) => typeof f.url), Array(32).fill("string"), "a download URL each");
    for (const file of files.slice(32)) {
      assert.equal(file.url, undefined);
      assert.equal(file.error?.name, "OutputLimitExceeded", JSON.stringify(file));
      assert.match(file.error.message, /at most 32 files from \/out/);
    }
    assert.equal(files[32].path, "/out/p32.png", "the first 32 in path order are published");
    assert.match(stderr, /38 more files in \/out were not stored: a run publishes at most 32 files/);
    assert.equal(stderr.match(/was not stored/g), null, "one line for them all");
    const images = result.content.filter((c) => c.type === "image");
    assert.ok(images.length >= 1, "the first images still come back");
    assert.ok(images.reduce((sum, c) => sum + c.data.length, 0) <= 128 * 1024);
  });
});
