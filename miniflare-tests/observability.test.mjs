// What an operator sees, end to end: runs in JavaScript and Python on a real tab (one ok, one
// exiting 2, one timing out), a fetch and a write the policy refuses, then the tenant's metrics
// from GET /admin/metrics (valid Prometheus text with the right counters and histogram counts)
// and the server's log (scripts/with-server.sh's RELAY_SERVER_LOG): one JSON line per request
// and per run, and no key, token, signing key or run output anywhere in it.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { attachedExecutor } from "./lib/attached.mjs";
import { BASE, devVars } from "./lib/relay.mjs";

const MARKER = "output-marker-5e0c7a91d2";
let attached;
let tenantId;
let client;
const runIds = [];

before(async () => {
  attached = await attachedExecutor("observability", { queue: { attachWaitMs: 2000 } });
  ({ client } = attached);
  tenantId = attached.tenant.id;
  const calls = [
    ["run_js", { code: `console.log("${MARKER}")` }],
    ["run_js", { code: "process.exit(2)" }],
    ["run_py", { code: `print("${MARKER}")` }],
    ["run_js", { code: "while (true) {}", policy: { limits: { timeoutMs: 1000 } } }],
    ["run_js", { code: 'try { await fetch("https://not-allowed.example/") } catch {} import fs from "fs"; try { fs.writeFileSync("/host/x", "1") } catch {}' }],
  ];
  for (const [name, args] of calls) {
    const result = await client.callTool({ name, arguments: args });
    runIds.push(result.structuredContent);
  }
});

after(() => attached?.close());

const metrics = (headers = { authorization: `Bearer ${devVars.ADMIN_TOKEN}` }) => fetch(`${BASE}/admin/metrics?tenant=${tenantId}`, { headers });

/** The Prometheus text as {name{labels}: value}, failing on any line that is not valid. */
function parse(text) {
  const samples = {};
  for (const line of text.split("\n").filter(Boolean)) {
    if (line.startsWith("# HELP ") || line.startsWith("# TYPE ")) continue;
    const match = line.match(/^([a-z_]+)\{((?:[a-zA-Z_]+="(?:\\.|[^"\\])*",?)*)\} (\d+)$/);
    assert.ok(match, `not a Prometheus sample: ${line}`);
    samples[`${match[1]}{${match[2]}}`] = Number(match[3]);
  }
  return samples;
}

describe("metrics", () => {
  test("the admin route wants the admin token", async () => {
    assert.equal((await metrics({})).status, 401);
    assert.equal((await metrics({ authorization: "Bearer wrong" })).status, 401);
    const noTenant = await fetch(`${BASE}/admin/metrics`, { headers: { authorization: `Bearer ${devVars.ADMIN_TOKEN}` } });
    assert.equal(noTenant.status, 400);
  });

  test("count runs by language and outcome, denials by kind, and time every run", async () => {
    const res = await metrics();
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type"), /^text\/plain; version=0\.0\.4/);
    const samples = parse(await res.text());
    const t = `tenant="${tenantId}"`;
    assert.equal(samples[`relay_runs_total{${t},language="js",outcome="ok"}`], 2);
    assert.equal(samples[`relay_runs_total{${t},language="js",outcome="exit_nonzero"}`], 1);
    assert.equal(samples[`relay_runs_total{${t},language="py",outcome="ok"}`], 1);
    assert.equal(samples[`relay_runs_total{${t},language="js",outcome="Timeout"}`], 1);
    assert.equal(samples[`relay_policy_denials_total{${t},kind="fetch"}`], 1);
    assert.equal(samples[`relay_policy_denials_total{${t},kind="write"}`], 1);
    assert.equal(samples[`relay_run_ms_count{${t}}`], 5);
    assert.equal(samples[`relay_run_ms_bucket{${t},le="+Inf"}`], 5);
    assert.ok(samples[`relay_run_ms_sum{${t}}`] >= 1000, "the timed-out run alone took a second");
    assert.equal(samples[`relay_output_bytes_count{${t}}`], 5);
    assert.equal(samples[`relay_queue_wait_ms_count{${t}}`], 5);
    assert.ok(samples[`relay_build_ms_count{${t}}`] >= 1, "capsules were built and stored");
    assert.ok(samples[`relay_wasm_memory_bytes{${t}}`] >= 1 << 20, "the relay session's isolate reports its wasm memory");
  });
});

describe("logs", () => {
  let lines;
  before(() => {
    const log = readFileSync(process.env.RELAY_SERVER_LOG, "utf8");
    lines = log.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  });

  test("one line per run, with tenant, session, language, time, exit code and bytes out", () => {
    const runs = lines.filter((l) => l.kind === "run" && l.tenant === tenantId);
    assert.equal(runs.length, 5);
    const timedOut = runs.find((l) => l.error === "Timeout");
    assert.deepEqual(
      { tool: timedOut.tool, language: timedOut.language, session: timedOut.session, exitCode: timedOut.exitCode, level: timedOut.level },
      { tool: "run_js", language: "js", session: "default", exitCode: 124, level: "warn" },
    );
    assert.ok(runs.every((l) => /^r_[0-9a-f]+$/.test(l.runId) && Number.isInteger(l.durationMs) && Number.isInteger(l.bytesOut)));
    assert.ok(runs.some((l) => l.language === "py" && l.bytesOut === MARKER.length + 1));
  });

  test("one line per request, by route pattern, naming the tenant where a credential did", () => {
    const mcp = lines.filter((l) => l.kind === "request" && l.route === "/mcp" && l.tenant === tenantId);
    assert.ok(mcp.length >= 5, `${mcp.length} /mcp lines`);
    assert.ok(mcp.every((l) => l.session === "default" && l.status < 500 && Number.isInteger(l.durationMs)));
    assert.ok(mcp.filter((l) => l.status === 200).length >= 5, "the tool calls");
    // The tab's results come on its results socket: one upgrade, logged with the tenant.
    const results = lines.filter((l) => l.route === "GET /session/:id/results" && l.tenant === tenantId);
    assert.ok(results.some((l) => l.status === 101), JSON.stringify(results));
    const admin = lines.filter((l) => l.route === "GET /admin/metrics");
    assert.ok(admin.some((l) => l.status === 401 && l.level === "warn"));
  });

  test("no key, token, signing key or run output is ever logged", () => {
    const log = readFileSync(process.env.RELAY_SERVER_LOG, "utf8");
    for (const [what, secret] of [
      ["the tenant's key", attached.key],
      ["the dev key", devVars.DEV_API_KEY],
      ["the signing key", devVars.CAPSULE_SIGNING_KEY],
      ["the admin token", devVars.ADMIN_TOKEN],
      ["a run's output", MARKER],
    ]) {
      assert.ok(!log.includes(secret), `${what} is in the log`);
    }
    assert.ok(!/eyJ[A-Za-z0-9_-]{10,}/.test(log), "no JWT (attach, run or capsule token) is in the log");
  });
});
