// The shared policy tables against the page's policy module: tests/policy_cases.json (egress)
// and tests/fs_path_cases.json (file paths), judged by dist/public/policy.wasm (relay-core's
// src/policy compiled by policy-wasm/) through public/lib/policy.js, with the same per-case
// semantics as tests/policy.rs, so a case the page would decide differently from the Rust
// tests fails here.
//
// No server and no browser: the module imports nothing, and Node's WebAssembly is V8, the
// engine Chromium runs the page's copy with, so running it here is running it there.
// Run: node --test miniflare-tests/policy-tables.test.mjs

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as esbuild from "esbuild";
import { buildAssets } from "../scripts/build-assets.mjs";
import { loadPolicy } from "../public/lib/policy.js";
import { startStaticServer } from "./lib/static-server.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const HASH_FILE = path.join(ROOT, "dist", "generated", "policy-wasm.json");

let outDir;
let wasm;

before(async () => {
  ({ outDir } = await buildAssets({ log: () => {} }));
  wasm = await readFile(path.join(outDir, "policy.wasm"));
});

async function table(name) {
  return JSON.parse(await readFile(path.join(ROOT, "tests", name), "utf8"));
}

/**
 * As tests/policy.rs's run_table: each case's policy is basePolicy with the case's
 * `overrideField` fields replacing the base's; `judge(policy, case)` gives the module's reply;
 * an allowed reply must equal `expected(case)` when that is given, a denial's reason must
 * contain every `reasonContains`, and every case has a note.
 */
function runTable({ cases, basePolicy }, overrideField, minCases, judge, expected = () => undefined) {
  const failures = [];
  for (const c of cases) {
    const reply = judge({ ...basePolicy, ...c[overrideField] }, c);
    const ok =
      c.verdict === "allow"
        ? reply.allow === true && (expected(c) === undefined || reply.path === expected(c))
        : reply.allow === false && (c.reasonContains ?? []).every((needle) => reply.reason.includes(needle));
    if (!ok) failures.push(`got ${JSON.stringify(reply)}, want ${JSON.stringify(c)}`);
    if (!c.note) failures.push(`no note says what this case covers: ${JSON.stringify(c)}`);
  }
  assert.deepEqual(failures, []);
  assert.ok(cases.length >= minCases, `${cases.length} cases, want at least ${minCases}`);
}

describe("the shared tables, judged by policy.wasm", () => {
  test("every egress case of tests/policy_cases.json", async () => {
    const policy = await loadPolicy(wasm);
    runTable(await table("policy_cases.json"), "network", 150, (network, c) => policy.checkUrl(network, c.url));
  });

  test("every path case of tests/fs_path_cases.json", async () => {
    const policy = await loadPolicy(wasm);
    runTable(
      await table("fs_path_cases.json"),
      "filesystem",
      60,
      (filesystem, c) => policy.checkPath(filesystem, c.path, c.access),
      (c) => c.normalized ?? c.path,
    );
  });
});

describe("loadPolicy", () => {
  test("keeps one instance per source", async () => {
    assert.equal(await loadPolicy(wasm), await loadPolicy(wasm));
  });

  test("throws on a malformed request instead of answering it", async () => {
    const policy = await loadPolicy(wasm);
    assert.throws(() => policy.checkPath({}, "/tmp/a", "delete"), /policy\.wasm check_path: malformed request: unknown variant `delete`/);
    assert.throws(() => policy.checkUrl({}, 42), /policy\.wasm check_url: malformed request/);
    // The instance is still good after a refused request.
    assert.deepEqual(policy.checkPath({}, "/tmp/a/", "write"), { allow: true, path: "/tmp/a" });
  });

  test("the build records policy.wasm's SRI hash for the bundles", async () => {
    const { integrity, size } = JSON.parse(await readFile(HASH_FILE, "utf8"));
    assert.equal(integrity, `sha384-${createHash("sha384").update(wasm).digest("base64")}`);
    assert.equal(size, wasm.length);
  });

  test("every runtime's runners get the same policy.wasm (runtimes.json), for the guest's writes", async () => {
    const runtimes = JSON.parse(await readFile(path.join(outDir, "runtimes.json"), "utf8"));
    const { integrity, size } = JSON.parse(await readFile(HASH_FILE, "utf8"));
    assert.ok(Object.keys(runtimes).length >= 2);
    for (const [id, { files }] of Object.entries(runtimes)) assert.deepEqual(files["policy.wasm"], { url: "policy.wasm", integrity, size }, id);
  });

  describe("as bundled for the page: fetches policy.wasm and checks its SRI hash", () => {
    let bundled;
    let tmp;
    const servers = [];

    before(async () => {
      // Bundled as build-assets bundles the page, so `relay-policy-wasm` is the build's hash.
      tmp = await mkdtemp(path.join(tmpdir(), "relay-policy-"));
      const file = path.join(tmp, "policy.bundle.mjs");
      await esbuild.build({
        entryPoints: [path.join(ROOT, "public", "lib", "policy.js")],
        outfile: file,
        bundle: true,
        format: "esm",
        alias: { "relay-policy-wasm": HASH_FILE },
        logLevel: "warning",
      });
      bundled = await import(pathToFileURL(file).href);
    });

    after(async () => {
      for (const server of servers) await server.close();
      await rm(tmp, { recursive: true, force: true });
    });

    async function serve(dir) {
      const server = await startStaticServer(dir);
      servers.push(server);
      return server;
    }

    test("the built module loads and decides", async () => {
      const { url } = await serve(outDir);
      const policy = await bundled.loadPolicy(new URL("/policy.wasm", url));
      assert.deepEqual(policy.checkUrl({ allowedDomains: ["example.com"] }, "https://api.example.com/"), { allow: true });
      const denied = policy.checkPath({}, "/etc/passwd", "read");
      assert.equal(denied.allow, false);
      assert.match(denied.reason, /outside the workspace/);
    });

    test("a module whose bytes differ from the build's is refused", async () => {
      const tampered = Buffer.from(wasm);
      tampered[tampered.length - 1] ^= 1;
      await writeFile(path.join(tmp, "policy.wasm"), tampered);
      const { url } = await serve(tmp);
      await assert.rejects(bundled.loadPolicy(new URL("/policy.wasm", url)), (err) => {
        assert.match(String(err.cause?.message ?? err.message), /integrity/);
        return true;
      });
    });
  });
});
