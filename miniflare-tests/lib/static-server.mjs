// A tiny static file server for the browser tests: serves one directory (dist/public) on
// 127.0.0.1 with the content types the executor needs (module scripts, wasm) and records each
// request's path, so a test can tell what the browser fetched over the network.

import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import http from "node:http";
import path from "node:path";

const CONTENT_TYPES = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".map": "application/json",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".zip": "application/zip",
};

/** @returns {Promise<{url: string, requests: string[], close: () => Promise<void>}>} */
export async function startStaticServer(root) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const { pathname } = new URL(req.url, "http://localhost");
    requests.push(pathname);
    const file = path.join(root, decodeURIComponent(pathname === "/" ? "/index.html" : pathname));
    const info = file.startsWith(root + path.sep) ? await stat(file).catch(() => null) : null;
    if (req.method !== "GET" || !info?.isFile()) {
      res.writeHead(info ? 405 : 404).end();
      return;
    }
    res.writeHead(200, {
      "content-type": CONTENT_TYPES[path.extname(file)] ?? "application/octet-stream",
      "content-length": info.size,
      "cache-control": "no-cache",
    });
    createReadStream(file).pipe(res);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
