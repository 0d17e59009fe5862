// Dependency builds: what `run_js` with `npm.dependencies: {lodash}` costs cold (the tab
// resolves, fetches, checks, bundles with esbuild-wasm, uploads, finalizes, then runs) and
// reused (an identical call: the recorded build, no build command), against a plain run_js in
// the same run; and the sizes of lodash's tarball, its bundle, source map and the deps layer.
// Packages come from the loopback npm stand-in of the tests (miniflare-tests/lib/package-sources.mjs).
// Each new build asks for lodash with a different range (a new build key, the same layer): in
// the page's kept build worker, and right after a reload (a new worker, esbuild.wasm from the
// Cache API).
// Run it with `bash bench/run.sh packages`.

import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { launchBrowser, openExecutor, waitForLine } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { startPackageSources } from "../miniflare-tests/lib/package-sources.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";
import { BENCH_QUOTAS, percentiles, timeCalls } from "./timing.mjs";

const N = Number(process.env.BENCH_CALLS ?? 20);
const CODE = 'import _ from "lodash"; console.log(_.chunk([1, 2, 3], 2).length);';
const PLAIN = "console.log([1, 2, 3].length - 1);";
const RANGES = ["^4.17.0", "~4.17.21", ">=4.0.0", "4.x", "4.17.x", "^4.1.0", "^4.2.0", "^4.3.0", "^4.4.0", "^4.5.0", "^4.6.0", "^4.7.0"];
// Builds right after a page reload: a new build worker, esbuild.wasm from the Cache API.
const RELOAD_RANGES = ["^4.8.0", "^4.9.0", "^4.10.0"];

const line = (label, s, n) => console.log(`${label.padEnd(44)} p50 ${s.p50.toFixed(0)} ms  p95 ${s.p95.toFixed(0)} ms  (n=${n})`);
const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;

const registry = await startPackageSources();
const { key } = await createTenant("bench-packages", { packages: registry.sources, quotas: BENCH_QUOTAS });
const browser = await launchBrowser();
const { page, lines } = await openExecutor(browser, key);
const client = await connectClient(key);
const uploads = [];
page.on("request", (req) => req.url().endsWith("/capsule/upload") && uploads.push(req.postDataBuffer()));

const run = async (range) => {
  const args = range ? { code: CODE, npm: { dependencies: { lodash: range } } } : { code: PLAIN };
  const result = await client.callTool({ name: "run_js", arguments: args }, undefined, { timeout: 120_000 });
  if (result.structuredContent?.stdout !== "2\n") throw new Error(`run failed: ${JSON.stringify(result)}`);
};

const plain = await timeCalls(() => run(null), { n: N, warmup: 3 });
let t0 = performance.now();
await run(RANGES[0]);
const first = performance.now() - t0;
const warm = [];
for (const range of RANGES.slice(1)) {
  t0 = performance.now();
  await run(range);
  warm.push(performance.now() - t0);
}
const reused = await timeCalls(() => run(RANGES[0]), { n: N, warmup: 1 });
const reloaded = [];
for (const range of RELOAD_RANGES) {
  const seen = lines.length;
  await page.reload();
  await waitForLine(lines, /^Ready\. Waiting/, 30_000, seen);
  t0 = performance.now();
  await run(range);
  reloaded.push(performance.now() - t0);
}

console.log(`run_js with npm lodash, loopback registry (${new Date().toISOString()})`);
line("plain run_js (no dependencies)", plain, N);
console.log(`${"first build (esbuild-wasm fetched)".padEnd(44)} ${first.toFixed(0)} ms`);
line("new build, build worker kept warm", percentiles(warm), warm.length);
line("new build after a page reload", percentiles(reloaded), reloaded.length);
line("reused build (identical call)", reused, N);
console.log(`${"reused / plain p50".padEnd(44)} ${(reused.p50 / plain.p50).toFixed(2)}x`);

const layer = uploads[0];
const dir = mkdtempSync(path.join(tmpdir(), "bench-packages-"));
writeFileSync(path.join(dir, "deps.zip"), layer);
const listing = execFileSync("python3", ["-c", "import sys, zipfile; [print(i.filename, i.file_size) for i in zipfile.ZipFile(sys.argv[1]).infolist()]", path.join(dir, "deps.zip")]).toString();
const sizes = Object.fromEntries(listing.trim().split("\n").map((l) => l.split(" ")).map(([name, size]) => [name, Number(size)]));
const tarball = (await (await fetch(`${registry.sources.npmRegistry}/lodash/-/lodash-4.17.21.tgz`)).arrayBuffer()).byteLength;
console.log(`lodash 4.17.21 tarball ${kib(tarball)}; bundle index.js ${kib(sizes["node_modules/lodash/index.js"])}, index.js.map ${kib(sizes["node_modules/lodash/index.js.map"])}; deps layer (zip) ${kib(layer.length)}; ${uploads.length} uploads for ${RANGES.length + RELOAD_RANGES.length} builds`);

await client.close();
await browser.close();
await registry.close();
