// A tiny static file server for the browser tests: serves directories laid over each other (the
// first that has a file wins: dist/test's runner test page over dist/public) on 127.0.0.1 with the content types the executor needs (module scripts, wasm) and records each
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

/**
 * @param roots one directory or several, searched in order
 * @returns {Promise<{url: string, requests: string[], close: () => Promise<void>}>}
 */
export async function startStaticServer(roots) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const { pathname } = new URL(req.url, "http://localhost");
    requests.push(pathname);
    const { file, info } = await find([roots].flat(), decodeURIComponent(pathname === "/" ? "/index.html" : pathname));
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

/** The first of `roots` holding `name` (never a path outside them), with its stat. */
async function find(roots, name) {
  for (const root of roots) {
    const file = path.join(root, name);
    const info = file.startsWith(root + path.sep) ? await stat(file).catch(() => null) : null;
    if (info) return { file, info };
  }
  return { file: null, info: null };
}
