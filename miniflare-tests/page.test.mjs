// The executor page driven in Chromium as a person uses it: open it with no key, type a wrong
// key and then the right one, copy a connect snippet, run code from the try-it box, watch a
// run started by an SDK client appear with its output and /out file, reload and still see the
// history, open a second tab and see which one runs next, close it and see the first take over
// with nothing queued lost. Screenshots go to miniflare-tests/.artifacts/screenshots/ (kept by
// CI as artifacts; see README "The two commands").

import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { launchBrowser } from "./lib/browser.mjs";
import { connectClient, readRelaySession } from "./lib/mcp-client.mjs";
import { BASE, ROOT, createTenant } from "./lib/relay.mjs";

const SHOTS = path.join(ROOT, "miniflare-tests/.artifacts/screenshots");

let key;
let browser;
let context;
let page;
let client;

const text = (selector) => page.locator(selector).innerText();
const waitForText = (selector, pattern, timeout = 20_000) =>
  page.waitForFunction(([s, p]) => new RegExp(p).test(document.querySelector(s)?.textContent ?? ""), [selector, pattern.source], { timeout });
const shot = (name, target = page) => target.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  ({ key } = await createTenant("page", { queue: { attachWaitMs: 3000 } }));
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1000, height: 900 } });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: BASE });
  page = await context.newPage();
  await page.goto(`${BASE}/`);
});

after(async () => {
  await client?.close();
  await browser?.close();
});

describe("a browser that cannot be an executor", () => {
  test("is told what it lacks and which browsers work, and does not attach", async () => {
    // What an older browser lacks (Firefox 115 ESR, for one, has no Ed25519 in WebCrypto).
    const older = await browser.newContext();
    await older.addInitScript(() => {
      delete window.DecompressionStream;
      const generateKey = SubtleCrypto.prototype.generateKey;
      SubtleCrypto.prototype.generateKey = function (algorithm, ...rest) {
        if (algorithm?.name === "Ed25519") return Promise.reject(new DOMException("Algorithm: Unrecognized name", "NotSupportedError"));
        return generateKey.call(this, algorithm, ...rest);
      };
    });
    try {
      const tab = await older.newPage();
      const attaches = [];
      tab.on("request", (request) => request.url().endsWith("/session") && attaches.push(request.url()));
      await tab.goto(`${BASE}/#key=${key}`);
      await tab.waitForFunction(() => document.getElementById("banner").dataset.state === "unsupported", null, { timeout: 20_000 });
      const banner = await tab.locator("#banner").innerText();
      assert.match(banner, /^This browser cannot be an executor: it has no DecompressionStream\("deflate-raw"\), Ed25519 signatures in WebCrypto\./);
      assert.match(banner, /works in Chrome or Edge 137\+, Firefox 129\+ and Safari 17\+\.$/);
      await shot("page-unsupported", tab);
      assert.deepEqual(attaches, [], "it never attached");
    } finally {
      await older.close();
    }
  });
});

describe("attaching", () => {
  test("with no key the page asks for one, and says what the tab is", async () => {
    await page.locator("#key-form").waitFor({ state: "visible" });
    assert.match(await text("#banner"), /Enter your API key/);
    assert.match(await text("header"), /runs code for your AI agents/);
    assert.equal(await page.locator("#connect").isVisible(), false, "nothing to connect to before attaching");
  });

  test("a wrong key is refused with one clear message that says where keys come from, and the form stays", async () => {
    await page.getByLabel("API key").fill("rk_wrong_key_0000000000000000000000000000000000");
    await page.getByRole("button", { name: "Attach" }).click();
    await waitForText("#key-error", /refused this key/);
    const message = await text("#key-error");
    assert.match(message, /\(malformed API key: relay-edge keys look like `rk_`/, "the server's reason");
    assert.match(message, /POST \/admin\/tenants/, "where keys come from");
    assert.match(message, /scripts\/dev\.sh/, "and locally");
    const body = await text("body");
    assert.equal(body.match(/refused/g)?.length, 1, `said once:\n${body}`);
    assert.doesNotMatch(body, /POST \/session/, "no route the person never called");
    assert.match(await text("#banner"), /enter a valid API key below/);
    assert.equal(await page.locator("#banner").getAttribute("data-state"), "unauthorized");
    assert.ok(await page.locator("#key-form").isVisible());
  });

  test("the right key, typed and submitted with Enter, attaches the tab", async () => {
    // Every state the runtimes line shows, from here on.
    await page.evaluate(() => {
      window.runtimeStates = [];
      new MutationObserver(() => window.runtimeStates.push(document.getElementById("runtimes").textContent)).observe(
        document.getElementById("runtimes"),
        { childList: true, characterData: true, subtree: true },
      );
    });
    await page.getByLabel("API key").fill(key);
    await page.getByLabel("API key").press("Enter");
    await waitForText("#banner", /Attached\. Calls of your MCP clients/);
    await waitForText("#tabs", /^1 \(this tab\)$/);
    assert.equal(await text("#session"), "default");
    assert.equal(await page.locator("#key-form").isVisible(), false);
    assert.equal(await text("#key-error"), "");
    await shot("page-attached");
  });

  test("the runtimes' readiness shows: loading, then ready", async () => {
    await waitForText("#runtimes", /^QuickJS ready · Pyodide ready$/, 60_000);
    const states = await page.evaluate(() => window.runtimeStates);
    assert.ok(states.includes("QuickJS loading… · Pyodide loading…"), states.join("\n"));
    assert.equal(await page.locator("#runtimes").getAttribute("data-ready"), "true");
  });
});

describe("connecting a client", () => {
  test("every snippet has the URL, and the key masked until asked for", async () => {
    const snippets = page.locator(".snippet pre");
    assert.equal(await snippets.count(), 4);
    for (const snippet of await snippets.allInnerTexts()) {
      assert.ok(snippet.includes(`${BASE}/mcp`), snippet);
      assert.ok(!snippet.includes(key), "the key is masked");
    }
    await page.getByLabel("Show the key in the snippets").check();
    assert.ok((await snippets.first().innerText()).includes(key));
    await page.getByLabel("Show the key in the snippets").uncheck();
  });

  test("a copy button copies the whole snippet with the real key", async () => {
    await page.getByRole("button", { name: "Copy the Claude Code snippet" }).click();
    await waitForText('[data-snippet="claude-code"]', /^Copied$/);
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    assert.equal(copied, `claude mcp add --transport http relay ${BASE}/mcp --header "Authorization: Bearer ${key}"`);
    await page.getByRole("button", { name: "Copy the Cursor snippet" }).click();
    const cursor = JSON.parse(await page.evaluate(() => navigator.clipboard.readText()));
    assert.deepEqual(cursor, { mcpServers: { relay: { url: `${BASE}/mcp`, headers: { Authorization: `Bearer ${key}` } } } });
     // The same form scripts/dev.sh prints: `"type": "http"`, the name clients read.
    await page.getByRole("button", { name: "Copy the Any client (JSON) snippet" }).click();
    const any = JSON.parse(await page.evaluate(() => navigator.clipboard.readText()));
    assert.deepEqual(any, { mcpServers: { relay: { type: "http", url: `${BASE}/mcp`, headers: { Authorization: `Bearer ${key}` } } } });
    const devScript = readFileSync(path.join(ROOT, "scripts/dev.sh"), "utf8");
    assert.match(devScript, /"type": "http", "url": "\$URL\/mcp"/);
  });
});

describe("runs", () => {
  test("code run from the try-it box shows its result, and appears in the list", async () => {
    await page.getByLabel("Language").selectOption("run_py");
    await page.getByLabel("Code", { exact: true }).fill("print('six times seven is', 6 * 7)");
    await page.getByRole("button", { name: "Run" }).click();
    await waitForText("#try-output", /exit 0/, 60_000);
    assert.match(await text("#try-output"), /six times seven is 42/);
    const run = page.locator(".run").first();
    assert.match(await run.locator("summary").first().innerText(), /run_py[\s\S]*Python[\s\S]*ok · exit 0/);
  });

  test("a run started by an SDK client appears with its code (collapsed), output, /out files and a thumbnail", async () => {
    client = await connectClient(key);
    const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20" fill="teal"/></svg>';
    const code = `import fs from "fs"; console.log("hello from the sdk"); fs.writeFileSync("/out/report.txt", "done"); fs.writeFileSync("/out/box.svg", ${JSON.stringify(svg)});`;
    const result = await client.callTool({ name: "run_js", arguments: { code } });
    assert.equal(result.isError, false, JSON.stringify(result));
    const run = page.locator(".run").first();
    await run.locator("summary").first().click();
    assert.match(await run.locator("summary").first().innerText(), /run_js[\s\S]*JavaScript[\s\S]*ok · exit 0/);
    assert.equal(await run.locator('pre[data-stream="stdout"]').innerText(), "hello from the sdk\n");
    // The code, from the capsule the tab ran: collapsed until asked for.
    const codeView = run.locator(".run-code");
    assert.equal(await codeView.getAttribute("open"), null, "collapsed");
    await codeView.locator("summary").click();
    assert.equal(await run.locator('pre[data-view="code"]').innerText(), code);
    const link = run.getByRole("link", { name: "/out/report.txt" });
    const download = await fetch(await link.getAttribute("href"));
    assert.equal(await download.text(), "done");
    const thumb = run.getByRole("img", { name: "thumbnail of /out/box.svg" });
    await page.waitForFunction((img) => img.complete && img.naturalWidth > 0, await thumb.elementHandle());
    assert.equal(await thumb.evaluate((img) => img.naturalWidth), 40, "the image itself, loaded");
    assert.equal(await run.locator("img").count(), 1, "no thumbnail for the text file");
    await shot("page-runs");
  });

  test("the MCP clients seen recently include the SDK client, and not the page itself", async () => {
    await waitForText("#clients", /relay-edge-tests/, 40_000);
    assert.ok(await page.locator("#clients-section").isVisible());
    // The try-it box above made this page an MCP client of the relay session too.
    const seen = (await readRelaySession(client)).clients.map((c) => c.name);
    assert.ok(seen.includes("relay-edge page"), seen.join(", "));
    assert.doesNotMatch(await text("#clients"), /relay-edge page/);
  });

  test("a file tool call is answered by the relay session: it is not one of this tab's runs", async () => {
    const runs = await page.locator(".run").count();
    const read = await client.callTool({ name: "read", arguments: { path: "/out/report.txt" } });
    assert.equal(read.structuredContent.content, "done", JSON.stringify(read));
    await new Promise((resolve) => setTimeout(resolve, 1000)); // a command sent to the tab would show by now
    assert.equal(await page.locator(".run").count(), runs, "no run was added for the read");
  });

  test("after a reload the history is still there", async () => {
    await page.reload();
    await waitForText("#banner", /Attached/);
    const summaries = await page.locator(".run summary").allInnerTexts();
    assert.ok(summaries.some((s) => /run_js/.test(s)) && summaries.some((s) => /run_py/.test(s)), summaries.join("\n"));
    const run = page.locator(".run", { hasText: "run_js" }).first();
    await run.locator("summary").first().click();
    assert.equal(await run.locator('pre[data-stream="stdout"]').innerText(), "hello from the sdk\n");
    assert.match(await run.locator('pre[data-view="code"]').textContent(), /hello from the sdk/, "the code is kept too");
  });
});

describe("several tabs", () => {
  let second;

  test("a second tab runs the next calls, and the first one says it is on standby", async () => {
    second = await context.newPage();
    await second.goto(`${BASE}/`);
    await second.waitForFunction(() => /this tab runs the next call/.test(document.getElementById("tabs").textContent));
    await waitForText("#tabs", /2 attached; another tab, opened later, runs the next calls/);
    assert.match(await text("#banner"), /on standby/);
    const result = await client.callTool({ name: "run_js", arguments: { code: "console.log('where am I')" } });
    assert.equal(result.isError, false);
    await second.locator(".run summary", { hasText: "ok" }).first().waitFor();
    await shot("page-standby");
  });

  test("closing the newest tab hands over: a queued call runs in the first, nothing lost", async () => {
    const slow = client.callTool({ name: "run_js", arguments: { code: "await new Promise((r) => setTimeout(r, 4000)); console.log('slow')" } });
    await second.locator(".run", { hasText: "running" }).first().waitFor();
    const queued = client.callTool({ name: "run_js", arguments: { code: "console.log('queued behind it')" } });
    await second.close();
    const [slowResult, queuedResult] = await Promise.all([slow, queued]);
    assert.equal(queuedResult.isError, false, JSON.stringify(queuedResult));
    assert.equal(queuedResult.structuredContent.stdout, "queued behind it\n");
    // The run the closed tab held ended with it, or, when the tab left before the relay heard
    // it had started the run, went to the first tab; either way nothing hangs.
    assert.ok(slowResult.isError || slowResult.structuredContent.stdout === "slow\n", JSON.stringify(slowResult));
    await waitForText("#tabs", /^1 \(this tab\)$/);
    assert.match(await text("#banner"), /Attached\. Calls of your MCP clients/);
  });
});

describe("for every person", () => {
  test("every control has a label or an accessible name, and can take focus", async () => {
    const unnamed = await page.evaluate(() =>
      [...document.querySelectorAll("input, select, textarea, button, a[href]")]
        .filter((el) => el.offsetParent !== null)
        .filter((el) => !(el.labels?.length || el.getAttribute("aria-label") || el.textContent.trim()) || el.tabIndex < 0)
        .map((el) => el.outerHTML.slice(0, 80)),
    );
    assert.deepEqual(unnamed, []);
  });

  test("the try-it box works from the keyboard alone", async () => {
    await page.getByLabel("Code", { exact: true }).focus();
    await page.getByLabel("Code", { exact: true }).fill("console.log('typed')");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.textContent), "Run");
    await page.keyboard.press("Enter");
    await waitForText("#try-output", /typed/, 60_000);
  });

  test("text keeps a contrast of at least 4.5:1", async () => {
    const ratios = await page.evaluate(() => {
      const rgb = (c) => c.match(/\d+/g).slice(0, 3).map(Number);
      const lum = ([r, g, b]) => {
        const f = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
      };
      const background = (el) => {
        for (let e = el; e; e = e.parentElement) {
          const bg = getComputedStyle(e).backgroundColor;
          if (!/rgba\(.*, 0\)|transparent/.test(bg)) return bg;
        }
        return "rgb(255, 255, 255)";
      };
      return [...document.querySelectorAll("#banner, .facts dt, .facts dd, .run-status, .run-what, p, label, pre")]
        .filter((el) => el.offsetParent !== null && el.textContent.trim())
        .map((el) => {
          const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(rgb(background(el)))];
          return { el: el.id || el.className || el.tagName, ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) };
        });
    });
    assert.ok(ratios.length > 5);
    for (const { el, ratio } of ratios) assert.ok(ratio >= 4.5, `${el}: ${ratio.toFixed(2)}`);
  });

  test("on a narrow window nothing needs a sideways scroll", async () => {
    await page.setViewportSize({ width: 360, height: 800 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than a 360px window`);
    await shot("page-narrow");
  });
});
