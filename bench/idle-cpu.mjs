// CPU used by the server (wrangler dev, workerd) and by Chromium while one attached tab is idle
// (issue 32): centiseconds of CPU a second over 15 s, from /proc, counting only this run's own
// processes (the machine runs other engineers' servers and browsers). `bash bench/run.sh idle-cpu`.
import { execSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { launchBrowser, openExecutor } from "../miniflare-tests/lib/browser.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";
import { BENCH_QUOTAS } from "./timing.mjs";

const descendants = (root) => {
  const kids = execSync(`pgrep -P ${root} || true`).toString().split("\n").filter(Boolean).map(Number);
  return kids.flatMap((k) => [k, ...descendants(k)]);
};
const mine = descendants(process.pid);
const ticksOf = (pids) =>
  pids.reduce((sum, pid) => {
    try {
      const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      return sum + Number(f[11]) + Number(f[12]);
    } catch { return sum; }
  }, 0);
const { key } = await createTenant("bench", { quotas: BENCH_QUOTAS });
const browser = await launchBrowser();
try {
  const executor = await openExecutor(browser, key);
  await new Promise((r) => setTimeout(r, 5000));
  const server = () => descendants(process.ppid).filter((p) => p !== process.pid && !descendants(process.pid).includes(p));
  const w0 = ticksOf(server()), c0 = ticksOf(descendants(process.pid)), t0 = Date.now();
  const lines0 = executor.lines.length;
  await new Promise((r) => setTimeout(r, 15000));
  const w1 = ticksOf(server()), c1 = ticksOf(descendants(process.pid)), s = (Date.now() - t0) / 1000;
  console.log(`idle ${s.toFixed(1)} s: workerd ${((w1 - w0) / s).toFixed(1)} cs/s, chromium ${((c1 - c0) / s).toFixed(1)} cs/s, page lines ${executor.lines.length - lines0}`);
  console.log(executor.lines.slice(lines0, lines0 + 10).join("\n"));
} finally {
  await browser.close();
}
