//! The relay session's workspace over its SQLite and R2 (docs/ARCHITECTURE.md "The
//! workspace"): the index (`workspace_files`), the bodies (`workspace_bodies`, inline when
//! small, else in R2 by sha256), the version and the root; committing changes under the rules of
//! `crate::workspace::rules`; and the file tools answered from it, with or without a tab. The
//! routes a tab and a run use are `workspace_routes.rs`.
//!
//! Two invariants hold whatever fails: a body's row is written only once the body is stored, and
//! a file's index row (one statement) only once its body's row is there, so no reader ever sees
//! a file whose body is missing; and every commit is synchronous (no `.await` between reading
//! the facts of a path and writing its row), so commits never interleave.

use base64::Engine;
use serde::Deserialize;
use serde_json::Value;

use super::store::Store;
use super::{Platform, RelaySession, Sql, SqlValue, StorageError};
use crate::capsule::canonical::sha256_hex;
use crate::error::ErrorName;
use crate::keys;
use crate::policy::fs_path::is_within;
use crate::protocol::Caller;
use crate::search::{SearchRequest, Searcher};
use crate::stores::{Blobs, Meta};
use crate::workspace::rules::{self, check_write, directories_above, Facts};
use crate::workspace::tools::{self, ReadArgs, WriteArgs};
use crate::workspace::{root, Change, FileEntry, Refusal, INLINE_MAX_BYTES, MCPS_ROOT};

pub(super) const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
/// How many removals the index keeps for tabs catching up by changes; a tab further behind
/// gets the whole index.
pub const REMOVALS_KEPT: u64 = 10_000;
/// How long a `search` may read and scan before it stops with Timeout (the tab's limit before).
pub const SEARCH_TIMEOUT_MS: u64 = 20_000;
/// How many times a `write` is tried again when a commit changed its file while its body was
/// being stored (an append must build on the file as it is).
const WRITE_ATTEMPTS: usize = 3;

type Result<T> = std::result::Result<T, StorageError>;

/// A stored body: its size, its bytes in base64 when kept inline, and whether its R2 copy is
/// under the relay session's own prefix (1) or, stored before it had one, its tenant's (0).
#[derive(Debug, Clone, Deserialize)]
pub struct Body {
    pub size: u64,
    pub inline: Option<String>,
    pub own: i64,
}

/// The workspace as a tab brings its cache up to date: the version and root, and the files
/// changed since the version it holds (every file when `full`), and the paths removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changes {
    pub version: u64,
    pub root: String,
    /// True when these are all the files (the tab's version was older than what is kept of
    /// removals, or it held none): the tab drops whatever else it holds.
    pub full: bool,
    pub files: Vec<FileEntry>,
    pub removed: Vec<String>,
}

/// The bounds of the paths below `dir`: from `dir/` up to `dir0` (`0` follows `/` in bytes).
fn below(dir: &str) -> [SqlValue; 2] {
    [format!("{dir}/").into(), format!("{dir}0").into()]
}

const LIVE: &str =
    "SELECT path, sha256, size, mtime_ms AS mtimeMs, version FROM workspace_files WHERE sha256 IS NOT NULL";

impl<S: Sql> Store<'_, S> {
    /// The workspace's version: the latest change's, never below the pruning floor.
    pub fn workspace_version(&self) -> Result<u64> {
        #[derive(Deserialize)]
        struct Version {
            v: i64,
        }
        let query =
            "SELECT MAX(COALESCE((SELECT MAX(version) FROM workspace_files), 0), floor) AS v FROM workspace_state";
        Ok(self.first::<Version>(query, &[])?.map_or(0, |v| v.v as u64))
    }

    /// Every file, by path (as bytes: SQLite's BINARY collation).
    pub fn workspace_files(&self) -> Result<Vec<FileEntry>> {
        self.sql.rows(&format!("{LIVE} ORDER BY path"), &[])
    }

    /// The files below directory `dir`, by path.
    pub fn workspace_files_below(&self, dir: &str) -> Result<Vec<FileEntry>> {
        self.sql.rows(&format!("{LIVE} AND path >= ? AND path < ? ORDER BY path"), &below(dir))
    }

    /// The file at `path`, if there is one.
    pub fn workspace_file(&self, path: &str) -> Result<Option<FileEntry>> {
        self.first(&format!("{LIVE} AND path = ?"), &[path.into()])
    }

    /// The version, the root and every file: one consistent view (no commit runs between).
    pub fn workspace_listing(&self) -> Result<Changes> {
        self.workspace_changes(None)
    }

    /// What changed after version `since` (`None`: everything), as [`Changes`] says.
    pub fn workspace_changes(&self, since: Option<u64>) -> Result<Changes> {
        let version = self.workspace_version()?;
        let all = self.workspace_files()?;
        let root = root(all.iter().map(|f| (f.path.as_str(), f.sha256.as_str(), f.size)));
        let floor = self.workspace_floor()?;
        let Some(since) = since.filter(|since| *since >= floor && *since <= version) else {
            return Ok(Changes { version, root, full: true, files: all, removed: Vec::new() });
        };
        #[derive(Deserialize)]
        struct Removed {
            path: String,
        }
        let query = "SELECT path FROM workspace_files WHERE sha256 IS NULL AND version > ? ORDER BY path";
        let removed = self.sql.rows::<Removed>(query, &[since.into()])?.into_iter().map(|r| r.path).collect();
        let files = all.into_iter().filter(|f| f.version > since).collect();
        Ok(Changes { version, root, full: false, files, removed })
    }

    fn workspace_floor(&self) -> Result<u64> {
        #[derive(Deserialize)]
        struct Floor {
            floor: i64,
        }
        Ok(self.first::<Floor>("SELECT floor FROM workspace_state", &[])?.map_or(0, |f| f.floor as u64))
    }

    /// The root of the workspace as it stands, and its version.
    pub fn workspace_root(&self) -> Result<(u64, String)> {
        let version = self.workspace_version()?;
        let files = self.workspace_files()?;
        Ok((version, root(files.iter().map(|f| (f.path.as_str(), f.sha256.as_str(), f.size)))))
    }

    /// Every file's bytes together (what the cap is counted on) and how many files there are.
    pub fn workspace_totals(&self) -> Result<Totals> {
        let query = "SELECT COALESCE(SUM(size), 0) AS bytes, COUNT(*) AS files FROM workspace_files \
            WHERE sha256 IS NOT NULL";
        Ok(self.first::<Totals>(query, &[])?.unwrap_or(Totals { bytes: 0, files: 0 }))
    }

    /// What the rules need to know around `path`, the workspace holding `totals`.
    fn workspace_facts(&self, path: &str, totals: Totals) -> Result<Facts> {
        let existing = self.workspace_file(path)?.map(|f| f.size);
        let mut file_above = None;
        for dir in directories_above(path) {
            if self.workspace_file(dir)?.is_some() {
                file_above = Some(dir.to_owned());
                break;
            }
        }
        #[derive(Deserialize)]
        struct Count {
            n: i64,
        }
        let query = "SELECT COUNT(*) AS n FROM workspace_files WHERE sha256 IS NOT NULL AND path >= ? AND path < ?";
        let files_below = self.first::<Count>(query, &below(path))?.map_or(0, |c| c.n as u64);
        Ok(Facts { existing, file_above, files_below, total_bytes: totals.bytes, total_files: totals.files })
    }

    /// The stored body of `sha256`, if there is one.
    pub fn workspace_body(&self, sha256: &str) -> Result<Option<Body>> {
        self.first("SELECT size, inline, own FROM workspace_bodies WHERE sha256 = ?", &[sha256.into()])
    }

    /// Records that the body of `sha256` is stored at `now_ms` (`inline`: its bytes, kept here;
    /// else in R2 under the relay session's own prefix).
    fn put_workspace_body(&self, sha256: &str, size: u64, inline: Option<&[u8]>, now_ms: u64) -> Result<()> {
        let inline = inline.map_or(SqlValue::Null, |bytes| BASE64.encode(bytes).into());
        let query =
            "INSERT OR IGNORE INTO workspace_bodies (sha256, size, inline, stored_ms, own) VALUES (?, ?, ?, ?, 1)";
        self.sql.exec(query, &[sha256.into(), size.into(), inline, now_ms.into()])
    }

    /// Notes the body of `sha256`, stored already, as stored again at `now_ms`: a sweep keeps it
    /// for its grace, so that the commit this store comes before finds it.
    fn renew_workspace_body(&self, sha256: &str, now_ms: u64) -> Result<()> {
        let query = "UPDATE workspace_bodies SET stored_ms = MAX(stored_ms, ?) WHERE sha256 = ?";
        self.sql.exec(query, &[now_ms.into(), sha256.into()])
    }

    /// Forgets the oldest removals past the latest `keep`, raising the floor to the newest
    /// version it forgot: a tab holding a version below it gets the whole index.
    pub fn prune_removals(&self, keep: u64) -> Result<()> {
        #[derive(Deserialize)]
        struct Cut {
            v: Option<i64>,
        }
        let query =
            "SELECT version AS v FROM workspace_files WHERE sha256 IS NULL ORDER BY version DESC LIMIT 1 OFFSET ?";
        let Some(cut) = self.first::<Cut>(query, &[keep.into()])?.and_then(|c| c.v) else { return Ok(()) };
        self.sql.exec("UPDATE workspace_state SET floor = MAX(floor, ?)", &[cut.into()])?;
        self.sql.exec("DELETE FROM workspace_files WHERE sha256 IS NULL AND version <= ?", &[cut.into()])
    }

    /// Commits `changes` in order, each on its own, under a cap of `max_bytes`: each one's
    /// outcome, the version it made or why it was refused (a refused one changes nothing and
    /// does not stop the next). Storage failing refuses the change it failed in and the rest.
    /// Removals past the latest [`REMOVALS_KEPT`] are forgotten after.
    pub fn commit(&self, changes: &[Change], max_bytes: u64, now_ms: u64) -> Vec<std::result::Result<u64, Refusal>> {
        let outcomes = self.commit_each(changes, max_bytes, now_ms);
        if changes.iter().any(|c| matches!(c, Change::Remove { .. })) {
            // Forgetting is bookkeeping: a failure leaves more removals kept, nothing wrong.
            let _ = self.prune_removals(REMOVALS_KEPT);
        }
        outcomes
    }

    fn commit_each(&self, changes: &[Change], max_bytes: u64, now_ms: u64) -> Vec<std::result::Result<u64, Refusal>> {
        let unavailable = |e: StorageError| Refusal::new(ErrorName::StorageUnavailable, storage_message(&e));
        let mut outcomes = Vec::with_capacity(changes.len());
        let mut totals = match self.workspace_totals() {
            Ok(totals) => totals,
            Err(e) => return changes.iter().map(|_| Err(unavailable(e.clone()))).collect(),
        };
        for (i, change) in changes.iter().enumerate() {
            match self.commit_one(change, &mut totals, max_bytes, now_ms) {
                Ok(outcome) => outcomes.push(outcome),
                Err(e) => {
                    outcomes.extend(changes[i..].iter().map(|_| Err(unavailable(e.clone()))));
                    break;
                }
            }
        }
        outcomes
    }

    /// One change checked and committed; `totals` follow the workspace.
    fn commit_one(
        &self,
        change: &Change,
        totals: &mut Totals,
        max_bytes: u64,
        now_ms: u64,
    ) -> Result<std::result::Result<u64, Refusal>> {
        let version = self.workspace_version()? + 1;
        match change {
            Change::Remove { path } => {
                if let Err(refusal) = rules::file_path(path) {
                    return Ok(Err(refusal));
                }
                let Some(existing) = self.workspace_file(path)? else { return Ok(Ok(version - 1)) };
                let query =
                    "UPDATE workspace_files SET sha256 = NULL, size = 0, mtime_ms = ?, version = ? WHERE path = ?";
                self.sql.exec(query, &[now_ms.into(), version.into(), path.as_str().into()])?;
                totals.bytes -= existing.size;
                totals.files -= 1;
                Ok(Ok(version))
            }
            Change::Write { path, sha256, size } => {
                let facts = self.workspace_facts(path, *totals)?;
                if let Err(refusal) = check_write(path, *size, &facts, max_bytes) {
                    return Ok(Err(refusal));
                }
                if self.workspace_body(sha256)?.is_none_or(|body| body.size != *size) {
                    let message = format!(
                        "the body of {path} ({sha256}, {size} bytes) is not stored; upload it before committing the file"
                    );
                    return Ok(Err(Refusal::new(ErrorName::ValidationError, message)));
                }
                let query =
                    "INSERT INTO workspace_files (path, sha256, size, mtime_ms, version) VALUES (?, ?, ?, ?, ?) \
                    ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, \
                    mtime_ms = excluded.mtime_ms, version = excluded.version";
                let args =
                    [path.as_str().into(), sha256.as_str().into(), (*size).into(), now_ms.into(), version.into()];
                self.sql.exec(query, &args)?;
                totals.bytes = totals.bytes - facts.existing.unwrap_or(0) + size;
                totals.files += u64::from(facts.existing.is_none());
                Ok(Ok(version))
            }
        }
    }
}

/// The workspace's bytes and files, as commits go.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Totals {
    pub bytes: u64,
    pub files: u64,
}

/// A StorageUnavailable message naming the store.
fn storage_message(e: &StorageError) -> String {
    format!("the relay session's storage failed ({e}); the workspace is unchanged, try again")
}

impl<P: Platform> RelaySession<P> {
    /// Stores `bytes` as a body of the workspace of `caller`'s relay session, once: inline when
    /// small, else in R2 (which checks the sha256 again, and whose bytes are first charged to
    /// the tenant's `storedBytes`), and only then its row. The body's sha256.
    pub async fn store_body(&self, caller: &Caller, bytes: Vec<u8>) -> std::result::Result<String, Refusal> {
        let sha256 = sha256_hex(&bytes);
        self.store_body_as(caller, &sha256, bytes).await?;
        Ok(sha256)
    }

    /// Stores `bytes` as the body its sender says is `sha256`; a body of another hash is
    /// refused (ValidationError) and nothing is stored.
    pub async fn store_claimed_body(
        &self,
        caller: &Caller,
        sha256: &str,
        bytes: Vec<u8>,
    ) -> std::result::Result<(), Refusal> {
        let actual = sha256_hex(&bytes);
        if actual != sha256 {
            let message = format!("the body's sha256 is {actual}, not {sha256}; nothing was stored, send it again");
            return Err(Refusal::new(ErrorName::ValidationError, message));
        }
        self.store_body_as(caller, sha256, bytes).await
    }

    /// A body stored already is only noted as stored again (`body_sweep` keeps it its grace);
    /// one a sweep is deleting is stored after the deletion ends. Only a body new to R2 is
    /// charged to the tenant's `storedBytes` (the retention sweep measures R2, not the SQLite),
    /// and given back if its put fails. A refusal is the quota's (`QuotaExceeded`, with its
    /// `Retry-After`), never a storage failure.
    async fn store_body_as(&self, caller: &Caller, sha256: &str, bytes: Vec<u8>) -> std::result::Result<(), Refusal> {
        let unavailable = |e: StorageError| Refusal::new(ErrorName::StorageUnavailable, storage_message(&e));
        self.bodies.wait(sha256).await;
        if self.store().workspace_body(sha256).map_err(unavailable)?.is_some() {
            return self.store().renew_workspace_body(sha256, self.now_ms()).map_err(unavailable);
        }
        let size = bytes.len() as u64;
        if size <= INLINE_MAX_BYTES {
            return self.store().put_workspace_body(sha256, size, Some(&bytes), self.now_ms()).map_err(unavailable);
        }
        // Marked before anything awaits again: the sweep keeps a body in flight, and the
        // charge's hop below would otherwise leave it unmarked, deletable under the commit
        // about to name it.
        let _uploading = self.bodies.uploading(sha256);
        let charged_ms = self.now_ms();
        self.platform.charge_stored(&caller.tenant, size).await?;
        let key = keys::workspace_body(&caller.object_name(), sha256);
        if let Err(e) = self.platform.blobs().put(&key, bytes, Some(sha256), Meta::default()).await {
            self.platform.store_failed(&caller.tenant.id, size, charged_ms);
            return Err(unavailable(e));
        }
        self.store().put_workspace_body(sha256, size, None, self.now_ms()).map_err(unavailable)
    }

    /// The bytes of a stored body (`size` of them).
    pub async fn body_bytes(&self, relay_session: &str, sha256: &str) -> Result<Vec<u8>> {
        let body = self.store().workspace_body(sha256)?;
        let Some(body) = body else { return Err(StorageError(format!("workspace body {sha256} is not stored"))) };
        let bytes = match body.inline {
            Some(inline) => BASE64.decode(inline).map_err(|e| StorageError(format!("inline body {sha256}: {e}")))?,
            None => {
                let key = match body.own {
                    1 => keys::workspace_body(relay_session, sha256),
                    _ => keys::tenant_workspace_body(relay_session.split('/').next().unwrap_or_default(), sha256),
                };
                self.platform.blobs().get(&key).await?.unwrap_or_default()
            }
        };
        if bytes.len() as u64 != body.size {
            return Err(StorageError(format!("workspace body {sha256} is missing or cut short in storage")));
        }
        Ok(bytes)
    }

    /// A `read` or `write` or `search` (its arguments checked by `run::file_op`) answered from
    /// the workspace of `caller`'s relay session, and `mcps` (the `/mcps` tree's files,
    /// which are no file of the index: they are listed from the upstream servers): the tool's
    /// structuredContent, or why not.
    pub async fn file_tool(
        &self,
        caller: &Caller,
        tool: &str,
        arguments: &Value,
        max_bytes: u64,
        mcps: &[(String, Vec<u8>)],
    ) -> std::result::Result<Value, Refusal> {
        let unavailable = |e: StorageError| Refusal::new(ErrorName::StorageUnavailable, storage_message(&e));
        let parsed = |e: serde_json::Error| Refusal::new(ErrorName::ValidationError, format!("{tool}: {e}"));
        let relay_session = &caller.object_name();
        match tool {
            "read" => {
                let args: ReadArgs = serde_json::from_value(arguments.clone()).map_err(parsed)?;
                if is_within(&args.path, MCPS_ROOT) {
                    return read_mcps(&args, mcps);
                }
                self.read(relay_session, &args).await.map_err(unavailable)?
            }
            "write" => {
                let args: WriteArgs = serde_json::from_value(arguments.clone()).map_err(parsed)?;
                self.write(caller, &args, max_bytes).await
            }
            "search" => {
                let request: SearchRequest = serde_json::from_value(arguments.clone()).map_err(parsed)?;
                self.search(relay_session, &request, mcps).await.map_err(unavailable)?
            }
            _ => Err(Refusal::new(ErrorName::ValidationError, format!("{tool} is not a file tool"))),
        }
    }

    async fn read(&self, relay_session: &str, args: &ReadArgs) -> Result<std::result::Result<Value, Refusal>> {
        let Some(file) = self.store().workspace_file(&args.path)? else {
            let below = self.store().workspace_files_below(&args.path)?;
            let sizes: Vec<(String, u64)> = below.into_iter().map(|f| (f.path, f.size)).collect();
            return Ok(tools::read_directory(args, &sizes));
        };
        let bytes = self.body_bytes(relay_session, &file.sha256).await?;
        Ok(tools::read_file(args, &bytes))
    }

    /// A `write`: the new body stored, then committed unless a commit changed the file while
    /// the body was being stored (then done again on the file as it is now).
    async fn write(&self, caller: &Caller, args: &WriteArgs, max_bytes: u64) -> std::result::Result<Value, Refusal> {
        let unavailable = |e: StorageError| Refusal::new(ErrorName::StorageUnavailable, storage_message(&e));
        for _ in 0..WRITE_ATTEMPTS {
            let before = self.store().workspace_file(&args.path).map_err(unavailable)?;
            let existing = match &before {
                Some(file) if args.mode == tools::Mode::Append => {
                    Some(self.body_bytes(&caller.object_name(), &file.sha256).await.map_err(unavailable)?)
                }
                Some(_) => Some(Vec::new()),
                None => None,
            };
            let (bytes, added) = tools::written(args, existing)?;
            let size = bytes.len() as u64;
            let sha256 = self.store_body(caller, bytes).await?;
            // Nothing awaits from here to the commit: no other commit comes between.
            if self.store().workspace_file(&args.path).map_err(unavailable)? != before {
                continue;
            }
            let change = Change::Write { path: args.path.clone(), sha256, size };
            let outcome = self.store().commit(&[change], max_bytes, self.now_ms()).remove(0);
            return outcome.map(|_| tools::write_result(&args.path, added, size));
        }
        let message = format!("{} kept changing while this write was stored; write again", args.path);
        Err(Refusal::new(ErrorName::Internal, message))
    }

    /// A `search`: the files in scope (the index's and `mcps`) read one at a time, in path
    /// order, and scanned; stopped with Timeout after [`SEARCH_TIMEOUT_MS`].
    async fn search(
        &self,
        relay_session: &str,
        request: &SearchRequest,
        mcps: &[(String, Vec<u8>)],
    ) -> Result<std::result::Result<Value, Refusal>> {
        let mut searcher = match Searcher::new(request) {
            Ok(searcher) => searcher,
            Err(e) => return Ok(Err(Refusal::new(ErrorName::ValidationError, e.message))),
        };
        let started = self.now_ms();
        let stored = self.store().workspace_files()?;
        let mut files: Vec<(&str, Option<&str>, &[u8])> =
            stored.iter().map(|f| (f.path.as_str(), Some(f.sha256.as_str()), &[][..])).collect();
        files.extend(mcps.iter().map(|(path, bytes)| (path.as_str(), None, bytes.as_slice())));
        files.retain(|(path, _, _)| searcher.covers(path));
        files.sort_by(|a, b| a.0.cmp(b.0));
        for (path, sha256, bytes) in files {
            if self.now_ms().saturating_sub(started) > SEARCH_TIMEOUT_MS {
                let message = format!(
                    "the search stopped after {} s, before {path}; narrow it with paths or filePattern",
                    SEARCH_TIMEOUT_MS / 1000
                );
                return Ok(Err(Refusal::new(ErrorName::Timeout, message)));
            }
            match sha256 {
                Some(sha256) => searcher.scan(path, &self.body_bytes(relay_session, sha256).await?),
                None => searcher.scan(path, bytes),
            }
        }
        Ok(Ok(serde_json::to_value(searcher.finish()).expect("a search result serializes")))
    }
}

/// A `read` under `/mcps`, from the tree's files.
fn read_mcps(args: &ReadArgs, mcps: &[(String, Vec<u8>)]) -> std::result::Result<Value, Refusal> {
    match mcps.iter().find(|(path, _)| *path == args.path) {
        Some((_, bytes)) => tools::read_file(args, bytes),
        None => {
            let sizes: Vec<(String, u64)> =
                mcps.iter().map(|(path, bytes)| (path.clone(), bytes.len() as u64)).collect();
            tools::read_directory(args, &sizes)
        }
    }
}
