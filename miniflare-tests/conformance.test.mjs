// The official MCP conformance suite (@modelcontextprotocol/conformance) against the Worker,
// once per protocol era: the 2025-11-25 requirement set on the legacy (initialize + session)
// wire and the 2026-07-28 set on the stateless wire. The suite's client cannot send an
// Authorization header, so it talks to lib/auth-proxy.mjs, which adds a test tenant's key.
//
// Every scenario that ran is judged here, scored or not (the CLI itself only scores what a
// revision required when it shipped, so server-session-lifecycle or http-header-validation
// could fail unnoticed): a scenario fails when a check reports FAILURE or WARNING, as the
// CLI's own baseline rule says. conformance-expected-failures.yml lists what may fail (the
// scenarios and checks that need the suite's fixture tools); an entry that passes is stale.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { startAuthProxy } from "./lib/auth-proxy.mjs";
import { BASE, ROOT, createTenant } from "./lib/relay.mjs";

const CLI = path.join(ROOT, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const BASELINE = path.join(ROOT, "miniflare-tests/conformance-expected-failures.yml");

/**
 * Scenarios that must run and pass in their era, whatever the baseline file says: the lifecycle,
 * listing, streaming, header and DNS-rebinding rules every client of that revision relies on.
 */
const MUST_PASS = {
  "2025-11-25": ["server-initialize", "server-session-lifecycle", "ping", "tools-list", "resources-list",
    "prompts-list", "server-sse-multiple-streams", "dns-rebinding-protection", "logging-set-level"],
  "2026-07-28": ["server-stateless", "http-header-validation", "caching", "tools-list", "resources-list",
    "prompts-list", "server-sse-multiple-streams", "dns-rebinding-protection", "sep-2164-resource-not-found"],
};

let proxy;
before(async () => {
  const { key } = await createTenant("conformance", { queue: { attachWaitMs: 300 } });
  proxy = await startAuthProxy(BASE, key);
});
after(() => proxy?.close());

for (const revision of Object.keys(MUST_PASS)) {
  test(`conformance suite, ${revision} requirement set`, async (t) => {
    const out = mkdtempSync(path.join(tmpdir(), `relay-conformance-${revision}-`));
    try {
      const run = await runSuite(revision, out);
      const results = readResults(out);
      const verdicts = judge(results, readBaseline());
      for (const v of verdicts) t.diagnostic(`[${revision}] ${v.scenario}: ${v.verdict}${v.note ? ` (${v.note})` : ""}`);
      assert.equal(run.code, 0, `the conformance CLI failed:\n${run.output.slice(-4000)}`);
      for (const scenario of MUST_PASS[revision]) {
        assert.ok(results.has(scenario), `${scenario} did not run at ${revision}`);
      }
      const bad = verdicts.filter((v) => v.verdict === "FAIL" || v.verdict === "STALE");
      assert.deepEqual(bad, [], `unexpected conformance results at ${revision}`);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
}

/** Runs the CLI (asynchronously: the proxy lives in this process). */
function runSuite(revision, outDir) {
  const args = [CLI, "server", "--url", `${proxy.url}/mcp`, "--requirements", revision,
    "--expected-failures", BASELINE, "-o", outDir, "--timeout", "20000"];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

/** scenario -> its checks, from the `server-<scenario>-<timestamp>/checks.json` files. */
function readResults(outDir) {
  const results = new Map();
  for (const dir of readdirSync(outDir)) {
    const scenario = dir.replace(/^server-/, "").replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, "");
    results.set(scenario, JSON.parse(readFileSync(path.join(outDir, dir, "checks.json"), "utf8")));
  }
  return results;
}

/** The `server:` entries of the baseline: whole scenarios, and `scenario:check-id` checks. */
function readBaseline() {
  const entries = readFileSync(BASELINE, "utf8")
    .split("\n")
    .map((line) => line.replace(/#.*/, "").match(/^\s*-\s+(\S+)\s*$/)?.[1])
    .filter(Boolean);
  const scenarios = new Set(entries.filter((e) => !e.includes(":")));
  const checks = new Map();
  for (const [scenario, check] of entries.filter((e) => e.includes(":")).map((e) => e.split(":"))) {
    checks.set(scenario, (checks.get(scenario) ?? new Set()).add(check));
  }
  return { scenarios, checks };
}

const isBad = (check) => check.status === "FAILURE" || check.status === "WARNING";

/** One verdict per scenario: pass, FAIL (unexpected), expected failure, or STALE baseline. */
function judge(results, baseline) {
  return [...results].map(([scenario, checks]) => {
    const failing = worstPerCheck(checks).filter(isBad);
    if (baseline.scenarios.has(scenario)) {
      return failing.length
        ? { scenario, verdict: "expected failure (fixture)" }
        : { scenario, verdict: "STALE", note: "passes now: remove it from the baseline" };
    }
    const excused = baseline.checks.get(scenario) ?? new Set();
    const unexpected = failing.filter((c) => !excused.has(c.id));
    const describe = (c) => `${c.id}: ${c.errorMessage ?? c.status}`;
    if (unexpected.length) return { scenario, verdict: "FAIL", note: unexpected.map(describe).join("; ") };
    const stale = [...excused].filter((id) => checks.some((c) => c.id === id && c.status === "SUCCESS"));
    if (stale.length) return { scenario, verdict: "STALE", note: `checks now passing: ${stale.join(", ")}` };
    const note = failing.length ? `fixture checks failing as expected: ${failing.map((c) => c.id).join(", ")}` : undefined;
    return { scenario, verdict: "pass", note };
  });
}

/** A check id can repeat; its verdict is its most severe occurrence (INFO never counts). */
function worstPerCheck(checks) {
  const rank = { FAILURE: 3, WARNING: 2, SUCCESS: 1 };
  const worst = new Map();
  for (const c of checks.filter((c) => c.status !== "INFO")) {
    if ((rank[c.status] ?? 0) >= (rank[worst.get(c.id)?.status] ?? 0)) worst.set(c.id, c);
  }
  return [...worst.values()];
}
