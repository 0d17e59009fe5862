// Intervals that keep time while the tab is hidden, for the page's watchdogs (the sandbox
// frame's pings, lib/sandbox.js; the command stream's silence, lib/session.js). Executor tabs
// usually sit in the background, where Chrome runs a page's chained timers once a minute after
// 5 minutes hidden: a crashed frame would be noticed a minute late. A worker's timers are not
// throttled so, and its messages reach the page as they come: each interval ticks from one
// worker of the page's origin (clock-worker.js). Should that worker fail to start, the page's
// own timers stand in. A tick still runs on the page's thread, so long page work delays it.

const intervals = new Map(); // id -> {ms, fn, timer: a stand-in timer, once the worker failed}
let worker; // the clock worker; false once it failed to start
let nextId = 0;

/** Calls `fn` every `ms` milliseconds; returns the function that stops it. */
export function every(ms, fn) {
  const id = ++nextId;
  const interval = { ms, fn, timer: null };
  intervals.set(id, interval);
  worker ??= startWorker();
  if (worker) worker.postMessage({ id, everyMs: ms });
  else interval.timer = setInterval(fn, ms);
  return () => {
    intervals.delete(id);
    clearInterval(interval.timer);
    if (worker) worker.postMessage({ id, everyMs: null });
  };
}

function startWorker() {
  const started = new Worker(new URL("clock-worker.js", location.href), { type: "module", name: "relay-clock" });
  started.onmessage = ({ data: id }) => intervals.get(id)?.fn();
  started.onerror = () => {
    started.terminate();
    worker = false;
    console.warn("relay-mcp: clock-worker.js did not start; the page's watchdogs use its own timers, slow in a hidden tab");
    for (const interval of intervals.values()) interval.timer ??= setInterval(interval.fn, interval.ms);
  };
  return started;
}
