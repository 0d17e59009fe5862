// This tab's lease on its place in the relay session (run::lease in the core). The relay
// cannot tell a closed tab by its streams (a write to a dead tab may succeed for minutes), so
// the tab keeps telling it that it is alive, idle or busy, every `renewMs` (a fifth of the
// lease the `hello` command gives). It does so from this worker, a thread of its own: long
// work on the page's thread cannot hold the renewals up, nor can the throttling of timers in
// a background tab (a hidden page's chained timers may fire once a minute; a worker's do not).
// A closed tab's renewals stop with it, and the relay drops it once its lease lapses.
//
// A renewal is a `ping` on the tab's lease socket (GET /session/<id>/lease?tab=), which the
// runtime answers `pong` without waking the relay session; while that socket is not open, or
// stops answering, it is a POST to the same path.
// Messages: page -> {target: {socket: {url, protocols}, post: {url, headers}, renewMs} | null}

// After a socket closed (or failed to open), this long before the next try: a network that
// refuses WebSockets costs one attempt per interval, the renewals going by POST meanwhile.
const REOPEN_MS = 5_000;
// Renewals a socket may leave unanswered before it is taken for dead (a connection lost on the
// way can look open for minutes).
const UNANSWERED_MAX = 3;

let target = null;
let timer = null;
let ws = null;
let opened = null; // the URL and protocols `ws` was opened with
let closedAt = -Infinity;
let unanswered = 0;

self.onmessage = ({ data }) => {
  target = data.target;
  clearInterval(timer);
  timer = null;
  if (!target) return drop(ws, "released");
  timer = setInterval(renew, target.renewMs);
  renew();
};

function renew() {
  const key = `${target.socket.url} ${target.socket.protocols.join(",")}`;
  if (ws && opened !== key) drop(ws, "replaced"); // a new tab id or token: a new socket at once
  if (ws?.readyState === WebSocket.OPEN && unanswered < UNANSWERED_MAX) {
    unanswered++;
    return ws.send("ping");
  }
  if (ws?.readyState === WebSocket.OPEN) drop(ws, "unanswered");
  if (!ws && performance.now() - closedAt >= REOPEN_MS) open(key);
  post();
}

function open(key) {
  const socket = new WebSocket(target.socket.url, target.socket.protocols);
  ws = socket;
  opened = key;
  unanswered = 0;
  socket.onopen = () => {
    unanswered = 1;
    socket.send("ping");
  };
  socket.onmessage = () => (unanswered = 0);
  socket.onclose = () => forget(socket);
}

function post() {
  const { url, headers } = target.post;
  fetch(url, { method: "POST", headers }).then(
    (res) => res.ok || console.warn(`relay-mcp: the relay refused this tab's lease renewal (${res.status})`),
    () => {}, // offline: the next renewal tries again
  );
}

/** Closes `socket`; unless it was only replaced, the next one waits REOPEN_MS. */
function drop(socket, why) {
  if (!socket) return;
  forget(socket);
  if (why === "replaced") closedAt = -Infinity;
  socket.close(1000, why);
}

function forget(socket) {
  if (socket !== ws) return;
  ws = null;
  closedAt = performance.now();
}
