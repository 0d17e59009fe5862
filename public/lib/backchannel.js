// The result backchannel: run events go to POST /session/<id>/result as NDJSON
// batches, one line per event {runId, seq, type, ...}. seq counts from 0 per run, so the server
// can put events in order and drop a batch it already has. Chrome streams request bodies only
// over HTTP/2, so instead of one endless upload events are batched (every ~20 ms, at 64 KiB,
// and at once on exit) and sent strictly one batch after another; a failed batch is retried
// with the same seq numbers. A command's acknowledgement ("received") waits up to
// ACK_DELAY_MS for company: a quick run's acknowledgement, output and exit then go in one
// batch, where an acknowledgement sent alone would hold the exit back behind its own request.

import { fetchOk, isTransient, withRetry } from "./http.js";

const FLUSH_DELAY_MS = 20;
// Far inside the server's limit for an acknowledgement (run::lease::ACK_WITHIN_MS, 10 s).
const ACK_DELAY_MS = 200;
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
   */
  constructor(endpoint, { onUnauthorized = async () => {}, onRefused = () => {}, onDropped = () => {} } = {}) {
    this.endpoint = endpoint;
    this.onUnauthorized = onUnauthorized;
    this.onRefused = onRefused;
    this.onDropped = onDropped;
    this.lines = [];
    this.bytes = 0;
    this.timer = null;
    this.flushAt = Infinity; // when the timer fires
    this.sending = null; // the batch in flight, if any
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
    else if (!RIDES_ALONG.has(line.phase)) this.flushWithin(line.phase === "received" ? ACK_DELAY_MS : FLUSH_DELAY_MS);
  }

  /** Flushes in `ms` at the latest: an earlier flush already planned stays. */
  flushWithin(ms) {
    const at = performance.now() + ms;
    if (at >= this.flushAt) return;
    clearTimeout(this.timer);
    this.flushAt = at;
    this.timer = setTimeout(() => this.flush(), ms);
  }

  flush() {
    clearTimeout(this.timer);
    this.timer = null;
    this.flushAt = Infinity;
    // One batch at a time: what queues meanwhile goes as soon as the batch in flight is done.
    if (this.sending || this.lines.length === 0) return;
    let units = this.lines[0].length + 1;
    let count = 1;
    while (count < this.lines.length && units + this.lines[count].length + 1 <= MAX_BATCH_UNITS) {
      units += this.lines[count++].length + 1;
    }
    const body = this.lines.splice(0, count).join("\n") + "\n";
    this.bytes -= units;
    this.sending = this.send(body).finally(() => {
      this.sending = null;
      this.flush();
      if (!this.sending) this.settleDrained();
    });
  }

  /** Resolves once every event reported so far has been sent (or given up on). */
  drained() {
    if (!this.sending && this.lines.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  settleDrained() {
    if (this.lines.length > 0) return; // still waiting for their flush
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }

  async send(body) {
    try {
      await withRetry(
        () => {
          const { url, headers } = this.endpoint();
          return fetchOk(url, { method: "POST", headers: { ...headers, "content-type": "application/x-ndjson" }, body });
        },
        {
          retryable: (err) => err.status === 401 || isTransient(err),
          beforeRetry: (err) => (err.status === 401 ? this.onUnauthorized() : undefined),
        },
      );
    } catch (err) {
      if (Array.isArray(err.body?.refused)) this.onRefused(err.body.refused);
      else this.onDropped(err);
    }
  }
}
