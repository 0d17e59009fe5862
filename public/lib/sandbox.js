// The page's handle on the sandbox frame (../sandbox/frame.js): a hidden
// <iframe sandbox="allow-scripts"> whose workers run guest code in an opaque origin. The page
// loads and checks each runtime's files (lib/runtime-files.js) and hands them to the frame once
// (prepare); then every run takes a fresh worker and talks to it over the port it gets (take),
// and ends it (kill); once the page is idle again, the frame loads the next one (refill). A
// ready worker the frame offers ahead (standby) is used at once when the offer is current (see
// frame.js: it counts the kills it had handled), saving a round trip through the frame.
// Messages from the frame are accepted only from that frame's window.

import { memo } from "./memo.js";
import { dropSnapshot, loadRuntimeFiles, saveSnapshot } from "./runtime-files.js";

export class Sandbox {
  /** @param frameUrl the URL of sandbox.html; the frame is added to `document.body`. */
  constructor(frameUrl) {
    this.frame = document.createElement("iframe");
    this.frame.sandbox = "allow-scripts";
    this.frame.hidden = true;
    this.frame.title = "relay-edge sandbox";
    this.ready = new Promise((resolve) => (this.onHello = resolve));
    this.prepared = memo((runtimeId) => this.load(runtimeId));
    this.waiting = new Map(); // key -> {resolve, reject}
    this.offers = new Map(); // runtimeId -> {id, port, killed}: ready workers the frame offered
    this.killsSent = 0;
    this.onCrash = () => {};
    window.addEventListener("message", (event) => this.onMessage(event));
    this.frame.src = frameUrl;
    document.body.append(this.frame);
  }

  isPrepared(runtimeId) {
    return this.prepared.has(runtimeId);
  }

  /** Loads `runtimeId` into the frame once; a failure is not remembered (the next run retries). */
  prepare(runtimeId) {
    return this.prepared(runtimeId);
  }

  async load(runtimeId) {
    const files = await loadRuntimeFiles(runtimeId);
    await this.ready;
    const fromCache = "snapshot.bin" in files;
    try {
      const { snapshot } = await this.ask(`prepared:${runtimeId}`, { type: "prepare", runtimeId, files }, Object.values(files));
      if (snapshot) saveSnapshot(runtimeId, snapshot).catch(() => {});
    } catch (err) {
      if (!fromCache) throw err;
      // A snapshot from an older browser build, say: boot from scratch and make a new one.
      await dropSnapshot(runtimeId);
      return this.load(runtimeId);
    }
  }

  /**
   * A fresh worker, loaded with `runtimeId`, for run `runId`: the MessagePort to its glue. No
   * worker is asked for once `wanted()` says the run is over (the frame would stop the worker
   * of whichever run holds one then).
   */
  async take(runtimeId, runId, wanted = () => true) {
    await this.prepare(runtimeId);
    if (!wanted()) throw new Error(`run ${runId} ended before it had a worker`);
    const offer = this.offers.get(runtimeId);
    this.offers.delete(runtimeId);
    // Current only if the frame had handled every kill sent: no guest can be alive beside it.
    if (offer?.killed === this.killsSent) {
      this.post({ type: "took", runtimeId, id: offer.id, runId });
      return offer.port;
    }
    if (offer) {
      offer.port.close();
      this.post({ type: "discard", runtimeId, id: offer.id });
    }
    const { port } = await this.ask(`taken:${runId}`, { type: "take", runtimeId, runId });
    return port;
  }

  /** Ends run `runId`: its worker is terminated. */
  kill(runId) {
    this.killsSent++;
    this.post({ type: "kill", runId });
  }

  /** The page is idle: the frame replaces the standby workers runs took. */
  refill() {
    this.post({ type: "refill" });
  }

  ask(key, message, transfer = []) {
    return new Promise((resolve, reject) => {
      this.waiting.set(key, { resolve, reject });
      this.post(message, transfer);
    });
  }

  post(message, transfer = []) {
    this.frame.contentWindow.postMessage(message, "*", transfer);
  }

  onMessage({ source, data, ports }) {
    if (source !== this.frame.contentWindow || !data) return;
    switch (data.type) {
      case "hello":
        return this.onHello();
      case "prepared":
        return this.settle(`prepared:${data.runtimeId}`, null, { snapshot: data.snapshot });
      case "failed":
        return this.settle(`prepared:${data.runtimeId}`, new Error(data.message));
      case "taken":
        return this.settle(`taken:${data.runId}`, null, { port: ports[0] });
      case "standby":
        return this.keepOffer(data, ports[0]);
      case "crashed":
        if (this.waiting.has(`taken:${data.runId}`)) return this.settle(`taken:${data.runId}`, new Error(data.message));
        return this.onCrash(data.runId, String(data.message));
    }
  }

  keepOffer({ runtimeId, id, killed }, port) {
    const stale = this.offers.get(runtimeId);
    if (stale) {
      stale.port.close();
      this.post({ type: "discard", runtimeId, id: stale.id });
    }
    this.offers.set(runtimeId, { id, port, killed });
  }

  settle(key, error, value) {
    const waiter = this.waiting.get(key);
    this.waiting.delete(key);
    if (error) waiter?.reject(error);
    else waiter?.resolve(value);
  }
}
