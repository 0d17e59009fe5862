// The result backchannel's fast path: one WebSocket per tab to the relay session's DO
// (GET /session/<id>/results?tab=<tabId>), on which a batch costs no request of its own. Through
// wrangler dev a POST's round trip from the page took ~17 ms, a socket message's ~1.3 ms.
// A message is `<id>\n<batch>`; the DO answers `{id, status, body}` as the POST would have.
// The DO also sends each run's command on it, framed as on the command stream, where the same
// command comes too: the socket's copy arrives sooner, and the session runs the first of the two.
//
// The socket only makes what POST does faster: a batch goes by POST while the socket is not
// open, when it is too large for one message, or when the socket closes before its answer (seq
// numbers make a batch that arrives twice harmless), or leaves it unanswered for 5 s. A closed
// socket says nothing of the tab's liveness: that is the lease's, renewed by the batches.

import { parseEvent } from "./event-stream.js";
import { HttpError } from "./http.js";

export const RESULTS_PROTOCOL = "relay-results";
// Larger batches (output floods) go by POST: a message stays far under the runtime's cap.
const MAX_MESSAGE_UNITS = 256 * 1024;
// After the socket closes (or failed to open), batches go by POST for this long before the
// next try, so a network that refuses WebSockets costs one attempt per interval.
const REOPEN_MS = 5000;
// A batch unanswered this long means the socket is dead without having closed (a connection
// lost on the way looks open for minutes): it is closed, and its batches go by POST.
const ANSWER_MS = 5000;

/** Thrown for a batch whose socket closed before it was answered: send it by POST. */
export class SocketClosed extends Error {}

export class ResultSocket {
  /**
   * @param endpoint () => {url, protocols} for the current tab and attach token, or null
   * @param onCommand (type, data) => void for a command's copy (data as on the stream: JSON text)
   * @param onOpened (opened) => void: true when a socket opens, false when one closes unopened
   */
  constructor(endpoint, onCommand, onOpened = () => {}) {
    this.endpoint = endpoint;
    this.onCommand = onCommand;
    this.onOpened = onOpened;
    this.ws = null;
    this.opened = null; // the URL and token `ws` was opened with: a new tab id or token means a new socket
    this.pending = new Map(); // message id -> {resolve, reject, timer}
    this.nextId = 1;
    this.closedAt = -Infinity;
  }

  /**
   * Sends `body` (an NDJSON batch). Returns a promise that settles as fetchOk would (rejecting
   * with an HttpError, or SocketClosed), or null when the socket cannot take it now.
   */
  send(body) {
    this.open();
    if (this.ws?.readyState !== WebSocket.OPEN || body.length > MAX_MESSAGE_UNITS) return null;
    const id = this.nextId++;
    const ws = this.ws;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.giveUp(ws), ANSWER_MS);
      this.pending.set(id, { resolve, reject, timer });
      ws.send(`${id}\n${body}`);
    });
  }

  /** Closes `ws`, which left a batch unanswered: its batches go by POST. */
  giveUp(ws) {
    this.closed(ws);
    ws.close(4000, "a batch went unanswered");
  }

  /**
   * Opens the socket for the current tab and token, unless it is open (or opening) or closed
   * just now. A refreshed token replaces the socket before the old one expires (the DO takes no
   * batch past that), so batches do not meet a 401 there.
   */
  open() {
    const target = this.endpoint();
    const opened = target && `${target.url} ${target.protocols.join(",")}`;
    if (!target || (this.ws && this.opened === opened)) return;
    if (!this.ws && performance.now() - this.closedAt < REOPEN_MS) return;
    if (this.ws) {
      const old = this.ws;
      this.closed(old); // its unanswered batches go by POST
      old.close(1000, "a new tab id or token");
    }
    const ws = new WebSocket(target.url, target.protocols);
    this.ws = ws;
    this.opened = opened;
    ws.onmessage = (event) => this.received(event.data);
    let wasOpen = false;
    ws.onopen = () => {
      wasOpen = true;
      this.onOpened(true);
    };
    ws.onclose = () => {
      if (this.ws === ws && !wasOpen) this.onOpened(false); // not one this page closed itself
      this.closed(ws);
    };
  }

  received(data) {
    const command = data.startsWith("event:") ? parseEvent(data) : null;
    if (command) return this.onCommand(command.type, command.data);
    const { id, status, body } = JSON.parse(data);
    const waiter = this.pending.get(id);
    if (!waiter) return;
    this.pending.delete(id);
    clearTimeout(waiter.timer);
    if (status >= 200 && status < 300) return waiter.resolve(body);
    waiter.reject(HttpError.refused("results socket", status, body));
  }

  closed(ws) {
    if (ws !== this.ws) return;
    this.ws = null;
    this.closedAt = performance.now();
    for (const { reject, timer } of this.pending.values()) {
      clearTimeout(timer);
      reject(new SocketClosed("the results socket closed"));
    }
    this.pending.clear();
  }
}
