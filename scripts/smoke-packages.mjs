// A smoke run of package builds against the real default sources (not part of CI): the public
// npm registry, PyPI and Pyodide's CDN, through the relay-edge that RELAY_URL names and a
// headless Chromium tab attached to it. Each call runs twice: cold (the tab builds it) and
// reused (the relay signs the recorded build at once); both times are printed, with what the
// call printed or why it failed. Exits 1 if a call that should work here failed.
// Run it with `bash scripts/smoke-packages.sh` (builds, starts a local relay, runs this).

import { launchBrowser, openExecutor } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";

const CALLS = [
  {
    what: "lodash and lodash/chunk from the npm registry",
    tool: "run_js",
    args: {
      code: 'import _ from "lodash";\nimport chunk from "lodash/chunk";\nconsole.log(_.VERSION, JSON.stringify(chunk([1, 2, 3, 4, 5], 2)));',
      npm: { dependencies: { lodash: "^4.17.21" } },
    },
  },
  {
    // 2.x needs six (4.0 no longer does): its Requires-Dist brings six with none listed.
    what: "python-dateutil<3 (which needs six) from PyPI",
    tool: "run_py",
    args: {
      code: "import dateutil, dateutil.parser, six\nprint(dateutil.__version__, six.__version__, dateutil.parser.parse('2026-11-25T10:30').minute)",
      pip: { requirements: ["python-dateutil<3"] },
    },
  },
  {
    what: "msgpack from PyPI (its PEP 783 wheel for this Pyodide)",
    tool: "run_py",
    args: {
      code: "import msgpack\nprint(msgpack.version, msgpack.Packer.__module__, msgpack.unpackb(msgpack.packb({'a': [1, 2]})))",
      pip: { requirements: ["msgpack"] },
    },
  },
  {
    what: "numpy from Pyodide's CDN (its distribution)",
    tool: "run_py",
    args: { code: "import numpy as np\nprint(np.__version__, int(np.arange(10).sum()))", pip: { requirements: ["numpy"] } },
  },
];

const { key } = await createTenant(`smoke-${Date.now()}`); // the default package sources
const browser = await launchBrowser();
let failures = 0;
try {
  await openExecutor(browser, key);
  const client = await connectClient(key, "default", "smoke-packages");
  for (const { what, tool, args } of CALLS) {
    const times = [];
    let outcome;
    for (const run of ["cold", "reused"]) {
      const started = performance.now();
      const result = await client.callTool({ name: tool, arguments: args }, undefined, { timeout: 300_000, resetTimeoutOnProgress: true, onprogress: () => {} });
      times.push(`${run} ${Math.round(performance.now() - started)} ms`);
      const { exitCode, stdout, error } = result.structuredContent ?? {};
      outcome = exitCode === 0 ? `ok: ${stdout.trim()}` : `FAILED: ${error ? `${error.name}: ${error.message}` : result.content?.[0]?.text}`;
      if (exitCode !== 0) break;
    }
    if (outcome.startsWith("FAILED")) failures++;
    console.log(`${what}\n  ${times.join(", ")}\n  ${outcome}`);
  }
  await client.close();
} finally {
  await browser.close();
}
process.exit(failures ? 1 : 0);
