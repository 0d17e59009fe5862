// Resolves `pip.requirements` against a package index's JSON API (PyPI's `/pypi/<project>/json`):
// the highest release matching the specifiers (pre-releases and yanked files only when pinned),
// and of it the pure-Python wheel (py3, abi `none`, platform `any`), checked against the sha256
// the index publishes. A release with only an sdist or only platform wheels is refused with the
// reason: Pyodide installs pure-Python wheels. `pip.wheelUrls` are fetched as they are. Wheels
// land in the layer as wheels/<file>.whl; the runner unpacks them into site-packages.
// Requirements are installed as listed: their own Requires-Dist are not followed.

import { checkDigest, failed } from "./registry.js";

/**
 * @returns {Promise<{files: Map<string, Uint8Array>, resolved: string[]}>} files by layer path
 */
export async function installPip({ requirements, wheelUrls }, sources, via, progress) {
  const wheels = [];
  for (const requirement of requirements) {
    wheels.push(await resolveRequirement(requirement, sources.pypiIndex, via));
    progress("resolve", `${wheels.length} of ${requirements.length} requirements`);
  }
  const files = new Map();
  const resolved = [];
  for (const wheel of wheels) {
    const bytes = await via.bytes(wheel.url, `${wheel.filename} (listed by ${wheel.listedBy})`);
    await checkDigest(bytes, wheel.digests, wheel.filename);
    files.set(`wheels/${wheel.filename}`, bytes);
    resolved.push(`${wheel.project}==${wheel.version}`);
    progress("fetch", `${files.size} of ${wheels.length + wheelUrls.length} wheels, ${Math.round(via.downloaded / 1024)} KiB`);
  }
  for (const url of wheelUrls) {
    const filename = decodeURIComponent(new URL(url).pathname.split("/").pop());
    if (!pureWheel(filename)) throw failed(`${url}: ${filename} is not a pure-Python wheel (py3-none-any); Pyodide cannot install it`);
    files.set(`wheels/${filename}`, await via.bytes(url, filename));
    resolved.push(url);
  }
  return { files, resolved };
}

async function resolveRequirement(requirement, index, via) {
  const [project, specifiers] = splitRequirement(requirement);
  const page = `${index}/pypi/${encodeURIComponent(project)}/json`;
  const metadata = await via.json(page, `Python package ${project}`, "application/json");
  const pinned = specifiers.some(([op, v]) => op === "==" && !v.includes("*"));
  const versions = Object.entries(metadata.releases ?? {})
    .filter(([version, files]) => files.length && (pinned || !isPrerelease(version)) && (pinned || files.some((f) => !f.yanked)))
    .map(([version]) => version)
    .filter((version) => specifiers.every(([op, wanted]) => matches(version, op, wanted)))
    .sort(compareVersions);
  const version = versions.at(-1);
  if (!version) throw failed(`${requirement}: no release of ${project} matches (latest is ${metadata.info?.version ?? "unknown"})`);
  const files = metadata.releases[version];
  const wheel = files.find((f) => f.packagetype === "bdist_wheel" && pureWheel(f.filename));
  // A file's `url` may be relative (a private index's may be): resolved against the page that
  // listed it, as pip resolves links; the Worker's /registry then checks the result against the
  // tenant's package sources.
  if (wheel) return { ...wheel, url: new URL(wheel.url, page).href, listedBy: page, project: metadata.info?.name ?? project, version };
  const platform = files.filter((f) => f.packagetype === "bdist_wheel").map((f) => f.filename);
  const why = platform.length
    ? `has only platform wheels (${platform.slice(0, 3).join(", ")}${platform.length > 3 ? ", ..." : ""}), no pure-Python py3-none-any wheel`
    : "has only a source distribution (sdist), no wheel: building it needs a compiler and setup code the sandbox does not run";
  const compiled = platform.length ? " (the compiled packages of Pyodide's own distribution, such as numpy and pandas, are not available yet)" : "";
  throw failed(`${project}==${version} ${why}; only pure-Python wheels can be installed${compiled}; pick a release or package that ships one`);
}

/** "attrs>=23,<25" -> ["attrs", [[">=", "23"], ["<", "25"]]] (the server checked the shape). */
function splitRequirement(requirement) {
  const match = /^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$/.exec(requirement);
  const specifiers = match[2]
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => /^(===|==|!=|>=|<=|~=|>|<)\s*(.+)$/.exec(s).slice(1, 3));
  return [match[1], specifiers];
}

/** A wheel file name's tags say pure Python 3: `<name>-<ver>[-<build>]-<py>-none-any.whl`. */
function pureWheel(filename) {
  const parts = filename.replace(/\.whl$/, "").split("-");
  const [python, abi, platform] = parts.slice(-3);
  return parts.length >= 5 && abi === "none" && platform === "any" && python.split(".").some((tag) => tag.startsWith("py3"));
}

function isPrerelease(version) {
  return /(a|b|rc|dev|alpha|beta|c)\d*/i.test(version.replace(/^\d+!/, "").replace(/\.post\d+$/, ""));
}

function matches(version, op, wanted) {
  if (wanted.endsWith(".*")) {
    const prefix = wanted.slice(0, -2).split(".");
    const same = release(version).slice(0, prefix.length).join(".") === release(prefix.join(".")).join(".");
    return op === "!=" ? !same : same;
  }
  const order = compareVersions(version, wanted);
  switch (op) {
    case "==":
    case "===":
      return order === 0;
    case "!=":
      return order !== 0;
    case ">=":
      return order >= 0;
    case "<=":
      return order <= 0;
    case ">":
      return order > 0;
    case "<":
      return order < 0;
    case "~=": {
      const prefix = release(wanted).slice(0, -1);
      return order >= 0 && release(version).slice(0, prefix.length).join(".") === prefix.join(".");
    }
  }
  return false;
}

/** The numeric release segments of a PEP 440 version ("1.2.0rc1" -> [1, 2, 0]). */
function release(version) {
  return version.replace(/^\d+!/, "").split(/[^0-9.]/)[0].split(".").filter(Boolean).map(Number);
}

function compareVersions(a, b) {
  const [x, y] = [release(a), release(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const difference = (x[i] ?? 0) - (y[i] ?? 0);
    if (difference) return difference;
  }
  return Number(isPrerelease(b)) - Number(isPrerelease(a)); // 1.0rc1 < 1.0
}
