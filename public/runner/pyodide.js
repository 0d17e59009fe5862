// Runs Python capsules in Pyodide, loaded once per worker from our vendored copy and reused.
// Pyodide normally fetches and imports its files from indexURL by itself; here every file comes
// from loadRuntimeFiles (Cache API, SRI-checked) instead: the two JS modules are imported from
// blob URLs and, while loadPyodide runs, fetches under indexURL are answered from memory.

import { network } from "./lockdown.js";
import relayRunSource from "./relay_run.py";

const MiB = 1024 * 1024;

export async function createPyodideEngine({ baseUrl, files }) {
  const { loadPyodide } = await importBytes(files.get("pyodide.mjs"));
  const { default: createPyodideModule } = await importBytes(files.get("pyodide.asm.mjs"));
  const pyodide = await withFilesAsFetch(baseUrl, files, () =>
    loadPyodide({
      indexURL: baseUrl,
      lockFileContents: new TextDecoder().decode(files.get("pyodide-lock.json")),
      createPyodideModule,
    }),
  );
  pyodide.runPython(relayRunSource);
  const relayRun = pyodide.globals.get("relay_run");
  return {
    run(job, sink) {
      const exitCode = runCapsule(pyodide, relayRun, job, sink);
      // The interpreter's whole wasm heap: it only grows, so this is the peak so far.
      return { exitCode, memPeakMb: pyodide._module.HEAPU8.buffer.byteLength / MiB };
    },
  };
}

function runCapsule(pyodide, relayRun, job, sink) {
  const written = writeFiles(pyodide.FS, job.files);
  pyodide.setStdout({ write: streamWriter(sink, "stdout") });
  pyodide.setStderr({ write: streamWriter(sink, "stderr") });
  try {
    const { entry } = job;
    const config = {
      entry: entry.path,
      argv: entry.argv,
      env: entry.env,
      cwd: entry.cwd,
      stdin: entry.stdin,
      wheels: written.filter((path) => path.endsWith(".whl")),
    };
    return relayRun(JSON.stringify(config));
  } finally {
    // The capsule's files go again (the program may have removed some itself).
    for (const path of written) if (pyodide.FS.analyzePath(path).exists) pyodide.FS.unlink(path);
  }
}

/** Writes the capsule's files at /<relative path>; returns their absolute paths. */
function writeFiles(FS, files) {
  return Object.entries(files).map(([relative, bytes]) => {
    const path = `/${relative}`;
    const dir = path.slice(0, path.lastIndexOf("/"));
    if (dir) FS.mkdirTree(dir);
    FS.writeFile(path, bytes);
    return path;
  });
}

/**
 * A Pyodide raw write handler for one stream. Past the output cap it throws, which raises in
 * the Python code that printed, so a printing loop ends instead of running to the timeout.
 */
function streamWriter(sink, stream) {
  const decoder = new TextDecoder();
  return (bytes) => {
    if (!sink.write(stream, decoder.decode(bytes, { stream: true }))) {
      throw new Error(sink.limitError().message);
    }
    return bytes.length;
  };
}

async function importBytes(bytes) {
  const url = URL.createObjectURL(new Blob([bytes], { type: "text/javascript" }));
  try {
    return await import(url);
  } finally {
    URL.revokeObjectURL(url);
  }
}

/** Runs `load` with fetch() answering URLs under baseUrl from `files`. */
async function withFilesAsFetch(baseUrl, files, load) {
  const previous = self.fetch;
  self.fetch = (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const name = url.startsWith(baseUrl) ? url.slice(baseUrl.length) : null;
    if (!files.has(name)) return network.fetch(input, init);
    const type = name.endsWith(".wasm") ? "application/wasm" : "application/octet-stream";
    return Promise.resolve(new Response(files.get(name), { headers: { "content-type": type } }));
  };
  try {
    return await load();
  } finally {
    self.fetch = previous;
  }
}
