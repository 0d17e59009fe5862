// When the page has the sandbox load the standbys runs took (public/lib/standby-refill.js), on a
// clock the test moves: after the answer had time to leave when calls come spaced out, at once
// when they come back to back, and never twice for one idling.
import assert from "node:assert/strict";
import { test } from "node:test";
import { BACK_TO_BACK_MS, REFILL_AFTER_MS, StandbyRefill } from "../public/lib/standby-refill.js";

/** A StandbyRefill on a test clock: `loads` counts its loads, `advance(ms)` fires due timers. */
function onTestClock() {
  let now = 1_000;
  const timers = new Map();
  let nextId = 1;
  const counted = { loads: 0 };
  const refills = new StandbyRefill(() => counted.loads++, {
    now: () => now,
    setTimer: (fn, ms) => {
      timers.set(nextId, { fn, at: now + ms });
      return nextId++;
    },
    clearTimer: (id) => timers.delete(id),
  });
  const advance = (ms) => {
    now += ms;
    for (const [id, { fn, at }] of [...timers]) {
      if (at > now) continue;
      timers.delete(id);
      fn();
    }
  };
  return { refills, counted, advance, pending: () => timers.size };
}

test("calls spaced out: the load waits REFILL_AFTER_MS after the page idles, then runs once", () => {
  const { refills, counted, advance } = onTestClock();
  refills.runStarts();
  advance(30);
  refills.idle();
  assert.equal(counted.loads, 0, "not while the answer is on its way");
  advance(REFILL_AFTER_MS - 1);
  assert.equal(counted.loads, 0);
  advance(1);
  assert.equal(counted.loads, 1);
  advance(10 * REFILL_AFTER_MS);
  assert.equal(counted.loads, 1, "one load per idling");
});

test("calls back to back: a run that starts soon after the last idling has its successor's standby loaded at once", () => {
  const { refills, counted, advance } = onTestClock();
  refills.runStarts();
  refills.idle();
  advance(REFILL_AFTER_MS);
  assert.equal(counted.loads, 1);
  advance(BACK_TO_BACK_MS - REFILL_AFTER_MS - 1);
  refills.runStarts(); // came back to back: within BACK_TO_BACK_MS of the idling
  advance(30);
  refills.idle();
  assert.equal(counted.loads, 2, "at once, without the wait");
  advance(BACK_TO_BACK_MS);
  refills.runStarts(); // spaced out again
  refills.idle();
  assert.equal(counted.loads, 2);
  advance(REFILL_AFTER_MS);
  assert.equal(counted.loads, 3);
});

test("a run that starts while a load waits starts that load at once, and it does not run again", () => {
  const { refills, counted, advance, pending } = onTestClock();
  refills.runStarts();
  refills.idle();
  advance(REFILL_AFTER_MS - 5);
  refills.runStarts();
  assert.equal(counted.loads, 1);
  assert.equal(pending(), 0);
  advance(10 * REFILL_AFTER_MS);
  assert.equal(counted.loads, 1);
});

test("a run that started with no idling since the last one (it waited in the tab's queue) came back to back", () => {
  const { refills, counted, advance } = onTestClock();
  refills.runStarts();
  advance(10 * BACK_TO_BACK_MS);
  refills.runStarts(); // the next run of the queue: the page never idled
  advance(10 * BACK_TO_BACK_MS);
  refills.idle();
  assert.equal(counted.loads, 1, "at once: the runs came back to back");
});

test("the page idling twice before the wait is over loads once", () => {
  const { refills, counted, advance } = onTestClock();
  refills.runStarts();
  refills.idle();
  advance(REFILL_AFTER_MS / 2);
  refills.idle();
  advance(10 * REFILL_AFTER_MS);
  assert.equal(counted.loads, 1);
});
