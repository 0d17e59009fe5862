// Debian's headless Chromium driven by playwright-core, and the executor page opened in it as a
// person would: with the API key in the URL fragment. Console lines are collected so tests can
// check what the page told its user.

import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import { BASE } from "./relay.mjs";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
// Without the background-networking flags Chromium keeps calling home, which this machine refuses.
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A headless Chromium; every launch gets a fresh, temporary user-data-dir. */
export async function launchBrowser() {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

/**
 * Opens the executor page for `session` with `key` in a fresh context (on the Worker at
 * `base`) and waits until it says it is ready. Returns the page and its console lines (without
 * the "relay-mcp: " prefix). `beforeOpen(context)` may route the context's traffic first.
 */
export async function openExecutor(browser, key, session = "default", base = BASE, { beforeOpen = async () => {} } = {}) {
  const context = await browser.newContext();
  await beforeOpen(context);
  const page = await context.newPage();
  const lines = [];
  page.on("console", (msg) => {
    const text = msg.text();
    if (text.startsWith("relay-mcp: ")) lines.push(text.slice("relay-mcp: ".length));
  });
  const fragment = session === "default" ? `#key=${key}` : `#key=${key}&session=${session}`;
  await page.goto(`${base}/${fragment}`);
  await waitForLine(lines, /^Ready\. Waiting for execution requests/);
  return { context, page, lines };
}

/** Waits until a console line from index `from` on matches `pattern`; returns it. */
export async function waitForLine(lines, pattern, timeoutMs = 30_000, from = 0) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = lines.slice(from).find((l) => pattern.test(l));
    if (line) return line;
    if (Date.now() > deadline) throw new Error(`no console line like ${pattern}; saw:\n${lines.join("\n")}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
