// The tab's workspace as a cache of the relay session's (docs/ARCHITECTURE.md "The workspace"):
// the relay session's DO holds the index (path -> sha256, size) and the bodies; this tab keeps a
// copy (lib/workspace.js, in OPFS) that it brings up to the relay session's version before each
// run, and it sends what a run writes up as the run makes it, committed by the relay session in
// run order.
//
// - sync(runId, delta): GET /session/<id>/workspace?since=<the version this tab holds>&run=<runId>
//   (the whole index the first time), then each body it lacks by its hash
//   (GET /session/<id>/workspace/bodies/<sha256>), checked against the hash before it is kept.
//   A run's command may carry that answer itself (`workspace`: the changes since the version
//   the relay session last gave this tab): applied, with no GET, when this copy is at its `since`.
// - writer(runToken): a run's changes, batched: bodies over INLINE_MAX_BYTES first
//   (PUT /workspace/bodies/<sha256>), then POST /workspace/commit, at most MAX_COMMIT_CHANGES
//   at a time. The run's exit waits for done(), so what it wrote reaches the relay session first.
//
// /mcps is this tab's own (mcps-tree.js writes it from the relay session's listing): it is not in
// the index and a sync leaves it alone. Files this browser held before the relay session kept
// the workspace (before its first sync here) are kept in the tab only, and the page says so.

import { sha256Hex, toBase64 } from "./bytes.js";
import { fetchOk, isQuotaRefusal, withRetry } from "./http.js";

// relay-core's workspace::INLINE_MAX_BYTES and relay_session::workspace::MAX_COMMIT_CHANGES.
const INLINE_MAX_BYTES = 4096;
const MAX_COMMIT_CHANGES = 1000;
// Body uploads of one commit, and body fetches of one sync, in flight at once.
const UPLOADS_AT_ONCE = 6;
const FETCHES_AT_ONCE = 6;
const TAB_ONLY = "/mcps/";

export class WorkspaceSync {
  /**
   * @param options.workspace this tab's copy (lib/workspace.js)
   * @param options.session the relay session's name (which localStorage entry is this one's)
   * @param options.endpoint (action) => {url, headers} of a tab route (SessionClient.endpoint)
   * @param options.status where the page says what happened
   */
  constructor({ workspace, session, endpoint, status }) {
    this.workspace = workspace;
    this.syncedKey = `relay-workspace-synced/${session}`;
    this.endpoint = endpoint;
    this.status = status;
    this.version = null; // the relay session's version this copy is at; null: not synced yet
    this.hashes = new Map(); // path -> sha256 of the relay session's file this copy holds
    this.syncing = Promise.resolve();
  }

  /**
   * Brings this copy to the relay session's workspace (before run `runId`, if given); one sync
   * at a time. `delta`: the changes the run's command carried (relay_session::tab_sync), used
   * only when this copy is exactly at its `since`; otherwise, or if applying it fails, this asks.
   * Never while a run's writer has changes on their way (a sync not a run's own waits for
   * RunQueue.whenIdle): it would take the relay session's older bytes over them.
   */
  sync(runId, delta) {
    const next = this.syncing.catch(() => {}).then(() => this.syncOnce(runId, delta));
    this.syncing = next;
    return next;
  }

  async syncOnce(runId, delta) {
    const started = performance.now();
    let fetched = 0;
    let index;
    let passes = 0;
    this.forgetOthers();
    do {
      const carried = index === undefined && delta && this.version !== null && delta.since === this.version;
      const taken = carried ? await this.applyCarried(delta) : null;
      index = taken === null ? await this.index(runId) : delta;
      fetched += taken ?? (await this.apply(index));
      if (++passes === 3 && this.forgetOthers()) throw new Error("another tab of this browser kept storing changes to the workspace meanwhile");
    } while (this.forgetOthers());
    return { version: index.version, root: index.root, files: index.files.length, fetched, ms: performance.now() - started };
  }

  /**
   * Whether this copy took in what another tab of this browser stored since last asked (they
   * share its storage: that tab's runs' writes, the relay session's refusals of them too): then
   * the hashes of those paths are not trusted, nor the version, and the next index is the whole
   * one, each of those files checked.
   */
  forgetOthers() {
    const taken = this.workspace.tookFromOthers;
    if (taken?.size === 0) return false;
    this.workspace.tookFromOthers = new Set();
    if (taken === null) this.hashes.clear();
    for (const path of taken ?? []) this.hashes.delete(path);
    this.version = null;
    return true;
  }

  /** A run's carried changes applied: how many bodies it fetched; null when they could not be (the caller asks). */
  async applyCarried(delta) {
    try {
      return await this.apply(delta);
    } catch (err) {
      this.status.log(`Could not apply the workspace changes the run's command carried (${err.message}); asking the relay session`);
      return null;
    }
  }

  /** The relay session's index since the version this copy is at (all of it the first time). */
  async index(runId) {
    const { url, headers } = this.endpoint("workspace");
    const asked = new URL(url, location.href);
    if (this.version !== null) asked.searchParams.set("since", this.version);
    if (runId) asked.searchParams.set("run", runId);
    return withRetry(async () => (await fetchOk(asked, { headers })).json());
  }

  /**
   * Applies an index (or a delta): this copy is then at its version. How many bodies it fetched.
   * Removals first: the relay session's state is whole, the steps to it are not (a file that
   * became a directory, or made room for another, is written only once it is gone).
   */
  async apply(index) {
    this.workspace.limitBytes = index.maxBytes; // the tenant's cap: the runners hold to it
    for (const path of index.removed) await this.drop(path);
    if (index.full) await this.dropUnlisted(new Set(index.files.map((f) => f.path)));
    const taken = await pool(index.files, FETCHES_AT_ONCE, (file) => this.take(file));
    this.version = index.version;
    return taken.reduce((sum, n) => sum + n, 0);
  }

  /** Holds the relay session's `file`, fetching its body unless this copy has those bytes: 1 if fetched. */
  async take({ path, sha256 }) {
    const local = this.workspace.read(path);
    if (local && (this.hashes.get(path) ?? (await sha256Hex(local))) === sha256) {
      this.hashes.set(path, sha256);
      return 0;
    }
    await this.workspace.write(path, await this.body(sha256), { mirrored: true });
    this.hashes.set(path, sha256);
    return 1;
  }

  async drop(path) {
    this.hashes.delete(path);
    if (this.workspace.read(path)) await this.workspace.remove(path);
  }

  /** A body by its hash, refused unless it hashes to it. */
  async body(sha256) {
    const { url, headers } = this.endpoint(`workspace/bodies/${sha256}`);
    const bytes = new Uint8Array(await withRetry(async () => (await fetchOk(url, { headers })).arrayBuffer()));
    const actual = await sha256Hex(bytes);
    if (actual !== sha256) throw new Error(`the relay session sent a body whose sha256 is ${actual}, not ${sha256}; it was not kept`);
    return bytes;
  }

  /**
   * After a whole index: the files this copy holds that the relay session does not. Once this
   * browser has synced, they were removed there, and go here too; before (files from before the
   * relay session kept the workspace), they stay in this tab only.
   */
  async dropUnlisted(listed) {
    const unlisted = this.workspace.list().filter((path) => !listed.has(path) && !path.startsWith(TAB_ONLY));
    if (localStorage.getItem(this.syncedKey)) {
      for (const path of unlisted) await this.drop(path);
      return;
    }
    if (unlisted.length) await this.uploadFromBefore(unlisted);
    localStorage.setItem(this.syncedKey, "1");
  }

  /**
   * Uploads, once, the files this browser held before the relay session kept the workspace
   * (POST /session/<id>/workspace/upload: only paths the relay session has no file at, within
   * the cap and the tenant's policy), and says on the page what went up and what did not.
   */
  async uploadFromBefore(paths) {
    const { headers } = this.endpoint("workspace");
    const put = (sha256, body) => {
      const { url } = this.endpoint(`workspace/bodies/${sha256}`);
      return withRetry(() => fetchOk(url, { method: "PUT", headers, body }));
    };
    let uploaded = 0;
    for (let i = 0; i < paths.length; i += MAX_COMMIT_CHANGES) {
      const batch = paths.slice(i, i + MAX_COMMIT_CHANGES).map((path) => ({ path, bytes: this.workspace.read(path) }));
      const changes = await pool(batch, UPLOADS_AT_ONCE, ({ path, bytes }) => describe(path, bytes, put));
      const { url } = this.endpoint("workspace/upload");
      const init = { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ changes }) };
      const { results } = await withRetry(async () => (await fetchOk(url, init)).json());
      results.forEach((result, n) => {
        if (!result.error) {
          uploaded++;
          this.hashes.set(changes[n].path, changes[n].sha256);
        } else this.status.error(`${changes[n].path} from before stays in this tab only: ${result.error.name}: ${result.error.message}`);
      });
    }
    this.status.log(`Uploaded ${uploaded} of ${paths.length} file(s) this tab held from before the relay session kept the workspace`);
  }

  /**
   * Where run `runToken`'s changes go, from this tab as the relay session knows it when each
   * commit is sent (its results are judged by the same id): should the relay session have given
   * the run to another executor (this tab taken for gone before it acknowledged the run), it
   * keeps none of them.
   */
  writer(runToken) {
    return new RunWriter(this, runToken, () => this.endpoint("workspace").headers["x-relay-tab"]);
  }
}

/**
 * A run's changes on their way to the relay session (the edge executor's runner writes through
 * one too), committed in the order of each path's last change: a path changed again before its
 * change was sent keeps only the latest, so a loop rewriting one file holds one copy of it.
 */
export class RunWriter {
  /** @param tab () => the id of the tab that runs it (none at the edge) */
  constructor(sync, runToken, tab = () => undefined) {
    this.sync = sync;
    this.headers = { authorization: `Bearer ${runToken}` };
    this.tab = tab;
    this.waiting = new Map(); // path -> its latest unsent change: Uint8Array, or null (removed)
    this.heldBytes = 0; // bytes of the changes not yet committed, waiting or being sent
    this.draining = null;
    this.refused = []; // {path, name, message}
    this.failure = null;
  }

  /**
   * A change the run made (already stored in this tab). This copy's bytes at `path` are no longer
   * known to be the relay session's until the change is committed: a refused one must not leave
   * the old hash trusted, or the next sync keeps the bytes the relay session refused.
   */
  push(path, bytes) {
    this.sync.hashes.delete(path);
    this.heldBytes += (bytes?.length ?? 0) - (this.waiting.get(path)?.length ?? 0);
    this.waiting.delete(path); // so it goes after the changes made before this one
    this.waiting.set(path, bytes);
    this.draining ??= this.drain();
  }

  async drain() {
    try {
      while (this.waiting.size && !this.failure) {
        const batch = this.take(MAX_COMMIT_CHANGES);
        await this.commit(batch).finally(() => (this.heldBytes -= batch.reduce((sum, { bytes }) => sum + (bytes?.length ?? 0), 0)));
      }
    } catch (err) {
      this.failure = err;
    } finally {
      this.draining = null;
    }
  }

  /** The first `count` waiting changes, no longer waiting. */
  take(count) {
    const batch = [];
    for (const [path, bytes] of this.waiting) {
      if (batch.length === count) break;
      batch.push({ path, bytes });
      this.waiting.delete(path);
    }
    return batch;
  }

  /** Settles once every change is committed or refused: {refused, failure}. */
  async done() {
    while (this.draining) await this.draining;
    if (this.refused.length || this.failure) this.sync.version = null; // this copy may differ: sync it whole
    return { refused: this.refused, failure: this.failure };
  }

  /**
   * Commits `batch` in order. A body the tenant's quota refuses (429 QuotaExceeded, never
   * retried) refuses its change alone, as the commit refuses one: noted with the quota's
   * words. A body that cannot be uploaded otherwise (the network or the tab went) ends the
   * commit before its change: the changes before it are committed, it and those after are not,
   * and the failure is thrown, so the index is as it was before that file.
   */
  async commit(batch) {
    const put = (sha256, body) => withRetry(() => fetchOk(`/workspace/bodies/${sha256}`, { method: "PUT", headers: this.headers, body }));
    const tried = await pool(batch, UPLOADS_AT_ONCE, ({ path, bytes }) => describe(path, bytes, put).catch((failure) => ({ path, failure })));
    const quota = (change) => isQuotaRefusal(change.failure);
    for (const { path, failure } of tried.filter(quota)) this.refused.push({ path, name: failure.serverName, message: failure.body?.error?.message ?? failure.message });
    const described = tried.filter((change) => !quota(change));
    const failed = described.findIndex((change) => change.failure);
    const changes = failed < 0 ? described : described.slice(0, failed);
    if (changes.length) await this.post(changes);
    if (failed >= 0) throw described[failed].failure;
  }

  async post(changes) {
    const body = JSON.stringify({ changes });
    const tab = this.tab();
    const headers = { ...this.headers, "content-type": "application/json", ...(tab && { "x-relay-tab": tab }) };
    const post = async () => (await fetchOk("/workspace/commit", { method: "POST", headers, body })).json();
    const { results } = await withRetry(post);
    results.forEach((result, i) => {
      const { path, sha256 } = changes[i];
      if (result.error) this.refused.push({ path, ...result.error });
      else if (sha256 && !this.waiting.has(path)) this.sync.hashes.set(path, sha256); // unless changed again since
    });
  }
}

/** The run's stderr line for the changes `done()` reported not kept ({refused, failure}); "" when all were. */
export function notKept({ refused, failure }) {
  const lines = refused.map(({ path, name, message }) => `${path} was not kept in the workspace: ${name}: ${message}\n`);
  if (failure) lines.push(`file changes did not reach the relay session: ${failure.message}\n`);
  return lines.join("");
}

/** A change as a commit carries it: a small body inline, a larger one uploaded first with `put(sha256, bytes)`. */
async function describe(path, bytes, put) {
  if (!bytes) return { path, removed: true };
  const sha256 = await sha256Hex(bytes);
  if (bytes.length <= INLINE_MAX_BYTES) return { path, sha256, size: bytes.length, inline: toBase64(bytes) };
  await put(sha256, bytes);
  return { path, sha256, size: bytes.length };
}

/** `work` of each item, at most `width` at once, the results in the items' order. */
async function pool(items, width, work) {
  const results = new Array(items.length);
  let next = 0;
  let failure = null;
  const lane = async () => {
    while (next < items.length && failure === null) {
      const i = next++;
      try {
        results[i] = await work(items[i]);
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  // Every lane settles before a failure is thrown: nothing of a failed pass writes after what
  // its caller does next (a carried delta that failed is followed by the relay session's index).
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane));
  if (failure !== null) throw failure.err;
  return results;
}
