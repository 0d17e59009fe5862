// The page's policy checks: relay-core's src/policy (and the Python build resolver) compiled to
// wasm (policy-wasm/, served as policy.wasm), so the tab judges a guest's fetch or file write with the very code the Rust
// tests run, not a second implementation. tests/policy_cases.json and tests/fs_path_cases.json
// are the tables both sides pass (miniflare-tests/policy-tables.test.mjs runs them here).
// This file loads the module; lib/policy-checks.js calls it.

import { memo } from "./memo.js";
import { policyChecks } from "./policy-checks.js";

/**
 * @param source where the module comes from: omitted in the page (policy.wasm next to this
 *   module, checked against the SRI hash the build put into the bundle), a URL (fetched and
 *   checked the same way), or the module's bytes (taken as they are: Node tests read them from
 *   dist/public/policy.wasm).
 * @returns {Promise<{checkUrl, checkPath, resolvePython}>} (lib/policy-checks.js), kept per source:
 *   the instance is reused.
 */
export function loadPolicy(source) {
  return policies(source);
}

const policies = memo(async (source) => {
  const bytes = ArrayBuffer.isView(source) || source instanceof ArrayBuffer ? source : await fetchChecked(source);
  const { instance } = await WebAssembly.instantiate(bytes, {});
  return policyChecks(instance);
});

async function fetchChecked(url = new URL("policy.wasm", import.meta.url)) {
  // Imported only here, so that Node can load this file unbundled (the alias is esbuild's).
  const { integrity } = (await import("relay-policy-wasm")).default;
  const res = await fetch(url, { integrity });
  if (!res.ok) throw new Error(`GET ${url} answered ${res.status}`);
  return res.arrayBuffer();
}
