// The page's handle on the sandbox frame (../sandbox/frame.js): a hidden
// <iframe sandbox="allow-scripts"> whose workers run guest code in an opaque origin. The page
// loads and checks each runtime's files (lib/runtime-files.js) and hands them to the frame once
// (prepare); then every run takes a fresh worker and talks to it over the port it gets (take),
// and ends it (kill); once the page is idle again, the frame loads the next one (refill). A
// ready worker the frame offers ahead (standby) is used at once when the offer is current (see
// frame.js: it counts the kills it had handled), saving a round trip through the frame.
// Messages from the frame are accepted only from that frame's window.
//
// The frame can die under a run. Chromium gives the opaque-origin frame a process of its own,
// and guest code can kill that process: Python filling its worker's JavaScript heap through
// Pyodide's FFI makes V8 abort the whole renderer (Chromium 156: the frame's process crashes
// after 10-20 s; the page gets no event, no worker error, no MessagePort `close`). So the page
// pings the frame, whose thread runs no guest code, and a ping unanswered for FRAME_SILENCE_MS
// means the frame is dead: the run holding a worker ends (onCrash), a new frame replaces it and
// loads the runtimes the old one had, and takes and loads that were waiting on the old frame
// start again on the new one. A frame that never says hello (it failed to load, or died
// first) is replaced the same way after HELLO_WITHIN_MS. The pings tick from the page's worker
// clock (lib/clock.js), so a tab in the background notices as soon.
//
// Contexts (run::contexts in the core): a run in a context takes its worker as any run the
// first time, and the page keeps that worker's port under the context's key; the run is
// `release`d, not killed, when it ends well, and the context's later runs `enter` the same
// worker and post to the same port. A kill ends the context; so do the frame's death, a
// worker that dies between runs (`lost`), and an idle time the relay gives (checked on the
// page's clock, a little after the relay's own expiry, so the relay always decides first).

import { every } from "./clock.js";
import { namedError } from "./errors.js";
import { memo } from "./memo.js";
import { dropSnapshot, loadRuntimeFiles, saveSnapshot } from "./runtime-files.js";

// How often the page pings the frame, and how long an unanswered ping may wait before the frame
// counts as dead. The frame answers within milliseconds; the margin is for a loaded machine.
const PING_EVERY_MS = 500;
const FRAME_SILENCE_MS = 3_000;
// How long a new frame may take to say hello: a small document with one inline script, which
// loads in well under a second; the margin is for a page that is itself still starting up.
const HELLO_WITHIN_MS = 10_000;
// A context unused for its idle time (the relay's) plus this is ended here.
const CONTEXT_IDLE_MARGIN_MS = 5_000;

/** What a take or load waiting on a frame that died is rejected with: it starts again. */
class FrameGone extends Error {}

export class Sandbox {
  /** @param frameUrl the URL of sandbox.html; the frame is added to `document.body`. */
  constructor(frameUrl) {
    this.frameUrl = frameUrl;
    this.runtimes = new Set(); // the runtime ids asked for: a new frame loads them again
    this.holder = null; // the run that holds a worker of the frame
    this.pings = 0;
    // (runId, error): the frame died while run `runId` held one of its workers.
    this.onCrash = () => {};
    // Whether the page has a run in hand. Contexts are not expired then, and their idle time
    // counts from the end of it: the relay sends one run at a time, so a run it admitted for a
    // context waits in its queue while the page runs another, maybe past the idle time.
    this.busy = () => false;
    this.busyAt = 0; // when the page was last seen with a run in hand
    window.addEventListener("message", (event) => this.onMessage(event));
    this.open();
    every(PING_EVERY_MS, () => {
      this.checkFrame();
      this.expireContexts();
    });
  }

  /** A new frame, with nothing loaded; messages to it wait until it says hello. */
  open() {
    this.frame = document.createElement("iframe");
    this.frame.sandbox = "allow-scripts";
    this.frame.hidden = true;
    this.frame.title = "relay-edge sandbox";
    this.listening = false; // the frame said hello
    this.openedAt = performance.now();
    this.unsent = []; // [message, transfer] posted before it did
    this.ping = null; // {id, sentAt}: the ping not answered yet
    this.ready = {}; // runtimeId -> standby workers ready in the frame, as its last pong said
    this.prepared = memo((runtimeId) => this.load(runtimeId));
    this.waiting = new Map(); // key -> {resolve, reject}
    this.offers = new Map(); // runtimeId -> {id, port, killed}: ready workers the frame offered
    this.killsSent = 0;
    // key -> {port, runs, idleMs, usedAt, runId}: the contexts whose workers this frame holds
    this.contexts = new Map();
    this.frame.src = this.frameUrl;
    document.body.append(this.frame);
  }

  isPrepared(runtimeId) {
    return this.prepared.has(runtimeId);
  }

  /** Loads `runtimeId` into the frame once; a failure is not remembered (the next run retries). */
  prepare(runtimeId) {
    this.runtimes.add(runtimeId);
    return this.prepared(runtimeId);
  }

  async load(runtimeId) {
    const frame = this.frame;
    const files = await loadRuntimeFiles(runtimeId);
    // The frame died meanwhile: its replacement loads the runtime itself (reload).
    if (frame !== this.frame) throw new FrameGone(`the sandbox frame was replaced while ${runtimeId} loaded`);
    // Asked at once: the message waits for the frame's hello, the answer for the frame, and a
    // frame replaced first rejects it (FrameGone).
    const fromCache = "snapshot.bin" in files;
    try {
      const { snapshot } = await this.ask(`prepared:${runtimeId}`, { type: "prepare", runtimeId, files }, Object.values(files));
      if (snapshot) saveSnapshot(runtimeId, snapshot).catch(() => {});
    } catch (err) {
      if (!fromCache || err instanceof FrameGone) throw err;
      // A snapshot from an older browser build, say: boot from scratch and make a new one.
      await dropSnapshot(runtimeId);
      return this.load(runtimeId);
    }
  }

  /**
   * A fresh worker, loaded with `runtimeId`, for run `runId`: the MessagePort to its glue. No
   * worker is asked for once `wanted()` says the run is over (the frame would stop the worker
   * of whichever run holds one then), and one that comes after is stopped: the run's kill came
   * while the frame was still loading it, so the frame would run it with no one to stop it, and
   * offer no standby meanwhile; the frame then refills (the page's refill came while it was
   * loading, and was let go). A frame that dies meanwhile is replaced and asked again.
   */
  async take(runtimeId, runId, wanted = () => true, context = undefined) {
    for (;;) {
      try {
        const port = await this.takeFromFrame(runtimeId, runId, wanted, context);
        if (!wanted()) {
          port.close();
          this.kill(runId);
          this.refill();
          throw new Error(`run ${runId} ended before it had a worker`);
        }
        this.holder = runId;
        return port;
      } catch (err) {
        if (!(err instanceof FrameGone) || !wanted()) throw err;
      }
    }
  }

  async takeFromFrame(runtimeId, runId, wanted, context) {
    await this.prepare(runtimeId);
    if (!wanted()) throw new Error(`run ${runId} ended before it had a worker`);
    const offer = this.offers.get(runtimeId);
    this.offers.delete(runtimeId);
    // Current only if the frame had handled every kill sent: no guest can be alive beside it.
    if (offer?.killed === this.killsSent) {
      this.post({ type: "took", runtimeId, id: offer.id, runId, context });
      return offer.port;
    }
    if (offer) {
      offer.port.close();
      this.post({ type: "discard", runtimeId, id: offer.id });
    }
    const { port } = await this.ask(`taken:${runId}`, { type: "take", runtimeId, runId, context });
    return port;
  }

  /**
   * A worker for run `runId` in context `name` of `runtimeId` (`fresh`: end the one held
   * first): `{port, runs}`, runs being how many runs the context's worker served before.
   */
  async takeContext(runtimeId, { name, fresh, idleMs }, runId, wanted = () => true) {
    const key = `${runtimeId}/${name}`;
    if (fresh) this.dropContext(key);
    const held = this.contexts.get(key);
    if (held) {
      this.post({ type: "enter", runId, context: key });
      Object.assign(held, { runId, idleMs });
      this.holder = runId;
      return { port: held.port, runs: held.runs };
    }
    const port = await this.take(runtimeId, runId, wanted, key);
    this.contexts.set(key, { port, runs: 0, idleMs, usedAt: performance.now(), runId });
    return { port, runs: 0 };
  }

  /** Run `runId`, in a context, ended well: its worker is kept for the context's next run. */
  release(runId) {
    if (this.holder === runId) this.holder = null;
    for (const context of this.contexts.values()) {
      if (context.runId !== runId) continue;
      context.runs++;
      context.usedAt = performance.now();
      context.runId = null;
    }
    this.post({ type: "release", runId });
  }

  dropContext(key) {
    const context = this.contexts.get(key);
    if (!context) return;
    this.contexts.delete(key);
    context.port.close();
    this.post({ type: "drop", context: key });
  }

  /** Ends the contexts no run used for their idle time (and a margin: the relay decides first). */
  expireContexts() {
    const now = performance.now();
    if (this.busy()) {
      this.busyAt = now;
      return;
    }
    for (const [key, { runId, usedAt, idleMs }] of this.contexts) {
      const idle = now - Math.max(usedAt, this.busyAt);
      if (runId === null && idle > idleMs + CONTEXT_IDLE_MARGIN_MS) this.dropContext(key);
    }
  }

  /** Ends run `runId`: its worker is terminated (and with it the context it ran in, if any). */
  kill(runId) {
    if (this.holder === runId) this.holder = null;
    for (const [key, context] of this.contexts) {
      if (context.runId === runId) {
        this.contexts.delete(key);
        context.port.close();
      }
    }
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

  /** Posts to the frame, once it listens (what a frame's first document is sent is lost). */
  post(message, transfer = []) {
    if (!this.listening) return this.unsent.push([message, transfer]);
    this.frame.contentWindow.postMessage(message, "*", transfer);
  }

  onMessage({ source, data, ports }) {
    if (source !== this.frame.contentWindow || !data) return;
    switch (data.type) {
      case "hello":
        return this.listen();
      case "pong":
        if (data.id === this.ping?.id) this.ping = null;
        this.ready = data.ready ?? {};
        return;
      case "prepared":
        return this.settle(`prepared:${data.runtimeId}`, null, { snapshot: data.snapshot });
      case "failed":
        return this.settle(`prepared:${data.runtimeId}`, new Error(data.message));
      case "taken":
        return this.settle(`taken:${data.runId}`, null, { port: ports[0] });
      case "standby":
        return this.keepOffer(data, ports[0]);
      case "current":
        return this.confirmOffer(data);
      case "lost":
        return this.contexts.delete(data.context);
      case "crashed":
        if (this.waiting.has(`taken:${data.runId}`)) return this.settle(`taken:${data.runId}`, new Error(data.message));
        return this.onCrash(data.runId, new Error(String(data.message)));
    }
  }

  listen() {
    this.listening = true;
    for (const [message, transfer] of this.unsent.splice(0)) this.post(message, transfer);
  }

  /**
   * Pings the listening frame, unless a ping is unanswered. The frame is dead past
   * FRAME_SILENCE_MS without an answer, or HELLO_WITHIN_MS without a hello, once the messages
   * already queued for this page were read (had the page itself been stalled, the answer would
   * be among them: posted messages are read in order).
   */
  checkFrame() {
    const { frame, ping, listening } = this;
    if (listening && !ping) {
      this.ping = { id: ++this.pings, sentAt: performance.now() };
      return this.post({ type: "ping", id: this.ping.id });
    }
    const since = listening ? ping.sentAt : this.openedAt;
    if (performance.now() - since <= (listening ? FRAME_SILENCE_MS : HELLO_WITHIN_MS)) return;
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      if (frame !== this.frame || this.listening !== listening || this.ping !== ping) return; // it answered
      const waited = Math.round(performance.now() - since);
      this.replaceFrame(
        listening
          ? `the sandbox frame's process stopped answering (no answer for ${waited} ms)`
          : `the sandbox frame never said hello (opened ${waited} ms ago: it failed to load, or died first)`,
      );
    };
    port2.postMessage(null);
  }

  /**
   * The frame is dead (`why`, a sentence's start): a new one takes its place and loads the
   * runtimes again; whatever waited on the old one starts again (FrameGone), and the run that
   * held a worker there has crashed.
   */
  replaceFrame(why) {
    const { frame, waiting, offers, holder } = this;
    frame.remove();
    for (const offer of offers.values()) offer.port.close();
    for (const context of this.contexts.values()) context.port.close();
    this.holder = null;
    this.open();
    const message = `${why} and was replaced`;
    for (const waiter of waiting.values()) waiter.reject(new FrameGone(message));
    this.reload([...this.runtimes]);
    if (holder) this.onCrash(holder, namedError("RuntimeCrashed", message));
  }

  /** Loads `runtimeIds` into the new frame one after another (the first is ready soonest). */
  async reload(runtimeIds) {
    for (const runtimeId of runtimeIds) await this.prepare(runtimeId).catch(() => {});
  }

  /** The frame confirmed offer `id` as current as of `killed` kills (it handled them since). */
  confirmOffer({ runtimeId, id, killed }) {
    const offer = this.offers.get(runtimeId);
    if (offer?.id === id && Number.isInteger(killed)) offer.killed = killed;
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
