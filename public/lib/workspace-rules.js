// The rules of a relay session's workspace that the page (lib/workspace.js, lib/runner-host.js)
// and the runner workers (runner/*) must apply alike: which paths belong to the workspace, how
// big it may grow, and which writes a run's filesystem policy allows. Pure functions, no I/O.
//
// Paths are absolute and compared segment by segment, as relay-core's src/policy/fs_path.rs
// does (`/tmp` holds `/tmp/x`, not `/tmpx`). The policy check here mirrors relay-core's
// `is_within`; the page may swap in the Rust policy compiled to wasm without changing callers.

/** The directories the workspace keeps; everything else in a runtime's filesystem is per run. */
export const WORKSPACE_ROOTS = ["/tmp", "/out", "/host", "/mcps"];
/** The MCP servers' files: readable, never writable, whatever the policy says. */
export const READ_ONLY_ROOT = "/mcps";
/** The most a workspace may hold, all files together. */
export const WORKSPACE_LIMIT_BYTES = 64 * 1024 * 1024;
export const MAX_PATH_LENGTH = 1024;
/** relay-core's default FsPolicy, for a job that names none. */
export const DEFAULT_FILESYSTEM = Object.freeze({ readonly: ["/"], writable: ["/tmp", "/out"] });

/**
 * Why `path` cannot name a workspace file (a string), or null when it can: a string under
 * MAX_PATH_LENGTH of the form /<root>/<segment>... with no empty, ".", ".." or NUL segment.
 */
export function workspacePathProblem(path) {
  if (typeof path !== "string") return "a workspace path must be a string";
  if (path.length >= MAX_PATH_LENGTH) return `a workspace path must be shorter than ${MAX_PATH_LENGTH} characters`;
  const [empty, root, ...rest] = path.split("/");
  const where = `${WORKSPACE_ROOTS.join(", ")}`;
  if (empty !== "" || !WORKSPACE_ROOTS.includes(`/${root}`) || rest.length === 0) {
    return `"${path}" is not a file path under one of ${where}`;
  }
  if (rest.some((segment) => segment === "" || segment === "." || segment === ".." || segment.includes("\0"))) {
    return `"${path}" has an empty, ".", ".." or NUL segment`;
  }
  return null;
}

/** Whether `path` (absolute, normalized) is a root of the workspace or lies under one. */
export function inWorkspace(path) {
  return WORKSPACE_ROOTS.some((root) => isWithin(path, root));
}

/** Whether `path` is `root` or lies under it; both absolute and normalized. */
export function isWithin(path, root) {
  const base = root.length > 1 && root.endsWith("/") ? root.slice(0, -1) : root;
  return base === "/" || path === base || path.startsWith(`${base}/`);
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

/**
 * Why the run's policy forbids writing (creating, changing, removing) `path`, or null when it
 * allows it. `path` is absolute and normalized; `filesystem` is the run's {readonly, writable}.
 */
export function deniedWrite(path, filesystem = DEFAULT_FILESYSTEM) {
  const writable = filesystem.writable ?? [];
  const allowed = writable.length
    ? `this run may write only under ${writable.join(", ")} (policy.filesystem.writable)`
    : "this run may not write files (policy.filesystem.writable is empty)";
  if (isWithin(path, READ_ONLY_ROOT)) return `writing ${path} is not allowed: ${READ_ONLY_ROOT} is read-only; ${allowed}`;
  if (writable.some((root) => isWithin(path, root))) return null;
  return `writing ${path} is not allowed: ${allowed}`;
}

/** The error message of a write that would take the workspace past WORKSPACE_LIMIT_BYTES. */
export function workspaceFullMessage(path, totalBytes) {
  const mib = WORKSPACE_LIMIT_BYTES / (1024 * 1024);
  return `writing ${path} would make the workspace ${totalBytes} bytes, over its limit of ${mib} MiB (${WORKSPACE_LIMIT_BYTES} bytes); delete files under /tmp or /out you no longer need (fs.rmSync in JavaScript, os.remove or shutil.rmtree in Python) and write again`;
}
