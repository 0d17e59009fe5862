// Stopping Python in a single-threaded isolate (the edge, issue 27; figures in
// docs/BENCHMARKS.md, "stopping Python in a single-threaded isolate"). Pyodide's interrupt
// buffer is meant to be written by another thread, and a dynamic worker has one. But CPython on
// emscripten reads it itself: every SIGNAL_INTERVAL eval-loop checks (backward jumps, calls)
// `_Py_CheckEmscriptenSignals_Helper` reads `buffer[0]`, writes 0 back and raises the signal it
// read. So a buffer whose `0` getter counts its reads is a work counter on the interpreter's own
// thread that never needs the clock (which stands still during CPU work in production). Once
// told to stop it answers 2 (SIGINT: KeyboardInterrupt) once; a guest that catches or ignores
// that is halted `graceReads` reads later by a throw (HardStop) that the patched helper lets
// through (scripts/pyodide-patches.mjs), which unwinds the whole interpreter, as the QuickJS
// runner's sticky stop halts its instance. The interpreter is dead after that: its isolate
// serves no other run.

/** The throw that halts the interpreter: the patched helper rethrows what carries this flag. */
export class HardStop extends Error {
  constructor(reads) {
    super(`halted: still running ${reads} signal reads after its KeyboardInterrupt`);
    this.relayHardStop = true;
  }
}

// CPython's own interval: the eval loop reads the buffer every this many checks, and resets its
// countdown (`_Py_emscripten_signal_clock`) to it just before: a read that finds it there is
// the loop's. PyErr_CheckSignals, which C code calls in its own long loops, reads it at each
// call and finds the countdown anywhere. Its work per read varies widely (~0.5 us a small int's
// decimal conversion, ~80 us the regex engine's 4096 steps, against 2-11 us an eval-loop read),
// so such a read is worth DIRECT_READ_TICKS.
const SIGNAL_INTERVAL = 50;
const DIRECT_READ_TICKS = 0.1;
const SIGINT = 2;

/**
 * The interrupt buffer that counts the interpreter's work in ticks (an eval-loop read is one,
 * any other read DIRECT_READ_TICKS) and asks `spend(ticks)` at each read whether to stop.
 */
export class SignalCounter {
  constructor(module, spend, graceReads = 100) {
    this.module = module;
    this.countdown = module.__Py_emscripten_signal_clock >> 2; // its index in HEAP32
    this.heap = module.HEAP32;
    this.spend = spend;
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
    const ticks = fromLoop ? 1 : DIRECT_READ_TICKS;
    this.loopReads += fromLoop ? 1 : 0;
    this.ticks += ticks;
    if (this.halted) throw this.halted;
    if (!this.spend(ticks)) return 0;
    if (this.sigintAt === null) {
      this.sigintAt = this.reads;
      return SIGINT;
    }
    if (this.reads >= this.sigintAt + this.graceReads) this.halt();
    return 0;
  }

  /** Stops the guest for good: its next read throws, and `stopped` rejects now. */
  halt() {
    this.halted ??= new HardStop(this.reads - (this.sigintAt ?? this.reads));
    this.reject(this.halted);
    throw this.halted;
  }

  /** halt() from outside the interpreter (a timer, the stream): the rejection is the signal. */
  haltSoon() {
    try {
      this.halt();
    } catch {
      // thrown again at the interpreter's next read; `stopped` has its rejection already
    }
  }
}
