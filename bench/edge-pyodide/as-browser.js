// Imported first by guest.js: workerd has process.versions.node, so Pyodide (at its module's
// evaluation) and emscripten's glue would take Node's paths (node:fs, createRequire). Without
// `process` they take a browser's, which need only what guest.js hands them and a `location`
// to resolve its file names against.
globalThis.process = undefined;
globalThis.location = new URL("https://runtime.invalid/");
