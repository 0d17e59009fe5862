// A relay session's workspace: the files under /tmp, /out, /host and /mcps that outlive a run,
// kept by the page (the runner workers live in an opaque origin with no storage). Each run gets
// a snapshot of it with its job; the runner posts every change back as it happens (write-through,
// lib/runner-host.js), and the page applies it here, so writes survive a timeout, a cancel and a
// page reload.
//
// Stored in the Origin Private File System (a directory per relay session, nested directories
// for path segments, each name percent-encoded) or, where OPFS is missing, in IndexedDB (a
// database per relay session, one record per path). The whole workspace is read into memory
// when it is opened and kept in step: reads never wait for storage. Changes are applied one at a
// time, in the order they were asked for, and the in-memory view changes only once storage did.
//
// The workspace checks the shape of every path (a last line of defence for OPFS names), not the
// run's policy: that is the caller's job (lib/runner-host.js).

import { WORKSPACE_LIMIT_BYTES, workspaceFullMessage, workspacePathProblem } from "./workspace-rules.js";

export { WORKSPACE_LIMIT_BYTES } from "./workspace-rules.js";

const OPFS_DIRECTORY = "relay-workspace";
const IDB_PREFIX = "relay-workspace/";
const IDB_STORE = "files";

/**
 * Opens the workspace of relay session `name`, reading all of it into memory.
 * @param backend "opfs" | "indexeddb"; by default OPFS where the browser has it
 * @returns {Promise<Workspace>}
 */
export async function openWorkspace(name, { backend } = {}) {
  if (typeof name !== "string" || name === "") throw new Error("a workspace needs the relay session's name");
  const chosen = backend ?? ((await hasOpfs()) ? "opfs" : "indexeddb");
  const store = chosen === "opfs" ? await OpfsStore.open(name) : chosen === "indexeddb" ? await IdbStore.open(name) : null;
  if (!store) throw new Error(`unknown workspace backend "${backend}": use "opfs" or "indexeddb"`);
  return new Workspace(chosen, store, await store.load());
}

async function hasOpfs() {
  try {
    await navigator.storage.getDirectory();
    return true;
  } catch {
    return false;
  }
}

export class Workspace {
  constructor(backend, store, files) {
    this.backend = backend;
    this.store = store;
    this.files = files; // Map path -> Uint8Array
    this.totalBytes = [...files.values()].reduce((sum, bytes) => sum + bytes.byteLength, 0);
    this.queue = Promise.resolve();
  }

  /** The files for a job: a plain object path -> Uint8Array (the workspace's own arrays: never mutate). */
  snapshot() {
    return Object.fromEntries(this.files);
  }

  read(path) {
    return this.files.get(path);
  }

  list() {
    return [...this.files.keys()].sort();
  }

  /** Stores `bytes` (a Uint8Array) at `path`, replacing any file there. */
  write(path, bytes) {
    return this.serialized(async () => {
      checkPath(path);
      if (!(bytes instanceof Uint8Array)) throw new TypeError(`the contents of ${path} must be a Uint8Array`);
      this.checkTree(path);
      const total = this.totalBytes - (this.files.get(path)?.byteLength ?? 0) + bytes.byteLength;
      if (total > WORKSPACE_LIMIT_BYTES) throw outputLimitExceeded(path, total);
      const owned = bytes.slice();
      await this.store.write(path, owned);
      this.files.set(path, owned);
      this.totalBytes = total;
    });
  }

  /** Deletes the file at `path`; nothing happens if there is none. */
  remove(path) {
    return this.serialized(async () => {
      checkPath(path);
      const old = this.files.get(path);
      if (!old) return;
      await this.store.remove(path);
      this.files.delete(path);
      this.totalBytes -= old.byteLength;
    });
  }

  /** Runs `change` after every change asked for before it; a failure does not stop the next. */
  serialized(change) {
    const done = this.queue.then(change);
    this.queue = done.catch(() => {});
    return done;
  }

  /** A file cannot also be a directory: refuses a path below a file, or above one. */
  checkTree(path) {
    for (let end = path.indexOf("/", 1); end !== -1; end = path.indexOf("/", end + 1)) {
      if (this.files.has(path.slice(0, end))) throw new Error(`cannot write ${path}: ${path.slice(0, end)} is a file`);
    }
    const below = `${path}/`;
    for (const other of this.files.keys()) {
      if (other.startsWith(below)) throw new Error(`cannot write ${path}: it is a directory (it holds ${other})`);
    }
  }
}

function checkPath(path) {
  const problem = workspacePathProblem(path);
  if (problem) throw new Error(`refused workspace path: ${problem}`);
}

function outputLimitExceeded(path, total) {
  const error = new Error(workspaceFullMessage(path, total));
  error.name = "OutputLimitExceeded";
  return error;
}

/** The workspace as nested OPFS directories under relay-workspace/<session>/. */
class OpfsStore {
  static async open(name) {
    const root = await navigator.storage.getDirectory();
    const all = await root.getDirectoryHandle(OPFS_DIRECTORY, { create: true });
    return new OpfsStore(await all.getDirectoryHandle(encodeURIComponent(name), { create: true }));
  }

  constructor(directory) {
    this.directory = directory;
  }

  async load(directory = this.directory, prefix = "", files = new Map()) {
    for await (const [name, handle] of directory.entries()) {
      const path = `${prefix}/${decodeURIComponent(name)}`;
      if (handle.kind === "directory") await this.load(handle, path, files);
      else files.set(path, new Uint8Array(await (await handle.getFile()).arrayBuffer()));
    }
    return files;
  }

  async write(path, bytes) {
    const { directory, name } = await this.parentOf(path, true);
    const file = await directory.getFileHandle(name, { create: true });
    const writable = await file.createWritable(); // written aside, swapped in on close
    await writable.write(bytes);
    await writable.close();
  }

  async remove(path) {
    const { directory, name, chain } = await this.parentOf(path, false);
    await directory.removeEntry(name);
    // Directories are implicit in a workspace: drop the ones this left empty.
    for (let i = chain.length - 1; i > 0; i--) {
      if (!(await isEmpty(chain[i].directory))) break;
      await chain[i - 1].directory.removeEntry(chain[i].name);
    }
  }

  /** The directory holding `path` (made if `create`), its name there, and the directories on the way. */
  async parentOf(path, create) {
    const segments = path.slice(1).split("/").map(encodeURIComponent);
    const name = segments.pop();
    let directory = this.directory;
    const chain = [{ directory, name: "" }];
    for (const segment of segments) {
      directory = await directory.getDirectoryHandle(segment, { create });
      chain.push({ directory, name: segment });
    }
    return { directory, name, chain };
  }
}

async function isEmpty(directory) {
  for await (const _ of directory.keys()) return false;
  return true;
}

/** The workspace as one IndexedDB database per relay session: path -> bytes. */
class IdbStore {
  static async open(name) {
    const request = indexedDB.open(IDB_PREFIX + name, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(IDB_STORE);
    return new IdbStore(await settled(request));
  }

  constructor(db) {
    this.db = db;
  }

  async load() {
    const store = this.db.transaction(IDB_STORE).objectStore(IDB_STORE);
    const [keys, values] = await Promise.all([settled(store.getAllKeys()), settled(store.getAll())]);
    return new Map(keys.map((key, i) => [key, values[i]]));
  }

  write(path, bytes) {
    return this.change((store) => store.put(bytes, path));
  }

  remove(path) {
    return this.change((store) => store.delete(path));
  }

  /** Resolves once the change is committed, not merely requested. */
  change(apply) {
    const transaction = this.db.transaction(IDB_STORE, "readwrite");
    apply(transaction.objectStore(IDB_STORE));
    return new Promise((resolve, reject) => {
      transaction.oncomplete = () => resolve();
      transaction.onerror = transaction.onabort = () => reject(transaction.error ?? new Error("the IndexedDB change was aborted"));
    });
  }
}

function settled(request) {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}
