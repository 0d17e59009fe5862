// Bundles each package a call asked for into one ES module, /node_modules/<name>/index.js (with
// its source map beside it), which QuickJS imports by the package's name, and each subpath the
// call's code imports (`lodash/chunk`, found by the Worker) into /node_modules/<name>/<subpath>/
// index.js, which QuickJS imports by that specifier: one bundle per specifier. esbuild-wasm does the
// bundling over the virtual tree npm.js unpacked; this file's plugin is its file system and
// resolver: Node's algorithm (node_modules up the tree, package.json `exports` with the
// browser/import/default conditions, `browser`, `module`, `main`, index files). A package that
// reaches for a Node built-in fails the build, naming the package and the built-in: the sandbox
// has none of them.

import { Budget, failed } from "./registry.js";

const NODE_BUILTINS = new Set(
  "assert async_hooks buffer child_process cluster console constants crypto dgram diagnostics_channel dns domain events fs http http2 https inspector module net os path perf_hooks process punycode querystring readline repl stream string_decoder sys timers tls trace_events tty url util v8 vm wasi worker_threads zlib".split(" "),
);
const CONDITIONS = ["browser", "import", "module", "default", "require"];
const EXTENSIONS = ["", ".js", ".mjs", ".cjs", ".json", "/index.js", "/index.mjs", "/index.cjs", "/index.json"];
const LOADERS = { ".json": "json", ".mjs": "js", ".cjs": "js", ".js": "js" };

/**
 * @param esbuild an initialized esbuild-wasm
 * @param files Map of absolute path -> bytes (the unpacked tree)
 * @param specifiers the packages the call listed, and the subpaths of them its code imports
 * @param budget the build's Budget: each output counted into `bundleBytes` as it comes (raw, before
 *   the layer's zip, which its own `layerBytes` bounds)
 * @returns {Promise<Map<string, Uint8Array>>} the layer's files: node_modules/<specifier>/index.js
 *   and .map
 */
export async function bundlePackages(esbuild, files, specifiers, budget = new Budget({})) {
  const out = new Map();
  for (const name of specifiers) {
    const result = await esbuild
      .build({
        stdin: { contents: entrySource(name), resolveDir: "/", sourcefile: `${name}.entry.js` },
        bundle: true,
        write: false,
        format: "esm",
        target: "es2019",
        platform: "browser",
        outfile: `/node_modules/${name}/index.js`,
        sourcemap: "linked",
        sourcesContent: false,
        minify: false,
        logLevel: "silent",
        define: { "process.env.NODE_ENV": '"production"', global: "globalThis" },
        plugins: [treePlugin(files)],
      })
      .catch((err) => {
        throw failed(`${name}: ${describe(err)}`);
      });
    for (const file of result.outputFiles) {
      budget.count("bundleBytes", file.contents.length, name);
      out.set(file.path.slice(1), file.contents);
    }
  }
  return out;
}

/**
 * The module the bundle is built from: what the package exports, and as default either its own
 * default or (CommonJS) its `module.exports`, as Node's ESM import of it gives.
 */
function entrySource(name) {
  const spec = JSON.stringify(name);
  return `import * as ns from ${spec};\nexport * from ${spec};\nexport default ns.default !== undefined ? ns.default : ns;\n`;
}

function describe(err) {
  const messages = (err.errors ?? []).map((e) => (e.location ? `${e.text} (in ${e.location.file}:${e.location.line})` : e.text));
  return messages.length ? messages.join("; ") : err.message;
}

function treePlugin(files) {
  const packageJson = (dir) => {
    const bytes = files.get(`${dir}/package.json`);
    return bytes ? JSON.parse(new TextDecoder().decode(bytes)) : null;
  };
  return {
    name: "relay-node-modules",
    setup(build) {
      build.onResolve({ filter: /.*/ }, ({ path, resolveDir, importer }) => resolve(path, resolveDir, importer, files, packageJson));
      build.onLoad({ filter: /.*/, namespace: "tree" }, ({ path }) => ({
        contents: files.get(path),
        loader: LOADERS[extension(path)] ?? "js",
        resolveDir: path.slice(0, path.lastIndexOf("/")) || "/",
      }));
      build.onLoad({ filter: /.*/, namespace: "empty" }, () => ({ contents: "export default {};", loader: "js" }));
    },
  };
}

function resolve(spec, resolveDir, importer, files, packageJson) {
  const owner = packageDir(importer);
  const mapped = owner ? browserMap(packageJson(owner), spec) : undefined;
  if (mapped === false) return { path: spec, namespace: "empty" };
  const request = mapped ?? spec;
  if (/^\.{0,2}\//.test(request)) {
    const base = request.startsWith("/") ? request : join(mapped === undefined ? resolveDir : owner, request);
    const found = asFile(files, base, packageJson);
    return found ? { path: found, namespace: "tree" } : { errors: [{ text: `cannot find "${spec}" from ${importer || "the entry"}` }] };
  }
  const [name, subpath] = splitSpecifier(request);
  if (request.startsWith("node:") || (NODE_BUILTINS.has(name) && !visiblePackage(files, resolveDir, name))) {
    const who = owner ? packageLabel(owner, packageJson) : "the entry";
    return { errors: [{ text: `${who} needs the Node built-in "${request}", which the sandbox does not have; pick a package that runs in browsers without Node built-ins` }] };
  }
  const dir = visiblePackage(files, resolveDir, name);
  if (!dir) return { errors: [{ text: `cannot find package "${name}" from ${importer || "the entry"}: it is not among the dependencies` }] };
  const found = packageEntry(files, dir, subpath, packageJson);
  return found ? { path: found, namespace: "tree" } : { errors: [{ text: `${name}: cannot find its entry "${subpath || "."}"` }] };
}

/** The directory of the nearest `node_modules/<name>` from `dir` upwards. */
function visiblePackage(files, dir, name) {
  for (let at = dir; ; at = at.slice(0, Math.max(0, at.lastIndexOf("/")))) {
    const candidate = `${at === "/" ? "" : at}/node_modules/${name}`;
    if (files.has(`${candidate}/package.json`)) return candidate;
    if (!at || at === "/") return null;
  }
}

/** `@scope/name/sub` -> ["@scope/name", "./sub"]; `name` -> ["name", ""]. */
function splitSpecifier(spec) {
  const parts = spec.split("/");
  const length = spec.startsWith("@") ? 2 : 1;
  const rest = parts.slice(length).join("/");
  return [parts.slice(0, length).join("/"), rest ? `./${rest}` : ""];
}

function packageEntry(files, dir, subpath, packageJson) {
  const pkg = packageJson(dir) ?? {};
  if (pkg.exports !== undefined) {
    const target = exportsTarget(pkg.exports, subpath || ".");
    return target ? asFile(files, join(dir, target), packageJson) : null;
  }
  if (subpath) return asFile(files, join(dir, subpath), packageJson);
  const browser = typeof pkg.browser === "string" ? pkg.browser : undefined;
  for (const main of [browser, pkg.module, pkg.main, "index.js"]) {
    const found = main && asFile(files, join(dir, main), packageJson);
    if (found) return found;
  }
  return null;
}

/** The target of `subpath` in a package.json `exports` field, under CONDITIONS. */
function exportsTarget(exports, subpath) {
  const isSubpathMap = exports && typeof exports === "object" && !Array.isArray(exports) && Object.keys(exports).some((k) => k.startsWith("."));
  const map = isSubpathMap ? exports : { ".": exports };
  if (map[subpath] !== undefined) return conditional(map[subpath]);
  for (const [pattern, target] of Object.entries(map)) {
    const star = pattern.indexOf("*");
    if (star < 0 || !subpath.startsWith(pattern.slice(0, star)) || !subpath.endsWith(pattern.slice(star + 1))) continue;
    const middle = subpath.slice(star, subpath.length - (pattern.length - star - 1));
    const resolved = conditional(target);
    return resolved && resolved.replaceAll("*", middle);
  }
  return null;
}

function conditional(target) {
  if (typeof target === "string" || target === null) return target;
  if (Array.isArray(target)) return target.map(conditional).find(Boolean) ?? null;
  for (const condition of CONDITIONS) {
    if (target[condition] !== undefined) {
      const resolved = conditional(target[condition]);
      if (resolved) return resolved;
    }
  }
  return null;
}

/** A file at `base`, trying the usual extensions, or a directory's package.json main. */
function asFile(files, base, packageJson) {
  for (const suffix of EXTENSIONS) if (files.has(base + suffix)) return base + suffix;
  const pkg = packageJson(base);
  const main = pkg && (typeof pkg.browser === "string" ? pkg.browser : pkg.module ?? pkg.main);
  return main ? asFile(files, join(base, main), () => null) : null;
}

/** A package.json `browser` object's replacement for `spec` (false: an empty module). */
function browserMap(pkg, spec) {
  const map = pkg && typeof pkg.browser === "object" ? pkg.browser : null;
  if (!map) return undefined;
  for (const key of [spec, `./${spec}`, spec.replace(/^\.\//, "")]) if (Object.hasOwn(map, key)) return map[key];
  return undefined;
}

/** The package directory a file lies in: its last /node_modules/<name> (or @scope/name). */
function packageDir(file) {
  const match = /^(.*\/node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(file ?? "");
  return match?.[1] ?? null;
}

function packageLabel(dir, packageJson) {
  const pkg = packageJson(dir) ?? {};
  const name = pkg.name ?? dir.slice(dir.lastIndexOf("/node_modules/") + 14);
  return pkg.version ? `${name}@${pkg.version}` : name;
}

/** An absolute path: `relative` from `dir`. */
function join(dir, relative) {
  const parts = dir.split("/").filter(Boolean);
  for (const part of relative.split("/")) {
    if (part === "..") parts.pop();
    else if (part && part !== ".") parts.push(part);
  }
  return `/${parts.join("/")}`;
}

function extension(path) {
  const dot = path.lastIndexOf(".");
  return dot > path.lastIndexOf("/") ? path.slice(dot) : "";
}
