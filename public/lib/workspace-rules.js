// The rules of a relay session's workspace that the page (lib/workspace.js, lib/runner-host.js)
// and the runner workers (runner/*) must apply alike: which paths belong to the workspace, how
// big it may grow, and which writes a run may make. The path rule itself is relay-core's
// `check_path` (src/policy/fs_path.rs) in policy.wasm, never a copy: the page has its instance
// (lib/policy.js), each runner worker its own of the same module (runner/write-rule.js), and
// both pass it here. So a write the runner lets through is one the page stores, and one the
// page would refuse fails in the guest with check_path's sentence.

/** The directories the workspace keeps; everything else in a runtime's filesystem is per run. */
export const WORKSPACE_ROOTS = ["/tmp", "/out", "/host", "/mcps"];
/** The most a workspace may hold, all files together, unless the relay session says its tenant's cap. */
export const WORKSPACE_LIMIT_BYTES = 64 * 1024 * 1024;
/** relay-core's default FsPolicy, for a job that names none. */
export const DEFAULT_FILESYSTEM = Object.freeze({ readonly: ["/"], writable: ["/tmp", "/out"] });
// Reads anywhere in the workspace: a read check of a path tests only its shape and root.
const ANY_READ = Object.freeze({ readonly: ["/"], writable: [] });

/**
 * Why the run's policy refuses writing (creating, changing, removing) `path`, or null when the
 * page stores such a change: check_path's verdict for a write.
 * @param policy policy.wasm's checks; filesystem the run's {readonly, writable}
 */
export function writeRefusal(policy, filesystem, path) {
  return problemOf(policy.checkPath(filesystem, path, "write"), path);
}

/** Why `path` cannot name a file of the workspace (check_path's syntax, below a root), or null. */
export function workspacePathProblem(policy, path) {
  const problem = problemOf(policy.checkPath(ANY_READ, path, "read"), path);
  if (problem || !WORKSPACE_ROOTS.includes(path)) return problem;
  return `path ${JSON.stringify(path)} is a root of the workspace, not a file`;
}

/**
 * A refusal's reason; an allowed path must also come back as it went in (check_path drops a
 * trailing "/"; the runners send paths they resolved, which it never changes).
 */
function problemOf(verdict, path) {
  if (!verdict.allow) return verdict.reason;
  return verdict.path === path ? null : `path ${JSON.stringify(path)} ends with "/"; name the file as ${JSON.stringify(verdict.path)}`;
}

/** Whether `path` (absolute, normalized) is a root of the workspace or lies under one. */
export function inWorkspace(path) {
  return WORKSPACE_ROOTS.some((root) => path === root || path.startsWith(`${root}/`));
}

/** `path` made absolute against `cwd`, with ".", ".." and empty segments resolved like POSIX. */
export function normalizePath(path, cwd = "/") {
  const joined = path.startsWith("/") ? path : `${cwd}/${path}`;
  const parts = [];
  for (const part of joined.split("/")) {
    if (part === "..") parts.pop();
    else if (part && part !== ".") parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/** The error message of a write that would take the workspace past `limit` bytes. */
export function workspaceFullMessage(path, totalBytes, limit = WORKSPACE_LIMIT_BYTES) {
  const mib = limit / (1024 * 1024);
  return `writing ${path} would make the workspace ${totalBytes} bytes, over its limit of ${mib} MiB (${limit} bytes); delete files under /tmp or /out you no longer need (fs.rmSync in JavaScript, os.remove or shutil.rmtree in Python) and write again`;
}
