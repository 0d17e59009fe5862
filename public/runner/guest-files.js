// The filesystem a JS capsule sees through the `fs` module (guest-prelude.js), held by the
// runner worker, outside QuickJS: the capsule's files (at /<relative path>), the relay session's
// workspace (/tmp, /out, /host, /mcps, from the job's snapshot) and what the run writes. Every
// change to a workspace file goes to the page at once (RunRelay); writes the run's policy
// forbids throw PolicyDenied. Directories are implicit (a path with files under it), plus the
// ones this run made with mkdir. Errors carry a Node error code as their name (ENOENT, ...).

import { concatBytes } from "../lib/bytes.js";
import {
  DEFAULT_FILESYSTEM,
  WORKSPACE_LIMIT_BYTES,
  WORKSPACE_ROOTS,
  deniedWrite,
  inWorkspace,
  workspaceFullMessage,
} from "../lib/workspace-rules.js";

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
   *   filesystem the run's {readonly, writable}; relay a RunRelay
   */
  constructor({ capsule = {}, workspace = {}, filesystem = DEFAULT_FILESYSTEM, relay }) {
    this.files = new Map(Object.entries(capsule).map(([path, bytes]) => [`/${path}`, bytes]));
    this.dirs = new Set(["/", ...WORKSPACE_ROOTS]);
    this.workspaceBytes = 0;
    for (const [path, bytes] of Object.entries(workspace)) {
      this.files.set(path, bytes);
      this.workspaceBytes += bytes.byteLength;
    }
    this.filesystem = filesystem;
    this.relay = relay;
  }

  /** "file", "dir" or undefined. */
  kind(path) {
    if (this.files.has(path)) return "file";
    if (this.dirs.has(path)) return "dir";
    const below = `${path}/`;
    for (const other of this.files.keys()) if (other.startsWith(below)) return "dir";
    for (const other of this.dirs) if (other.startsWith(below)) return "dir";
    return undefined;
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
    const prefix = path === "/" ? "/" : `${path}/`;
    const names = new Set();
    for (const other of [...this.files.keys(), ...this.dirs]) {
      if (other.startsWith(prefix) && other !== prefix) names.add(other.slice(prefix.length).split("/")[0]);
    }
    return [...names].sort();
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
    this.dirs.add(path);
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
    if (this.dirs.has(path) && (path === "/" || WORKSPACE_ROOTS.includes(path))) {
      throw new FsError("EPERM", `${path} is a root of the workspace and cannot be removed`);
    }
    if (kind === "file") {
      if (expect === "dir") throw new FsError("ENOTDIR", "not a directory");
      return this.drop(path);
    }
    if (expect === "file") throw new FsError("EISDIR", "illegal operation on a directory");
    const inside = this.under(path);
    if (inside.length && !recursive) {
      throw expect === "dir" ? new FsError("ENOTEMPTY", "directory not empty") : new FsError("EISDIR", "is a directory (use recursive: true)");
    }
    for (const file of inside) this.drop(file);
    for (const dir of [...this.dirs]) if (dir === path || dir.startsWith(`${path}/`)) this.dirs.delete(dir);
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
    for (const file of this.under(from)) {
      const bytes = this.files.get(file);
      this.drop(file);
      this.put(to + file.slice(from.length), bytes);
    }
    for (const dir of [...this.dirs]) {
      if (dir === from || dir.startsWith(`${from}/`)) {
        this.dirs.delete(dir);
        this.dirs.add(to + dir.slice(from.length));
      }
    }
  }

  /** The files under directory `path`. */
  under(path) {
    return [...this.files.keys()].filter((file) => file.startsWith(`${path}/`));
  }

  checkWrite(path) {
    const denied = deniedWrite(path, this.filesystem);
    if (!denied) return;
    this.relay.denied("write", path, denied);
    throw new FsError("PolicyDenied", denied);
  }

  /** Stores a file; a workspace file also goes to the page, within the workspace's limit. */
  put(path, bytes) {
    if (!inWorkspace(path)) return void this.files.set(path, bytes);
    const total = this.workspaceBytes - (this.files.get(path)?.byteLength ?? 0) + bytes.byteLength;
    if (total > WORKSPACE_LIMIT_BYTES) throw new FsError("ENOSPC", workspaceFullMessage(path, total));
    this.files.set(path, bytes);
    this.workspaceBytes = total;
    this.relay.fileWritten(path, bytes);
  }

  drop(path) {
    const bytes = this.files.get(path);
    this.files.delete(path);
    if (!inWorkspace(path)) return;
    this.workspaceBytes -= bytes.byteLength;
    this.relay.fileRemoved(path);
  }
}

function parentOf(path) {
  return path.slice(0, path.lastIndexOf("/")) || "/";
}

function noEntry() {
  return new FsError("ENOENT", "no such file or directory");
}
