// The filesystem a JS capsule sees through the `fs` module (guest-prelude.js), held by the
// runner worker, outside QuickJS: the capsule's files (at /<relative path>), the relay session's
// workspace (/tmp, /out, /host, /mcps, from the job's snapshot) and what the run writes. Every
// change to a workspace file goes to the page at once (RunRelay); writes the run's policy
// forbids throw PolicyDenied. Directories are implicit (a path with files under it), plus the
// ones this run made with mkdir. Errors carry a Node error code as their name (ENOENT, ...).

import { concatBytes } from "../lib/bytes.js";
import { WORKSPACE_ROOTS, workspaceFullMessage } from "../lib/workspace-rules.js";

export class FsError extends Error {
  /** @param code a Node error code (ENOENT, EISDIR, ...) or PolicyDenied */
  constructor(code, message) {
    super(message);
    this.name = code;
  }
}

export class GuestFiles {
  /**
   * @param capsule {relative path: Uint8Array}; workspace {absolute path: Uint8Array};
   *   rule the run's WriteRule (write-rule.js); relay a RunRelay
   */
  constructor({ capsule = {}, workspace = {}, rule, relay }) {
    this.files = new Map();
    // Every directory and the names in it, so that no operation looks at more than the paths
    // it names (a run may hold tens of thousands of files). A directory holding nothing is
    // kept only if it is in `made` (the roots, and what mkdir made); others go with their
    // last file, as a workspace keeps no empty directories.
    this.entries = new Map([["/", new Set()]]);
    this.made = new Set(["/"]);
    for (const root of WORKSPACE_ROOTS) this.makeDir(root);
    for (const [path, bytes] of Object.entries(capsule)) this.place(`/${path}`, bytes);
    this.workspaceBytes = 0;
    for (const [path, bytes] of Object.entries(workspace)) {
      this.place(path, bytes);
      this.workspaceBytes += bytes.byteLength;
    }
    this.rule = rule;
    this.relay = relay;
  }

  /** "file", "dir" or undefined. */
  kind(path) {
    if (this.files.has(path)) return "file";
    return this.entries.has(path) ? "dir" : undefined;
  }

  /** One call from the guest's fs module: `op` and its JSON `args`, `data` the bytes to write. */
  call(op, { path, to, append, recursive, force, expect }, data) {
    switch (op) {
      case "read":
        return this.read(path);
      case "write":
        return this.write(path, data ?? new Uint8Array(0), append);
      case "stat":
        return JSON.stringify(this.stat(path));
      case "list":
        return JSON.stringify(this.list(path));
      case "mkdir":
        return this.mkdir(path, recursive);
      case "remove":
        return this.remove(path, { expect, recursive, force });
      case "rename":
        return this.rename(path, to);
      default:
        throw new FsError("EINVAL", `unknown fs operation ${op}`);
    }
  }

  stat(path) {
    const kind = this.kind(path);
    if (!kind) throw noEntry();
    return { kind, size: kind === "file" ? this.files.get(path).byteLength : 0 };
  }

  read(path) {
    const kind = this.kind(path);
    if (kind === "file") return this.files.get(path);
    throw kind ? new FsError("EISDIR", "illegal operation on a directory") : noEntry();
  }

  write(path, bytes, append = false) {
    this.checkWrite(path);
    const kind = this.kind(path);
    if (kind === "dir") throw new FsError("EISDIR", "illegal operation on a directory");
    if (this.kind(parentOf(path)) !== "dir") throw noEntry();
    const old = this.files.get(path);
    this.put(path, append && old ? concatBytes([old, bytes]) : bytes);
  }

  /** The names in directory `path`, sorted. */
  list(path) {
    const kind = this.kind(path);
    if (kind !== "dir") throw kind ? new FsError("ENOTDIR", "not a directory") : noEntry();
    return [...this.entries.get(path)].sort();
  }

  mkdir(path, recursive = false) {
    const kind = this.kind(path);
    if (kind === "dir" && recursive) return;
    this.checkWrite(path);
    if (kind) throw new FsError("EEXIST", "file already exists");
    const parent = parentOf(path);
    if (this.kind(parent) !== "dir") {
      if (!recursive) throw noEntry();
      this.mkdir(parent, true);
    }
    this.makeDir(path);
  }

  /**
   * Deletes `path`. `expect`: "file" (unlink), "dir" (rmdir) or "any" (rm); `recursive` for a
   * directory that is not empty; `force`: a missing path is fine.
   */
  remove(path, { expect = "any", recursive = false, force = false } = {}) {
    const kind = this.kind(path);
    if (!kind) {
      if (force) return;
      throw noEntry();
    }
    this.checkWrite(path);
    if (this.made.has(path) && (path === "/" || WORKSPACE_ROOTS.includes(path))) {
      throw new FsError("EPERM", `${path} is a root of the workspace and cannot be removed`);
    }
    if (kind === "file") {
      if (expect === "dir") throw new FsError("ENOTDIR", "not a directory");
      return this.drop(path);
    }
    if (expect === "file") throw new FsError("EISDIR", "illegal operation on a directory");
    if (this.entries.get(path).size && !recursive) {
      throw expect === "dir" ? new FsError("ENOTEMPTY", "directory not empty") : new FsError("EISDIR", "is a directory (use recursive: true)");
    }
    this.removeTree(path);
  }

  rename(from, to) {
    const kind = this.kind(from);
    if (!kind) throw noEntry();
    this.checkWrite(from);
    this.checkWrite(to);
    if (this.kind(parentOf(to)) !== "dir") throw noEntry();
    if (kind === "file") {
      if (this.kind(to) === "dir") throw new FsError("EISDIR", "illegal operation on a directory");
      const bytes = this.files.get(from);
      this.drop(from);
      return this.put(to, bytes);
    }
    if (to === from || to.startsWith(`${from}/`)) throw new FsError("EINVAL", "cannot move a directory into itself");
    if (this.kind(to) === "file") throw new FsError("ENOTDIR", "not a directory");
    if (this.kind(to) === "dir" && this.list(to).length) throw new FsError("ENOTEMPTY", "directory not empty");
    const made = [...this.dirsUnder(from)].filter((dir) => this.made.has(dir));
    for (const file of [...this.filesUnder(from)]) {
      const bytes = this.files.get(file);
      this.drop(file);
      this.put(to + file.slice(from.length), bytes);
    }
    this.removeTree(from);
    for (const dir of made) this.makeDir(to + dir.slice(from.length));
  }

  /** The files under directory `path`, at any depth. */
  *filesUnder(path) {
    for (const name of this.entries.get(path) ?? []) {
      const child = childOf(path, name);
      if (this.files.has(child)) yield child;
      else yield* this.filesUnder(child);
    }
  }

  /** Directory `path` and the directories under it, at any depth. */
  *dirsUnder(path) {
    if (!this.entries.has(path)) return;
    yield path;
    for (const name of this.entries.get(path)) yield* this.dirsUnder(childOf(path, name));
  }

  /** Deletes directory `path` and everything under it; each workspace file goes to the page. */
  removeTree(path) {
    for (const name of [...(this.entries.get(path) ?? [])]) {
      const child = childOf(path, name);
      if (this.files.has(child)) this.drop(child);
      else this.removeTree(child);
    }
    if (!this.entries.has(path)) return; // it went with its last file
    this.entries.delete(path);
    this.made.delete(path);
    this.unlink(path);
  }

  checkWrite(path) {
    const denied = this.rule.denied(path);
    if (denied) throw new FsError("PolicyDenied", denied);
  }

  /** Stores a workspace file (checkWrite admitted it) and sends it to the page, within the workspace's limit. */
  put(path, bytes) {
    const total = this.workspaceBytes - (this.files.get(path)?.byteLength ?? 0) + bytes.byteLength;
    const limit = this.rule.limitBytes;
    if (total > limit) throw new FsError("ENOSPC", workspaceFullMessage(path, total, limit));
    this.place(path, bytes);
    this.workspaceBytes = total;
    this.relay.fileWritten(path, bytes);
  }

  drop(path) {
    this.workspaceBytes -= this.files.get(path).byteLength;
    this.files.delete(path);
    this.unlink(path);
    this.relay.fileRemoved(path);
  }

  /** Puts a file at `path`, with the directories on its way. */
  place(path, bytes) {
    if (!this.files.has(path)) this.link(path);
    this.files.set(path, bytes);
  }

  makeDir(path) {
    if (!this.entries.has(path)) {
      this.entries.set(path, new Set());
      this.link(path);
    }
    this.made.add(path);
  }

  /** Names `path` in its parent directory, making the parent (and its own) where missing. */
  link(path) {
    const parent = parentOf(path);
    if (!this.entries.has(parent)) {
      this.entries.set(parent, new Set());
      this.link(parent);
    }
    this.entries.get(parent).add(nameOf(path));
  }

  /** Takes `path` out of its parent; a parent left empty that mkdir did not make goes too. */
  unlink(path) {
    const parent = parentOf(path);
    const names = this.entries.get(parent);
    names.delete(nameOf(path));
    if (names.size || this.made.has(parent)) return;
    this.entries.delete(parent);
    this.unlink(parent);
  }
}

function parentOf(path) {
  return path.slice(0, path.lastIndexOf("/")) || "/";
}

function nameOf(path) {
  return path.slice(path.lastIndexOf("/") + 1);
}

function childOf(dir, name) {
  return dir === "/" ? `/${name}` : `${dir}/${name}`;
}

function noEntry() {
  return new FsError("ENOENT", "no such file or directory");
}
