// Issue 27 items 3 and 4: can a runner stop Python in a single-threaded dynamic worker? Tries
// bench/edge-pyodide/limits.js (a work-counting interrupt buffer, a hard stop, a heap cap) in
// fresh dynamic workers booted from the memory snapshot, under bench/edge-pyodide's own
// `wrangler dev`, and prints:
// - calibration: ticks (limits.js) per ms of guest clock for kinds of pure-Python
//   work (the guest's clock moves under wrangler dev), as the QuickJS runner's TICKS_PER_MS;
// - overhead: CPU-bound programs with no buffer, a plain buffer, and the counting one, in turns;
// - hostile guests, each with a 2 s timeout and a budget of TICKS_PER_MS * 2000 ticks: how each
//   ended, after how long, and the slowest answer of GET /ready (polled meanwhile);
// - fresh loads of `print(1)` and of the bare isolate, counting workerd's "hung" cancels.
// Run it with `source scripts/env.sh && node bench/edge-pyodide-limits.mjs` (BENCH_EDGE_PY_PORT,
// default 8865; BENCH_CALLS, default 10; BENCH_LOADS fresh loads of each kind, default 100;
// BENCH_NO_MESSAGE_CHANNEL=1 hides MessageChannel from Pyodide and BENCH_ASYNC_COMPILE=1 leaves
// pyodide.mjs's asynchronous compile unpatched, see harness.mjs; BENCH_ONLY a
// comma-separated subset of calibrate,overhead,hostile,loads; BENCH_HOSTILE only the hostile
// guests whose label contains it).

import { loadavg } from "node:os";
import { pollReady, startWorker } from "./dev-worker.mjs";
import { build, DIR, READY, timed } from "./edge-pyodide/harness.mjs";
import { percentiles } from "./timing.mjs";

const PORT = Number(process.env.BENCH_EDGE_PY_PORT ?? 8865);
const N = Number(process.env.BENCH_CALLS ?? 10);
const LOADS = Number(process.env.BENCH_LOADS ?? 100);
// Ticks a millisecond of pure-Python work is worth (limits.js; the calibration prints them):
// the budget is this many a ms of the timeout.
const TICKS_PER_MS = 100;
const TIMEOUT_MS = 2000;
const HEAP_MAX_MIB = 96;

const CALIBRATE = {
  "while loop, i += 1": "i = 0\nwhile i < 3_000_000: i += 1",
  "for loop with arithmetic": "s = 0\nfor i in range(2_000_000): s += i * i % 7",
  "recursive calls, fib(27)": "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)\nfib(27)",
  "list comprehension + sort": "for _ in range(20): sorted([(i * 7919) % 10007 for i in range(50_000)])",
  "str methods": "s = ''\nfor i in range(200_000): s = str(i).zfill(8).upper()",
  "dict of strings": "d = {}\nfor i in range(300_000): d[str(i)] = i",
  "regex, 2**22 backtracking steps": "import re\nre.match(r'(a+)+$', 'a' * 22 + 'b')",
  "while True: pass (bounded)": "import itertools\nfor _ in itertools.repeat(None, 5_000_000): pass",
};

const HOSTILE = {
  "while True: pass": { code: "while True: pass" },
  "catches KeyboardInterrupt, loops on": { code: "while True:\n    try:\n        while True: pass\n    except KeyboardInterrupt:\n        print('caught')" },
  "SIGINT ignored, then a loop": { code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass" },
  "catches BaseException in the loop body": { code: "while True:\n    try:\n        sum(i for i in range(1000))\n    except BaseException:\n        pass" },
  "deep recursion, limit 10**6": { code: "import sys\nsys.setrecursionlimit(10**6)\ndef f(n): return f(n + 1)\nf(0)" },
  "deep recursion, default limit": { code: "def f(n): return f(n + 1)\nf(0)" },
  "asyncio loop, sleep(0)": { code: "import asyncio\nwhile True: await asyncio.sleep(0)", isAsync: true },
  "asyncio loop catching all": { code: "import asyncio\nwhile True:\n    try:\n        await asyncio.sleep(0)\n    except BaseException:\n        pass", isAsync: true },
  "asyncio sleep(3600)": { code: "import asyncio\nawait asyncio.sleep(3600)", isAsync: true },
  // 2**26 backtracking steps: a few seconds, bounded (2**40 froze workerd for good here).
  "regex backtracking, 2**26 steps": { code: "import re\nre.match(r'(a+)+$', 'a' * 26 + 'b')" },
  "the same regex, the clock read too": { code: "import re\nre.match(r'(a+)+$', 'a' * 26 + 'b')", clock: true },
  "str(10**200000) (C loop with signal checks)": { code: "import sys\nsys.set_int_max_str_digits(0)\nfor _ in range(1000): str(10**200000)" },
  "sum(range(10**8)) (one C call)": { code: "sum(range(10**8))" },
  "bytearray(2**30)": { code: "x = bytearray(2**30)" },
  "bytearray(2**30), caught, kept going": { code: "try:\n    x = bytearray(2**30)\nexcept MemoryError:\n    print('caught')\nwhile True: pass" },
  "a list of 1 KiB strings": { code: "l = []\nwhile True: l.append(str(len(l)) * 300)" },
};

// Requests that failed (workerd's "hung" cancel, see freshLoads): counted, printed at the end.
const failures = [];
const guest = (url, body) => timed(`${url}/cold?stage=guest&snapshot=1`, body).catch((err) => ({ error: err.message }));
const median = (xs) => percentiles(xs).p50;
const fmt = (x) => (typeof x === "number" ? x.toFixed(x < 10 ? 2 : 0) : String(x));

async function calibrate(url) {
  console.log(`\ncalibration: ticks (eval-loop reads, other reads 0.1 each) per ms of guest clock (median of ${N}; no budget)`);
  for (const [label, code] of Object.entries(CALIBRATE)) {
    const rates = [];
    let last;
    for (let i = 0; i < N; i++) {
      const r = await guest(url, { code, interrupt: "counting" });
      if (r.error || r.body.how !== "returned") {
        failures.push(`${label}: ${(r.error ?? JSON.stringify(r.body)).slice(0, 200)}`);
        continue;
      }
      last = r.body;
      rates.push(last.ticks / Math.max(1, last.runMs));
    }
    const split = `${last.loopReads} of ${last.reads} reads from the eval loop, ${last.runMs} ms`;
    console.log(`  ${label.padEnd(28)} ${fmt(median(rates)).padStart(7)} ticks/ms  (range ${fmt(Math.min(...rates))}-${fmt(Math.max(...rates))}; the last: ${split})`);
  }
}

async function overhead(url) {
  console.log(`\noverhead: the program's guest-clock ms, p50 (p95) of ${N}, the three in turns`);
  const kinds = ["none", "buffer", "counting"];
  for (const label of ["for loop with arithmetic", "recursive calls, fib(27)", "dict of strings"]) {
    const runs = kinds.map(() => []);
    for (let i = 0; i < N; i++) {
      for (const [k, interrupt] of kinds.entries()) {
        const r = await guest(url, { code: CALIBRATE[label], interrupt });
        if (r.error) failures.push(`${label}/${interrupt}: ${r.error.slice(0, 200)}`);
        else runs[k].push(r.body.runMs);
      }
    }
    const s = runs.map(percentiles);
    const cells = kinds.map((k, i) => `${k} ${fmt(s[i].p50)} (${fmt(s[i].p95)})`).join(", ");
    console.log(`  ${label.padEnd(28)} ${cells}; counting/none ${(s[2].p50 / s[0].p50).toFixed(3)}x`);
  }
}

async function hostile(url) {
  const budget = TICKS_PER_MS * TIMEOUT_MS;
  console.log(`\nhostile guests: timeout ${TIMEOUT_MS} ms, budget ${budget} ticks (${TICKS_PER_MS}/ms), heap cap ${HEAP_MAX_MIB} MiB`);
  const picked = Object.entries(HOSTILE).filter(([label]) => label.includes(process.env.BENCH_HOSTILE ?? ""));
  for (const [label, { code, isAsync, clock }] of picked) {
    const done = { value: false };
    const health = pollReady(url, done);
    const r = await guest(url, { code, isAsync, clock, interrupt: "counting", budget, timeoutMs: TIMEOUT_MS, heapMaxMiB: HEAP_MAX_MIB });
    done.value = true;
    const slowest = await health;
    if (r.error) {
      console.log(`  ${label.padEnd(40)} request failed: ${r.error.slice(0, 200)}`);
      continue;
    }
    const b = r.body;
    const out = (b.stdout + b.stderr).trim().split("\n").filter(Boolean);
    const printed = out.length ? `; printed ${out.length} lines, the last ${JSON.stringify(out[out.length - 1].slice(0, 80))}` : "";
    console.log(`  ${label.padEnd(40)} ${b.how}: ${(b.error ?? b.result).slice(0, 90)} | run ${b.runMs} ms, client ${fmt(r.ms)} ms, ticks ${b.ticks}, reads ${b.reads}, SIGINT at ${b.sigintAt}, heap ${b.heapMiB} MiB, slowest /ready ${fmt(slowest)} ms${printed}`);
  }
}

/** Fresh loads of `path`, in turns with the others: how many failed, and how. */
async function freshLoads(url) {
  const kinds = {
    "bare isolate, no snapshot module": "/cold?stage=load",
    "bare isolate, 30 MiB snapshot module": "/cold?stage=load&snapshot=1",
    "print(1) from the snapshot": "/cold?stage=run&snapshot=1",
  };
  console.log(`\nfresh loads, ${LOADS} of each in turns (load average ${loadavg()[0].toFixed(2)} at the start)`);
  const results = Object.fromEntries(Object.keys(kinds).map((k) => [k, []]));
  for (let i = 0; i < LOADS; i++) {
    for (const [label, path] of Object.entries(kinds)) {
      const load = loadavg()[0];
      const t0 = performance.now();
      const r = await timed(`${url}${path}`).catch((err) => ({ error: err.message, ms: performance.now() - t0 }));
      results[label].push({ ...r, load, i });
    }
  }
  for (const [label, all] of Object.entries(results)) {
    const failed = all.filter((r) => r.error);
    const ms = all.filter((r) => !r.error).map((r) => r.ms);
    const s = percentiles(ms);
    const hung = failed.filter((r) => /hung/.test(r.error));
    const where = failed.map((r) => `#${r.i} at load ${r.load.toFixed(1)} after ${fmt(r.ms)} ms`).join(", ");
    console.log(`  ${label.padEnd(28)} p50 ${fmt(s.p50)} ms, p95 ${fmt(s.p95)} ms; failed ${failed.length} (hung ${hung.length})${where ? `: ${where}` : ""}`);
    if (failed.length) console.log(`    the first: ${failed[0].error.slice(0, 300)}`);
  }
}

const noMessageChannel = process.env.BENCH_NO_MESSAGE_CHANNEL === "1";
const asyncCompile = process.env.BENCH_ASYNC_COMPILE === "1";
await build({ noMessageChannel, asyncCompile });
if (noMessageChannel) console.log("MessageChannel hidden from Pyodide (BENCH_NO_MESSAGE_CHANNEL=1)");
if (asyncCompile) console.log("pyodide.mjs's asynchronous compile left as it is (BENCH_ASYNC_COMPILE=1)");
const server = await startWorker({ dir: DIR, port: PORT, ready: READY, portVariable: "BENCH_EDGE_PY_PORT" });
try {
  const { url } = server;
  const boot = await timed(`${url}/bootstrap`);
  console.log(`memory snapshot made in ${fmt(boot.ms)} ms: ${(boot.body.snapshotBytes / 2 ** 20).toFixed(1)} MiB; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  const only = process.env.BENCH_ONLY?.split(",") ?? ["calibrate", "overhead", "hostile", "loads"];
  if (only.includes("calibrate")) await calibrate(url);
  if (only.includes("overhead")) await overhead(url);
  if (only.includes("hostile")) await hostile(url);
  if (only.includes("loads")) await freshLoads(url);
  console.log(`\nfailed requests outside the fresh loads: ${failures.length}${failures.map((f) => `\n  ${f}`).join("")}`);
} finally {
  server.stop();
}
console.log(`load average at the end: ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
