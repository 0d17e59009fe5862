// A tiny HTTP proxy that adds `Authorization: Bearer <key>` to every request and forwards it to
// the Worker unchanged otherwise: same method, path, body and headers, Host and Origin included,
// and the answer (SSE streams too) piped back as it comes.
//
// Why: the official conformance suite's client has no way to send an Authorization header, and
// relay-edge refuses every /mcp request without a tenant's key (401). Keeping Host and Origin as
// the client sent them matters: the suite's dns-rebinding scenario forges them to check that the
// Worker itself refuses a foreign Host/Origin, which a rewriting proxy would hide. The Worker is
// reached on 127.0.0.1 whatever Host the request names.

import http from "node:http";

/**
 * Starts the proxy on a free port of 127.0.0.1 in front of `target` (the Worker's base URL).
 * Returns `{url, close}`; `url` is the proxy's base URL.
 */
export async function startAuthProxy(target, key) {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => forward(req, res, upstream, key));
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

function forward(req, res, upstream, key) {
  const headers = { ...req.headers, authorization: `Bearer ${key}` };
  const out = http.request(
    { host: "127.0.0.1", port: upstream.port, method: req.method, path: req.url, headers },
    (answer) => {
      res.writeHead(answer.statusCode, answer.rawHeaders);
      answer.pipe(res);
    },
  );
  out.on("error", (err) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
    res.end(`auth proxy: ${err.message}`);
  });
  // A client that goes away takes the upstream request with it (so closing a stream cancels).
  res.on("close", () => out.destroy());
  req.pipe(out);
}
