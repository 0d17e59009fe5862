// The workspace in Pyodide's filesystem: the job's snapshot is written into the interpreter's
// in-memory filesystem before the guest runs, and every change under /tmp, /out, /host and
// /mcps goes to the page as it happens (write-through), by wrapping Emscripten's FS operations.
// Python's syscalls call them through the FS object (FS.open, FS.close, FS.unlink, FS.rename,
// ...), so a wrapper sees what open(), os and pathlib do. A file opened for writing is sent
// whole when it is closed.
//
// Writes the run's policy forbids under the roots fail here with EACCES, symlinks into or under
// them with EPERM; relay_run.py's audit hook refuses them first, with a message that says what
// to change. Outside the roots the filesystem is the run's own scratch space.

import { WORKSPACE_ROOTS, inWorkspace, normalizePath, workspaceFullMessage } from "../lib/workspace-rules.js";

// Emscripten's open flags and errno values (not Linux's).
const O_ACCMODE = 3;
const O_CREAT = 64;
const O_TRUNC = 512;
const EACCES = 2;
const EPERM = 63;
const EBUSY = 10;
const ENOSPC = 51;

/** Whether open flags can change the file. */
export function opensForWriting(flags) {
  return (flags & O_ACCMODE) !== 0 || (flags & (O_CREAT | O_TRUNC)) !== 0;
}

/** Writes the workspace snapshot at its paths; the roots always exist. Before any wrapping. */
export function loadWorkspace(FS, workspace = {}) {
  for (const root of WORKSPACE_ROOTS) FS.mkdirTree(root);
  for (const [path, bytes] of Object.entries(workspace)) {
    FS.mkdirTree(path.slice(0, path.lastIndexOf("/")));
    FS.writeFile(path, bytes);
  }
}

/**
 * Empties the workspace roots (the files of a context's last run), before the next run's
 * snapshot is written: the workspace may have changed since, by other runs and tools.
 */
export function clearWorkspace(FS) {
  for (const root of WORKSPACE_ROOTS) {
    for (const name of FS.readdir(root)) if (name !== "." && name !== "..") removeTree(FS, `${root}/${name}`);
  }
}

function removeTree(FS, path) {
  const stat = FS.lstat(path);
  if (!FS.isDir(stat.mode)) return FS.unlink(path);
  for (const name of FS.readdir(path)) if (name !== "." && name !== "..") removeTree(FS, `${path}/${name}`);
  FS.rmdir(path);
}

/**
 * Wraps FS's operations for this run: policy checks under the roots and write-through.
 * @param rule the run's WriteRule; relay a RunRelay; warn(text) writes to stderr
 * @returns a function that puts FS's own operations back (before a context's next run)
 */
export function writeThrough(FS, { rule, relay, workspace = {}, warn }) {
  const sizes = new Map(Object.entries(workspace).map(([path, bytes]) => [path, bytes.byteLength]));
  let totalBytes = [...sizes.values()].reduce((sum, size) => sum + size, 0);
  const original = {};
  for (const name of ["open", "close", "unlink", "rmdir", "mkdir", "rename", "symlink", "truncate"]) original[name] = FS[name];
  const absolute = (path) => normalizePath(String(path), FS.cwd());
  const unwritable = (path) => inWorkspace(path) && rule.refusal(path) !== null;
  const refuseUnwritable = (path) => {
    if (unwritable(path)) throw new FS.ErrnoError(EACCES);
  };

  const sent = (path) => {
    let bytes;
    try {
      bytes = FS.readFile(path);
    } catch {
      return; // gone already (unlinked while open)
    }
    const total = totalBytes - (sizes.get(path) ?? 0) + bytes.byteLength;
    if (total > rule.limitBytes) {
      warn(`relay: ${path} was not saved: ${workspaceFullMessage(path, total, rule.limitBytes)}\n`);
      throw new FS.ErrnoError(ENOSPC);
    }
    sizes.set(path, bytes.byteLength);
    totalBytes = total;
    relay.fileWritten(path, bytes);
  };
  const removed = (path) => {
    if (!inWorkspace(path)) return;
    totalBytes -= sizes.get(path) ?? 0;
    sizes.delete(path);
    relay.fileRemoved(path);
  };

  FS.open = (path, flags, mode) => {
    const writing = typeof flags === "number" && opensForWriting(flags);
    if (writing && typeof path === "string") refuseUnwritable(absolute(path));
    const stream = original.open(path, flags, mode);
    // Through a symlink, the path opened is the stream's: check that one too.
    if (writing && unwritable(stream.path)) {
      original.close(stream);
      throw new FS.ErrnoError(EACCES);
    }
    return stream;
  };
  FS.close = (stream) => {
    const written = opensForWriting(stream.flags) && typeof stream.path === "string" && inWorkspace(stream.path) && !unwritable(stream.path);
    original.close(stream);
    if (written) sent(stream.path);
  };
  FS.truncate = (path, length) => {
    const target = typeof path === "string" ? absolute(path) : null;
    if (target) refuseUnwritable(target);
    original.truncate(path, length);
    if (target && inWorkspace(target)) sent(target);
  };
  FS.unlink = (path) => {
    const target = absolute(path);
    refuseUnwritable(target);
    original.unlink(path);
    removed(target);
  };
  FS.rmdir = (path) => {
    const target = absolute(path);
    refuseUnwritable(target);
    if (WORKSPACE_ROOTS.includes(target)) throw new FS.ErrnoError(EBUSY);
    original.rmdir(path);
  };
  FS.mkdir = (path, mode) => {
    refuseUnwritable(absolute(path));
    return original.mkdir(path, mode);
  };
  FS.rename = (from, to) => {
    const [source, target] = [absolute(from), absolute(to)];
    refuseUnwritable(source);
    refuseUnwritable(target);
    if (WORKSPACE_ROOTS.includes(source)) throw new FS.ErrnoError(EBUSY);
    const moved = filesUnder(FS, source);
    original.rename(from, to);
    for (const file of moved) {
      removed(file);
      const destination = target + file.slice(source.length);
      if (inWorkspace(destination)) sent(destination);
    }
  };
  FS.symlink = (target, linkpath) => {
    const link = absolute(linkpath);
    const pointsTo = normalizePath(String(target), link.slice(0, link.lastIndexOf("/")) || "/");
    if (inWorkspace(link) || inWorkspace(pointsTo)) throw new FS.ErrnoError(EPERM);
    return original.symlink(target, linkpath);
  };
  return () => Object.assign(FS, original);
}

/** `path` itself if it is a file, else every file below it. */
function filesUnder(FS, path) {
  let stat;
  try {
    stat = FS.lstat(path);
  } catch {
    return [];
  }
  if (!FS.isDir(stat.mode)) return [path];
  return FS.readdir(path)
    .filter((name) => name !== "." && name !== "..")
    .flatMap((name) => filesUnder(FS, `${path}/${name}`));
}
