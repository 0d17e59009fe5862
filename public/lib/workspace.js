// A relay session's workspace: the files under /tmp, /out, /host and /mcps that outlive a run,
// kept by the page (the runner workers live in an opaque origin with no storage). Each run gets
// a snapshot of it with its job; the runner posts every change back as it happens (write-through,
// lib/runner-host.js), and the page applies it here, so writes survive a timeout, a cancel and a
// page reload.
//
// The whole workspace is read into memory when it is opened and kept in step: reads never wait
// for storage. Changes are applied in the order they were asked for, and the in-memory view
// changes only once storage did. The changes waiting when storage is free are checked in order
// (each against the workspace as the ones before it leave it) and stored together, in one write:
// a run that makes or deletes 10,000 files costs a few writes, not 10,000. No change looks at
// more than its own path: which paths are directories is counted, not searched for
// (lib/workspace-tree.js).
//
// Stored in the Origin Private File System as a log (a directory per relay session under
// relay-workspace/, names percent-encoded): `base-<n>` holds the whole workspace, each `log-<n>`
// one batch of changes after it (lib/workspace-records.js). When the logs outweigh the workspace,
// or are many, the next batch writes a new base instead, and what it replaces is deleted. Tabs of
// one relay session in one browser share the directory: each batch is stored under a Web Lock,
// after reading what other tabs stored since. Where OPFS is missing, in IndexedDB (a database per
// relay session, one record per path, a batch per transaction).
//
// The workspace checks the shape of every path (relay-core's check_path, lib/workspace-rules.js),
// not the run's policy: that is the caller's job (lib/runner-host.js).

import { loadPolicy } from "./policy.js";
import { encodeRecords, records } from "./workspace-records.js";
import { FileTree, PendingTree } from "./workspace-tree.js";
import { WORKSPACE_LIMIT_BYTES, workspaceFullMessage, workspacePathProblem } from "./workspace-rules.js";

const OPFS_DIRECTORY = "relay-workspace";
const IDB_PREFIX = "relay-workspace/";
const IDB_STORE = "files";
// The most one batch holds (a single larger file is a batch of its own), so that a log stays a
// size the page can build and write at once.
const MAX_BATCH_BYTES = 16 << 20;
// A new base replaces the logs once there are this many (each is read when the page opens)...
const MAX_LOGS = 128;
// ...or once they hold more bytes than the workspace itself (and this much at least): a base
// costs the workspace's size to write, paid for by at least as many bytes of logs before it.
const MIN_LOG_BYTES = 1 << 20;

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
  const [stored, policy] = await Promise.all([store.load(), loadPolicy()]);
  const workspace = new Workspace(chosen, store, policy);
  workspace.takeIn(stored);
  return workspace;
}

/** OPFS as the workspace needs it: writable files (Safari had OPFS long before createWritable) and Web Locks. */
async function hasOpfs() {
  try {
    await navigator.storage.getDirectory();
    return Boolean(navigator.locks) && "createWritable" in FileSystemFileHandle.prototype;
  } catch {
    return false;
  }
}

export class Workspace {
  constructor(backend, store, policy) {
    this.backend = backend;
    this.store = store;
    this.policy = policy;
    this.tree = new FileTree();
    this.limitBytes = WORKSPACE_LIMIT_BYTES; // the tenant's cap, once the relay session says it (workspace-sync.js)
    this.waiting = []; // changes asked for, not stored yet: {path, bytes (null: remove), resolve, reject}
    this.storing = false;
    // Paths other tabs of this browser stored changes at, taken in since workspace-sync.js last
    // asked; null for all of them (a newer base).
    this.tookFromOthers = new Set();
  }

  get totalBytes() {
    return this.tree.totalBytes;
  }

  /** The files for a job: a plain object path -> Uint8Array (the workspace's own arrays: never mutate). */
  snapshot() {
    return Object.fromEntries(this.tree.files);
  }

  read(path) {
    return this.tree.get(path);
  }

  list() {
    return [...this.tree.files.keys()].sort();
  }

  /**
   * Stores `bytes` (a Uint8Array) at `path`, replacing any file there. `mirrored`: the relay
   * session's own file, taken as it holds it (workspace-sync.js), which its cap judged already:
   * on the way from one state to the next this copy may pass the cap (a file grows before
   * another shrinks), so only runs' writes are held to it here.
   */
  write(path, bytes, { mirrored = false } = {}) {
    return this.change(path, bytes instanceof Uint8Array ? bytes.slice() : bytes, mirrored);
  }

  /** Deletes the file at `path`; nothing happens if there is none. */
  remove(path) {
    return this.change(path, null);
  }

  /** Settles once the change is stored, or refused; a refusal does not stop the next. */
  change(path, bytes, mirrored = false) {
    return new Promise((resolve, reject) => {
      this.waiting.push({ path, bytes, mirrored, resolve, reject });
      if (!this.storing) this.storeWaiting();
    });
  }

  async storeWaiting() {
    this.storing = true;
    try {
      while (this.waiting.length) await this.store.exclusive(() => this.storeBatch(this.takeBatch()));
    } catch (err) {
      for (const change of this.waiting.splice(0)) change.reject(err); // the lock itself failed
    } finally {
      this.storing = false;
    }
  }

  /** The changes waiting, from the oldest, up to MAX_BATCH_BYTES (at least one). */
  takeBatch() {
    let bytes = 0;
    let count = 0;
    for (const { bytes: data } of this.waiting) {
      bytes += data?.byteLength ?? 0;
      if (count && bytes > MAX_BATCH_BYTES) break;
      count++;
    }
    return this.waiting.splice(0, count);
  }

  /**
   * Takes in what other tabs stored, checks each change of `batch` in order, stores those that
   * pass in one write, then shows them. Settles every change; never throws.
   */
  async storeBatch(batch) {
    const accepted = [];
    try {
      const newer = await this.store.newer();
      if (newer?.files) this.tookFromOthers = null;
      for (const path of newer?.changes?.keys() ?? []) this.tookFromOthers?.add(path);
      this.takeIn(newer);
      const pending = new PendingTree(this.tree);
      for (const change of batch) {
        try {
          this.check(pending, change);
          if (change.bytes || pending.get(change.path)) pending.set(change.path, change.bytes);
          accepted.push(change);
        } catch (err) {
          change.reject(err);
        }
      }
      if (pending.files.size) await this.store.apply(pending.files, pending);
      for (const [path, bytes] of pending.files) this.tree.set(path, bytes);
    } catch (err) {
      for (const change of batch) change.reject(err); // no effect on those settled already
      return;
    }
    for (const change of accepted) change.resolve();
  }

  /** What the store read (when opened, or from other tabs since): a whole workspace, or changes. */
  takeIn(newer) {
    if (newer?.files) this.tree = new FileTree(newer.files);
    for (const [path, bytes] of newer?.changes ?? []) this.tree.set(path, bytes);
  }

  /** Throws why `change` cannot be applied to the workspace as `pending` holds it. */
  check(pending, { path, bytes, mirrored }) {
    const problem = workspacePathProblem(this.policy, path);
    if (problem) throw new Error(`refused workspace path: ${problem}`);
    if (bytes === null) return;
    if (!(bytes instanceof Uint8Array)) throw new TypeError(`the contents of ${path} must be a Uint8Array`);
    // A file cannot also be a directory: refuses a path below a file, or above one.
    for (let end = path.indexOf("/", 1); end !== -1; end = path.indexOf("/", end + 1)) {
      if (pending.get(path.slice(0, end))) throw new Error(`cannot write ${path}: ${path.slice(0, end)} is a file`);
    }
    const below = pending.filesUnder(path);
    if (below) throw new Error(`cannot write ${path}: it is a directory (it holds ${below} file${below === 1 ? "" : "s"})`);
    const total = pending.totalBytes - (pending.get(path)?.byteLength ?? 0) + bytes.byteLength;
    if (total > this.limitBytes && !mirrored) throw outputLimitExceeded(path, total, this.limitBytes);
  }
}

function outputLimitExceeded(path, total, limit) {
  const error = new Error(workspaceFullMessage(path, total, limit));
  error.name = "OutputLimitExceeded";
  return error;
}

/**
 * The workspace as a log in OPFS, under relay-workspace/<session>/: `base-<n>` and `log-<n>`
 * files, `n` counting up across both; the newest base and the logs after it are the workspace.
 */
class OpfsStore {
  static async open(name) {
    const root = await navigator.storage.getDirectory();
    const all = await root.getDirectoryHandle(OPFS_DIRECTORY, { create: true });
    const directory = await all.getDirectoryHandle(encodeURIComponent(name), { create: true });
    return new OpfsStore(directory, `${OPFS_DIRECTORY}/${encodeURIComponent(name)}`);
  }

  constructor(directory, lockName) {
    this.directory = directory;
    this.lockName = lockName;
    this.seq = 0; // the newest base or log this tab has read or written
    this.logCount = 0; // logs after the newest base
    this.logBytes = 0;
  }

  /** Runs `work` while no other tab of this browser changes this directory. */
  exclusive(work) {
    return navigator.locks.request(this.lockName, work);
  }

  /** All that is stored, as newer() gives it. */
  load() {
    return this.exclusive(async () => {
      const stored = await this.newer();
      if (stored?.migrate) await this.writeBase(stored.files); // the old layout's files, in a base now
      return stored;
    });
  }

  /**
   * What is stored past this tab's `seq` (other tabs', or all of it when the page opens):
   * `{files}` when there is a newer base (the whole workspace), else `{changes}` (path -> bytes,
   * null for a removal), or null when nothing is. Call it under exclusive().
   */
  async newer() {
    const { bases, logs, legacy } = await this.listing();
    const base = bases.at(-1);
    const rebased = base?.seq > this.seq;
    const from = rebased ? base.seq : this.seq;
    const later = logs.filter((log) => log.seq > from);
    const migrate = this.seq === 0 && !base && legacy.length > 0;
    if (!rebased && !later.length && !migrate) return null;
    const files = migrate ? await readLegacy(legacy) : rebased ? new Map() : null;
    if (rebased) {
      await this.readFiles(base.name, files);
      this.logCount = this.logBytes = 0;
    }
    const changes = files ?? new Map();
    for (const log of later) {
      const size = await this.readFiles(log.name, changes, !files);
      this.logCount++;
      this.logBytes += size;
    }
    this.seq = Math.max(from, ...later.map((log) => log.seq));
    return files ? { files, migrate } : { changes };
  }

  /**
   * Applies file `name`'s records to `into`; a removal deletes, or is kept as null with
   * `keepRemovals`. Returns the file's size.
   */
  async readFiles(name, into, keepRemovals = false) {
    const buffer = await (await (await this.directory.getFileHandle(name)).getFile()).arrayBuffer();
    try {
      for (const [path, bytes] of records(buffer)) {
        if (bytes || keepRemovals) into.set(path, bytes);
        else into.delete(path);
      }
    } catch (err) {
      throw new Error(`the workspace's stored file ${name} cannot be read: ${err.message}`);
    }
    return buffer.byteLength;
  }

  /** The bases, the logs (each by `seq`) and the directories of the old layout, in order. */
  async listing() {
    const bases = [];
    const logs = [];
    const legacy = [];
    for await (const [name, handle] of this.directory.entries()) {
      const [, kind, seq] = /^(base|log)-(\d+)$/.exec(name) ?? [];
      if (handle.kind === "directory") legacy.push(handle);
      else if (kind) (kind === "base" ? bases : logs).push({ name, seq: Number(seq) });
    }
    const bySeq = (a, b) => a.seq - b.seq;
    return { bases: bases.sort(bySeq), logs: logs.sort(bySeq), legacy };
  }

  /**
   * Stores a batch: `changes` (path -> bytes, null for a removal) as the next log, or the whole
   * workspace as it will be (`after`: a PendingTree) as the next base when the logs are due.
   */
  async apply(changes, after) {
    const log = encodeRecords(changes);
    if (this.logCount >= MAX_LOGS || this.logBytes + log.size > Math.max(after.totalBytes, MIN_LOG_BYTES)) {
      return this.writeBase(after.entries());
    }
    await this.writeFile(`log-${this.seq + 1}`, log.blob);
    this.seq++;
    this.logCount++;
    this.logBytes += log.size;
  }

  /** Writes `files` ([path, bytes] pairs) as the next base, then deletes all it replaces. */
  async writeBase(files) {
    const name = `base-${this.seq + 1}`;
    await this.writeFile(name, encodeRecords(files).blob);
    this.seq++;
    this.logCount = this.logBytes = 0;
    const replaced = [];
    for await (const [entry, handle] of this.directory.entries()) if (entry !== name) replaced.push([entry, handle.kind]);
    // The base is stored: what it replaces is never read again, so a file that cannot be
    // deleted now is left for the next base to delete.
    for (const [entry, kind] of replaced) await this.directory.removeEntry(entry, { recursive: kind === "directory" }).catch(() => {});
  }

  async writeFile(name, blob) {
    const file = await this.directory.getFileHandle(name, { create: true });
    const writable = await file.createWritable(); // written aside, swapped in on close
    await writable.write(blob);
    await writable.close();
  }
}

/** The files of the old layout: a directory per path segment, each name percent-encoded. */
async function readLegacy(directories, prefix = "", files = new Map()) {
  for (const directory of directories) {
    const path = `${prefix}/${decodeURIComponent(directory.name)}`;
    for await (const handle of directory.values()) {
      if (handle.kind === "directory") await readLegacy([handle], path, files);
      else files.set(`${path}/${decodeURIComponent(handle.name)}`, new Uint8Array(await (await handle.getFile()).arrayBuffer()));
    }
  }
  return files;
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
    return { files: new Map(keys.map((key, i) => [key, values[i]])) };
  }

  /** Each record is its own: nothing to exclude or take in (tabs see one another's on reload). */
  exclusive(work) {
    return work();
  }

  newer() {
    return null;
  }

  /** Stores the batch in one transaction; resolves once it is committed, not merely requested. */
  apply(changes) {
    const transaction = this.db.transaction(IDB_STORE, "readwrite");
    const store = transaction.objectStore(IDB_STORE);
    for (const [path, bytes] of changes) {
      if (bytes) store.put(bytes, path);
      else store.delete(path);
    }
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
