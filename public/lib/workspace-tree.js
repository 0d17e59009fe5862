// The workspace's files in memory (lib/workspace.js): by path, with how many files lie under
// each directory and their total size, so that no change looks at more than its own path. A
// batch of changes is checked against a PendingTree over the workspace's FileTree, which it
// leaves untouched until the batch is stored. Pure, no I/O.

/** Files by path, with how many files lie under each directory, and their total size. */
export class FileTree {
  constructor(files = new Map()) {
    this.files = files;
    // directory -> files under it, at any depth: this tree's own count (a PendingTree's is
    // what its changes add to the base's, and may be negative)
    this.dirs = new Map();
    this.totalBytes = 0;
    for (const [path, bytes] of files) this.count(path, null, bytes);
  }

  get(path) {
    return this.files.get(path);
  }

  filesUnder(dir) {
    return this.dirs.get(dir) ?? 0;
  }

  /** Puts `bytes` at `path`, or removes it when `bytes` is null. */
  set(path, bytes) {
    this.count(path, this.get(path), bytes);
    if (bytes) this.files.set(path, bytes);
    else this.files.delete(path);
  }

  /** Accounts for `path` changing from `old` to `bytes` (either may be null: no file). */
  count(path, old, bytes) {
    this.totalBytes += (bytes?.byteLength ?? 0) - (old?.byteLength ?? 0);
    if (!old === !bytes) return;
    for (let end = path.lastIndexOf("/"); end > 0; end = path.lastIndexOf("/", end - 1)) {
      const dir = path.slice(0, end);
      // Its own count, not filesUnder(): a PendingTree's filesUnder() adds the base's.
      const files = (this.dirs.get(dir) ?? 0) + (bytes ? 1 : -1);
      if (files) this.dirs.set(dir, files);
      else this.dirs.delete(dir);
    }
  }
}

/** A FileTree as a batch of changes would leave `base`, which it does not touch. */
export class PendingTree extends FileTree {
  constructor(base) {
    super();
    this.base = base;
    this.totalBytes = base.totalBytes;
  }

  get(path) {
    return this.files.has(path) ? this.files.get(path) : this.base.get(path);
  }

  filesUnder(dir) {
    return this.base.filesUnder(dir) + super.filesUnder(dir);
  }

  /** Keeps a removal as null: `files` is the batch's changes. */
  set(path, bytes) {
    this.count(path, this.get(path), bytes);
    this.files.set(path, bytes);
  }

  /** [path, bytes] of every file the workspace holds after the batch. */
  *entries() {
    for (const entry of this.base.files) if (!this.files.has(entry[0])) yield entry;
    for (const entry of this.files) if (entry[1]) yield entry;
  }
}
