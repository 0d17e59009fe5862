// Resolves npm dependencies like npm does and fetches them: a dist-tag (`latest`, `next`) to
// the version it names; a range to the registry's `latest` if it satisfies it, else the highest
// version that does; their `dependencies` in
// turn, hoisted to the top `node_modules` unless another version is there already (then nested
// under the package that needs it). Each tarball is checked against the registry's `integrity`
// before it is unpacked, and unpacked within the build's budget. The result is a virtual tree of files under /node_modules.

import maxSatisfying from "semver/ranges/max-satisfying.js";
import satisfies from "semver/functions/satisfies.js";
import { checkDigest, failed } from "./registry.js";
import { untgz } from "./tar.js";

// The abbreviated metadata format (npm's own client asks for it): names, versions, deps, dist.
const PACKUMENT_ACCEPT = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8";
/** Packages one build may install, its dependencies' dependencies included. */
export const MAX_PACKAGES = 500;

/**
 * @param dependencies {name: range}
 * @param registry the tenant's npm registry base URL
 * @param via the build's Registry (registry.js)
 * @param progress (phase, detail) => void
 * @returns {Promise<{files: Map<string, Uint8Array>, installed: [{name, version, dir}]}>} files
 *   by absolute path (/node_modules/<name>/...)
 */
export async function installNpm(dependencies, registry, via, progress) {
  const packuments = new Map();
  const packument = (name) => {
    if (!packuments.has(name)) {
      const url = `${registry}/${name.replace("/", "%2f")}`;
      packuments.set(name, via.json(url, `npm package ${name}`, PACKUMENT_ACCEPT));
    }
    return packuments.get(name);
  };
  const installed = await resolveTree(dependencies, packument, progress);
  const files = new Map();
  let done = 0;
  for (const pkg of installed) {
    const what = `${pkg.name}@${pkg.version}`;
    const tarball = await via.bytes(pkg.dist.tarball, what);
    await checkDigest(tarball, pkg.dist.integrity ?? (pkg.dist.shasum && `sha1-${hexToBase64(pkg.dist.shasum)}`), what);
    for (const [path, bytes] of await untgz(tarball, what, via.budget)) files.set(`${pkg.dir}/${path}`, bytes);
    progress("fetch", `${++done} of ${installed.length} packages, ${Math.round(via.downloaded / 1024)} KiB`);
  }
  return { files, installed: installed.map(({ name, version, dir }) => ({ name, version, dir })) };
}

/** Breadth first, so that the packages asked for take the top of node_modules. */
async function resolveTree(dependencies, packument, progress) {
  const placed = new Map(); // dir -> {name, version, dist, dir}
  const queue = Object.entries(dependencies).map(([name, range]) => ({ name, range, from: "" }));
  while (queue.length) {
    const { name, range, from } = queue.shift();
    const dir = placement(placed, name, range, from);
    if (!dir) continue; // a satisfying version is already visible from `from`
    const version = pick(await packument(name), name, range, from);
    placed.set(dir, { name, version: version.version, dist: version.dist, dir });
    if (placed.size > MAX_PACKAGES) throw failed(`the dependencies need more than ${MAX_PACKAGES} packages; list fewer`);
    progress("resolve", `${placed.size} packages`);
    for (const [dep, depRange] of Object.entries(version.dependencies ?? {})) queue.push({ name: dep, range: depRange, from: dir });
  }
  return [...placed.values()];
}

/**
 * Where `name@range`, needed by the package in `from` ("" for the call), goes: null when a
 * version visible from there satisfies the range, else the top node_modules when free, else
 * nested under `from`.
 */
function placement(placed, name, range, from) {
  for (let dir = from; ; dir = parentPackage(dir)) {
    const seen = placed.get(`${dir}/node_modules/${name}`);
    if (seen) return satisfies(seen.version, range) ? null : `${from}/node_modules/${name}`;
    if (!dir) return `/node_modules/${name}`;
  }
}

/** The package directory above `dir` ("/node_modules/a/node_modules/b" -> "/node_modules/a"). */
function parentPackage(dir) {
  const at = dir.lastIndexOf("/node_modules/");
  return at <= 0 ? "" : dir.slice(0, at);
}

function pick(packument, name, range, from) {
  const versions = Object.keys(packument.versions ?? {});
  const tags = packument["dist-tags"] ?? {};
  const latest = tags.latest;
  const tagged = Object.hasOwn(tags, range) ? tags[range] : null;
  const chosen = tagged ?? (latest && satisfies(latest, range) ? latest : maxSatisfying(versions, range));
  if (!chosen) {
    const neededBy = from ? ` (needed by ${from.split("/node_modules/").pop()})` : "";
    const newest = latest ? `; latest is ${latest}` : "";
    throw failed(`no version of ${name} matches "${range}"${neededBy}${newest}`);
  }
  const version = packument.versions[chosen];
  if (!version?.dist?.tarball) throw failed(`${name}@${chosen}: the registry lists no tarball`);
  return { ...version, version: chosen };
}

function hexToBase64(hex) {
  return btoa(String.fromCharCode(...hex.match(/../g).map((h) => parseInt(h, 16))));
}
