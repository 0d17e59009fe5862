// Package sources on loopback for the dependency builds: an npm registry stand-in serving real
// tarballs (`npm pack NAME@VERSION`) with packuments made from their own package.json, and a
// PyPI JSON API stand-in serving real wheels (`pip download --only-binary=:all: --no-deps`, the
// compiled msgpack ones for Pyodide's PEP 783 platforms). Both are fetched once into
// miniflare-tests/.artifacts/packages/ and reused after. Besides the real packages:
// `tampered-number` (is-number's tarball with one byte changed, listed with the original's
// integrity) and `sdistonly` (a project whose only release is an sdist). The same Python index
// is also served under /relpypi with every file's `url` relative to the page that lists it
// (`../../../files/<file>`), as some private indexes answer, and under /abi2025 with only the
// wheel msgpack built for an older Pyodide ABI (every other project absent there).
// Pyodide-style mirrors: /pyodide/ serves a `pyodide-lock.json` written here in the shipped
// lock's format (its `info` copied from the shipped one) over real wheels (msgpack compiled,
// python-dateutil depending on six), and the files themselves; /pyodide-tampered/
// serves the same lock with one byte of msgpack's wheel changed.
// `many-files` (made here: 2,001 one-line modules) is past a build at the edge's cap of files;
// `bomb` (128 files of 8 MiB of zeros: 1 GiB, about 1 MiB gzipped) past its unpacked bytes, and `many-tiny`
// (20,000 empty files) past its files by far: a build must stop them as they inflate.
// Outside every source, `/secret` answers 200: a request the Worker should never have made shows.

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { ROOT } from "./relay.mjs";

const DIR = path.join(ROOT, "miniflare-tests", ".artifacts", "packages");
export const NPM_PACKAGES = ["lodash@4.17.21", "is-odd@3.0.1", "is-number@6.0.0", "is-docker@3.0.0", "nanoid@6.0.2"];
/** A wheel built for Pyodide's platform (PEP 783): what pip needs to be told to fetch it. */
const pyemscripten = (python, abi) => ["--platform", `pyemscripten_${abi}_wasm32`, "--python-version", python, "--implementation", "cp", "--abi", `cp${python.replace(".", "")}`];
/** Each wheel by its file name, and the `pip download` arguments that fetch it. */
export const WHEELS = {
  "six-1.16.0-py2.py3-none-any.whl": ["six==1.16.0"],
  "six-1.5.0-py2.py3-none-any.whl": ["six==1.5.0"],
  // 2.9.0.post0 requires six (4.0.0 no longer does), and is the one Pyodide's lock ships.
  "python_dateutil-2.9.0.post0-py2.py3-none-any.whl": ["python-dateutil==2.9.0.post0"],
  // Requires six>=1.9.0 (and gmpy only for its extras).
  "ecdsa-0.19.2-py2.py3-none-any.whl": ["ecdsa==0.19.2"],
  "msgpack-1.2.4-cp314-cp314-pyemscripten_2026_0_wasm32.whl": ["msgpack==1.2.4", ...pyemscripten("3.14", "2026_0")],
  "msgpack-1.2.4-cp313-cp313-pyemscripten_2025_0_wasm32.whl": ["msgpack==1.2.4", ...pyemscripten("3.13", "2025_0")],
};
export const MSGPACK_WHEEL = "msgpack-1.2.4-cp314-cp314-pyemscripten_2026_0_wasm32.whl";
const OLD_ABI_MSGPACK = "msgpack-1.2.4-cp313-cp313-pyemscripten_2025_0_wasm32.whl";
/** The mirror's lock: its packages and what each depends on, as Pyodide's lock lists them. */
const MIRRORED = {
  msgpack: { file: MSGPACK_WHEEL, depends: [], imports: ["msgpack"] },
  "python-dateutil": { file: "python_dateutil-2.9.0.post0-py2.py3-none-any.whl", depends: ["six"], imports: ["dateutil"] },
  six: { file: "six-1.16.0-py2.py3-none-any.whl", depends: [], imports: ["six"] },
};

/** Fetches the packages into DIR unless they are there already. */
function fetchFixtures() {
  mkdirSync(DIR, { recursive: true });
  const have = readdirSync(DIR);
  const missing = NPM_PACKAGES.filter((spec) => !have.includes(`${spec.replace("@", "-")}.tgz`));
  if (missing.length) execFileSync("npm", ["pack", "--silent", ...missing], { cwd: DIR, stdio: ["ignore", "ignore", "inherit"] });
  for (const [file, args] of Object.entries(WHEELS)) {
    if (have.includes(file)) continue;
    execFileSync("python3", ["-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps", "-d", DIR, ...args], {
      stdio: ["ignore", "ignore", "inherit"],
    });
    if (!existsSync(path.join(DIR, file))) throw new Error(`pip download ${args.join(" ")} did not fetch ${file}`);
  }
}

const sri = (bytes) => `sha512-${createHash("sha512").update(bytes).digest("base64")}`;
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

/** npm packuments by name, and the tarballs by URL path. */
function npmRegistry(base) {
  const packuments = {};
  const files = {};
  const add = (name, version, manifest, served, integrity) => {
    const file = `${name}-${version}.tgz`;
    files[`/npm/${name}/-/${file}`] = served;
    const packument = (packuments[name] ??= { name, "dist-tags": {}, versions: {} });
    packument.versions[version] = { name, version, dependencies: manifest.dependencies ?? {}, dist: { tarball: `${base}/npm/${name}/-/${file}`, integrity } };
    packument["dist-tags"].latest = version;
  };
  for (const spec of NPM_PACKAGES) {
    const bytes = readFileSync(path.join(DIR, `${spec.replace("@", "-")}.tgz`));
    const manifest = JSON.parse(execFileSync("tar", ["-xzOf", "-", "package/package.json"], { input: bytes }));
    add(manifest.name, manifest.version, manifest, bytes, sri(bytes));
    if (manifest.name === "is-number") {
      const tampered = Buffer.from(bytes);
      tampered[tampered.length - 10] ^= 0xff;
      add("tampered-number", manifest.version, manifest, tampered, sri(bytes));
    }
  }
  for (const [name, tarball] of Object.entries(madePackages())) add(name, "1.0.0", {}, tarball, sri(tarball));
  return { packuments, files };
}

/** The packages made here, by name: made once per process (the bomb takes a few seconds). */
export const madePackages = memo(() => ({
  "many-files": packed("many-files", (dir) => {
    for (let i = 0; i < 2_001; i++) writeFileSync(path.join(dir, `m${i}.js`), `module.exports = ${i};\n`);
  }),
  bomb: packed("bomb", (dir) => {
    for (let i = 0; i < 128; i++) {
      writeFileSync(path.join(dir, `zeros${i}.bin`), "");
      truncateSync(path.join(dir, `zeros${i}.bin`), 8 * 1024 * 1024); // sparse: no disk, no memory
    }
  }),
  "many-tiny": packed("many-tiny", (dir) => {
    for (let i = 0; i < 20_000; i++) writeFileSync(path.join(dir, `t${i}.js`), "");
  }),
}));

/** Package `name` (its package.json, and what `fill` writes beside it) as a tarball (`tar`, as `npm pack` makes them). */
export function packed(name, fill) {
  const dir = mkdtempSync(path.join(tmpdir(), `${name}-`));
  try {
    mkdirSync(path.join(dir, "package"));
    writeFileSync(path.join(dir, "package", "package.json"), JSON.stringify({ name, version: "1.0.0", main: "index.js" }));
    fill(path.join(dir, "package"));
    return execFileSync("tar", ["--sort=name", "-czf", "-", "-C", dir, "package"], { maxBuffer: 64 * 1024 * 1024 });
  } finally {
    rmSync(dir, { recursive: true });
  }
}

function memo(make) {
  let made;
  return () => (made ??= make());
}

/** PyPI JSON API documents by project, and the files by URL path. */
function pythonIndex(base) {
  const projects = {};
  const files = {};
  const add = (project, version, filename, bytes, packagetype) => {
    files[`/files/${filename}`] = bytes;
    const document = (projects[project] ??= { info: { name: project, version }, releases: {} });
    (document.releases[version] ??= []).push({ filename, url: `${base}/files/${filename}`, digests: { sha256: sha256(bytes) }, packagetype, yanked: false });
  };
  for (const file of Object.keys(WHEELS)) {
    const [project, version] = file.split("-");
    add(project.replaceAll("_", "-"), version, file, readFileSync(path.join(DIR, file)), "bdist_wheel");
  }
  add("sdistonly", "1.0", "sdistonly-1.0.tar.gz", Buffer.from("not served"), "sdist");
  return { projects, files };
}

/** The index as /abi2025 serves it: msgpack with only its wheel for Pyodide's 2025_0 ABI. */
function olderAbiIndex(python) {
  const msgpack = python.projects.msgpack;
  const releases = { "1.2.4": msgpack.releases["1.2.4"].filter((file) => file.filename === OLD_ABI_MSGPACK) };
  return { msgpack: { ...msgpack, releases } };
}

/**
 * A Pyodide-style mirror under `prefix`: its lock (the shipped lock's format and `info`, these
 * packages with their real sha256) and its files, by URL path; `tamper` changes one byte of
 * msgpack's wheel as served (the lock keeps the real digest).
 */
function pyodideMirror(prefix, { tamper = false } = {}) {
  const shipped = JSON.parse(readFileSync(path.join(ROOT, "node_modules", "pyodide", "pyodide-lock.json"), "utf8"));
  const files = {};
  const packages = {};
  for (const [name, { file, depends, imports }] of Object.entries(MIRRORED)) {
    const bytes = readFileSync(path.join(DIR, file));
    const version = file.split("-")[1];
    packages[name] = { depends, file_name: file, imports, install_dir: "site", name, package_type: "package", sha256: sha256(bytes), unvendored_tests: false, version };
    const served = Buffer.from(bytes);
    if (tamper && name === "msgpack") served[served.length >> 1] ^= 0x01;
    files[`${prefix}/${file}`] = served;
  }
  files[`${prefix}/pyodide-lock.json`] = Buffer.from(JSON.stringify({ info: shipped.info, packages }));
  return files;
}

/** A project's document with each file's `url` relative to /relpypi/pypi/<project>/json. */
function relativeLinks(document) {
  const releases = Object.fromEntries(
    Object.entries(document.releases).map(([version, files]) => [
      version,
      files.map((file) => ({ ...file, url: `../../../files/${file.filename}` })),
    ]),
  );
  return { ...document, releases };
}

/**
 * A package source that never answers whole: `/npm/silent` gets no response at all, `/npm/stall`
 * the head and the start of a body, then nothing, and `/npm/trickle` the head, then a byte
 * every `trickleMs` (well within the Worker's stall timer) for ever. `{sources, close()}`.
 */
export async function startSilentSource({ trickleMs = 2_000 } = {}) {
  const server = createServer((req, res) => {
    if (req.url === "/npm/stall") {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"name": "stall", ');
    }
    if (req.url === "/npm/trickle") {
      res.writeHead(200, { "content-type": "application/json" });
      const drip = setInterval(() => res.write(" "), trickleMs);
      res.on("close", () => clearInterval(drip));
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    sources: { npmRegistry: `${base}/npm`, pypiIndex: `${base}/pypi`, pypiFiles: `${base}/files` },
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * Starts both stand-ins on one loopback port.
 * @returns {Promise<{sources, relativeIndex, olderAbiIndex, mirror(name), hits: Map<string, number>,
 *   close()}>} `sources` as a tenant's `defaults.packages` (Pyodide's files from /pyodide, checked
 *   against the shipped lock); `relativeIndex` a `pypiIndex` whose file links are relative;
 *   `olderAbiIndex` one whose msgpack has only a wheel for another ABI; `mirror("pyodide" |
 *   "pyodide-tampered")` the `pyodideIndex` and `pyodideLock` of a mirror; `hits` counts requests
 *   by path
 */
export async function startPackageSources() {
  fetchFixtures();
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const base = `http://127.0.0.1:${server.address().port}`;
  const npm = npmRegistry(base);
  const python = pythonIndex(base);
  const olderAbi = olderAbiIndex(python);
  const mirrors = { ...pyodideMirror("/pyodide"), ...pyodideMirror("/pyodide-tampered", { tamper: true }) };
  const hits = new Map();
  server.on("request", (req, res) => {
    const { pathname } = new URL(req.url, base);
    hits.set(pathname, (hits.get(pathname) ?? 0) + 1);
    const name = decodeURIComponent(pathname.slice("/npm/".length));
    const [, index, project] = /^\/(pypi|relpypi|abi2025)\/pypi\/([^/]+)\/json$/.exec(pathname) ?? [];
    if (pathname === "/secret") return res.end("outside every package source");
    const body = npm.files[pathname] ?? python.files[pathname] ?? mirrors[pathname];
    if (body) {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      return res.end(body);
    }
    const projects = index === "abi2025" ? olderAbi : python.projects;
    const document = pathname.startsWith("/npm/") ? npm.packuments[name] : project && projects[project];
    const served = index === "relpypi" && document ? relativeLinks(document) : document;
    if (!document) {
      res.writeHead(404, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: "Not found" }));
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(served));
  });
  return {
    sources: { npmRegistry: `${base}/npm`, pypiIndex: `${base}/pypi`, pypiFiles: `${base}/files`, pyodideIndex: `${base}/pyodide`, pyodideLock: "" },
    relativeIndex: `${base}/relpypi`,
    olderAbiIndex: `${base}/abi2025`,
    mirror: (name) => ({ pyodideIndex: `${base}/${name}`, pyodideLock: `${base}/${name}/pyodide-lock.json` }),
    hits,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
