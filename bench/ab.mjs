// Two builds at once, calls interleaved (issue 32): RELAY_URL (A, this checkout's server) and
// RELAY_URL_B (B, another build's `wrangler dev`, started beforehand on its own port), each with
// its own tab in one Chromium. Per round `tools/list`, `read` and a warm-context `run_js` on A
// then on B (the order alternates), then the floor and the warm run 1 s apart, so both see the
// same moments of a shared machine's load. Prints p50s, ratios to each one's floor, and the
// median of the paired differences A - B: what resolves a few ms where two runs differ by 50%.
import { launchBrowser, openExecutor } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";
import { BENCH_QUOTAS, checked, percentiles, timed } from "./timing.mjs";
const N = Number(process.env.BENCH_CALLS ?? 60), PAUSED_N = Number(process.env.BENCH_PAUSED_CALLS ?? 12);
const bases = { A: process.env.RELAY_URL, B: process.env.RELAY_URL_B };
const browser = await launchBrowser();
const side = async (base) => {
  const { key } = await createTenant("bench", { quotas: BENCH_QUOTAS }, base);
  await openExecutor(browser, key, "default", base);
  const client = await connectClient(key, "default", "ab", base);
  return {
    list: () => client.listTools(),
    read: () => client.callTool({ name: "read", arguments: { path: "/missing.txt" } }),
    warm: () => checked(client, "run_js", "console.log(1)", { context: "bench" }),
  };
};
const sides = { A: await side(bases.A), B: await side(bases.B) };
const kinds = ["list", "read", "warm"];
const t = () => ({ list: [], read: [], warm: [], plist: [], pwarm: [] });
const times = { A: t(), B: t() };
for (let i = 0; i < 10; i++) for (const s of ["A", "B"]) for (const k of kinds) await sides[s][k]();
for (let i = 0; i < N; i++) for (const s of i % 2 ? ["B", "A"] : ["A", "B"]) for (const k of kinds) times[s][k].push(await timed(sides[s][k]));
const pause = () => new Promise((r) => setTimeout(r, 1000));
for (let i = 0; i < PAUSED_N; i++) for (const s of i % 2 ? ["B", "A"] : ["A", "B"]) {
  await pause(); times[s].plist.push(await timed(sides[s].list));
  await pause(); times[s].pwarm.push(await timed(sides[s].warm));
}
const p50 = (xs) => percentiles(xs).p50;
const diff = (k) => p50(times.A[k].map((a, i) => a - times.B[k][i]));
console.log(`A ${bases.A}  B ${bases.B}  (n=${N}, paused n=${PAUSED_N})`);
for (const [k, floor] of [["list", "list"], ["read", "list"], ["warm", "list"], ["plist", "plist"], ["pwarm", "plist"]]) {
  const [a, b] = [p50(times.A[k]), p50(times.B[k])];
  const r = (s, v) => (k === floor ? "" : ` (${(v / p50(times[s][floor])).toFixed(2)}x)`);
  console.log(`${k.padEnd(6)} A ${a.toFixed(1)} ms${r("A", a)}  B ${b.toFixed(1)} ms${r("B", b)}  median A-B ${diff(k).toFixed(1)} ms`);
}
await browser.close();
process.exit(0); // the clients' open streams would keep Node running
