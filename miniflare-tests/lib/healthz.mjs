// What the edge tests (edge.test.mjs, edge-py.test.mjs) check while a guest runs: that the server
// answers again, and how soon.

import { BASE } from "./relay.mjs";

// How much later than a run's timeout the server may answer again, on a loaded machine.
export const MARGIN_MS = 15_000;

/**
 * Times `GET /healthz` while `work` runs: every answer's status and latency. wrangler dev's
 * workerd is frozen while a guest computes and answers every probe afterwards, so this proves
 * only that the server came back, and by the slowest probe, how soon.
 */
export async function healthzDuring(work) {
  const answers = [];
  let running = true;
  const probe = (async () => {
    while (running) {
      const started = Date.now();
      const res = await fetch(`${BASE}/healthz`);
      answers.push({ status: res.status, ms: Date.now() - started });
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const result = await work();
  running = false;
  await probe;
  const res = await fetch(`${BASE}/healthz`);
  answers.push({ status: res.status, ms: 0 });
  return { result, answers };
}
