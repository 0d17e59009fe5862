// The relay session's workspace and guest fetch, in headless Chromium on the runner test page:
// real QuickJS and Pyodide in the sandbox frame's workers, the page's Workspace in OPFS or
// IndexedDB, written through as the guest writes; fetches answered by a script the test gives
// the page (lib/runner-host.js's onFetch). Run: node --test miniflare-tests/workspace.test.mjs

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { loadPolicy } from "../public/lib/policy.js";
import { DEFAULT_FILESYSTEM } from "../public/lib/workspace-rules.js";
import { runnerJob, startRunnerPages } from "./lib/runner-page.mjs";

let pages;
let page;
let policy; // the page's path rule, policy.wasm, here in Node: what the runners must agree with

before(async () => {
  pages = await startRunnerPages();
  page = await pages.openPage();
  policy = await loadPolicy(await readFile(path.join(pages.outDir, "policy.wasm")));
});

after(async () => {
  await pages?.close();
});

let workspaceCount = 0;
/** A workspace no other test uses. */
const freshWorkspace = (backend) => ({ name: `session ${++workspaceCount}/${Date.now()}`, ...(backend && { backend }) });

function run(language, code, options = {}, onPage = page) {
  return onPage.evaluate((job) => window.relayTest.run(job), runnerJob(language, code, options));
}

const filesOf = (workspace, onPage = page) => onPage.evaluate((w) => window.relayTest.workspaceFiles(w), workspace);
const change = (workspace, op) => page.evaluate(([w, o]) => window.relayTest.workspaceChange(w, o), [workspace, op]);

describe("the workspace across runs", () => {
  test("a file written by Python is read by the next JavaScript run, and back", async () => {
    const workspace = freshWorkspace();
    const py = await run("py", `import os, pathlib
os.makedirs("/out/data", exist_ok=True)
with open("/out/data/from-py.txt", "w") as f:
    f.write("hello from python")
pathlib.Path("/tmp/scratch.txt").write_text("gone soon")
os.remove("/tmp/scratch.txt")
print(sorted(os.listdir("/")))`, { workspace });
    assert.equal(py.exitCode, 0, py.stderr);
    assert.match(py.stdout, /'host', .*'mcps', .*'out', .*'tmp'/);

    const js = await run(
      "js",
      `import fs from "node:fs";
       import { readFile } from "fs/promises";
       console.log(fs.readFileSync("/out/data/from-py.txt", "utf8"));
       console.log(JSON.stringify(fs.readdirSync("/out/data")), fs.existsSync("/tmp/scratch.txt"));
       fs.writeFileSync("/tmp/from-js.json", JSON.stringify({ n: 42 }));
       fs.appendFileSync("/tmp/from-js.json", "\\n");
       await fs.promises.mkdir("/out/deep/er", { recursive: true });
       fs.writeFileSync("/out/deep/er/bytes.bin", new Uint8Array([104, 105]));
       console.log((await readFile("/out/deep/er/bytes.bin")).length, fs.statSync("/out/deep").isDirectory());`,
      { workspace },
    );
    assert.equal(js.exitCode, 0, js.stderr);
    assert.equal(js.stdout, `hello from python\n["from-py.txt"] false\n2 true\n`);

    const back = await run("py", `import json
print(json.load(open("/tmp/from-js.json"))["n"], open("/out/deep/er/bytes.bin", "rb").read())`, { workspace });
    assert.equal(back.stdout, "42 b'hi'\n", back.stderr);
    const { files, backend } = await filesOf(workspace);
    assert.equal(backend, "opfs");
    assert.deepEqual(files, { "/out/data/from-py.txt": "hello from python", "/out/deep/er/bytes.bin": "hi", "/tmp/from-js.json": `{"n":42}\n` });
  });

  test("renames, removals and relative paths are written through", async () => {
    const workspace = freshWorkspace();
    const js = await run(
      "js",
      `import fs from "fs";
       fs.writeFileSync("a.txt", "A");                 // relative to process.cwd() = /tmp
       fs.mkdirSync("dir");
       fs.writeFileSync("dir/b.txt", "B");
       fs.renameSync("dir", "/out/moved");
       fs.renameSync("a.txt", "../out/a.txt");
       fs.writeFileSync("/tmp/c.txt", "C");
       fs.rmSync("/tmp/c.txt");
       try { fs.readFileSync("/tmp/c.txt"); } catch (e) { console.log(e.code, e.message); }`,
      { workspace, entry: { cwd: "/tmp" } },
    );
    assert.equal(js.stdout, "ENOENT ENOENT: no such file or directory, open '/tmp/c.txt'\n", js.stderr);
    const py = await run("py", `import os, shutil
os.rename("/out/a.txt", "/tmp/a2.txt")
shutil.rmtree("/out/moved")
os.makedirs("/out/x/y")
with open("/out/x/y/z.txt", "w") as f:
    f.write("Z")
shutil.move("/out/x", "/tmp/x")
print(sorted(os.listdir("/tmp")))`, { workspace });
    assert.equal(py.stdout, "['a2.txt', 'x']\n", py.stderr);
    assert.deepEqual((await filesOf(workspace)).files, { "/tmp/a2.txt": "A", "/tmp/x/y/z.txt": "Z" });
  });

  test("a directory removed and a file written in its place, in one run, is stored as the run left it", async () => {
    const workspace = freshWorkspace();
    const made = await run("js", `import fs from "fs"; fs.mkdirSync("/tmp/d"); fs.writeFileSync("/tmp/d/a", "A"); fs.writeFileSync("/tmp/d/b", "B");`, { workspace });
    assert.equal(made.exitCode, 0, made.stderr);
    const replaced = await run("js", `import fs from "fs"; fs.rmSync("/tmp/d", { recursive: true }); fs.writeFileSync("/tmp/d", "now a file");`, { workspace });
    assert.equal(replaced.exitCode, 0, replaced.stderr);
    assert.equal(replaced.usage.fileErrors, 0, "every change was stored");
    assert.deepEqual((await filesOf(workspace)).files, { "/tmp/d": "now a file" });
  });

  for (const backend of ["opfs", "indexeddb"]) {
    test(`the workspace survives a page reload (${backend})`, async () => {
      const workspace = freshWorkspace(backend);
      const written = await run("py", `open("/out/kept.txt", "w").write("still here")`, { workspace });
      assert.equal(written.exitCode, 0, written.stderr);
      const reloaded = await pages.openPage();
      try {
        const { backend: opened, files } = await filesOf(workspace, reloaded);
        assert.equal(opened, backend);
        assert.deepEqual(files, { "/out/kept.txt": "still here" });
        const read = await run("js", `import fs from "fs"; console.log(fs.readFileSync("/out/kept.txt", "utf8"))`, { workspace }, reloaded);
        assert.equal(read.stdout, "still here\n", read.stderr);
      } finally {
        await reloaded.close();
      }
    });
  }

  test("writes made before a timeout or a cancel are kept", async () => {
    const workspace = freshWorkspace();
    const js = await run("js", `import fs from "fs"; fs.writeFileSync("/tmp/js-before-timeout", "1"); while (true) {}`, {
      workspace,
      limits: { timeoutMs: 500 },
    });
    assert.equal(js.error?.name, "Timeout");
    const py = await run("py", `with open("/tmp/py-before-timeout", "w") as f:\n    f.write("2")\nwhile True:\n    pass`, {
      workspace,
      limits: { timeoutMs: 1500 },
    });
    assert.equal(py.error?.name, "Timeout");
    const cancelled = await run("js", `import fs from "fs"; fs.writeFileSync("/out/before-cancel", "3"); while (true) {}`, {
      workspace,
      cancelAfterMs: 300,
    });
    assert.equal(cancelled.error?.name, "Cancelled");
    const pyCancelled = await run("py", `open("/out/py-before-cancel", "w").write("4")\nwhile True:\n    pass`, { workspace, cancelAfterMs: 3000 });
    assert.equal(pyCancelled.error?.name, "Cancelled");
    assert.deepEqual((await filesOf(workspace)).files, {
      "/out/before-cancel": "3",
      "/out/py-before-cancel": "4",
      "/tmp/js-before-timeout": "1",
      "/tmp/py-before-timeout": "2",
    });
  });

  test("files Python leaves open are flushed and kept when the program ends", async () => {
    const workspace = freshWorkspace();
    const py = await run("py", `log = open("/out/log.txt", "w")\nlog.write("unclosed")`, { workspace });
    assert.equal(py.exitCode, 0, py.stderr);
    assert.deepEqual((await filesOf(workspace)).files, { "/out/log.txt": "unclosed" });
  });
});

describe("the workspace's storage (OPFS)", () => {
  /** The names in the workspace's OPFS directory, sorted; with `layout`, first make these files there. */
  const opfsEntries = (workspace, onPage = page, layout = null) =>
    onPage.evaluate(
      async ([name, layout]) => {
        const root = await navigator.storage.getDirectory();
        const all = await root.getDirectoryHandle("relay-workspace", { create: true });
        const dir = await all.getDirectoryHandle(encodeURIComponent(name), { create: true });
        for (const [path, text] of Object.entries(layout ?? {})) {
          let at = dir;
          const segments = path.slice(1).split("/").map(encodeURIComponent);
          for (const segment of segments.slice(0, -1)) at = await at.getDirectoryHandle(segment, { create: true });
          const writable = await (await at.getFileHandle(segments.at(-1), { create: true })).createWritable();
          await writable.write(text);
          await writable.close();
        }
        const names = [];
        for await (const entry of dir.keys()) names.push(entry);
        return names.sort();
      },
      [workspace.name, layout],
    );

  test("two tabs of one relay session share it: each takes in what the other stored first", async () => {
    const workspace = freshWorkspace();
    const other = await pages.openPage();
    try {
      const changeOn = (onPage, op) => onPage.evaluate(([w, o]) => window.relayTest.workspaceChange(w, o), [workspace, op]);
      assert.equal(await changeOn(page, { op: "write", path: "/tmp/a", text: "A" }), "ok");
      assert.equal(await changeOn(other, { op: "write", path: "/tmp/b", text: "B" }), "ok");
      assert.equal(await changeOn(page, { op: "write", path: "/tmp/b/below", text: "x" }), "Error: cannot write /tmp/b/below: /tmp/b is a file");
      // Enough batches from the other tab that it replaces its logs with a base.
      for (let i = 0; i < 130; i++) assert.equal(await changeOn(other, { op: "write", path: `/out/n${i}`, text: `${i}` }), "ok");
      const stored = await opfsEntries(workspace, other);
      assert.equal(stored.filter((name) => name.startsWith("base-")).length, 1, stored.join(" "));
      assert.ok(stored.length < 10, `the logs a base replaced are deleted: ${stored.join(" ")}`);
      assert.equal(await changeOn(page, { op: "remove", path: "/out/n0" }), "ok");
      const expected = { "/tmp/a": "A", "/tmp/b": "B", ...Object.fromEntries(Array.from({ length: 129 }, (_, i) => [`/out/n${i + 1}`, `${i + 1}`])) };
      assert.deepEqual((await filesOf(workspace)).files, expected);
      const reopened = await pages.openPage();
      try {
        assert.deepEqual((await filesOf(workspace, reopened)).files, expected);
      } finally {
        await reopened.close();
      }
    } finally {
      await other.close();
    }
  });

  test("a workspace of the old layout (a directory per segment) is read and moved into a base", async () => {
    const workspace = freshWorkspace();
    const legacy = { "/tmp/sub/a b%.txt": "old", "/out/x": "y" };
    assert.deepEqual(await opfsEntries(workspace, page, legacy), ["out", "tmp"]);
    assert.deepEqual((await filesOf(workspace)).files, legacy);
    assert.deepEqual(await opfsEntries(workspace), ["base-1"]);
    const reopened = await pages.openPage();
    try {
      assert.deepEqual((await filesOf(workspace, reopened)).files, legacy);
    } finally {
      await reopened.close();
    }
  });
});

describe("the run's filesystem policy", () => {
  test("writing /host/x is refused with PolicyDenied in both runtimes, and nothing is kept", async () => {
    const workspace = freshWorkspace();
    const js = await run(
      "js",
      `import fs from "fs";
       for (const path of ["/host/x", "/mcps/server/x", "/tmp/../host/x", "../host/y"]) {
         try { fs.writeFileSync(path, "no"); console.log("ALLOWED", path); }
         catch (e) { console.log(e.name, e.code, e.message); }
       }`,
      { workspace, entry: { cwd: "/tmp" } },
    );
    assert.equal(js.exitCode, 0, js.stderr);
    const lines = js.stdout.trim().split("\n");
    assert.equal(lines.length, 4);
    for (const line of [lines[0], ...lines.slice(2)]) {
      assert.match(line, /^PolicyDenied EACCES path "\/host\/\S+" is not writable: policy\.filesystem\.writable is \["\/tmp", "\/out"\]; .*ask the tenant to add "\/host"$/);
    }
    assert.match(lines[1], /^PolicyDenied EACCES path "\/mcps\/server\/x" is not writable: \/mcps holds the tenant's MCP servers' files and is never writable/);

    const py = await run("py", `import os, pathlib
for attempt in (lambda: open("/host/x", "w"), lambda: pathlib.Path("/tmp/../host/x").write_text("no"),
                lambda: os.open("../host/y", os.O_WRONLY | os.O_CREAT), lambda: os.mkdir("/host/dir"),
                lambda: os.remove("/mcps/x"), lambda: os.rename("/tmp", "/host/tmp"),
                lambda: os.symlink("/host", "/home/link")):
    try:
        attempt()
        print("ALLOWED")
    except PermissionError as error:
        print(type(error).__name__, error)`, { workspace, entry: { cwd: "/tmp" } });
    assert.equal(py.exitCode, 0, py.stderr);
    const pyLines = py.stdout.trim().split("\n");
    assert.equal(pyLines.length, 7, py.stdout);
    for (const line of pyLines.slice(0, 6)) {
      assert.match(line, /^PermissionError PolicyDenied: path "\/(host|mcps)\/\S+" is not writable: .*(\["\/tmp", "\/out"\]|never writable)/);
    }
    assert.match(pyLines[6], /^PermissionError PolicyDenied: symlinks in or into the workspace/);
    assert.deepEqual((await filesOf(workspace)).files, {});
  });

  test("a wider policy lets a run write /host; /mcps stays read-only", async () => {
    const workspace = freshWorkspace();
    const filesystem = { readonly: ["/"], writable: ["/tmp", "/out", "/host"] };
    const js = await run("js", `import fs from "fs"; fs.writeFileSync("/host/notes.md", "# notes")`, { workspace, filesystem });
    assert.equal(js.exitCode, 0, js.stderr);
    const py = await run("py", `open("/mcps/x", "w")`, { workspace, filesystem: { readonly: ["/"], writable: ["/"] } });
    assert.equal(py.exitCode, 1);
    assert.match(py.stderr, /PermissionError: PolicyDenied: path "\/mcps\/x" is not writable: \/mcps holds the tenant's MCP servers' files and is never writable/);
    assert.deepEqual((await filesOf(workspace)).files, { "/host/notes.md": "# notes" });
  });

  test("the workspace itself refuses paths that escape or are not under a root, and its size limit", async () => {
    const workspace = freshWorkspace("indexeddb");
    for (const path of ["/tmp/../etc/passwd", "/etc/passwd", "/tmp", "/tmp//a", "/tmp/./a", "tmp/a", `/tmp/${"a".repeat(1100)}`]) {
      assert.match(await change(workspace, { op: "write", path, text: "x" }), /^Error: refused workspace path/, path);
    }
    assert.equal(await change(workspace, { op: "write", path: "/tmp/big", size: 40 << 20 }), "ok");
    const refused = await change(workspace, { op: "write", path: "/out/bigger", size: 30 << 20 });
    assert.match(refused, /^OutputLimitExceeded: writing \/out\/bigger would make the workspace \d+ bytes, over its limit of 64 MiB .*delete files/);
    // A sync taking the relay session's files may pass the cap on its way (a file grows before
    // another shrinks): the relay session judged them; only runs' writes are held to it.
    assert.equal(await change(workspace, { op: "write", path: "/out/bigger", size: 30 << 20, mirrored: true }), "ok");
    assert.equal(await change(workspace, { op: "remove", path: "/out/bigger" }), "ok");
    assert.equal(await change(workspace, { op: "write", path: "/tmp/big/below", text: "x" }), "Error: cannot write /tmp/big/below: /tmp/big is a file");
    assert.equal(await change(workspace, { op: "remove", path: "/tmp/big" }), "ok");
    assert.equal(await change(workspace, { op: "write", path: "/out/bigger", size: 30 << 20 }), "ok");
    assert.equal((await filesOf(workspace)).totalBytes, 30 << 20);
  });

  test("a guest cannot forge file changes: not on the global channel, not through the wrapped filesystem", async () => {
    const workspace = freshWorkspace();
    const py = await run("py", `import asyncio, js, pyodide_js
from pyodide.ffi import create_proxy, to_js
box = {}
js.setTimeout(create_proxy(lambda this: box.setdefault("g", this), capture_this=True), 0)
while "g" not in box:
    await asyncio.sleep(0)
g = box["g"]
obj = lambda value: to_js(value, dict_converter=g.Object.fromEntries)
g.postMessage(obj({"type": "file", "op": "write", "path": "/tmp/forged", "data": to_js(b"evil")}))
g.postMessage(obj({"type": "file", "op": "write", "path": "/host/forged", "data": to_js(b"evil")}))
FS = pyodide_js.FS
for attempt in (lambda: FS.writeFile("/host/x", "evil"), lambda: FS.close(obj({"flags": 1, "path": "/host/x"})),
                lambda: FS.close(obj({"flags": 1, "path": "/tmp/../host/x"}))):
    try:
        attempt()
        print("ALLOWED")
    except Exception as error:
        print("refused")
await asyncio.sleep(0.1)
print("done")`, { workspace });
    assert.equal(py.stdout, "refused\nrefused\nrefused\ndone\n", py.stderr);
    assert.equal(py.exitCode, 0, py.stderr);
    assert.deepEqual((await filesOf(workspace)).files, {});
  });
});

describe("paths the page refuses fail where the guest writes them", () => {
  // Each breaks a rule of check_path; a 1,100-character path of segments the right length.
  const REFUSED = ["/tmp/a\\b", `/tmp/${"s".repeat(256)}`, "/tmp/a%2eb", "/tmp/a\tb", "/tmp/a\nb", `/tmp/${`${"a".repeat(99)}/`.repeat(10)}${"a".repeat(95)}`];
  const reasonOf = (path) => policy.checkPath(DEFAULT_FILESYSTEM, path, "write").reason;

  test("the refused names are the ones meant", () => {
    assert.equal(REFUSED[5].length, 1100);
    const reasons = REFUSED.map(reasonOf);
    for (const [i, needle] of ["backslash", "segment of 256 bytes", '"%2e"', "U+0009", "U+000A", "1100 bytes long"].entries()) {
      assert.ok(reasons[i].includes(needle), `${reasons[i]} should say ${needle}`);
    }
  });

  test("JavaScript: each write, mkdir and rename raises PolicyDenied with check_path's sentence, and the run goes on", async () => {
    const workspace = freshWorkspace();
    const js = await run(
      "js",
      `import fs from "fs";
       const attempts = ${JSON.stringify(REFUSED)}.map((path) => () => fs.writeFileSync(path, "x"));
       attempts.push(() => fs.mkdirSync("/tmp/a\\\\b"), () => fs.renameSync("/tmp/kept.txt", "/tmp/a%2eb"));
       fs.writeFileSync("/tmp/kept.txt", "kept");
       for (const attempt of attempts) {
         try { attempt(); console.log(JSON.stringify(["stored"])); }
         catch (e) { console.log(JSON.stringify([e.name, e.code, e.message])); }
       }
       fs.appendFileSync("/tmp/kept.txt", ", and the run went on");`,
      { workspace },
    );
    assert.equal(js.exitCode, 0, js.stderr);
    const expected = [...REFUSED, "/tmp/a\\b", "/tmp/a%2eb"].map((path) => ["PolicyDenied", "EACCES", reasonOf(path)]);
    assert.deepEqual(js.stdout.trim().split("\n").map((line) => JSON.parse(line)), expected);
    assert.equal(js.usage.denied, expected.length, "each refusal is reported for the audit");
    assert.deepEqual((await filesOf(workspace)).files, { "/tmp/kept.txt": "kept, and the run went on" });
  });

  test("Python: each open, mkdir and rename raises an OSError with check_path's sentence, and the run goes on", async () => {
    const workspace = freshWorkspace();
    const py = await run(
      "py",
      `import json, os
attempts = [lambda path=path: open(path, "w").write("x") for path in json.loads(${JSON.stringify(JSON.stringify(REFUSED))})]
attempts += [lambda: os.mkdir("/tmp/a\\\\b"), lambda: os.rename("/tmp/kept.txt", "/tmp/a%2eb")]
open("/tmp/kept.txt", "w").write("kept")
for attempt in attempts:
    try:
        attempt()
        print(json.dumps(["stored"]))
    except OSError as error:
        print(json.dumps([type(error).__name__, str(error)]))
with open("/tmp/kept.txt", "a") as f:
    f.write(", and the run went on")`,
      { workspace },
    );
    assert.equal(py.exitCode, 0, py.stderr);
    const expected = [...REFUSED, "/tmp/a\\b", "/tmp/a%2eb"].map((path) => ["PermissionError", `PolicyDenied: ${reasonOf(path)}`]);
    assert.deepEqual(py.stdout.trim().split("\n").map((line) => JSON.parse(line)), expected);
    assert.equal(py.usage.denied, expected.length, "each refusal is reported for the audit");
    assert.deepEqual((await filesOf(workspace)).files, { "/tmp/kept.txt": "kept, and the run went on" });
  });

  test("both runtimes give the verdicts of tests/fs_path_cases.json for every write they can name", async () => {
    const { basePolicy, cases } = JSON.parse(await readFile(path.join(import.meta.dirname, "..", "tests", "fs_path_cases.json"), "utf8"));
    // A runner resolves ".", ".." and "//" as POSIX does before it judges a path: the cases
    // already in that form are the ones a guest's write can reach check_path with. Python
    // refuses a NUL in a path itself (ValueError), before anyone judges it.
    const resolved = (p) => `/${p.split("/").filter((s) => s && s !== "." && s !== "..").join("/")}`;
    const writes = cases.filter((c) => c.access === "write" && resolved(c.path) === c.path);
    const byPolicy = Map.groupBy(writes, (c) => JSON.stringify({ ...basePolicy, ...c.filesystem }));
    const failures = [];
    for (const [filesystem, group] of byPolicy) {
      const paths = group.map((c) => c.path);
      const js = await run(
        "js",
        `import fs from "fs";
         for (const path of ${JSON.stringify(paths)}) {
           try { fs.writeFileSync(path, "x"); console.log(JSON.stringify("allow")); }
           catch (e) { console.log(JSON.stringify(e.name === "PolicyDenied" ? e.message : "allow")); }
         }`,
        { filesystem: JSON.parse(filesystem) },
      );
      const pyPaths = paths.filter((p) => !p.includes("\0"));
      const py = await run(
        "py",
        `import json
for path in json.loads(${JSON.stringify(JSON.stringify(pyPaths))}):
    try:
        open(path, "w").close()
        print(json.dumps("allow"))
    except PermissionError as error:
        print(json.dumps(str(error).removeprefix("PolicyDenied: ")))
    except OSError:
        print(json.dumps("allow"))`,
        { filesystem: JSON.parse(filesystem) },
      );
      for (const [runtime, outcome, judged] of [["js", js, paths], ["py", py, pyPaths]]) {
        const verdicts = outcome.stdout.trim().split("\n").map((line) => JSON.parse(line));
        judged.forEach((p, i) => {
          const c = group.find((g) => g.path === p);
          const verdict = verdicts[i] ?? `no answer: the run ended ${JSON.stringify(outcome.error ?? outcome.exitCode)}`;
          const ok = c.verdict === "allow" ? verdict === "allow" : verdict !== "allow" && c.reasonContains.every((n) => verdict.includes(n));
          if (!ok) failures.push(`${runtime}: ${JSON.stringify(p)} under ${filesystem}: got ${JSON.stringify(verdict)}, want ${c.verdict} ${JSON.stringify(c.reasonContains ?? [])} (${outcome.stderr})`);
        });
      }
    }
    assert.deepEqual(failures, []);
    assert.ok(writes.length >= 40, `${writes.length} cases`);
  });
});

test("a file change the glue is tricked into is held back by the page's own rule", async () => {
  const workspace = freshWorkspace();
  assert.equal(await change(workspace, { op: "write", path: "/host/x", text: "original" }), "ok");
  // A real stream opened for writing under /tmp, its path rewritten to escape to /host/x (which
  // exists, so the wrapped close would read it and send it): the glue judges the stream's path
  // with the page's rule (check_path in policy.wasm), which the page applies again, so it sends
  // nothing; the guest's own write went to its scratch file, and the run goes on.
  const py = await run("py", `import os, pyodide_js
fd = os.open("/tmp/decoy", os.O_WRONLY | os.O_CREAT)
stream = pyodide_js.FS.getStream(fd)
stream.path = "/tmp/../host/x"
os.close(fd)
print("sent")`, { workspace });
  assert.equal(py.exitCode, 0, JSON.stringify(py));
  assert.equal(py.stdout, "sent\n");
  assert.deepEqual((await filesOf(workspace)).files, { "/host/x": "original" });
});

test("a run that would take the workspace past 64 MiB is told what to delete, and nothing is sent", async () => {
  const workspace = freshWorkspace();
  const js = await run(
    "js",
    `import fs from "fs";
     fs.writeFileSync("/tmp/small", "kept");
     try { fs.writeFileSync("/tmp/huge", new Uint8Array(65 * 1024 * 1024)); } catch (e) { console.log(e.code, e.message); }`,
    { workspace },
  );
  assert.equal(js.exitCode, 0, js.stderr);
  assert.match(js.stdout, /^ENOSPC writing \/tmp\/huge would make the workspace \d+ bytes, over its limit of 64 MiB .*delete files/);
  const py = await run("py", `try:
    with open("/out/huge", "wb") as f:
        f.write(bytes(65 * 1024 * 1024))
except OSError as error:
    print(type(error).__name__, error.errno == __import__("errno").ENOSPC)`, { workspace });
  assert.equal(py.stdout, "OSError True\n", py.stderr);
  assert.match(py.stderr, /^relay: \/out\/huge was not saved: writing \/out\/huge would make the workspace \d+ bytes, over its limit of 64 MiB/);
  assert.deepEqual((await filesOf(workspace)).files, { "/tmp/small": "kept" });
});

describe("guest fetch", () => {
  const fetches = {
    "https://api.example.com/data": { status: 200, statusText: "OK", url: "https://api.example.com/data", headers: [["content-type", "application/json"]], body: `{"answer":42}` },
    "https://api.example.com/missing": { status: 404, statusText: "Not Found", url: "https://api.example.com/missing", headers: [], body: "no such thing" },
  };

  test("JavaScript's fetch gets the page's answer", async () => {
    const js = await run(
      "js",
      `const r = await fetch("https://api.example.com/data", { method: "POST", headers: { "X-Token": "t" }, body: "ping" });
       console.log(r.status, r.statusText, r.ok, r.url, r.headers.get("Content-Type"), JSON.stringify(await r.json()));
       const missing = await fetch("https://api.example.com/missing");
       console.log(missing.status, missing.ok, await missing.text());`,
      { fetches },
    );
    assert.equal(js.exitCode, 0, js.stderr);
    assert.equal(js.stdout, `200 OK true https://api.example.com/data application/json {"answer":42}\n404 false no such thing\n`);
    assert.deepEqual(js.requests[0], { url: "https://api.example.com/data", method: "POST", headers: [["x-token", "t"]], body: "ping" });
    assert.deepEqual({ fetches: js.usage.fetches, denied: js.usage.denied }, { fetches: 2, denied: 0 });
  });

  test("Python's pyfetch with top-level await gets the page's answer", async () => {
    const py = await run("py", `from pyodide.http import pyfetch
r = await pyfetch("https://api.example.com/data", method="POST", body="ping", headers={"X-Token": "t"})
print(r.status, r.status_text, r.ok, r.url, r.headers["content-type"], await r.json())
missing = await pyfetch("https://api.example.com/missing")
print(missing.status, await missing.string())`, { fetches });
    assert.equal(py.exitCode, 0, py.stderr);
    assert.equal(py.stdout, "200 OK True https://api.example.com/data application/json {'answer': 42}\n404 no such thing\n");
    assert.equal(py.requests[0].method, "POST");
    assert.equal(py.requests[0].body, "ping");
    assert.deepEqual(py.requests[0].headers.find(([name]) => name === "x-token"), ["x-token", "t"]);
    assert.equal(py.usage.fetches, 2);
  });

  test("a denied fetch is PolicyDenied in both runtimes and counted", async () => {
    const js = await run(
      "js",
      `try { await fetch("https://evil.example.net/x"); } catch (e) { console.log(e.name, e.message); }
       await fetch("https://api.example.com/data");`,
      { fetches },
    );
    assert.equal(js.stdout, "PolicyDenied evil.example.net is not in policy.network.allowedDomains\n", js.stderr);
    assert.deepEqual({ fetches: js.usage.fetches, denied: js.usage.denied }, { fetches: 2, denied: 1 });

    const py = await run("py", `from pyodide.http import pyfetch
try:
    await pyfetch("https://evil.example.net/x")
except OSError as error:
    print(type(error).__name__, error)
await pyfetch("https://evil.example.net/y")`, { fetches });
    assert.equal(py.exitCode, 1);
    assert.equal(py.stdout, "AbortError PolicyDenied: evil.example.net is not in policy.network.allowedDomains\n");
    assert.match(py.stderr, /^Traceback .*\n {2}File "\/entry\.py", line 6.*AbortError: PolicyDenied: evil\.example\.net/s);
    assert.deepEqual({ fetches: py.usage.fetches, denied: py.usage.denied }, { fetches: 2, denied: 2 });
  });

  test("a pending fetch keeps a JavaScript run alive, as a timer does", async () => {
    const js = await run("js", `fetch("https://api.example.com/data").then((r) => r.text()).then((t) => console.log("later", t));`, { fetches });
    assert.equal(js.exitCode, 0, js.stderr);
    assert.equal(js.stdout, `later {"answer":42}\n`);
  });
});

test("top-level await in Python keeps exit codes and tracebacks", async () => {
  const exits = await run("py", `import asyncio, sys\nawait asyncio.sleep(0.01)\nprint(__name__)\nsys.exit(4)`);
  assert.equal(exits.stdout, "__main__\n");
  assert.equal(exits.exitCode, 4, exits.stderr);
  const fails = await run("py", `import asyncio\nasync def f():\n    await asyncio.sleep(0)\n    raise ValueError("late")\n\nawait f()\n`);
  assert.equal(fails.exitCode, 1);
  assert.match(fails.stderr, /^Traceback \(most recent call last\):\n {2}File "\/entry\.py", line 6, in <module>\n/);
  assert.match(fails.stderr, /ValueError: late\n$/);
  assert.doesNotMatch(fails.stderr, /relay_run|run_sync|webloop/);
});
