// End to end, runs with dependencies: an npm registry stand-in and a PyPI stand-in on loopback
// serve real packages (lib/package-sources.mjs); a real executor page in headless Chromium
// builds them (resolve, integrity check, esbuild-wasm bundle, deterministic zip), uploads the
// layer under a grant and finalizes; the official SDK client sees the result and the build's
// progress. A second identical call reuses the capsule without a build. Refusals are named:
// a Node built-in, an integrity mismatch, an sdist-only project. npm subpath imports
// (`lodash/chunk`, `nanoid/non-secure` through its `exports`); Python: msgpack's compiled PEP 783
// wheel, python-dateutil's own requirements followed, a conflict, a wheel for another ABI, and
// Pyodide's distribution from a loopback mirror whose lock the stand-in writes (a changed byte
// refused, files kept in the Cache API and hashed again on use). Then presign, upload and
// finalize over raw HTTP: every way a tab could cheat is refused and nothing half-made is served
// or recorded. Last, `GET /registry` over raw HTTP: a URL that leaves the sources once parsed,
// a source that never answers, and one that trickles its body.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openExecutor } from "./lib/browser.mjs";
import { connectClient } from "./lib/mcp-client.mjs";
import { MSGPACK_WHEEL, startPackageSources, startSilentSource } from "./lib/package-sources.mjs";
import { sseEvents } from "./lib/mcp-http.mjs";
import { zip } from "../public/lib/zip-writer.js";
import { BASE, attach, createTenant, devVars, holdLease, mintRunToken, patchTenant, relayCapsule } from "./lib/relay.mjs";

let registry;
let key;
let tenant;
let browser;
let executor;
let client;

before(async () => {
  registry = await startPackageSources();
  ({ key, tenant } = await createTenant("packages", { packages: registry.sources, queue: { attachWaitMs: 5000 } }));
  browser = await launchBrowser();
  executor = await openExecutor(browser, key);
  client = await connectClient(key);
});

after(async () => {
  await client?.close();
  await browser?.close();
  await registry?.close();
});

/** Calls `tool` and returns its structured result and the progress messages it streamed. */
async function call(tool, args) {
  const progress = [];
  const result = await client.callTool({ name: tool, arguments: args }, undefined, {
    onprogress: (p) => progress.push(p.message),
    timeout: 120_000,
  });
  return { ...result.structuredContent, isError: result.isError, text: result.content?.[0]?.text, progress };
}

const builds = () => executor.lines.filter((line) => line.startsWith("Building the dependencies")).length;

describe("run_js with npm.dependencies", () => {
  const lodashCall = {
    code: 'import _ from "lodash";\nconsole.log(JSON.stringify(_.chunk([1, 2, 3, 4, 5], 2)), _.VERSION);',
    npm: { dependencies: { lodash: "^4.17.0" } },
  };

  test("lodash is resolved, fetched, bundled and imported; progress names each build phase", async () => {
    const before = builds();
    const result = await call("run_js", lodashCall);
    assert.equal(result.exitCode, 0, JSON.stringify(result));
    assert.equal(result.stdout, "[[1,2],[3,4],[5]] 4.17.21\n");
    assert.equal(builds(), before + 1);
    for (const phase of ["resolve", "fetch", "bundle", "upload", "finalize"]) {
      assert.ok(result.progress.some((m) => m?.startsWith(phase)), `${phase} in ${JSON.stringify(result.progress)}`);
    }
    assert.ok(result.progress.some((m) => /^fetch \(1 of 1 packages, \d+ KiB\)$/.test(m)), JSON.stringify(result.progress));
  });

  test("a second identical call reuses the capsule: no build command, no registry request", async () => {
    const [buildsBefore, hitsBefore] = [builds(), registry.hits.get("/npm/lodash")];
    const result = await call("run_js", lodashCall);
    assert.equal(result.stdout, "[[1,2],[3,4],[5]] 4.17.21\n");
    assert.equal(builds(), buildsBefore, "no build the second time");
    assert.equal(registry.hits.get("/npm/lodash"), hitsBefore);
    assert.ok(!result.progress.some((m) => m?.startsWith("resolve")), JSON.stringify(result.progress));
  });

  test("a package with dependencies of its own gets them, hoisted", async () => {
    const code = 'import isOdd from "is-odd";\nconsole.log(isOdd(3), isOdd("4"));';
    const result = await call("run_js", { code, npm: { dependencies: { "is-odd": "latest" } } });
    assert.equal(result.exitCode, 0, JSON.stringify(result));
    assert.equal(result.stdout, "true false\n");
    assert.ok(registry.hits.get("/npm/is-number") >= 1, "is-number, is-odd's dependency, was resolved");
  });

  test("a package that needs a Node built-in is refused, naming the package and the built-in", async () => {
    const result = await call("run_js", { code: 'import isDocker from "is-docker";', npm: { dependencies: { "is-docker": "^3.0.0" } } });
    assert.equal(result.isError, true);
    assert.equal(result.error?.name, "DepsResolutionFailed", JSON.stringify(result));
    assert.match(result.error.message, /is-docker@3\.0\.0 needs the Node built-in "node:fs"/);
  });

  test("in a context, a build that fails before the run reaches the interpreter keeps the context", async () => {
    const set = await call("run_js", { code: "var loaded = 'data'", context: "deps" });
    assert.equal(set.exitCode, 0, JSON.stringify(set));
    const unbuilt = await call("run_js", { code: "1", context: "deps", npm: { dependencies: { lodash: "^5.0.0" } } });
    assert.equal(unbuilt.error?.name, "DepsResolutionFailed", JSON.stringify(unbuilt));
    assert.equal(unbuilt.context.kept, true, "a typo in a dependency ended the context");
    const next = await call("run_js", { code: "console.log(loaded)", context: "deps" });
    assert.equal(next.stdout, "data\n", JSON.stringify(next));
    assert.deepEqual([next.context.fresh, next.context.lost], [false, undefined]);
  });

  test("a tarball that does not match the registry's integrity is refused before it is used", async () => {
    const result = await call("run_js", { code: "1", npm: { dependencies: { "tampered-number": "6.0.0" } } });
    assert.equal(result.error?.name, "DepsResolutionFailed", JSON.stringify(result));
    assert.match(result.error.message, /tampered-number@6\.0\.0: the download does not match the registry's integrity sha512-/);
  });

  test("a range nothing matches names the package and the latest version", async () => {
    const result = await call("run_js", { code: "1", npm: { dependencies: { lodash: "^5.0.0" } } });
    assert.equal(result.error?.name, "DepsResolutionFailed", JSON.stringify(result));
    assert.match(result.error.message, /no version of lodash matches "\^5\.0\.0"; latest is 4\.17\.21/);
  });

  test("importing a package that is not listed, or a subpath of one, says what to list", async () => {
    const code = 'for (const name of ["left-pad", "lodash/chunk"]) { try { await import(name); } catch (e) { console.log(e.message); } }';
    const result = await call("run_js", { ...lodashCall, code });
    assert.equal(result.exitCode, 0, JSON.stringify(result));
    const [unlisted, subpath] = result.stdout.trim().split("\n");
    assert.match(unlisted, /^cannot import "left-pad": .*; list "left-pad" in npm\.dependencies/);
    assert.match(subpath, /^cannot import "lodash\/chunk": .*a subpath such as "pkg\/sub" is bundled when the call's code imports it by a string literal/);
  });

  test("a subpath the code imports is bundled on its own, from the package's files or its exports", async () => {
    const code = [
      'import chunk from "lodash/chunk";',
      'import { customAlphabet } from "nanoid/non-secure";',
      "const id = customAlphabet(\"ab\", 12)();",
      "console.log(JSON.stringify(chunk([1, 2, 3, 4, 5], 2)), id.length, /^[ab]+$/.test(id));",
    ].join("\n");
    const result = await call("run_js", { code, npm: { dependencies: { lodash: "^4.17.0", nanoid: "^6.0.0" } } });
    assert.equal(result.exitCode, 0, JSON.stringify(result));
    assert.equal(result.stdout, "[[1,2],[3,4],[5]] 12 true\n");
    assert.ok(result.progress.some((m) => /^bundle \(2 packages and 2 subpaths/.test(m)), JSON.stringify(result.progress));
  });

  test("a layer upload the tenant's storedBytes quota refuses ends the run QuotaExceeded naming the quota, not DepsResolutionFailed", async () => {
    const MIB = 1 << 20;
    assert.equal((await patchTenant(tenant.id, { defaults: { quotas: { storedBytes: MIB } } })).status, 200);
    try {
      const usage = async () => JSON.parse((await client.readResource({ uri: "relay://usage" })).contents[0].text).storedBytes;
      // A workspace body fills the quota to 100 bytes short: the run (no capsule of its own
      // until its build finalizes) is admitted, and its layer's upload is refused.
      // Bodies over 4 KiB (kept in R2, charged) and under a request's 1 MiB, to the byte.
      let room = MIB - (await usage()).used - 100;
      for (let i = 0; room > 4096; i++) {
        const size = room > 600_000 + 4096 ? 600_000 : room;
        assert.ok(!(await call("write", { path: `/tmp/fill${i}`, content: String.fromCharCode(97 + i).repeat(size) })).isError); // each its own body
        room -= size;
      }
      assert.equal((await usage()).used, MIB - 100);
      const code = 'import isNumber from "is-number";\nconsole.log(isNumber(5));';
      const result = await call("run_js", { code, npm: { dependencies: { "is-number": "6.0.0" } } });
      console.log(`# the build over the quota: ${JSON.stringify(result.error)}`);
      assert.equal(result.isError, true, JSON.stringify(result));
      assert.equal(result.error?.name, "QuotaExceeded", JSON.stringify(result.error));
      assert.match(result.error.message, /defaults\.quotas\.storedBytes is reached: .* retry in \d+ s/);
    } finally {
      assert.equal((await patchTenant(tenant.id, { defaults: { quotas: { storedBytes: 10 * 1024 ** 3 } } })).status, 200);
    }
  });

  test("a subpath a package's exports do not list is refused, naming it", async () => {
    const result = await call("run_js", { code: 'import a from "nanoid/url-alphabet";', npm: { dependencies: { nanoid: "^6.0.0" } } });
    assert.equal(result.error?.name, "DepsResolutionFailed", JSON.stringify(result));
    assert.match(result.error.message, /nanoid\/url-alphabet: nanoid: cannot find its entry "\.\/url-alphabet"/);
  });
});

describe("run_py with pip", () => {
  test("a pure-Python wheel is resolved, checked, installed into site-packages and imported", async () => {
    const code = "import six, importlib.metadata\nprint(six.__version__, importlib.metadata.version('six'), six.__file__.split('/')[-2])";
    const result = await call("run_py", { code, pip: { requirements: ["six>=1.15,<2"] } });
    assert.equal(result.exitCode, 0, JSON.stringify(result));
    assert.equal(result.stdout, "1.16.0 1.16.0 site-packages\n");
  });

  test("a project with only an sdist is refused with the reason, and the result says nothing ran", async () => {
    const result = await call("run_py", { code: "import sdistonly", pip: { requirements: ["sdistonly"] } });
    assert.equal(result.error?.name, "DepsResolutionFailed", JSON.stringify(result));
    assert.match(result.error.message, /sdistonly==1\.0 has only a source distribution \(sdist\)/);
    assert.match(result.text, /\nexit code 1: the code did not run$/, result.text);
  });

  test("an index whose file links are relative: each is resolved against the page that listed it", async () => {
    // The tenant's index is switched to the stand-in's /relpypi (relative `url`s), and back.
    const patched = await patchTenant(tenant.id, { defaults: { packages: { pypiIndex: registry.relativeIndex } } });
    assert.equal(patched.status, 200, await patched.clone().text());
    try {
      const result = await call("run_py", { code: "import six\nprint(six.__version__)", pip: { requirements: ["six==1.16.0"] } });
      assert.equal(result.exitCode, 0, JSON.stringify(result));
      assert.equal(result.stdout, "1.16.0\n");
      assert.ok(registry.hits.get("/relpypi/pypi/six/json") >= 1, "the relative index listed the wheel");
    } finally {
      assert.equal((await patchTenant(tenant.id, { defaults: { packages: registry.sources } })).status, 200);
    }
  });

  /** Switches the tenant's package sources for `body` (then back), as an admin would. */
  async function withSources(packages, body) {
    const patched = await patchTenant(tenant.id, { defaults: { packages } });
    assert.equal(patched.status, 200, await patched.clone().text());
    try {
      return await body();
    } finally {
      assert.equal((await patchTenant(tenant.id, { defaults: { packages: registry.sources } })).status, 200);
    }
  }

  const msgpackRoundTrip = [
    "import msgpack",
    "packed = msgpack.packb({'a': [1, 2, 3], 'b': 'x'})",
    "print(msgpack.unpackb(packed), msgpack.version, msgpack.Packer.__module__)",
  ].join("\n");

  test("a compiled wheel built for this runtime's ABI (PEP 783) is picked over other ABIs, installed and used", async () => {
    const result = await call("run_py", { code: msgpackRoundTrip, pip: { requirements: ["msgpack"] } });
    assert.equal(result.exitCode, 0, JSON.stringify(result));
    // msgpack.Packer comes from the compiled extension (msgpack._cmsgpack), not the pure fallback.
    assert.equal(result.stdout, "{'a': [1, 2, 3], 'b': 'x'} (1, 2, 4) msgpack._cmsgpack\n");
    assert.equal(registry.hits.get(`/files/${MSGPACK_WHEEL}`), 1);
    assert.equal(registry.hits.get("/files/msgpack-1.2.4-cp313-cp313-pyemscripten_2025_0_wasm32.whl"), undefined);
  });

  test("python-dateutil brings six, its own requirement, with none listed", async () => {
    const code = "import dateutil.parser, six\nprint(dateutil.parser.parse('2026-11-25T10:30:00').minute, six.__version__)";
    const result = await call("run_py", { code, pip: { requirements: ["python-dateutil"] } });
    assert.equal(result.exitCode, 0, JSON.stringify(result));
    assert.equal(result.stdout, "30 1.16.0\n");
    assert.ok(result.progress.some((m) => /^resolve \(2 projects, 2 wheels read\)$/.test(m)), JSON.stringify(result.progress));
  });

  test("a conflict between two requirers names both and their ranges", async () => {
    const result = await call("run_py", { code: "1", pip: { requirements: ["ecdsa", "six==1.5.0"] } });
    assert.equal(result.error?.name, "DepsResolutionFailed", JSON.stringify(result));
    assert.match(result.error.message, /^conflicting requirements for six: six==1\.5\.0 \(the call\), six>=1\.9\.0 \(ecdsa 0\.19\.2\); no release of six satisfies all of them/);
  });

  test("a platform wheel for another ABI is refused, naming the wheels there are and the tags the runtime needs", async () => {
    const result = await withSources({ pypiIndex: registry.olderAbiIndex }, () =>
      call("run_py", { code: "import msgpack", pip: { requirements: ["msgpack==1.2.4"] } }),
    );
    assert.equal(result.error?.name, "DepsResolutionFailed", JSON.stringify(result));
    const { message } = result.error;
    assert.match(message, /^msgpack==1\.2\.4 has no wheel for Pyodide's CPython 3\.14\.\d+, ABI 2026_0, wasm32: its wheels are tagged cp313-cp313-pyemscripten_2025_0_wasm32, and it needs cp314-cp314-pyemscripten_2026_0_wasm32/);
    assert.match(message, /Pyodide's distribution \(shipped with pyodide@314\) has msgpack 1\.1\.2, which does not fit$/);
    assert.match(result.text, /\nexit code 1: the code did not run$/, result.text);
  });

  describe("Pyodide's distribution from a mirror, checked against its lock", () => {
    const mirror = () => ({ ...registry.mirror("pyodide"), pypiIndex: registry.olderAbiIndex });
    const file = (name) => `/pyodide/${name}`;

    test("packages the index cannot serve load from the mirror with the lock's dependencies", async () => {
      const code = `${msgpackRoundTrip}\nimport dateutil.parser, six\nprint(dateutil.parser.parse('2026-11-25').day, six.__version__)`;
      const result = await withSources(mirror(), () => call("run_py", { code, pip: { requirements: ["msgpack", "python-dateutil"] } }));
      assert.equal(result.exitCode, 0, JSON.stringify(result));
      assert.equal(result.stdout, "{'a': [1, 2, 3], 'b': 'x'} (1, 2, 4) msgpack._cmsgpack\n25 1.16.0\n");
      for (const name of [MSGPACK_WHEEL, "python_dateutil-2.9.0.post0-py2.py3-none-any.whl", "six-1.16.0-py2.py3-none-any.whl"]) {
        assert.equal(registry.hits.get(file(name)), 1, `${name} from the mirror`);
      }
      assert.ok(registry.hits.get("/pyodide/pyodide-lock.json") >= 1);
    });

    test("a file kept in the Cache API is used again, and hashed again: a changed copy is fetched anew", async () => {
      const six = file("six-1.16.0-py2.py3-none-any.whl");
      const again = await withSources(mirror(), () => call("run_py", { code: "import six\nprint(six.__version__)", pip: { requirements: ["six"] } }));
      assert.equal(again.stdout, "1.16.0\n", JSON.stringify(again));
      assert.equal(registry.hits.get(six), 1, "from the cache: not fetched again");
      const url = `${registry.mirror("pyodide").pyodideIndex}/six-1.16.0-py2.py3-none-any.whl`;
      await executor.page.evaluate(async (key) => (await caches.open("relay-python-packages")).put(key, new Response("not six")), url);
      const afterChange = await withSources(mirror(), () =>
        call("run_py", { code: "import six\nprint(six.__version__)", pip: { requirements: ["six==1.16.0"] } }),
      );
      assert.equal(afterChange.stdout, "1.16.0\n", JSON.stringify(afterChange));
      assert.equal(registry.hits.get(six), 2, "the changed cache entry was refused and the file fetched again");
    });

    test("a byte changed in a mirrored file is refused against the lock, and nothing runs", async () => {
      const result = await withSources({ ...registry.mirror("pyodide-tampered"), pypiIndex: registry.olderAbiIndex }, () =>
        call("run_py", { code: "print('ran')", pip: { requirements: ["msgpack"] } }),
      );
      assert.equal(result.error?.name, "DepsResolutionFailed", JSON.stringify(result));
      assert.match(result.error.message, new RegExp(`^${MSGPACK_WHEEL}: the download from http://127\\.0\\.0\\.1:\\d+/pyodide-tampered/${MSGPACK_WHEEL} has sha256 [0-9a-f]{64}, and Pyodide's lock gives [0-9a-f]{64}; it was altered`));
      assert.equal(result.stdout, "");
      assert.match(result.text, /\nexit code 1: the code did not run$/, result.text);
    });
  });
});

describe("presign, upload and finalize over raw HTTP, with this test as the tab", () => {
  const SESSION = "played-build";
  let layer; // the deps layer as a tab builds it (public/lib/zip-writer.js)
  let claim;
  let tenant;
  let playedKey;
  let attachToken;
  let commands;
  let played;
  let build;
  let answer;
  let lease;

  before(async () => {
    layer = Buffer.from(await zip({ "node_modules/lodash/index.js": new TextEncoder().encode("module.exports = {};") }));
    claim = { id: "deps", sha256: sha256(layer), size: layer.length };
    ({ key: playedKey, tenant } = await createTenant("played-build", { packages: registry.sources }));
    ({ attachToken } = await attach(playedKey, SESSION));
    const events = await fetch(`${BASE}/session/${SESSION}/events`, { headers: { authorization: `Bearer ${attachToken}` } });
    commands = sseEvents(events.body);
    const hello = (await commands.next()).value;
    assert.equal(hello.event, "hello");
    lease = await holdLease(SESSION, attachToken, hello.data.tabId, hello.data.leaseMs);
    assert.equal((await commands.next()).value.event, "tabs");
    played = await connectClient(playedKey, SESSION);
    ({ answer, build } = await callWithDeps({ lodash: "4.17.21" }));
  });

  /** Calls run_js with these dependencies and takes the tab's next command, a `build`. */
  async function callWithDeps(dependencies) {
    const answer = played.callTool({ name: "run_js", arguments: { code: "1", npm: { dependencies } } });
    const { value } = await commands.next();
    assert.equal(value.event, "build", JSON.stringify(value));
    build = value.data;
    await results([{ type: "progress", phase: "received" }]);
    return { answer, build };
  }

  after(async () => {
    lease?.stop();
    await commands?.return();
    await played?.close();
  });

  const seqs = new Map();
  /** Posts this tab's events for the current run, numbered on from its last. */
  const results = (events) => {
    const next = () => {
      const seq = seqs.get(build.runId) ?? 0;
      seqs.set(build.runId, seq + 1);
      return seq;
    };
    return fetch(`${BASE}/session/${SESSION}/result`, {
      method: "POST",
      headers: { authorization: `Bearer ${attachToken}`, "content-type": "application/x-ndjson" },
      body: events.map((e) => JSON.stringify({ runId: build.runId, seq: next(), ...e })).join("\n") + "\n",
    });
  };
  const runAuth = () => ({ authorization: `Bearer ${build.runToken}`, "content-type": "application/json" });
  const presign = (layers, headers = runAuth()) =>
    fetch(`${BASE}/capsule/presign`, { method: "POST", headers, body: JSON.stringify({ layers }) });
  const finalize = (proposal) => fetch(`${BASE}/capsule/finalize`, { method: "POST", headers: runAuth(), body: JSON.stringify(proposal) });
  const upload = (grant, body) => fetch(`${BASE}/capsule/upload`, { method: "PUT", headers: { authorization: `Bearer ${grant}` }, body });
  async function refused(res, status, name, pattern) {
    const body = await res.json();
    assert.equal(res.status, status, JSON.stringify(body));
    assert.equal(body.error.name, name, JSON.stringify(body));
    assert.match(body.error.message, pattern);
  }

  test("the build command names the dependencies, the tenant's sources and a run token", () => {
    assert.deepEqual(build.build, { ecosystem: "npm", dependencies: { lodash: "4.17.21" } });
    assert.deepEqual(build.sources, registry.sources);
    assert.equal(build.language, "js");
    assert.match(build.runToken, /^[\w-]+\.[\w-]+\.[\w-]+$/);
  });

  test("presign refuses an oversized layer, another layer, a bad digest, and a caller without the run's token", async () => {
    await refused(await presign([{ ...claim, size: 21 * 1024 * 1024 }]), 413, "PayloadTooLarge", /20971520|20 MiB/);
    await refused(await presign([{ ...claim, id: "code" }]), 400, "ValidationError", /only "deps"/);
    await refused(await presign([{ ...claim, sha256: "ABC" }]), 400, "ValidationError", /64 lowercase hex/);
    const res = await presign([claim], { "content-type": "application/json" });
    assert.equal(res.status, 401);
  });

  test("an upload must be the very bytes its grant names, and a grant uploads once", async () => {
    const res = await presign([claim]);
    assert.equal(res.status, 200);
    const [granted] = (await res.json()).grants;
    assert.equal(granted.url, "/capsule/upload", "the grant travels in a header, never in a URL");
    assert.ok(granted.expiresAt > Date.now() && granted.expiresAt <= Date.now() + 600_000);

    await refused(await finalize({ layers: [claim] }), 409, "LayerNotUploaded", /was not uploaded/);
    const other = Buffer.from(layer).fill(0x41);
    await refused(await upload(granted.grant, other), 400, "ValidationError", /has sha256 [0-9a-f]{64}; its grant is for/);
    assert.equal((await upload(granted.grant, Buffer.concat([layer, layer]))).status, 413);

    const stored = await upload(granted.grant, layer);
    assert.equal(stored.status, 201);
    assert.deepEqual(await stored.json(), { layer: "deps", sha256: claim.sha256, size: claim.size });
    await refused(await upload(granted.grant, layer), 409, "GrantSpent", /already used/);
  });

  test("an expired grant, or one this build never gave, uploads nothing", async () => {
    const grant = (age) =>
      relayCapsule(["upload-grant", devVars.CAPSULE_SIGNING_KEY, tenant.id, SESSION, build.runId, claim.sha256, String(claim.size), String(age)]);
    await refused(await upload(grant(700), layer), 401, "Unauthorized", /expired; ask POST \/capsule\/presign/);
    await refused(await upload(grant(0), layer), 404, "NotFound", /gave no such grant/);
  });

  /** Uploads `bytes` as this build's deps layer under a fresh grant; returns its claim. */
  async function uploadLayer(bytes) {
    const own = { id: "deps", sha256: sha256(bytes), size: bytes.length };
    const [granted] = (await (await presign([own])).json()).grants;
    assert.equal((await upload(granted.grant, bytes)).status, 201);
    return own;
  }

  test("finalize refuses a layer with files outside node_modules/ and wheels/, naming the entry", async () => {
    const hostile = [
      [{ "main.js": "steal()", "node_modules/lodash/index.js": "" }, /the deps layer holds "main\.js", outside node_modules\/ and wheels\//],
      [{ "node_modules/../main.js": "" }, /layer path "node_modules\/\.\.\/main\.js" is not allowed: it has a "\.\." segment/],
      [{ "/node_modules/a.js": "" }, /layer path "\/node_modules\/a\.js" is not allowed: it starts with "\/"/],
      [{ "node_modules\\..\\main.js": "" }, /it contains a backslash/],
    ];
    for (const [files, pattern] of hostile) {
      const bytes = await zip(Object.fromEntries(Object.entries(files).map(([p, c]) => [p, new TextEncoder().encode(c)])));
      await refused(await finalize({ layers: [await uploadLayer(Buffer.from(bytes))] }), 400, "ValidationError", pattern);
    }
  });

  test("finalize refuses a wrong digest and a widened policy, then signs the capsule with the uploaded layer", async () => {
    await refused(await finalize({ layers: [{ ...claim, sha256: "0".repeat(64) }] }), 409, "LayerNotUploaded", /0{64}/);
    const policy = tenant.defaults.policy;
    const wider = { ...policy, limits: { ...policy.limits, timeoutMs: policy.limits.timeoutMs * 10 } };
    await refused(await finalize({ layers: [claim], policy: wider }), 403, "PolicyDenied", /policy\.limits: the proposed policy is wider/);

    const res = await finalize({ layers: [claim], resolved: ["lodash@4.17.21"] });
    const command = await res.json();
    assert.equal(res.status, 200, JSON.stringify(command));
    assert.equal(command.capsuleUrl, `/capsules/${command.hash}/capsule.json`);
    const auth = { authorization: `Bearer ${command.token}` };
    const manifest = await (await fetch(`${BASE}${command.capsuleUrl}`, { headers: auth })).json();
    const deps = manifest.fsLayers.find((l) => l.id === "deps");
    assert.deepEqual([deps.sha256, deps.size], [claim.sha256, claim.size]);
    const served = await fetch(new URL(deps.path, `${BASE}${command.capsuleUrl}`), { headers: auth });
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), layer);
    await refused(await finalize({ layers: [claim] }), 404, "NotFound", /no build in progress/);

    await results([{ type: "stdout", data: "built\n" }, { type: "exit", exitCode: 0, usage: { wallMs: 1, memPeakMb: 1 } }]);
    const result = await answer;
    assert.equal(result.structuredContent.stdout, "built\n");
  });

  test("a refused layer leaves no build record: the next identical call builds again", async () => {
    const failed = { type: "exit", exitCode: 1, error: { name: "DepsResolutionFailed", message: "the relay refused the layer" } };
    const dependencies = { lodash: "4.17.20" };
    const first = await callWithDeps(dependencies);
    const stray = Buffer.from(await zip({ "main.js": new TextEncoder().encode("steal()") }));
    await refused(await finalize({ layers: [await uploadLayer(stray)] }), 400, "ValidationError", /"main\.js"/);
    await results([failed]);
    assert.equal((await first.answer).structuredContent.error.name, "DepsResolutionFailed");

    const again = await callWithDeps(dependencies); // a `build` command again, not a capsule
    await results([failed]);
    await again.answer;
  });
});

describe("GET /registry over raw HTTP", () => {
  const get = (url, tenantId = tenant.id) =>
    fetch(`${BASE}/registry?url=${encodeURIComponent(url)}`, {
      headers: { authorization: `Bearer ${mintRunToken({ tenant: tenantId, run: "r_registry", capsule: "0".repeat(64) })}` },
    });

  test("a URL under a source is fetched; one that leaves it once parsed (a tab, LF or CR inside `..`) never is", async () => {
    const base = registry.sources.npmRegistry;
    const res = await get(`${base}/lodash`);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).name, "lodash");
    for (const hidden of ["\t", "\n", "\r"]) {
      const refused = await get(`${base}/.${hidden}./secret`);
      const body = await refused.json();
      assert.equal(refused.status, 403, JSON.stringify(body));
      assert.equal(body.error.name, "PolicyDenied");
      assert.match(body.error.message, /^http:\/\/127\.0\.0\.1:\d+\/secret is not under this tenant's package sources/);
    }
    const encoded = await get(`${base}/%2e%2e%2fsecret`);
    assert.equal(encoded.status, 403);
    assert.match((await encoded.json()).error.message, /path segment "%2e%2e%2fsecret" decodes to "..\/secret"/);
    assert.equal(registry.hits.get("/secret"), undefined, "the stand-in was never asked for /secret");
  });

  test("a source that does not answer is UpstreamFailed naming it and the deadline; one that stalls mid-body breaks off", async () => {
    const silent = await startSilentSource();
    try {
      const owner = await createTenant("silent-source", { packages: silent.sources });
      const started = Date.now();
      const [head, stalled] = await Promise.all([
        get(`${silent.sources.npmRegistry}/silent`, owner.tenant.id),
        get(`${silent.sources.npmRegistry}/stall`, owner.tenant.id).then(async (res) => ({ status: res.status, body: await res.text().catch((e) => e) })),
      ]);
      console.log(`# /registry gave up on a silent source after ${Date.now() - started} ms`);
      const body = await head.json();
      assert.equal(head.status, 502, JSON.stringify(body));
      assert.equal(body.error.name, "UpstreamFailed");
      const source = `package source npmRegistry (${silent.sources.npmRegistry}) for ${silent.sources.npmRegistry}/silent`;
      assert.ok(body.error.message.startsWith(`${source} did not answer within 20 s`), body.error.message);
      assert.equal(stalled.status, 200, "the head came in time");
      assert.ok(stalled.body instanceof Error, `the stalled body broke off instead of ending: ${stalled.body}`);
    } finally {
      await silent.close();
    }
  });

  test("a source that trickles its body (a byte every 2 s) is broken off at the answer's overall deadline", { timeout: 150_000 }, async () => {
    const silent = await startSilentSource();
    try {
      const owner = await createTenant("trickling-source", { packages: silent.sources });
      const started = Date.now();
      const res = await get(`${silent.sources.npmRegistry}/trickle`, owner.tenant.id);
      assert.equal(res.status, 200, "the head came in time");
      const body = await res.text().catch((e) => e);
      console.log(`# /registry broke off a trickling source after ${Date.now() - started} ms (the deadline is 60 s)`);
      assert.ok(body instanceof Error, `the trickled body broke off instead of going on: ${JSON.stringify(body)}`);
      // The Worker logs the deadline as it breaks the stream off: on a loaded machine the line
      // may reach the log a moment after the client saw the break.
      const source = `package source npmRegistry (${silent.sources.npmRegistry}) for ${silent.sources.npmRegistry}/trickle`;
      const logged = () => readFileSync(process.env.RELAY_SERVER_LOG, "utf8").includes(`${source} did not send its whole answer within 60 s`);
      for (let waited = 0; !logged() && waited < 10_000; waited += 250) await new Promise((resolve) => setTimeout(resolve, 250));
      assert.ok(logged(), "the log names the source and the deadline");
    } finally {
      await silent.close();
    }
  });
});

function sha256(bytes) {
  return createHash("sha256").update(bytes).digest("hex");
}
