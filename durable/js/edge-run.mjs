// The rules of entry.mjs's edge entrypoints that need no workerd, in a module of their own so
// Node tests them (miniflare-tests/edge-run.test.mjs): which routes a run's HOST lets through
// (and a build's), the exit event a run gets when its isolate dies before it sends one, and
// which run a standby may serve.

// The routes a run may reach with its token, by method and path.
const RUN_ROUTES = [
  ["POST", /^\/egress$/],
  ["POST", /^\/mcps-rpc$/],
  ["PUT", /^\/workspace\/bodies\/[0-9a-f]{64}$/],
  ["POST", /^\/workspace\/commit$/],
  ["PUT", /^\/files\/[^/]+\/out\/.+$/],
];

// The one route a deps build at the edge may reach: the tenant's package sources, through the
// Worker (durable/js/edge-build.js). Its upload and finalize are the host's own requests.
const BUILD_ROUTES = [["GET", /^\/registry$/]];

/**
 * Whether a run at the edge (or, with `build`, its deps build) may reach `method` `pathname`
 * (a parsed URL's) with its token.
 */
export function isRunRoute(method, pathname, { build = false } = {}) {
  return (build ? BUILD_ROUTES : RUN_ROUTES).some(([allowed, path]) => method === allowed && path.test(pathname));
}

// relay-core's exit codes of the two names (ErrorName::exit_code): this module is bundled by
// wrangler, without the page's generated error table.
const EXIT_CODES = { Timeout: 124, RuntimeCrashed: 137 };

/**
 * The runner's NDJSON `events`, ending with an exit event even when the runner's isolate dies
 * first (production's limits.cpuMs or its 128 MB, which the runner's own limits should reach
 * first but may not): the stream errors or ends with no exit, and the run would end Internal.
 * The exit says Timeout once the run's `timeoutMs` has passed since `started`, else
 * RuntimeCrashed, as a tab's run whose worker died. Only whole lines are passed on: a line the
 * isolate died in the middle of is dropped, or the exit after it would be cut into it and the
 * relay session would refuse both, with the events sent beside them.
 */
export function endingWithExit(events, { runId, started, timeoutMs }) {
  const reader = events.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let partial = "";
  let seq = -1;
  let exited = false;
  const wholeLines = (bytes) => {
    const lines = (partial + decoder.decode(bytes, { stream: true })).split("\n");
    partial = lines.pop();
    for (const line of lines.filter(Boolean)) {
      const event = JSON.parse(line);
      seq = Math.max(seq, event.seq);
      exited ||= event.type === "exit";
    }
    return lines.length ? `${lines.join("\n")}\n` : "";
  };
  return new ReadableStream({
    async pull(controller) {
      for (;;) {
        const read = await reader.read().catch(() => ({ done: true }));
        if (read.done) break;
        const whole = wholeLines(read.value);
        if (whole) return controller.enqueue(encoder.encode(whole)); // else read on: a pull must give something
      }
      if (!exited) controller.enqueue(encoder.encode(`${JSON.stringify(lostExit(runId, seq + 1, Date.now() - started, timeoutMs))}\n`));
      controller.close();
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

function lostExit(runId, seq, wallMs, timeoutMs) {
  const [name, message] =
    wallMs >= timeoutMs
      ? ["Timeout", `the run did not finish within its ${timeoutMs} ms timeout (policy.limits.timeoutMs); the edge stopped it`]
      : ["RuntimeCrashed", `the edge isolate running the code died after ${wallMs} ms, most likely of its CPU time or its 128 MB of memory. Use less memory or CPU per call (work in pieces), or run it in a tab`];
  return { runId, seq, type: "exit", exitCode: EXIT_CODES[name], usage: { wallMs, memPeakMb: 0 }, error: { name, message } };
}

// How long a standby waits for its run at most: past it the run takes a fresh runner, so a
// standby never serves runs long after it was made (the Worker's code may have changed since).
export const STANDBY_MAX_AGE_MS = 3 * 60_000;

/** Whether a standby made at `madeAt` (ms) is still young enough at `now` to serve a run. */
export function isFresh({ madeAt }, now) {
  const age = now - madeAt;
  return age >= 0 && age < STANDBY_MAX_AGE_MS;
}

/** Whether a standby ({cpuMs, madeAt}) may serve, at `now`, a run whose worker needs CPU limit `cpuMs`. */
export function standbyFits(standby, { cpuMs, now }) {
  return standby.cpuMs === cpuMs && isFresh(standby, now);
}
