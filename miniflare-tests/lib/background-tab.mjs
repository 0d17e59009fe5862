// Chromium driven over the DevTools protocol alone, for the one thing Playwright will not do:
// put a tab in the background. Playwright keeps every page it drives visible and unthrottled
// (focus emulation, --disable-background-timer-throttling); an executor tab usually sits
// behind others, where Chrome throttles the page's timers (once a second at once, once a
// minute after a while: intensive wake-up throttling). Here a tab opened in front of another
// hides it, as a person's next tab does.

import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CHROMIUM, CHROMIUM_ARGS } from "./browser.mjs";

/**
 * Launches Chromium (a fresh profile) with its DevTools endpoint. Returns `{open(url), targets(),
 * attach(targetId), close()}`: `open` makes a tab in front of the others and resolves once
 * `url` (as written) has loaded there; it and `attach` give `{targetId, send(method, params),
 * evaluate(expression)}` on that target.
 */
export async function launchWithTabs(extraArgs = []) {
  const profile = await mkdtemp(path.join(tmpdir(), "relay-tabs-"));
  const args = [...CHROMIUM_ARGS, ...extraArgs, `--user-data-dir=${profile}`, "--remote-debugging-port=0", "about:blank"];
  const chrome = spawn(CHROMIUM, args, { stdio: ["ignore", "ignore", "pipe"] });
  const socket = new WebSocket(await devToolsUrl(chrome));
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  const waiting = new Map();
  let nextId = 0;
  socket.onmessage = ({ data }) => {
    const { id, result, error } = JSON.parse(data);
    waiting.get(id)?.(error ? Promise.reject(new Error(`${error.message} (${error.code})`)) : result);
    waiting.delete(id);
  };
  const send = (method, params = {}, sessionId) =>
    new Promise((resolve) => {
      const id = ++nextId;
      waiting.set(id, resolve);
      socket.send(JSON.stringify({ id, method, params, sessionId }));
    });
  /** A session on `targetId`: its send, and evaluate (awaiting a promise, returning its value). */
  const attach = async (targetId) => {
    const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
    const sendTo = (method, params) => send(method, params, sessionId);
    const evaluate = async (expression) => {
      const { result, exceptionDetails } = await sendTo("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
      if (exceptionDetails) throw new Error(`${expression}: ${JSON.stringify(exceptionDetails)}`);
      return result.value;
    };
    return { targetId, send: sendTo, evaluate };
  };
  return {
    async open(url) {
      const { targetId } = await send("Target.createTarget", { url, newWindow: false, background: false });
      const tab = await attach(targetId);
      // Attached, it may still show the empty document it starts with.
      const loaded = `location.href === ${JSON.stringify(url)} && document.readyState === "complete"`;
      while (!(await tab.evaluate(loaded))) await new Promise((resolve) => setTimeout(resolve, 20));
      return tab;
    },
    /** Every target (tabs, and frames in processes of their own, `type: "iframe"`). */
    async targets() {
      return (await send("Target.getTargets")).targetInfos;
    },
    attach,
    async close() {
      socket.close();
      const exited = chrome.exitCode === null ? new Promise((resolve) => chrome.once("exit", resolve)) : null;
      chrome.kill();
      await exited;
      await rm(profile, { recursive: true, force: true, maxRetries: 10 }); // its helpers may write a moment longer
    },
  };
}

/** The browser's DevTools WebSocket URL, which Chromium prints on stderr as it starts. */
function devToolsUrl(chrome) {
  return new Promise((resolve, reject) => {
    let printed = "";
    chrome.stderr.on("data", (chunk) => {
      printed += chunk;
      const found = /DevTools listening on (ws:\/\/\S+)/.exec(printed);
      if (found) resolve(found[1]);
    });
    chrome.once("exit", (code) => reject(new Error(`Chromium exited (${code}) before it listened:\n${printed}`)));
  });
}
