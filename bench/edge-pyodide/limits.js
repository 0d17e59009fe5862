// Limits for Python in a single-threaded isolate (issue 27 items 3 and 4), tried outside the
// product. Pyodide's interrupt buffer is meant to be written by another thread, and a dynamic
// worker has one. But CPython on emscripten reads it itself: every so many eval-loop checks
// (backward jumps, calls) `_Py_CheckEmscriptenSignals_Helper` reads `buffer[0]`, writes 0 back
// and raises the signal it read. So a buffer whose `0` getter counts its reads is a work
// counter on the interpreter's own thread, and it never reads the clock (which stands still
// during CPU work in production). Past the budget it answers 2 (SIGINT: KeyboardInterrupt)
// once; a guest that catches or ignores that is halted `graceReads` reads later by a throw
// (HardStop) the patched helper lets through (bench/edge-pyodide/harness.mjs patches
// pyodide.asm.mjs: unpatched, the helper's try/catch swallows it), which unwinds the whole
// interpreter, as the QuickJS runner's sticky stop halts its instance. The isolate is never
// reused after that. A heap cap comes from the same patch: emscripten's getHeapMax reads
// `globalThis.relayHeapMax`, so a growth past it fails and Python raises MemoryError.

/** The throw that halts the interpreter: the patched helper rethrows what carries this flag. */
class HardStop extends Error {
  constructor(reads) {
    super(`halted: still running ${reads} signal reads after its KeyboardInterrupt`);
    this.relayHardStop = true;
  }
}

// CPython's own interval: the eval loop reads the buffer every this many checks, and resets its
// countdown (`_Py_emscripten_signal_clock`) to it just before: a read that finds it there is
// the loop's. PyErr_CheckSignals, which C code calls in its own long loops, reads it at each
// call and finds the countdown anywhere. Its work per read varies widely (measured here: ~0.5
// us a small int's decimal conversion, ~80 us the regex engine's 4096 steps, against 2-11 us an
// eval-loop read), so such a read is worth DIRECT_READ_TICKS: a program formatting numbers is
// not stopped far before its timeout, and a regex runs long (limits.cpuMs is its wall).
const SIGNAL_INTERVAL = 50;
const DIRECT_READ_TICKS = 0.1;

/**
 * The interrupt buffer that counts the interpreter's work in ticks: an eval-loop read is a tick
 * (SIGNAL_INTERVAL checks), any other read DIRECT_READ_TICKS.
 */
class WorkCounter {
  constructor(module, budget, graceReads, deadline) {
    this.module = module;
    this.countdown = module.__Py_emscripten_signal_clock >> 2; // its index in HEAP32
    this.heap = module.HEAP32;
    this.budget = budget;
    this.deadline = deadline; // ms since the epoch, where the clock moves (wrangler dev); or Infinity
    this.graceReads = graceReads;
    this.reads = 0;
    this.ticks = 0;
    this.loopReads = 0; // reads the eval loop made
    this.sigintAt = null; // the read that answered SIGINT
    this.halted = null; // the HardStop once thrown: every later read throws it again
    this.stopped = new Promise((_, reject) => (this.reject = reject));
    this.stopped.catch(() => {}); // raced, maybe never awaited
  }

  /** What `setInterruptBuffer` gets: index 0 is the signal, read (and cleared) by CPython. */
  buffer() {
    const counter = this;
    return {
      get 0() {
        return counter.read();
      },
      set 0(_cleared) {},
    };
  }

  read() {
    this.reads++;
    // A grown heap detaches the old view (its length becomes 0): take the new one.
    if (this.heap.length === 0) this.heap = this.module.HEAP32;
    const fromLoop = this.heap[this.countdown] === SIGNAL_INTERVAL;
    this.loopReads += fromLoop ? 1 : 0;
    this.ticks += fromLoop ? 1 : DIRECT_READ_TICKS;
    if (this.halted) throw this.halted;
    if (this.ticks < this.budget && (this.deadline === Infinity || Date.now() < this.deadline)) return 0;
    if (this.sigintAt === null) {
      this.sigintAt = this.reads;
      return 2;
    }
    if (this.reads >= this.sigintAt + this.graceReads) this.halt();
    return 0;
  }

  /** Stops the guest for good: its next read throws, and the run's race ends now. */
  halt() {
    this.halted ??= new HardStop(this.reads - (this.sigintAt ?? this.reads));
    this.reject(this.halted);
    throw this.halted;
  }
}

/**
 * Runs `code` in `pyodide` under the limits asked: `interrupt` "none" (no buffer), "buffer" (a
 * plain Int32Array nobody writes: the check's own cost) or "counting" (a WorkCounter of
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
  const counter = new WorkCounter(pyodide._module, budget, graceReads, clock ? Date.now() + timeoutMs : Infinity);
  if (interrupt === "counting") pyodide.setInterruptBuffer(counter.buffer());
  if (interrupt === "buffer") pyodide.setInterruptBuffer(new Int32Array(1));
  // A guest that only waits: the timer halts it at its next read, and ends the race now.
  const timer = setTimeout(() => {
    try {
      counter.halt();
    } catch {
      // thrown for the interpreter's next read; the race has its rejection already
    }
  }, timeoutMs);
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
