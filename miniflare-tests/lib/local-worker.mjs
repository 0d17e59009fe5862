// A second local Worker under `wrangler dev`, for tests that must stop and restart it or set
// other variables (the shared one from scripts/with-server.sh must stay up). Its state (DO
// SQLite, R2, KV) lives in `stateDir`, so a restart on the same directory finds it again.

import { spawn } from "node:child_process";
import { ROOT } from "./relay.mjs";

/**
 * Starts `wrangler dev` on 127.0.0.1:`port`, with `vars` (name -> value) set as the Worker's
 * variables (`--var`, over wrangler.toml's); resolves once /healthz answers.
 */
export async function startWorker({ port, stateDir, vars = {} }) {
  const url = `http://127.0.0.1:${port}`;
  const args = ["dev", "--ip", "127.0.0.1", "--port", String(port), "--persist-to", stateDir];
  for (const [name, value] of Object.entries(vars)) args.push("--var", `${name}:${value}`);
  const child = spawn("wrangler", [...args, "--log-level", "warn", "--show-interactive-dev-session=false"], {
    cwd: ROOT,
    stdio: "ignore",
    detached: true, // its own process group: stop() takes workerd down with it
  });
  const deadline = Date.now() + 120_000;
  while (!(await fetch(`${url}/healthz`).then((r) => r.ok, () => false))) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error(`wrangler dev on ${url} did not come up`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return {
    url,
    /** Kills wrangler and workerd at once, as a crash or a redeploy would. */
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      process.kill(-child.pid, "SIGKILL");
      await exited;
    },
  };
}
