// The page miniflare-tests/runner.test.mjs and workspace.test.mjs drive in Chromium: it exposes
// the executor's real parts (runner host and worker, workspace, signature check, zip reader) as
// window.relayTest, taking and returning plain data that Playwright can pass across.

import { fromBase64 } from "./lib/bytes.js";
import { loadCapsule } from "./lib/capsule.js";
import { canonicalJson } from "./lib/canonical-json.js";
import { KeyRing, verifyManifestSignature } from "./lib/jws.js";
import { RunnerHost } from "./lib/runner-host.js";
import { StandbyRefill } from "./lib/standby-refill.js";
import { openWorkspace } from "./lib/workspace.js";
import { unzip } from "./lib/zip.js";

const runner = new RunnerHost(new URL("sandbox.html", import.meta.url));
// The types of the messages the page sends the sandbox frame, for tests to tell its paths apart.
const sentToFrame = [];
const post = runner.sandbox.post.bind(runner.sandbox);
runner.sandbox.post = (message, transfer) => {
  sentToFrame.push(message.type);
  return post(message, transfer);
};

window.relayTest = {
  /**
   * Runs a runner job whose files are given as text or as {base64}; cancels it after
   * `cancelAfterMs` if set.
   * @returns the run's outcome plus its collected stdout/stderr, whether a runtime was loaded
   *   and the time the page waited (pageMs)
   */
  /**
   * With `workspace: {name, backend?}` the run gets that workspace's snapshot and writes
   * through to it; `fetches: {url: response | {error}}` scripts the page's answers to guest
   * fetches (a text `body`; an unlisted url is denied with PolicyDenied), and the result lists
   * the requests heard (`requests`, bodies as text).
   */
  async run({ files, cancelAfterMs, workspace, fetches = {}, killFirst = false, ...job }) {
    const output = { stdout: "", stderr: "" };
    const requests = [];
    let loaded = false;
    const abort = new AbortController();
    if (cancelAfterMs !== undefined) setTimeout(() => abort.abort(), cancelAfterMs);
    const opened = workspace && (await workspaceOf(workspace));
    const started = performance.now();
    // A kill the frame cannot have handled when the run asks for its worker: every offer held is stale.
    if (killFirst) runner.sandbox.kill("r_of_no_run");
    const outcome = await runner.run(
      {
        ...job,
        files: mapValues(files, (file) => (typeof file === "string" ? new TextEncoder().encode(file) : fromBase64(file.base64))),
        ...(opened && { workspace: opened.snapshot() }),
      },
      {
        signal: abort.signal,
        onLoading: () => (loaded = true),
        onOutput: (stream, text) => (output[stream] += text),
        ...(opened && { onFile: ({ op, path, data }) => (op === "write" ? opened.write(path, data) : opened.remove(path)) }),
        onFetch: async (request) => {
          requests.push({ ...request, body: request.body && new TextDecoder().decode(request.body) });
          const answer = fetches[request.url];
          if (!answer) return { error: { name: "PolicyDenied", message: `${new URL(request.url).hostname} is not in policy.network.allowedDomains` } };
          return answer.error ? answer : { ...answer, body: new TextEncoder().encode(answer.body ?? "") };
        },
      },
    );
    return { ...outcome, ...output, requests, loaded, pageMs: performance.now() - started };
  },

  /**
   * The sandbox's standby offers (lib/sandbox.js): `refill` as the idle page says it, then wait
   * until the frame has offered a standby of `runtimeId`. Resolves with the offer's id, or null
   * if none came in `timeoutMs`.
   */
  async offerOf(runtimeId, { timeoutMs = 10_000 } = {}) {
    runner.refill();
    const sandbox = runner.sandbox;
    await waitUntil(() => sandbox.offers.has(runtimeId), timeoutMs);
    return sandbox.offers.get(runtimeId)?.id ?? null;
  },

  /**
   * How many standby workers of `runtimeId` the frame holds ready (the offered one included),
   * once its pongs have said `count` or after `timeoutMs`.
   */
  async readyWorkers(runtimeId, count, timeoutMs = 10_000) {
    runner.refill();
    const sandbox = runner.sandbox;
    await waitUntil(() => sandbox.ready[runtimeId] === count, timeoutMs);
    return sandbox.ready[runtimeId] ?? 0;
  },

  /**
   * The executor page's standby timing (lib/standby-refill.js) on the page's own clock, after a
   * run that came spaced out: the ms from the page's idling until it has the sandbox refill, or
   * null if it did not in `timeoutMs`.
   */
  refillDelay(timeoutMs = 2_000) {
    return new Promise((resolve) => {
      let idleAt;
      const refills = new StandbyRefill(() => resolve(performance.now() - idleAt));
      refills.runStarts();
      idleAt = performance.now();
      refills.idle();
      setTimeout(() => resolve(null), timeoutMs);
    });
  },

  /**
   * Whether the page's offer of `runtimeId` is current (its kill count is the kills sent), once
   * it is or after `timeoutMs`; null when the page holds none.
   */
  async offerCurrent(runtimeId, timeoutMs = 5_000) {
    const sandbox = runner.sandbox;
    const current = () => sandbox.offers.get(runtimeId)?.killed === sandbox.killsSent;
    await waitUntil(() => current() || !sandbox.offers.has(runtimeId), timeoutMs);
    return sandbox.offers.has(runtimeId) ? current() : null;
  },

  /** The types of the messages the page sent the sandbox frame since the last call. */
  sentToFrame() {
    return sentToFrame.splice(0);
  },

  /** Whether the sandbox holds offer `id` of `runtimeId`. */
  holdsOffer(runtimeId, id) {
    return runner.sandbox.offers.get(runtimeId)?.id === id;
  },

  /** Whether the sandbox frame listens (said hello) and whether a run's job is in a worker. */
  sandboxState() {
    return { listening: runner.sandbox.listening, running: Boolean(runner.current?.port) };
  },

  /** A workspace's files as text, and its backend and size. */
  async workspaceFiles(workspace) {
    const opened = await workspaceOf(workspace);
    const files = Object.fromEntries(opened.list().map((path) => [path, new TextDecoder().decode(opened.read(path))]));
    return { backend: opened.backend, totalBytes: opened.totalBytes, files };
  },

  /**
   * Writes (text, or `size` zero bytes; `mirrored`: as a sync takes the relay session's file) or
   * removes a workspace file directly: "ok" or the error.
   */
  async workspaceChange(workspace, { op, path, text, size, mirrored }) {
    const opened = await workspaceOf(workspace);
    try {
      if (op === "remove") await opened.remove(path);
      else await opened.write(path, size === undefined ? new TextEncoder().encode(text) : new Uint8Array(size), { mirrored });
      return "ok";
    } catch (err) {
      return `${err.name}: ${err.message}`;
    }
  },

  /** "ok", or the error a manifest with this signature is refused with. */
  async verify(manifest, keySet) {
    try {
      await verifyManifestSignature(manifest, new KeyRing(async () => keySet));
      return "ok";
    } catch (err) {
      return `${err.name}: ${err.message}`;
    }
  },

  canonicalJson,

  /** A capsule announcement loaded and checked as the executor does: {files: {path: text}} or the error. */
  async loadCapsule(announced, keySet) {
    try {
      const { files } = await loadCapsule(announced, new KeyRing(async () => keySet));
      return { files: Object.fromEntries(Object.entries(files).map(([path, bytes]) => [path, new TextDecoder().decode(bytes)])) };
    } catch (err) {
      return `${err.name}: ${err.message}`;
    }
  },

  /**
   * JSON text the way the page takes capsule.json (JSON.parse, no reviver, then canonicalJson):
   * {canonical} or {refused: the error message}.
   */
  canonicalOfText(text) {
    try {
      return { canonical: canonicalJson(JSON.parse(text)) };
    } catch (err) {
      return { refused: err.message };
    }
  },

  /** Unzips base64 zip bytes; returns the files as text, or the error message. */
  async unzip(base64) {
    try {
      const files = await unzip(fromBase64(base64));
      return mapValues(files, (bytes) => new TextDecoder().decode(bytes));
    } catch (err) {
      return `${err.name}: ${err.message}`;
    }
  },
};

const workspaces = new Map(); // "backend:name" -> Promise<Workspace>, one per page like the executor's

/** Resolves once `condition()` holds (polled every 10 ms) or `timeoutMs` have passed. */
async function waitUntil(condition, timeoutMs) {
  const deadline = performance.now() + timeoutMs;
  while (!condition() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

function workspaceOf({ name, backend }) {
  const key = `${backend}:${name}`;
  if (!workspaces.has(key)) workspaces.set(key, openWorkspace(name, { backend }));
  return workspaces.get(key);
}

function mapValues(object, fn) {
  return Object.fromEntries(Object.entries(object).map(([key, value]) => [key, fn(value)]));
}
