// This tab's membership in a relay session: attach with the API key (POST /session), keep the
// short-lived attach token fresh (POST /session/<id>/refresh), keep the command stream
// (SSE GET /session/<id>/events) open, reopening it with a fresh token whenever it drops, and
// keep the tab's lease renewed (lease-worker.js, told the current tab id and token). The token
// goes in `Authorization: Bearer`, never in a URL.
//
// A command stream can die without an error: a half-open connection delivers nothing and
// reports nothing, while the lease, renewed on a socket of its own, keeps the tab listed, so a
// run sent to it would wait out its deadline. The relay writes a heartbeat on the stream every
// 2 s (TICK_MS in the relay session): a stream silent for STREAM_SILENCE_MS is taken for dead
// and the tab attaches anew. Each new stream brings a new tab id, and the old one's lease is
// let go at once, so it lapses and the relay sends that tab's unacknowledged runs to another
// tab (this one, once attached again). Silence is checked from the page's worker clock
// (lib/clock.js), so a tab in the background notices as soon.

import { every } from "./clock.js";
import { readEventStream } from "./event-stream.js";
import { HttpError, backoffMs, fetchOk } from "./http.js";
import { RESULTS_PROTOCOL } from "./result-socket.js";
// The commands a relay session sends a tab, and those that start a run (which the results socket
// may bring a copy of): from the core's TabCommand at build time (`relay-capsule tab-commands`).
import TAB_COMMANDS from "relay-tab-commands";

const COMMANDS = TAB_COMMANDS.commands;
const RUN_COMMANDS = TAB_COMMANDS.runCommands;
// A copy comes within moments of the first; these many run ids are plenty to tell it.
const RUNS_REMEMBERED = 256;
const REFRESH_MARGIN_MS = 60_000;
const RETRY_REFRESH_MS = 5_000;
const RECONNECT_MAX_MS = 30_000;
// Renewals per lease: one or two that come late cost nothing.
const RENEWALS_PER_LEASE = 5;
const LEASE_PROTOCOL = "relay-lease";
// Four heartbeats missed; a loaded relay may write one late, not four.
const STREAM_SILENCE_MS = 8_000;
const SILENCE_CHECK_MS = 1_000;
// A check this late means the page's own thread was held up (long page work): what the stream
// brought meanwhile may be unread yet, so silence counts afresh from then.
const CHECK_LATE_MS = 3 * SILENCE_CHECK_MS;

export class SessionClient {
  /**
   * @param options.key the API key
   * @param options.session the relay session name
   * @param options.onCommand (type, data) => void for each of COMMANDS
   * @param options.onState (state, detail) => void: "reconnecting" | "unauthorized"
   * @param options.leaseWorker the URL of lease-worker.js
   */
  constructor({ key, session, onCommand, onState, leaseWorker }) {
    this.key = key;
    this.session = session;
    this.onCommand = onCommand;
    this.onState = onState;
    this.leaseWorker = leaseWorker;
    this.lease = null; // the lease worker, once a `hello` said how long the lease lasts
    this.leaseMs = null;
    this.grant = null; // {sessionId, attachToken, expiresAt}
    this.tabId = null; // what the server calls this tab, from its `hello`
    this.runsSeen = new Set(); // ids of the runs this tab had a command for, oldest first
    this.events = null; // the open command stream's AbortController
    this.heardAt = 0; // when it last brought anything, heartbeats too
    this.checkedAt = 0; // the last silence check
    this.stopWatch = null;
    this.failures = 0;
    this.renewing = null;
    this.refreshTimer = null;
    this.stopped = false;
  }

  /** Attaches and opens the command stream; rejects (HttpError) when the server refuses the key. */
  async start() {
    await this.attach();
    this.listen();
    this.checkedAt = performance.now();
    this.stopWatch = every(SILENCE_CHECK_MS, () => this.checkStream());
  }

  /**
   * Tells the server this tab is going away (the page is closing or reloading), so the relay
   * session's next run goes to another tab at once. `keepalive` lets it outlive the page.
   */
  detach() {
    if (!this.grant || !this.tabId) return;
    this.lease?.terminate();
    this.lease = null;
    const { url, headers } = this.endpoint("detach");
    fetch(url, { method: "POST", headers, keepalive: true }).catch(() => {});
  }

  /**
   * Tells the server what this tab's runtimes are doing (`{id: "loading" | "ready" |
   * "failed"}`), so the relay session can show it and tell a run why it waits. Best effort: a
   * lost report only costs that note.
   */
  reportReadiness(runtimes) {
    if (!this.grant || !this.tabId) return;
    const { url, headers } = this.endpoint("ready");
    const init = { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ runtimes }) };
    fetch(url, init).catch(() => {});
  }

  stop() {
    this.stopped = true;
    this.stopWatch?.();
    this.events?.abort();
    clearTimeout(this.refreshTimer);
    this.lease?.terminate();
    this.lease = null;
  }

  get sessionId() {
    return this.grant?.sessionId;
  }

  /**
   * Where `action` (events, result, ready, refresh, detach) is, and the headers that prove this
   * tab (results also name it: the server takes a run's events only from the tab it gave the
   * run to).
   */
  endpoint(action) {
    const headers = { authorization: `Bearer ${this.grant.attachToken}` };
    if (this.tabId) headers["x-relay-tab"] = this.tabId;
    return { url: `/session/${encodeURIComponent(this.grant.sessionId)}/${action}`, headers };
  }

  /** Where this tab's results socket is (result-socket.js), with the current token; null before hello. */
  resultSocketEndpoint() {
    return this.socketEndpoint("results", RESULTS_PROTOCOL);
  }

  /** Where this tab's socket `action` is, offering `protocol` and the current token; null before hello. */
  socketEndpoint(action, protocol) {
    if (!this.grant || !this.tabId) return null;
    const url = new URL(this.endpoint(action).url, location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("tab", this.tabId);
    return { url: url.href, protocols: [protocol, `bearer.${this.grant.attachToken}`] };
  }

  /** Has the lease worker renew this tab's lease with the current tab id and token. */
  holdLease() {
    if (!this.leaseMs || !this.tabId || this.stopped) return;
    this.lease ??= new Worker(this.leaseWorker, { type: "module", name: "relay-lease" });
    const target = {
      socket: this.socketEndpoint("lease", LEASE_PROTOCOL),
      post: this.endpoint("lease"),
      renewMs: this.leaseMs / RENEWALS_PER_LEASE,
    };
    this.lease.postMessage({ target });
  }

  async attach() {
    const res = await fetchOk("/session", {
      method: "POST",
      headers: { authorization: `Bearer ${this.key}`, "content-type": "application/json" },
      body: JSON.stringify({ session: this.session }),
    });
    this.useGrant(await res.json());
  }

  useGrant(grant) {
    this.grant = grant;
    this.holdLease(); // the lease socket is held only to its token's expiry
    const left = grant.expiresAt - Date.now();
    this.scheduleRenew(Math.max(left - REFRESH_MARGIN_MS, left / 2));
  }

  scheduleRenew(ms) {
    clearTimeout(this.refreshTimer);
    if (this.stopped) return;
    this.refreshTimer = setTimeout(() => this.renew().catch(() => this.scheduleRenew(RETRY_REFRESH_MS)), ms);
  }

  /** Gets a fresh token: refresh the current one, or attach anew once it is expired or refused. */
  renew() {
    this.renewing ??= this.renewOnce().finally(() => (this.renewing = null));
    return this.renewing;
  }

  async renewOnce() {
    if (!this.grant || this.grant.expiresAt <= Date.now()) return this.attach();
    try {
      const { url, headers } = this.endpoint("refresh");
      const res = await fetchOk(url, { method: "POST", headers });
      this.useGrant(await res.json());
    } catch (err) {
      if (!(err instanceof HttpError) || err.status >= 500) throw err;
      await this.attach(); // the token or session is gone: start over with the key
    }
  }

  /** Opens the command stream; when it ends, fails or falls silent, it is reopened with a fresh token. */
  listen() {
    const stream = new AbortController();
    this.events = stream;
    this.heardAt = performance.now();
    const { url, headers } = this.endpoint("events");
    const heard = () => (this.heardAt = performance.now());
    fetchOk(url, { headers, signal: stream.signal })
      .then((res) => readEventStream(res.body, (type, data) => this.command(type, data), heard))
      .then(
        () => "the server ended the command stream",
        (err) => (stream.signal.aborted ? stream.signal.reason : err).message,
      )
      .then((why) => {
        if (stream !== this.events || this.stopped) return;
        this.events = null;
        this.reconnectLater(why);
      });
  }

  /** Ends the command stream once it was silent past STREAM_SILENCE_MS (see the top). */
  checkStream() {
    const now = performance.now();
    if (now - this.checkedAt > CHECK_LATE_MS) this.heardAt = now;
    this.checkedAt = now;
    const silentMs = Math.round(now - this.heardAt);
    if (!this.events || silentMs <= STREAM_SILENCE_MS) return;
    this.events.abort(new Error(`the command stream brought nothing for ${silentMs} ms, not even a heartbeat`));
  }

  /**
   * A command from the stream, or a run's command copied on the results socket
   * (result-socket.js): of the two copies of a run's command, the first is delivered.
   */
  command(type, data) {
    if (!COMMANDS.includes(type)) return;
    const command = JSON.parse(data);
    if (type === "hello") {
      this.failures = 0;
      this.tabId = command.tabId;
      this.leaseMs = command.leaseMs;
      this.runsSeen.clear(); // run ids are copied per tab
      this.holdLease();
    }
    if (RUN_COMMANDS.includes(type) && !this.firstSight(command.runId)) return;
    this.onCommand(type, command);
  }

  /** Whether this tab has not had run `runId`'s command yet (remembering the latest ones). */
  firstSight(runId) {
    if (this.runsSeen.has(runId)) return false;
    this.runsSeen.add(runId);
    if (this.runsSeen.size > RUNS_REMEMBERED) this.runsSeen.delete(this.runsSeen.values().next().value);
    return true;
  }

  /** Attaches anew after a pause (`why` the stream ended); the old tab id's lease is let go. */
  reconnectLater(why) {
    this.leaseMs = null; // until the next hello: the token's renewal must not renew the old tab id
    this.lease?.postMessage({ target: null });
    const delay = backoffMs(this.failures, RECONNECT_MAX_MS);
    this.failures++;
    this.onState("reconnecting", `${why}; retrying in ${delay / 1000} s`);
    setTimeout(async () => {
      if (this.stopped) return;
      try {
        await this.renew();
        this.listen();
      } catch (err) {
        if (err instanceof HttpError && (err.status === 401 || err.status === 403)) {
          this.stop();
          this.onState("unauthorized", err.body?.error?.message ?? err.message); // the server's words
        } else {
          this.reconnectLater(`could not attach again (${err.message})`);
        }
      }
    }, delay);
  }
}
