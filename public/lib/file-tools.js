// The file tools (`read`, `write`, `search`) executed on this tab's workspace, as the relay
// session's DO sends them in a `file` command: {runId, tool, arguments, filesystem}. The edge has
// checked the arguments already; the paths are checked again here with the same rule (the Rust
// policy compiled to wasm, lib/policy.js) before any file is touched, and the search runs the
// core's linear-time engine from the same module (off the page's thread: lib/searcher.js). No
// runtime is loaded: these are cheap.

import { concatBytes, fromBase64, toBase64 } from "./bytes.js";
import { failure, isErrorName, namedError } from "./errors.js";

const encoder = new TextEncoder();

/**
 * Runs one file tool.
 * @returns {Promise<{value} | {exitCode, error: {name, message}}>} the tool's structuredContent, or its failure
 */
export async function runFileTool(workspace, policy, { tool, arguments: args, filesystem }) {
  try {
    const run = TOOLS[tool];
    if (!run) return failure("ValidationError", `unknown file tool ${JSON.stringify(tool)}`);
    return await run(workspace, policy, args, filesystem);
  } catch (err) {
    return failure(isErrorName(err.name) ? err.name : "Internal", err.message);
  }
}

const TOOLS = {
  read(workspace, policy, { path, encoding = "utf-8", maxBytes = 1 << 20, offset = 0 }, filesystem) {
    path = checked(policy, filesystem, path, "read");
    const bytes = workspace.read(path);
    if (!bytes) return { value: listing(workspace, path, encoding) };
    if (offset > bytes.length) throw namedError("ValidationError", `offset ${offset} is past the end of ${path} (${bytes.length} bytes)`);
    let end = Math.min(bytes.length, offset + maxBytes);
    if (encoding === "utf-8") end = charBoundary(bytes, offset, end);
    const slice = bytes.subarray(offset, end);
    const value = { path, encoding, size: bytes.length, offset, bytesRead: slice.length, truncated: end < bytes.length };
    return { value: { ...value, content: encoding === "base64" ? toBase64(slice) : utf8(slice, path) } };
  },

  write(workspace, policy, { path, content, encoding = "utf-8", mode = "create" }, filesystem) {
    path = checked(policy, filesystem, path, "write");
    const existing = workspace.read(path);
    if (existing && mode === "create") {
      throw namedError("ValidationError", `${path} already exists; use mode "overwrite" to replace it or "append" to add to it`);
    }
    const added = encoding === "base64" ? fromBase64(content) : encoder.encode(content);
    const bytes = mode === "append" && existing ? concatBytes([existing, added]) : added;
    return workspace.write(path, bytes).then(() => ({ value: { path, bytesWritten: added.length, size: bytes.length } }));
  },

  async search(workspace, policy, args, filesystem) {
    const paths = (args.paths ?? []).map((path) => checked(policy, filesystem, path, "read"));
    const files = workspace.list().map((path) => [path, workspace.read(path)]);
    return { value: await policy.search({ ...args, paths }, files) };
  },
};

/**
 * A read of a directory: its entries (files with their sizes, then subdirectories with a
 * trailing "/" and the size of all they hold), as text, one per line, and as `entries`.
 */
function listing(workspace, path, encoding) {
  const prefix = `${path}/`;
  const sizes = new Map(); // entry name -> {type, size}
  for (const file of workspace.list().filter((p) => p.startsWith(prefix))) {
    const [name, ...rest] = file.slice(prefix.length).split("/");
    const entry = sizes.get(name) ?? { name: rest.length ? `${name}/` : name, type: rest.length ? "directory" : "file", size: 0 };
    entry.size += workspace.read(file).length;
    sizes.set(name, entry);
  }
  if (!sizes.size) {
    throw namedError("ValidationError", `no file or directory ${path} in this relay session's workspace; read its parent directory to see what is there`);
  }
  const entries = [...sizes.values()].sort((a, b) => a.name.localeCompare(b.name));
  const text = encoder.encode(entries.map(({ name, size }) => `${name}\t${size}`).join("\n"));
  const content = encoding === "base64" ? toBase64(text) : new TextDecoder().decode(text);
  return { path, encoding, content, size: text.length, offset: 0, bytesRead: text.length, truncated: false, entries };
}

/** The normalized path if the policy admits `access`, else a PolicyDenied error. */
function checked(policy, filesystem, path, access) {
  const verdict = policy.checkPath(filesystem, path, access);
  if (!verdict.allow) throw namedError("PolicyDenied", verdict.reason);
  return verdict.path;
}

/** `end`, moved back off the middle of a UTF-8 character when the read stops early. */
function charBoundary(bytes, start, end) {
  if (end >= bytes.length) return end;
  let cut = end;
  while (cut > start && cut > end - 4 && (bytes[cut] & 0xc0) === 0x80) cut--;
  return cut > start ? cut : end;
}

function utf8(bytes, path) {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw namedError("ValidationError", `${path} is not UTF-8 text; read it with encoding "base64"`);
  }
}

