// Package sources on loopback for the dependency builds: an npm registry stand-in serving real
// tarballs (`npm pack NAME@VERSION`) with packuments made from their own package.json, and a
// PyPI JSON API stand-in serving real wheels (`pip download --only-binary=:all: --no-deps`).
// Both are fetched once into miniflare-tests/.artifacts/packages/ and reused after. Besides the
// real packages: `tampered-number` (is-number's tarball with one byte changed, listed with the
// original's integrity) and `sdistonly` (a project whose only release is an sdist). The same
// Python index is also served under /relpypi with every file's `url` relative to the page that
// lists it (`../../../files/<file>`), as some private indexes answer.
// Outside every source, `/secret` answers 200: a request the Worker should never have made shows.

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { ROOT } from "./relay.mjs";

const DIR = path.join(ROOT, "miniflare-tests", ".artifacts", "packages");
export const NPM_PACKAGES = ["lodash@4.17.21", "is-odd@3.0.1", "is-number@6.0.0", "is-docker@3.0.0"];
export const WHEELS = ["six==1.16.0"];

/** Fetches the packages into DIR unless they are there already. */
function fetchFixtures() {
  mkdirSync(DIR, { recursive: true });
  const have = readdirSync(DIR);
  const missing = NPM_PACKAGES.filter((spec) => !have.includes(`${spec.replace("@", "-")}.tgz`));
  if (missing.length) execFileSync("npm", ["pack", "--silent", ...missing], { cwd: DIR, stdio: ["ignore", "ignore", "inherit"] });
  for (const requirement of WHEELS) {
    if (have.some((file) => file.startsWith(requirement.replace("==", "-")) && file.endsWith(".whl"))) continue;
    execFileSync("python3", ["-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps", "-d", DIR, requirement], {
      stdio: ["ignore", "ignore", "inherit"],
    });
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
  return { packuments, files };
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
  for (const file of readdirSync(DIR).filter((f) => f.endsWith(".whl"))) {
    const [project, version] = file.split("-");
    add(project, version, file, readFileSync(path.join(DIR, file)), "bdist_wheel");
  }
  add("sdistonly", "1.0", "sdistonly-1.0.tar.gz", Buffer.from("not served"), "sdist");
  return { projects, files };
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
 * A package source that never answers: `/npm/silent` gets no response at all, `/npm/stall` the
 * head and the start of a body, then nothing. `{sources, close()}`.
 */
export async function startSilentSource() {
  const server = createServer((req, res) => {
    if (req.url === "/npm/stall") {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"name": "stall", ');
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
 * @returns {Promise<{sources, relativeIndex, hits: Map<string, number>, close()}>} `sources` as a
 *   tenant's `defaults.packages`; `relativeIndex` a `pypiIndex` whose file links are relative;
 *   `hits` counts requests by path
 */
export async function startPackageSources() {
  fetchFixtures();
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const base = `http://127.0.0.1:${server.address().port}`;
  const npm = npmRegistry(base);
  const python = pythonIndex(base);
  const hits = new Map();
  server.on("request", (req, res) => {
    const { pathname } = new URL(req.url, base);
    hits.set(pathname, (hits.get(pathname) ?? 0) + 1);
    const name = decodeURIComponent(pathname.slice("/npm/".length));
    const [, index, project] = /^\/(pypi|relpypi)\/pypi\/([^/]+)\/json$/.exec(pathname) ?? [];
    if (pathname === "/secret") return res.end("outside every package source");
    const body = npm.files[pathname] ?? python.files[pathname];
    if (body) {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      return res.end(body);
    }
    const document = pathname.startsWith("/npm/") ? npm.packuments[name] : project && python.projects[project];
    const served = index === "relpypi" && document ? relativeLinks(document) : document;
    if (!document) {
      res.writeHead(404, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: "Not found" }));
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(served));
  });
  return {
    sources: { npmRegistry: `${base}/npm`, pypiIndex: `${base}/pypi`, pypiFiles: `${base}/files` },
    relativeIndex: `${base}/relpypi`,
    hits,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
