// A proxy in front of the Worker that never lets it learn that a client went away: requests
// and WebSocket upgrades are forwarded as they are, but when a client's connection closes, the
// proxy's own connection to the Worker stays open (what the Worker sends on it is read and
// dropped) until the proxy is closed. This plays what issue 24 met in production: a browser
// quit, and the relay went on writing to its tab's command stream as if it were there, since
// the runtime does not reliably report a closed client. A tab's goodbye (`POST .../detach`) is
// refused here too (503, never forwarded), and counted: only the tab's lease can tell.
// `stall()` plays a connection lost on the way (issue 24's half-open command stream): every
// response and tunnel open at that moment stops delivering, both ways, and neither end is told.

import http from "node:http";
import net from "node:net";

/**
 * Starts the proxy on a free port of 127.0.0.1 in front of `target`. Returns `{url, goodbyes,
 * stall, close}`: `goodbyes` lists the paths of the goodbyes it refused; `stall()` makes every
 * connection open now deliver nothing more (what the Worker sends on it is read and dropped),
 * while new ones work.
 */
export async function startDeafProxy(target) {
  const upstream = new URL(target);
  // Connections to the Worker whose client is gone; once the proxy is closed, none is kept.
  const kept = new Set();
  const clients = new Set();
  const goodbyes = [];
  // Forwardings open now, each as the function that stalls it.
  const open = new Set();
  const server = http.createServer((req, res) => {
    if (!req.url.endsWith("/detach")) return forward(req, res, upstream, kept, open);
    goodbyes.push(req.url);
    res.writeHead(503).end();
  });
  server.on("connection", (socket) => clients.add(socket));
  server.on("upgrade", (req, socket, head) => tunnel(req, socket, head, upstream, kept, open));
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    goodbyes,
    stall: () => {
      for (const stall of open) stall();
      open.clear();
    },
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        kept.add = (connection) => connection.destroy();
        for (const connection of [...kept, ...clients]) connection.destroy();
      }),
  };
}

function forward(req, res, upstream, kept, open) {
  const out = http.request(
    { host: "127.0.0.1", port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent: false },
    (answer) => {
      res.writeHead(answer.statusCode, answer.rawHeaders);
      answer.pipe(res);
      // Go on reading for the client, and never tell the Worker.
      const deafen = () => {
        answer.unpipe(res);
        answer.resume();
        kept.add(answer.socket);
      };
      open.add(deafen);
      answer.on("end", () => open.delete(deafen));
      res.on("close", () => {
        open.delete(deafen);
        if (!answer.complete) deafen(); // the client is gone
      });
    },
  );
  out.on("error", () => res.destroy());
  req.pipe(out);
}

function tunnel(req, socket, head, upstream, kept, open) {
  const out = net.connect(Number(upstream.port), "127.0.0.1", () => {
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
    out.write(`${lines.join("\r\n")}\r\n\r\n`);
    out.write(head);
    out.pipe(socket);
    socket.pipe(out, { end: false });
  });
  const deafen = () => {
    out.unpipe(socket);
    out.resume();
    kept.add(out);
  };
  // Stalled, the client's frames go nowhere either, and its side stays open.
  const stall = () => {
    socket.unpipe(out);
    socket.resume();
    deafen();
  };
  open.add(stall);
  socket.on("close", () => {
    open.delete(stall);
    deafen();
  });
  out.on("error", () => socket.destroy());
  socket.on("error", () => {});
}
