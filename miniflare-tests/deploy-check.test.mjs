// The deploy check (scripts/deploy-check.sh: `wrangler deploy --dry-run`, then
// relay_core::deploy) fails where a deploy would go wrong: a binding the Worker reads missing
// from the config, a bundle past its bound. No server: wrangler's dry run builds and bundles
// offline. scripts/test.sh also runs the check itself, on wrangler.toml, after the build.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ROOT } from "./lib/relay.mjs";

/** Runs the check with `args`: `{code, out}` (stdout and stderr together). */
function deployCheck(args = []) {
  try {
    const out = execFileSync("bash", ["scripts/deploy-check.sh", ...args], { cwd: ROOT, encoding: "utf8", stdio: "pipe" });
    return { code: 0, out };
  } catch (e) {
    return { code: e.status, out: `${e.stdout}${e.stderr}` };
  }
}

test("the repository's config passes and the bundle's sizes are printed", () => {
  const { code, out } = deployCheck();
  assert.equal(code, 0, out);
  const sizes = out.match(/bundle: ([\d.]+) KiB raw, ([\d.]+) KiB gzipped \(bound 1536 KiB gzipped\); bindings: 7 present/);
  assert.ok(sizes, out);
  console.log(`bundle: ${sizes[1]} KiB raw, ${sizes[2]} KiB gzipped`);
});

test("a config without a binding the Worker reads fails, naming it", () => {
  // Paths in a wrangler config are relative to its file: the copy sits beside the original.
  const config = path.join(ROOT, `.deploy-check-test-${process.pid}.toml`);
  const toml = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
  const withoutR2 = toml.replace(/\[\[r2_buckets\]\][^[]*/, "");
  assert.notEqual(withoutR2, toml);
  writeFileSync(config, withoutR2);
  try {
    const { code, out } = deployCheck(["--config", config]);
    assert.equal(code, 1, out);
    assert.match(out, /binding R2_CAPSULES \(R2 Bucket\) is missing: the Worker reads it; add it to wrangler\.toml/);
  } finally {
    rmSync(config, { force: true });
  }
});

test("a bundle past the bound fails, naming its size and the bound", () => {
  const { code, out } = deployCheck(["--max-gzip-kib", "100"]);
  assert.equal(code, 1, out);
  assert.match(out, /the bundle is [\d.]+ KiB gzipped, over the bound of 100 KiB/);
});
