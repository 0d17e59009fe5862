// Limits for Python in a single-threaded isolate (issue 27 items 3 and 4), as the bench runs
// them: the product's counting interrupt buffer (public/runner/python-limits.js, which says
// how it works) under a budget the bench picks, a timer for a guest that only waits, and the
// heap cap of the patched getHeapMax (scripts/pyodide-patches.mjs): `globalThis.relayHeapMax`,
// past which a growth fails and Python raises MemoryError.

import { SignalCounter } from "../../public/runner/python-limits.js";

/**
 * Runs `code` in `pyodide` under the limits asked: `interrupt` "none" (no buffer), "buffer" (a
 * plain Int32Array nobody writes: the check's own cost) or "counting" (a SignalCounter of
 * `budget` ticks, halted `graceReads` reads after its SIGINT); `timeoutMs` for a guest that
 * waits (a timer: it fires only while the isolate is idle); `heapMaxMiB` the wasm heap's cap
 * (0: emscripten's 4 GiB); `isAsync` runs it with runPythonAsync; `clock` also ends it at
 * `timeoutMs` on the clock at each read, as the QuickJS runner's Guard does (the clock moves
 * during CPU work under wrangler dev, not in production). Returns how it ended, its
 * output, the reads and ticks, and the guest's clock (which moves under wrangler dev).
 */
export async function runLimited(pyodide, { code, interrupt = "counting", budget = Infinity, graceReads = 100, timeoutMs = 10_000, heapMaxMiB = 0, isAsync = false, clock = false }) {
  globalThis.relayHeapMax = heapMaxMiB ? heapMaxMiB * 2 ** 20 : undefined;
  const output = { stdout: "", stderr: "" };
  pyodide.setStdout({ batched: (line) => (output.stdout += `${line}\n`) });
  pyodide.setStderr({ batched: (line) => (output.stderr += `${line}\n`) });
  const deadline = clock ? Date.now() + timeoutMs : Infinity;
  const counter = new SignalCounter(pyodide._module, () => counter.ticks >= budget || (deadline !== Infinity && Date.now() >= deadline), graceReads);
  if (interrupt === "counting") pyodide.setInterruptBuffer(counter.buffer());
  if (interrupt === "buffer") pyodide.setInterruptBuffer(new Int32Array(1));
  // A guest that only waits: the timer halts it at its next read, and ends the race now.
  const timer = setTimeout(() => counter.haltSoon(), timeoutMs);
  const t0 = Date.now();
  let ended;
  try {
    const run = isAsync ? pyodide.runPythonAsync(code) : Promise.resolve().then(() => pyodide.runPython(code));
    const result = await Promise.race([run, counter.stopped]);
    ended = { how: "returned", result: String(result) };
  } catch (err) {
    ended = err?.relayHardStop ? { how: "halted", error: err.message } : { how: "raised", error: lastLine(String(err?.message ?? err)) };
  } finally {
    clearTimeout(timer);
  }
  const heapMiB = pyodide._module.HEAPU8.buffer.byteLength / 2 ** 20;
  return { ...ended, ...output, reads: counter.reads, loopReads: counter.loopReads, ticks: Math.round(counter.ticks), sigintAt: counter.sigintAt, runMs: Date.now() - t0, heapMiB };
}

/** A Python traceback's last line: the exception. */
function lastLine(text) {
  const lines = text.trim().split("\n");
  return lines[lines.length - 1];
}
