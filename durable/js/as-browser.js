// Imported first by edge-runner-pyodide.js, before Pyodide's modules evaluate. workerd has
// process.versions.node, so Pyodide and emscripten's glue would take Node's paths (node:fs,
// createRequire): without `process` they take a browser's, which need only a `location` to
// resolve file names against (the runner answers every request for Pyodide's files from
// memory). MessageChannel is hidden too: Pyodide's event loop would schedule its zero-delay
// callbacks on one, whose messages workerd delivers without returning to timers, so an asyncio
// loop that never ends would starve the run's timeout timer; without it they go to setTimeout.
globalThis.process = undefined;
globalThis.MessageChannel = undefined;
globalThis.location = new URL("https://runtime.invalid/");
