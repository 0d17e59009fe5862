import { createTenant } from "./lib/relay.mjs";
import { connectClient } from "./lib/mcp-client.mjs";
const { key } = await createTenant("edge", { executor: "edge", edge: { cpuMsPerDay: 6000000, runsPerMinute: 100 } });
const client = await connectClient(key);
const health = setInterval(async () => { const t = Date.now(); await fetch(process.env.RELAY_URL + "/healthz"); const d = Date.now() - t; if (d > 500) console.log("healthz slow", d); }, 200);
for (const code of process.argv.slice(2)) {
  const t = Date.now();
  try {
    const r = await client.callTool({ name: "run_js", arguments: { code, policy: { limits: { timeoutMs: 3000 } } } }, undefined, { timeout: 120000 });
    const s = r.structuredContent; 
    console.log(Date.now() - t, "ms", JSON.stringify({...s, stdout: s.stdout.slice(0,200), stderr: s.stderr.slice(0,300)}).slice(0, 800));
  } catch (e) { console.log("ERR", e.message); }
}
clearInterval(health);
await client.close();
