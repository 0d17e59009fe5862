// Two builds at once, calls interleaved (issue 32): RELAY_URL (A, this checkout's server) and
// RELAY_URL_B (B, another build's `wrangler dev`, started beforehand on its own port), each with
// its own tab in one Chromium. Per round `tools/list`, `read`, a warm-context `run_js` and an
// edge `run_js` (a second tenant whose runs go to the edge) on A then on B (the order
// alternates), then the floor, the warm run and a `run_js` and a `run_py` without a context (a
// fresh worker each) 1 s apart, so both see the same moments of a shared machine's load. Prints
// p50s, ratios to each one's floor, and the median of the paired differences A - B: what
// resolves a few ms where two runs differ by 50%. Start B afresh for each comparison: a
// long-lived server slows with age.
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
  const budget = { cpuMsPerDay: 86_400_000, runsPerMinute: 6_000 };
  const edge = await createTenant("bench-edge", { executor: "edge", edge: budget, quotas: BENCH_QUOTAS }, base);
  const edgeClient = await connectClient(edge.key, "default", "ab", base);
  return {
    list: () => client.listTools(),
    read: () => client.callTool({ name: "read", arguments: { path: "/missing.txt" } }),
    warm: () => checked(client, "run_js", "console.log(1)", { context: "bench" }),
    edge: () => checked(edgeClient, "run_js", "console.log(1)"),
    fresh: () => checked(client, "run_js", "console.log(1)"),
    py: () => checked(client, "run_py", "print(1)"),
  };
};
const sides = { A: await side(bases.A), B: await side(bases.B) };
const kinds = ["list", "read", "warm", "edge"];
const t = () => ({ list: [], read: [], warm: [], edge: [], plist: [], pwarm: [], pfresh: [], ppy: [] });
const times = { A: t(), B: t() };
for (let i = 0; i < 10; i++) for (const s of ["A", "B"]) for (const k of kinds) await sides[s][k]();
for (let i = 0; i < N; i++) for (const s of i % 2 ? ["B", "A"] : ["A", "B"]) for (const k of kinds) times[s][k].push(await timed(sides[s][k]));
const pause = () => new Promise((r) => setTimeout(r, 1000));
for (let i = 0; i < PAUSED_N; i++) for (const s of i % 2 ? ["B", "A"] : ["A", "B"]) {
  await pause(); times[s].plist.push(await timed(sides[s].list));
  await pause(); times[s].pwarm.push(await timed(sides[s].warm));
  await pause(); times[s].pfresh.push(await timed(sides[s].fresh));
  await pause(); times[s].ppy.push(await timed(sides[s].py));
}
const p50 = (xs) => percentiles(xs).p50;
const diff = (k) => p50(times.A[k].map((a, i) => a - times.B[k][i]));
console.log(`A ${bases.A}  B ${bases.B}  (n=${N}, paused n=${PAUSED_N})`);
for (const [k, floor] of [["list", "list"], ["read", "list"], ["warm", "list"], ["edge", "list"], ["plist", "plist"], ["pwarm", "plist"], ["pfresh", "plist"], ["ppy", "plist"]]) {
  const [a, b] = [p50(times.A[k]), p50(times.B[k])];
  const r = (s, v) => (k === floor ? "" : ` (${(v / p50(times[s][floor])).toFixed(2)}x)`);
  console.log(`${k.padEnd(6)} A ${a.toFixed(1)} ms${r("A", a)}  B ${b.toFixed(1)} ms${r("B", b)}  median A-B ${diff(k).toFixed(1)} ms`);
}
await browser.close();
process.exit(0); // the clients' open streams would keep Node running
