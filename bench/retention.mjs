// The retention sweep over 10,000 `/out` files, 10,000 capsules and 10,000 workspace bodies
// (README "Operating"): uploads the files through `PUT /files` (32 a run, the most a run may
// publish), stores the capsules through `POST /capsules` (each its own code, so each its own
// layer: 10,000 layers too) for a tenant keeping unused ones a day, and uploads the bodies as a
// tab does ahead of a commit (`PUT /session/default/workspace/bodies/<sha256>`, 4.1 KB each, so
// in R2), 16 requests at once; then fires the Cron Trigger as of now (a sweep that scans and
// keeps all), four hours on (the files and the bodies go) and a day and an hour on (the capsules
// and their layers go), and prints each kind's duration from its log line. `bash bench/run.sh
// retention` (RELAY_LOG_LEVEL=log: the sweep's lines are info lines).

import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { attach, BASE, createTenant, mintRunToken } from "../miniflare-tests/lib/relay.mjs";

const FILES = Number(process.env.RETENTION_FILES ?? 10_000);
const CAPSULES = Number(process.env.RETENTION_CAPSULES ?? 10_000);
const BODIES = Number(process.env.RETENTION_BODIES ?? 10_000);
const PER_RUN = 32;
const AT_ONCE = 16;

const { tenant, key } = await createTenant("retention-bench", { retention: { unusedDays: 1 } });
const made = await fetch(`${BASE}/capsules`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify({ language: "js", code: "1" }) });
const { hash } = await made.json();
const tokens = [];
for (let run = 0; run * PER_RUN < FILES; run++) tokens.push(mintRunToken({ tenant: tenant.id, run: `r_${run}`, capsule: hash }));

const started = performance.now();
let next = 0;
async function uploader() {
  for (let i = next++; i < FILES; i = next++) {
    const run = Math.floor(i / PER_RUN);
    const res = await fetch(`${BASE}/files/r_${run}/out/f${i}.txt`, { method: "PUT", headers: { authorization: `Bearer ${tokens[run]}` }, body: `${i}` });
    if (res.status !== 201) throw new Error(`upload ${i}: ${res.status} ${await res.text()}`);
  }
}
await Promise.all(Array.from({ length: AT_ONCE }, uploader));
console.log(`uploaded ${FILES} files in ${((performance.now() - started) / 1000).toFixed(1)} s`);

const storing = performance.now();
let nextCapsule = 0;
async function storer() {
  for (let i = nextCapsule++; i < CAPSULES; i = nextCapsule++) {
    const res = await fetch(`${BASE}/capsules`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify({ language: "js", code: `${i}` }) });
    if (res.status !== 201) throw new Error(`capsule ${i}: ${res.status} ${await res.text()}`);
  }
}
await Promise.all(Array.from({ length: AT_ONCE }, storer));
console.log(`stored ${CAPSULES} capsules in ${((performance.now() - storing) / 1000).toFixed(1)} s`);

/** Runs `task(i)` for i below `n`, `AT_ONCE` at a time; the seconds it took. */
async function inParallel(n, task) {
  const began = performance.now();
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) await task(i);
  };
  await Promise.all(Array.from({ length: AT_ONCE }, worker));
  return ((performance.now() - began) / 1000).toFixed(1);
}

const { attachToken } = await attach(key, "default");
const took = await inParallel(BODIES, async (i) => {
  const body = `${i} `.padEnd(4_200, "b");
  const sha = createHash("sha256").update(body).digest("hex");
  const res = await fetch(`${BASE}/session/default/workspace/bodies/${sha}`, { method: "PUT", headers: { authorization: `Bearer ${attachToken}` }, body });
  if (res.status !== 201) throw new Error(`body ${i}: ${res.status} ${await res.text()}`);
});
console.log(`uploaded ${BODIES} workspace bodies in ${took} s`);

async function sweep(time) {
  const lines = () => readFileSync(process.env.RELAY_SERVER_LOG, "utf8").split("\n").filter((l) => l.startsWith("{") && l.includes('"kind":"retention"'));
  const before = lines().length;
  const t0 = performance.now();
  const res = await fetch(`${BASE}/cdn-cgi/handler/scheduled?cron=17+*+*+*+*&time=${time}`);
  const wall = performance.now() - t0;
  if (res.status !== 200) throw new Error(`scheduled: ${res.status}`);
  while (lines().length < before + 7) await new Promise((r) => setTimeout(r, 100));
  const kinds = lines().slice(before).map((l) => JSON.parse(l));
  return { wallMs: Math.round(wall), ...Object.fromEntries(kinds.map((l) => [l.what, { scanned: l.scanned, deleted: l.deleted, durationMs: l.durationMs }])) };
}

const now = Date.now();
console.log("sweep keeping all:", JSON.stringify(await sweep(now)));
console.log("sweep deleting the files and bodies:", JSON.stringify(await sweep(now + 4 * 3_600_000)));
console.log("sweep deleting the capsules and layers:", JSON.stringify(await sweep(now + 25 * 3_600_000)));
console.log("sweep of empty prefixes:", JSON.stringify(await sweep(now + 25 * 3_600_000)));
