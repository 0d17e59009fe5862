// The page's rule for a guest's writes, applied in the runner where the guest makes them:
// relay-core's check_path in policy.wasm (lib/workspace-rules.js writeRefusal). The sandbox frame
// compiles policy.wasm with the runtime's other files (runtimes.json lists it for every runtime)
// and hands the module to each worker, which instantiates its own. So a write the page would
// refuse (a backslash, a segment over 255 bytes, "%2e", a control character, a path over 1,024
// bytes, a root the run may not write) fails in the guest with check_path's sentence, instead
// of being reported done and then dropped by the page.

import { policyChecks } from "../lib/policy-checks.js";
import { DEFAULT_FILESYSTEM, WORKSPACE_LIMIT_BYTES, writeRefusal } from "../lib/workspace-rules.js";

const POLICY_WASM = "policy.wasm";

/** policy.wasm's checks on an instance of this worker's own; `modules` are the runtime's, compiled. */
export function runnerPolicy(modules) {
  const module = modules[POLICY_WASM];
  if (!module) throw new Error(`the runner needs ${POLICY_WASM} among its runtime's files`);
  return policyChecks(new WebAssembly.Instance(module, {}));
}

/** One run's write check, by its policy.filesystem, and the workspace's limit. */
export class WriteRule {
  /**
   * @param policy runnerPolicy()'s checks; relay the run's RunRelay (denials go to the audit);
   *   limitBytes the most the workspace may hold (the tenant's cap, from the job)
   */
  constructor(policy, filesystem = DEFAULT_FILESYSTEM, relay, limitBytes = WORKSPACE_LIMIT_BYTES) {
    this.policy = policy;
    this.filesystem = filesystem;
    this.relay = relay;
    this.limitBytes = limitBytes;
  }

  /** Why the page would refuse a write of `path` (absolute, resolved), or null. */
  refusal(path) {
    return writeRefusal(this.policy, this.filesystem, path);
  }

  /** As refusal(), for a write the guest asked for: a refusal is also reported to the page. */
  denied(path) {
    const reason = this.refusal(path);
    if (reason) this.relay.denied("write", path, reason);
    return reason;
  }
}
