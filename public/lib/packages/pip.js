// Builds a run_py call's `pip` dependencies: every decision is relay-core's resolver
// (src/packages/python, in policy.wasm), which this file feeds until it is done. It asks for
// project documents from the tenant's index (PyPI's JSON API, `/pypi/<project>/json`; a 404
// tells it the index has no such project) and for wheels, whose METADATA it reads (Requires-Dist:
// transitive requirements). The runtime it resolves for is the lock shipped with the page's
// Pyodide (its `info`: Python version, ABI, platform); the packages of Pyodide's distribution
// come from the tenant's `pyodideIndex`, checked against that lock or the tenant's `pyodideLock`.
//
// Every file is checked before use: an index's wheel against the sha256 the index publishes, a
// distribution file against its lock's sha256. Checked files are kept in the Cache API and hashed
// again each time they are used. `pip.wheelUrls` are taken as given. The files land in the deps
// layer where the resolver says (wheels/<file>, shared libraries in wheels/dynlib/); the runner
// installs them as Pyodide's loadPackage does.

import { sha256Hex } from "../bytes.js";
import { checkedBytes } from "../checked-cache.js";
import { loadPolicy } from "../policy.js";
import { runtimeFile, runtimeIds } from "../runtime-files.js";
import { unzipOne } from "../zip.js";
import { failed } from "./registry.js";

/** The cache checked Python package files are kept in, by URL. */
const CACHE = "relay-python-packages";
/** Most resolver steps one build takes (each is one round of fetches). */
const MAX_STEPS = 64;

/**
 * @returns {Promise<{files: Map<string, Uint8Array>, resolved: string[]}>} files by layer path
 */
export async function installPip({ requirements, wheelUrls }, sources, via, progress) {
  const [rules, shipped] = await Promise.all([loadPolicy(), shippedLock()]);
  const lock = sources.pyodideLock ? await via.json(sources.pyodideLock, "the tenant's Pyodide lock (defaults.packages.pyodideLock)", "application/json") : shipped.lock;
  const known = {
    requirements,
    wheelUrls,
    runtime: shipped.lock.info,
    lock,
    lockSource: sources.pyodideLock || `shipped with ${shipped.runtimeId}`,
    pyodideIndex: sources.pyodideIndex,
    projects: {},
    metadata: {},
  };
  const files = new Files(via);
  for (let steps = 0; steps < MAX_STEPS; steps++) {
    const step = rules.resolvePython(known);
    if (step.failed) throw failed(step.failed.message);
    if (step.done) return layer(step.done.install, files, progress);
    const { projects, wheels } = step.fetch;
    await Promise.all([
      ...projects.map(async (key) => (known.projects[key] = await projectDocument(key, sources.pypiIndex, via))),
      ...wheels.map(async (file) => (known.metadata[file.url] = await metadataOf(await files.get(file), file.filename))),
    ]);
    progress("resolve", `${Object.keys(known.projects).length} projects, ${Object.keys(known.metadata).length} wheels read`);
  }
  throw failed(`the requirements took more than ${MAX_STEPS} rounds of fetches to resolve; list fewer`);
}

/** The lock shipped with the page's Pyodide, from the runtime's own files (SRI checked). */
async function shippedLock() {
  const runtimeId = (await runtimeIds()).find((id) => id.startsWith("pyodide@"));
  const bytes = await runtimeFile(runtimeId, "pyodide-lock.json");
  return { runtimeId, lock: JSON.parse(new TextDecoder().decode(bytes)) };
}

/**
 * A project's document from the index, with what the resolver reads of it; null when the index
 * has no such project. A file's `url` may be relative (a private index's may be): it is resolved
 * against the page that listed it, as pip resolves links; /registry then checks it.
 */
async function projectDocument(key, index, via) {
  const page = `${index}/pypi/${encodeURIComponent(key)}/json`;
  const document = await via.jsonIfThere(page, `Python package ${key}`, "application/json");
  if (!document) return null;
  const releases = Object.fromEntries(
    Object.entries(document.releases ?? {}).map(([version, files]) => [
      version,
      (Array.isArray(files) ? files : []).filter((file) => URL.canParse(file.url, page)).map((file) => ({
        filename: String(file.filename),
        url: new URL(file.url, page).href,
        digests: { sha256: file.digests?.sha256 ?? null },
        yanked: Boolean(file.yanked),
        requires_python: file.requires_python ?? null,
      })),
    ]),
  );
  return { info: { name: String(document.info?.name ?? key) }, releases };
}

/** The text of a wheel's `<name>.dist-info/METADATA`. */
async function metadataOf(bytes, filename) {
  const entry = await unzipOne(bytes, (name) => /^[^/]+\.dist-info\/METADATA$/.test(name)).catch((err) => {
    throw failed(`${filename}: it is not a readable wheel: ${err.message}`);
  });
  if (!entry) throw failed(`${filename}: it is not a wheel: it has no .dist-info/METADATA`);
  return new TextDecoder().decode(entry.data);
}

/** The deps layer's files, in the resolver's order, and what was resolved. */
async function layer(install, files, progress) {
  const out = new Map();
  for (const file of install) {
    out.set(file.layerPath, await files.get(file));
    progress("fetch", `${out.size} of ${install.length} wheels, ${Math.round(files.via.downloaded / 1024)} KiB`);
  }
  return { files: out, resolved: install.map(({ project, version }) => `${project}==${version}`) };
}

/** Each file once per build: fetched through the Worker, checked, and kept. */
class Files {
  constructor(via) {
    this.via = via;
    this.fetched = new Map();
    this.cache = self.caches ? caches.open(CACHE) : Promise.resolve(null);
  }

  get(file) {
    if (!this.fetched.has(file.url)) this.fetched.set(file.url, this.load(file));
    return this.fetched.get(file.url);
  }

  /**
   * A file with a published sha256 comes from the cache when the copy there still hashes to
   * it, else from its source, refused unless it does; one without (a `wheelUrls` entry) is
   * fetched as given.
   */
  async load({ url, filename, sha256, source }) {
    if (!sha256) return this.via.bytes(url, filename);
    const publisher = source === "lock" ? "Pyodide's lock gives" : "the index publishes";
    const bytes = await checkedBytes(await this.cache, url, {
      expected: sha256,
      hash: sha256Hex,
      fetchBytes: () => this.via.bytes(url, filename),
      refuse: (actual) =>
        failed(`${filename}: the download from ${url} has sha256 ${actual}, and ${publisher} ${sha256}; it was altered or corrupted on the way, and nothing was built from it`),
    });
    return new Uint8Array(bytes);
  }
}
