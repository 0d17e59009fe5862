// The edge executor's runner for run_js (issue 27): QuickJS, the page's runner/quickjs.js, in
// the fresh dynamic Worker of each run. What it does around the run: edge-serve.js.

import quickjsWasm from "./quickjs.wasm";
import policyWasm from "./policy.wasm";
import { quickJsEngine } from "../../public/runner/quickjs.js";
import { edgeRunner } from "./edge-serve.js";

const MODULES = { "emscripten-module.wasm": quickjsWasm, "policy.wasm": policyWasm };

export default edgeRunner({
  modules: MODULES,
  // Made at the edge's cap, once per isolate (a standby's before its run): a run that asks for
  // less gets an instance of its own cap from it.
  start: (memMb) => quickJsEngine.start({ modules: MODULES, memMb }),
  // Interrupt-handler calls a millisecond of guest work is worth (QuickJS calls it every 10,000
  // branches and calls or so).
  ticksPerMs: 4,
});
