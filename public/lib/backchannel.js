// The result backchannel: run events go to POST /session/<id>/result as NDJSON
// batches, one line per event {runId, seq, type, ...}. seq counts from 0 per run, so the server
// can put events in order and drop a batch it already has. Chrome streams request bodies only
// over HTTP/2, so instead of one endless upload events are batched (every ~20 ms, at 64 KiB,
// and at once on exit); a failed batch is retried with the same seq numbers. A batch does not
// wait for the one before it to be answered (a run's exit would wait a whole round trip behind
// its acknowledgement): while small batches are unanswered, the next one carries their lines
// again ahead of its own, so it is complete in whichever order the server gets them, and the
// server skips the lines it already has. A larger batch in flight is waited for instead.
// Batches go on the tab's results socket when it is open (result-socket.js), else by POST.

import { fetchOk, isTransient, withRetry } from "./http.js";
import { SocketClosed } from "./result-socket.js";

const FLUSH_DELAY_MS = 20;
// Unanswered batches whose lines the next batch carries again: at most this many, of at most
// this many UTF-16 units in all.
const MAX_UNANSWERED = 2;
const RESEND_MAX_UNITS = 16 * 1024;
const FLUSH_BYTES = 64 * 1024;
// Output longer than this (in UTF-16 units) goes as several events, so one serialized event
// stays under 1 MiB however its characters escape (6 units at most each).
const OUTPUT_EVENT_CHARS = 128 * 1024;
// A batch holds at most this many UTF-16 units of NDJSON (at most 3 bytes each in UTF-8):
// well under the result route's 4 MiB cap. Lines beyond it wait for the next batch.
const MAX_BATCH_UNITS = 1024 * 1024;

// Phase reports that need no batch of their own: they go with the next output, lease renewal
// or exit. ("received" is not one: it acknowledges the capsule, which the server waits for.)
const RIDES_ALONG = new Set(["load-runtime", "execute"]);

/** `text` in pieces of at most `size` UTF-16 units, never splitting a surrogate pair. */
function* pieces(text, size) {
  for (let start = 0; start < text.length; ) {
    let end = Math.min(start + size, text.length);
    if (end < text.length && /[\ud800-\udbff]/.test(text[end - 1])) end -= 1;
    yield text.slice(start, end);
    start = end;
  }
}

export class Backchannel {
  /**
   * @param endpoint () => {url, headers}, where to post and the current attach token's header
   *   (the token changes on refresh)
   * @param options.onUnauthorized () => Promise, called before retrying a batch refused with 401
   * @param options.onRefused ([{runId, seq, code, reason}]) => void, events the server refused
   *   (404/409): code "unknown", "ended" or "not-on-tab" means it no longer wants that run
   * @param options.onDropped (error) => void, a batch that failed all its retries
   * @param options.socket a ResultSocket, tried before POST
   */
  constructor(endpoint, { onUnauthorized = async () => {}, onRefused = () => {}, onDropped = () => {}, socket = null } = {}) {
    this.endpoint = endpoint;
    this.socket = socket;
    this.onUnauthorized = onUnauthorized;
    this.onRefused = onRefused;
    this.onDropped = onDropped;
    this.lines = [];
    this.bytes = 0;
    this.timer = null;
    this.unanswered = []; // batches in flight, oldest first: {lines, units, covered}
    this.drainWaiters = []; // drained() callers
    this.nextSeq = new Map(); // runId -> the seq its next event gets
  }

  /**
   * A reporter for one run: report({type, ...}) numbers and queues its events. Every reporter
   * of a run shares one numbering, which ends with the run's exit.
   */
  forRun(runId) {
    const report = (event) => {
      const seq = this.nextSeq.get(runId) ?? 0;
      if (event.type === "exit") this.nextSeq.delete(runId);
      else this.nextSeq.set(runId, seq + 1);
      this.push({ runId, seq, ...event });
    };
    return (event) => {
      if (typeof event.data !== "string" || event.data.length <= OUTPUT_EVENT_CHARS) return report(event);
      for (const data of pieces(event.data, OUTPUT_EVENT_CHARS)) report({ ...event, data });
    };
  }

  push(line) {
    const text = JSON.stringify(line);
    this.lines.push(text);
    this.bytes += text.length + 1;
    if (line.type === "exit" || this.bytes >= FLUSH_BYTES) this.flush();
    else if (!RIDES_ALONG.has(line.phase)) this.timer ??= setTimeout(() => this.flush(), FLUSH_DELAY_MS);
  }

  flush() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.lines.length === 0) return;
    const resent = this.unanswered.reduce((sum, batch) => sum + batch.units, 0);
    // Too much unanswered to carry again: the lines go when a batch in flight is answered.
    if (this.unanswered.length && (this.unanswered.length >= MAX_UNANSWERED || resent > RESEND_MAX_UNITS)) return;
    let units = this.lines[0].length + 1;
    let count = 1;
    while (count < this.lines.length && resent + units + this.lines[count].length + 1 <= MAX_BATCH_UNITS) {
      units += this.lines[count++].length + 1;
    }
    const batch = { lines: this.lines.splice(0, count), units, covered: false };
    this.bytes -= units;
    const earlier = [...this.unanswered];
    const body = [...earlier.flatMap((b) => b.lines), ...batch.lines].join("\n") + "\n";
    this.unanswered.push(batch);
    this.send(body, batch).then((delivered) => {
      // The earlier batches' lines arrived with this one, whatever becomes of their own requests.
      if (delivered) for (const b of earlier) b.covered = true;
      this.unanswered.splice(this.unanswered.indexOf(batch), 1);
      this.flush();
      this.settleDrained();
    });
  }

  /** Resolves once every event reported so far has been sent (or given up on). */
  drained() {
    if (this.unanswered.length === 0 && this.lines.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  settleDrained() {
    if (this.unanswered.length > 0 || this.lines.length > 0) return;
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }

  /** Sends `body`; resolves whether it was delivered. A failure is reported unless a later
   * batch delivered these lines (`batch.covered`). */
  async send(body, batch) {
    try {
      await withRetry(() => this.deliver(body), {
        retryable: (err) => err.status === 401 || isTransient(err),
        beforeRetry: (err) => (err.status === 401 ? this.onUnauthorized() : undefined),
      });
      return true;
    } catch (err) {
      if (Array.isArray(err.body?.refused)) this.onRefused(err.body.refused);
      else if (!batch.covered) this.onDropped(err);
      return false;
    }
  }

  /** One attempt at `body`: on the socket if it takes it, else (or if it closes first) by POST. */
  async deliver(body) {
    const onSocket = this.socket?.send(body);
    if (onSocket) {
      try {
        return await onSocket;
      } catch (err) {
        if (!(err instanceof SocketClosed)) throw err;
      }
    }
    const { url, headers } = this.endpoint();
    return fetchOk(url, { method: "POST", headers: { ...headers, "content-type": "application/x-ndjson" }, body });
  }
}
