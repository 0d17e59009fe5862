// Timing shared by the benches: percentiles of a set of durations, timing a call n times after
// some untimed warm-up calls (optionally with a pause before each), timing several calls in
// turns (one of each per round, so a machine that slows down mid-run slows them all alike and
// their ratios hold), timing one call, and a run that must print "1".

/** {p50, p95, p99} of `times` (ms). */
export function percentiles(times) {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  return { p50: at(50), p95: at(95), p99: at(99) };
}

/** Times `call` `n` times after `warmup` untimed calls, waiting `pauseMs` before each timed one. */
export async function timeCalls(call, { n, warmup, pauseMs = 0 }) {
  for (let i = 0; i < warmup; i++) await call();
  const times = [];
  for (let i = 0; i < n; i++) {
    if (pauseMs) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    const t0 = performance.now();
    await call();
    times.push(performance.now() - t0);
  }
  return percentiles(times);
}

/** Times each of `calls` `n` times in rounds (one call of each per round, in order) after `warmup` rounds: their percentiles, in order. */
export async function timeInTurns(calls, { n, warmup }) {
  for (let i = 0; i < warmup; i++) for (const call of calls) await call();
  const times = calls.map(() => []);
  for (let i = 0; i < n; i++) {
    for (const [j, call] of calls.entries()) times[j].push(await timed(call));
  }
  return times.map(percentiles);
}

/** `fn`'s duration in ms. */
export async function timed(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** Calls tool `name` (run_js or run_py) with `code` (and `extra` arguments), which must print exactly "1". */
export async function checked(client, name, code, extra = {}) {
  const result = await client.callTool({ name, arguments: { code, ...extra } });
  if (result.structuredContent?.stdout !== "1\n") throw new Error(`${name} gave ${JSON.stringify(result)}`);
}

/**
 * The quotas a bench's tenant gets (README "Quotas"): the largest, so that a fast machine
 * measures calls and not the default's 1,200 `tools/call` a minute.
 */
export const BENCH_QUOTAS = { callsPerMinute: 60_000, relaySessions: 1_000, runsInFlight: 1_000, egressRequestsPerDay: 10_000_000 };
