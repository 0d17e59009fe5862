// The three browser engines the executor page is tested in, each driven the one way it can be
// offline here, behind one small interface (a tab in a fresh profile: goto, evaluate, reload,
// screenshot, close), so a suite written against it runs unchanged on all three:
// - chromium: Debian's Chromium through playwright-core (browser.mjs);
// - firefox: Debian's Firefox ESR through puppeteer-core over WebDriver BiDi, which Firefox
//   serves itself (no geckodriver: Debian has none, and downloading one is impossible here);
// - webkit: WebKitGTK's MiniBrowser through WebKitWebDriver (webkit2gtk-driver), which speaks
//   only classic WebDriver: a few JSON-over-HTTP commands, sent with fetch. WebKitGTK has no
//   headless mode, so it draws on an Xvfb display started here, one per test process.
// Classic WebDriver has no console events: suites read what the page shows (its status area),
// as a person does, never its console.

import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import puppeteer from "puppeteer-core";
import { launchBrowser } from "./browser.mjs";
import { BASE } from "./relay.mjs";

export const ENGINE_NAMES = ["chromium", "firefox", "webkit"];

const FIREFOX = process.env.FIREFOX_PATH ?? "/usr/bin/firefox-esr";
const WEBKIT_DRIVER = process.env.WEBKIT_DRIVER_PATH ?? "/usr/bin/WebKitWebDriver";
const MINIBROWSER = process.env.MINIBROWSER_PATH ?? "/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser";
const INSTALL = "bash scripts/setup.sh --browser";

/**
 * A tab of `engine` in a fresh browser profile of its own (closing the tab closes the browser).
 * @returns {Promise<{engine, version, goto(url), evaluate(fn, ...args), reload(), screenshot(path), close()}>}
 *   `evaluate` runs `fn` (a function, serialized) in the page with JSON-able `args`; it may return a promise.
 */
export function openTab(engine) {
  const open = { chromium: chromiumTab, firefox: firefoxTab, webkit: webkitTab }[engine];
  if (!open) throw new Error(`unknown engine "${engine}": one of ${ENGINE_NAMES.join(", ")}`);
  return open();
}

async function chromiumTab() {
  const browser = await launchBrowser();
  const page = await (await browser.newContext()).newPage();
  return {
    engine: "chromium",
    version: browser.version(),
    goto: (url) => page.goto(url),
    // An expression, not a function: the page's CSP forbids the eval a wrapper would need.
    evaluate: (fn, ...args) => page.evaluate(`(${fn})(...${JSON.stringify(args)})`),
    reload: () => page.reload(),
    screenshot: (path) => page.screenshot({ path, fullPage: true }),
    close: () => browser.close(),
  };
}

async function firefoxTab() {
  needs(FIREFOX, "Firefox ESR (firefox-esr)");
  const browser = await puppeteer.launch({ browser: "firefox", executablePath: FIREFOX, headless: true });
  const page = await browser.newPage();
  return {
    engine: "firefox",
    version: await browser.version(),
    goto: (url) => page.goto(url),
    evaluate: (fn, ...args) => page.evaluate(fn, ...args),
    reload: () => page.reload(),
    screenshot: (path) => page.screenshot({ path, fullPage: true }),
    close: () => browser.close(),
  };
}

async function webkitTab() {
  needs(WEBKIT_DRIVER, "WebKitWebDriver (webkit2gtk-driver)");
  const driver = await startWebkitDriver(await xvfbDisplay());
  try {
    return await webkitSession(driver);
  } catch (err) {
    driver.process.kill();
    throw err;
  }
}

/** A WebKitWebDriver on a free port, drawing on `display`: `{process, url}` once it answers. */
async function startWebkitDriver(display) {
  const port = await freePort();
  const driver = spawn(WEBKIT_DRIVER, [`--port=${port}`], { env: { ...process.env, DISPLAY: display }, stdio: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForDriver(url, driver);
  } catch (err) {
    driver.kill();
    throw err;
  }
  return { process: driver, url };
}

/** A MiniBrowser session of `driver`, as a tab; closing it ends the driver too. */
async function webkitSession(driver) {
  const options = { binary: MINIBROWSER, args: ["--automation"] };
  const created = { capabilities: { alwaysMatch: { "webkitgtk:browserOptions": options } } };
  const { sessionId, capabilities } = await webdriver(driver.url, "POST", "/session", created);
  const session = (method, path, body) => webdriver(driver.url, method, `/session/${sessionId}${path}`, body);
  await session("POST", "/window/rect", { width: 1280, height: 900 });
  return {
    engine: "webkit",
    version: `WebKitGTK ${capabilities.browserVersion}`,
    goto: (target) => session("POST", "/url", { url: target }),
    evaluate: (fn, ...args) => webkitEvaluate(session, fn, args),
    reload: () => session("POST", "/refresh", {}),
    screenshot: async (path) => writeFile(path, Buffer.from(await session("GET", "/screenshot"), "base64")),
    async close() {
      await session("DELETE", "").catch(() => {});
      driver.process.kill();
    },
  };
}

/** Runs `fn(...args)` in the page (classic WebDriver's execute/async), awaiting what it returns. */
async function webkitEvaluate(session, fn, args) {
  const script = `const done = arguments[arguments.length - 1];
    Promise.resolve().then(() => (${fn.toString()})(...Array.prototype.slice.call(arguments, 0, -1)))
      .then((value) => done({ value }), (error) => done({ error: String(error && error.stack || error) }));`;
  const { value, error } = await session("POST", "/execute/async", { script, args });
  if (error) throw new Error(`in the page: ${error}`);
  return value;
}

// No command takes this long but one the driver lost: fail naming it instead of hanging.
const COMMAND_TIMEOUT_MS = 90_000;

/** One classic WebDriver command; its `value`, or an Error naming the driver's error. */
async function webdriver(base, method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body ? { "content-type": "application/json" } : {},
    body: body && JSON.stringify(body),
    signal: AbortSignal.timeout(COMMAND_TIMEOUT_MS),
  }).catch((err) => {
    throw new Error(`WebDriver ${method} ${path}: ${err.message}`);
  });
  const { value } = await res.json();
  if (value?.error) throw new Error(`WebDriver ${method} ${path}: ${value.error}: ${value.message}`);
  return value;
}

async function waitForDriver(base, driver) {
  for (let i = 0; i < 100; i++) {
    if (driver.exitCode !== null) throw new Error(`WebKitWebDriver exited (${driver.exitCode})`);
    const ready = await webdriver(base, "GET", "/status").catch(() => null);
    if (ready?.ready) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("WebKitWebDriver did not start within 10 s");
}

let xvfb = null;

/**
 * The X display of this process's Xvfb, started once. Each try names a display, which Xvfb
 * takes with a lock file (or exits: another server holds it) and writes to fd 3 once it
 * listens. (Letting Xvfb pick one, `-displayfd` alone, races when test processes start
 * together: two servers then claim the same display.)
 */
function xvfbDisplay() {
  xvfb ??= (async () => {
    needs("/usr/bin/Xvfb", "Xvfb (xvfb)");
    for (let display = 90; display < 190; display++) {
      // -noreset: no server reset when the last client leaves, which would write the display to
      // fd 3 again (and the pipe is kept open, unread: a closed one would kill Xvfb with SIGPIPE).
      const args = [`:${display}`, "-displayfd", "3", "-noreset", "-screen", "0", "1280x900x24", "-nolisten", "tcp"];
      const server = spawn("Xvfb", args, { stdio: ["ignore", "ignore", "ignore", "pipe"] });
      const listening = once(server.stdio[3], "data").then(() => true);
      if (!(await Promise.race([listening, once(server, "exit").then(() => false)]))) continue;
      server.stdio[3].unref();
      server.unref();
      process.once("exit", () => server.kill());
      return `:${display}`;
    }
    throw new Error("no free X display in :90 to :189 for Xvfb");
  })();
  return xvfb;
}

async function freePort() {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  return port;
}

function needs(path, what) {
  if (!existsSync(path)) throw new Error(`no ${what} at ${path}: ${INSTALL} installs it`);
}

/**
 * Opens the executor page in a new tab of `engine` as a person does (the key in the URL
 * fragment) and waits until it is attached. Returns the tab.
 */
export async function attachTab(engine, key, { session = "default", base = BASE } = {}) {
  const tab = await openTab(engine);
  try {
    await tab.goto(`${base}/#key=${key}${session === "default" ? "" : `&session=${session}`}`);
    await waitForAttached(tab);
    return tab;
  } catch (err) {
    await tab.close();
    throw err;
  }
}

/** What the page's status area says: `{state, banner, browser, degraded: [ids], runtimesReady}`. */
export function pageFacts(tab) {
  return tab.evaluate(() => {
    const fact = (id) => document.getElementById(id);
    return {
      state: fact("state").dataset.state ?? null,
      banner: fact("banner").textContent,
      browser: fact("browser").textContent,
      degraded: (fact("browser").dataset.degraded ?? "").split(" ").filter(Boolean),
      runtimesReady: fact("runtimes").dataset.ready === "true",
    };
  });
}

/** Waits until the page says it is attached (and, with `runtimes`, that both runtimes are ready). */
export async function waitForAttached(tab, { runtimes = false, timeoutMs = 90_000 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (let facts; ; ) {
    facts = await pageFacts(tab).catch(() => null); // null while the page navigates
    if (facts?.state === "connected" && (!runtimes || facts.runtimesReady)) return facts;
    if (Date.now() > deadline) throw new Error(`the page did not attach${runtimes ? " with its runtimes ready" : ""}: ${JSON.stringify(facts)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
