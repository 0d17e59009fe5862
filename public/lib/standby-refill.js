// When the sandbox loads the standby workers runs took (RunnerHost.refill): once the page is
// idle, its results delivered, and not before, since loading one (QuickJS ~20-40 ms of CPU) on
// two cores holds up whatever runs beside it. That includes the run's answer, still on its way
// from the relay session to the client after the page's results were acknowledged (~9 ms at
// p50): so when calls come spaced out, as from an agent that reads each result first, the load
// waits REFILL_AFTER_MS more. When they come back to back, the next run needs its standby more
// than the last answer needs the CPU, and the load starts at once (a wait had the next runs
// find no standby ready); so does a waiting one when a run starts meanwhile.

// How long a load waits once the page is idle, when calls come spaced out.
export const REFILL_AFTER_MS = 20;
// A run that starts within this long of the page's last idling came back to back.
export const BACK_TO_BACK_MS = 250;

// The page's clock. (Called as a method of another object, setTimeout throws in a browser.)
const PAGE_CLOCK = {
  now: () => performance.now(),
  setTimer: (fn, ms) => setTimeout(fn, ms),
  clearTimer: (id) => clearTimeout(id),
};

export class StandbyRefill {
  /**
   * @param refill () => void: loads the standbys runs took
   * @param clock {now, setTimer, clearTimer}: the page's (tests pass their own)
   */
  constructor(refill, clock = PAGE_CLOCK) {
    this.load = refill;
    this.clock = clock;
    this.timer = null; // a load waiting for the last answer to reach its client
    this.idleSince = -Infinity;
    this.idled = true; // the page was idle since the last run started
    this.backToBack = false; // the current run started with no idling, or within BACK_TO_BACK_MS of it
  }

  /**
   * A run starts: whether it came back to back is noted (a run that waited behind another in
   * the tab's queue always did), and a waiting load starts now.
   */
  runStarts() {
    this.backToBack = !this.idled || this.clock.now() - this.idleSince < BACK_TO_BACK_MS;
    this.idled = false;
    if (this.timer !== null) this.refill();
  }

  /** The page is idle, its results delivered: the load starts now or after REFILL_AFTER_MS. */
  idle() {
    this.idleSince = this.clock.now();
    this.idled = true;
    if (this.backToBack) this.refill();
    else this.timer ??= this.clock.setTimer(() => this.refill(), REFILL_AFTER_MS);
  }

  refill() {
    this.clock.clearTimer(this.timer);
    this.timer = null;
    this.load();
  }
}
