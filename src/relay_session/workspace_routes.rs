//! The workspace's routes, decided (docs/ARCHITECTURE.md "The workspace"): a tab's index and
//! bodies (`workspace_index`, `workspace_body_bytes`), a run's body uploads and commits
//! (`put_body`, `commit_run`) and the slots of its `/out` files (`reserve_out_file`), a tab's
//! files from before (`upload_from_tab`), and `relay://workspace`. The store and the file
//! tools are `workspace.rs`.

use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use super::workspace::BASE64;
use super::{Platform, RelaySession, StorageError};
use crate::error::{ErrorName, HttpError};
use crate::files::Slot;
use crate::policy::{check_path, Access, FsPolicy};
use crate::protocol::Caller;
use crate::run::executor::EDGE;
use crate::workspace::rules;
use crate::workspace::{Change, Refusal, INLINE_MAX_BYTES};

type Result<T> = std::result::Result<T, StorageError>;

/// The most changes one commit may carry (a run making more sends several commits).
pub const MAX_COMMIT_CHANGES: usize = 1000;

/// One change of a commit, as a tab (or an edge run) sends it: a write names its body by
/// `sha256` and `size` (and may carry it `inline`, base64, when it has at most
/// [`INLINE_MAX_BYTES`]); a removal says `removed: true`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireChange {
    path: String,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    inline: Option<String>,
    #[serde(default)]
    removed: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Commit {
    changes: Vec<WireChange>,
}

impl WireChange {
    fn change(&self) -> std::result::Result<Change, String> {
        match (self.removed, &self.sha256, self.size, &self.inline) {
            (true, None, None, None) => Ok(Change::Remove { path: self.path.clone() }),
            (false, Some(sha256), Some(size), _) => {
                Ok(Change::Write { path: self.path.clone(), sha256: sha256.clone(), size })
            }
            _ => Err(format!(
                "change of {:?}: give {{path, sha256, size, inline?}} for a write or {{path, removed: true}} for a removal",
                self.path
            )),
        }
    }
}

impl<P: Platform> RelaySession<P> {
    /// `GET /session/<id>/workspace?since=&run=` from tab `tab`: the changes since version
    /// `since` (all files without it) as `{version, root, full, files, removed, maxBytes}`
    /// (`max_bytes`: the tenant's cap, which the tab's copy holds to). A tab asks before it
    /// starts run `run` (unless the run's command carried the changes: `tab_sync`), so the root
    /// it answers is the run's workspace before it, recorded for its audit, and the version the
    /// run's tab holds: only when the run is on that tab (one taken for gone may still ask).
    pub fn workspace_index(
        &self,
        since: Option<u64>,
        (run, tab): (Option<&str>, Option<&str>),
        max_bytes: u64,
    ) -> std::result::Result<Value, HttpError> {
        let changes = self.store().workspace_changes(since).map_err(|_| unavailable_sqlite())?;
        let on_tab = |run: &&str| tab.is_some_and(|tab| self.run_executor(run).flatten().as_deref() == Some(tab));
        if let Some(run) = run.filter(on_tab) {
            self.persisted("audit", self.store().audit_workspace(run, Some(&changes.root), None));
            self.tab_synced(run, changes.version);
        }
        Ok(json!({
            "version": changes.version, "root": changes.root, "full": changes.full,
            "files": changes.files, "removed": changes.removed, "maxBytes": max_bytes,
        }))
    }

    /// `relay://workspace`: `{version, root, files: [{path, sha256, size, mtimeMs, version}]}`,
    /// or `{error}` when the storage failed.
    pub fn workspace_listing(&self) -> Value {
        match self.persisted("workspace", self.store().workspace_listing()) {
            Some(listing) => json!({ "version": listing.version, "root": listing.root, "files": listing.files }),
            None => json!({ "error": "the relay session's storage failed; read the resource again" }),
        }
    }

    /// `GET /session/<id>/workspace/bodies/<sha256>`: a body this relay session's workspace
    /// holds (404 for any other: a tab reads only its own relay session's bodies).
    pub async fn workspace_body_bytes(
        &self,
        relay_session: &str,
        sha256: &str,
    ) -> std::result::Result<Vec<u8>, HttpError> {
        let known = self.store().workspace_body(sha256).map_err(|_| unavailable_sqlite())?;
        if known.is_none() {
            let message = format!("this relay session's workspace has no body {sha256}; ask for the index again");
            return Err(HttpError::new(ErrorName::NotFound, message));
        }
        self.body_bytes(relay_session, sha256).await.map_err(|_| HttpError::storage_unavailable("R2"))
    }

    /// `PUT /workspace/bodies/<sha256>` with run `run`'s token (or, with no run, a tab's
    /// attach token): stores a body about to be committed, checked against its hash and the
    /// tenant's cap. Nothing is visible until a commit names it.
    pub async fn put_body(
        &self,
        caller: &Caller,
        run: Option<&str>,
        sha256: &str,
        bytes: Vec<u8>,
    ) -> std::result::Result<Value, HttpError> {
        if let Some(run) = run {
            self.writing_run(run, None)?;
        }
        let max = caller.tenant.defaults.workspace.max_bytes;
        if bytes.len() as u64 > max {
            let message = rules::full_message(&format!("a file of {} bytes", bytes.len()), bytes.len() as u64, max);
            return Err(HttpError::new(ErrorName::PayloadTooLarge, message));
        }
        let size = bytes.len();
        self.store_claimed_body(caller, sha256, bytes).await.map_err(http_error)?;
        Ok(json!({ "sha256": sha256, "size": size }))
    }

    /// `PUT /files/<run>/out/...` with run `run`'s token, from `tab` if a tab sends it: the
    /// slot of `path` among the run's published files (`files::slot`), taken in one synchronous
    /// step, unless the run is in flight on another executor (a stale tab's file would replace
    /// the live run's). Once the run has ended its token alone decides: nothing of it changes
    /// what the run's result said.
    pub fn reserve_out_file(
        &self,
        (run, tab): (&str, Option<&str>),
        path: &str,
    ) -> std::result::Result<Slot, HttpError> {
        if let Some(on) = self.run_executor(run) {
            not_elsewhere(run, on.as_deref(), tab)?;
        }
        self.persisted("out files", self.store().reserve_out_file(run, path, self.now_ms()))
            .ok_or_else(unavailable_sqlite)
    }

    /// `POST /workspace/commit` with the token of run `run` (capsule `cap`), from `tab` if a tab
    /// sends it (`x-relay-tab`): the run's changes, each checked against the run's policy and
    /// the workspace's rules and committed on its own, in order.
    /// `{results: [{version} | {error: {name, message}}], version, root}`.
    pub async fn commit_run(
        &self,
        caller: &Caller,
        (run, tab): (&str, Option<&str>),
        cap: &str,
        body: &[u8],
    ) -> std::result::Result<Value, HttpError> {
        self.writing_run(run, tab)?;
        let policy = self.capsule_policy(&caller.tenant.id, cap).await?;
        self.commit_wire(caller, &policy.filesystem, body, Some((run, tab)), false).await
    }

    /// `POST /session/<id>/workspace/upload` (attach token): the files a tab held from before
    /// the relay session kept the workspace, under the tenant's filesystem policy and the cap.
    /// Only new paths: where the relay session has a file, its own stays. Answered as a commit.
    pub async fn upload_from_tab(&self, caller: &Caller, body: &[u8]) -> std::result::Result<Value, HttpError> {
        let filesystem = &caller.tenant.defaults.policy.filesystem;
        self.commit_wire(caller, filesystem, body, None, true).await
    }

    /// A commit's body (`{changes}`) checked and committed under `filesystem`, for run `run`
    /// (which must still be in flight when the commit is made), keeping files the index has
    /// when `only_new`.
    async fn commit_wire(
        &self,
        caller: &Caller,
        filesystem: &FsPolicy,
        body: &[u8],
        run: Option<(&str, Option<&str>)>,
        only_new: bool,
    ) -> std::result::Result<Value, HttpError> {
        let commit: Commit = serde_json::from_slice(body)
            .map_err(|e| HttpError::new(ErrorName::ValidationError, format!("the commit does not parse: {e}")))?;
        if commit.changes.len() > MAX_COMMIT_CHANGES {
            let message = format!("a commit carries at most {MAX_COMMIT_CHANGES} changes; send the rest in another");
            return Err(HttpError::new(ErrorName::PayloadTooLarge, message));
        }
        let mut admitted = Vec::with_capacity(commit.changes.len());
        for wire in &commit.changes {
            admitted.push(self.admit_change(caller, filesystem, wire).await);
        }
        // Storing inline bodies awaited: the run may have ended meanwhile. From here on nothing
        // awaits, so no other commit comes between the checks and the writes.
        if let Some((run, tab)) = run {
            self.writing_run(run, tab)?;
        }
        if only_new {
            for admitted in &mut admitted {
                self.keep_existing(admitted).map_err(|_| unavailable_sqlite())?;
            }
        }
        let changes: Vec<Change> = admitted.iter().filter_map(|a| a.as_ref().ok().cloned()).collect();
        let mut committed = self.store().commit(&changes, caller.tenant.defaults.workspace.max_bytes, self.now_ms());
        committed.reverse();
        let results: Vec<Value> = admitted
            .into_iter()
            .map(|admitted| match admitted.and_then(|_| committed.pop().expect("one outcome per change")) {
                Ok(version) => json!({ "version": version }),
                Err(refusal) => json!({ "error": { "name": refusal.name.as_str(), "message": refusal.message } }),
            })
            .collect();
        let (version, root) = self.store().workspace_root().map_err(|_| unavailable_sqlite())?;
        Ok(json!({ "results": results, "version": version, "root": root }))
    }

    /// Refuses an admitted change of a path the index has, or a removal: an upload only adds.
    fn keep_existing(&self, admitted: &mut std::result::Result<Change, Refusal>) -> Result<()> {
        let Ok(change) = admitted else { return Ok(()) };
        let path = change.path().to_owned();
        let refusal = match change {
            Change::Remove { .. } => Some(format!("{path}: an upload only adds files; nothing was removed")),
            Change::Write { .. } if self.store().workspace_file(&path)?.is_some() => {
                Some(format!("the relay session has its own {path}, which stays; this tab's copy was not uploaded"))
            }
            Change::Write { .. } => None,
        };
        if let Some(message) = refusal {
            *admitted = Err(Refusal::new(ErrorName::Conflict, message));
        }
        Ok(())
    }

    /// A change of a run's commit, its path admitted by the run's policy and its inline body
    /// stored, or why not.
    async fn admit_change(
        &self,
        caller: &Caller,
        filesystem: &FsPolicy,
        wire: &WireChange,
    ) -> std::result::Result<Change, Refusal> {
        let change = wire.change().map_err(|e| Refusal::new(ErrorName::ValidationError, e))?;
        check_path(filesystem, change.path(), Access::Write).map_err(|e| Refusal::new(ErrorName::PolicyDenied, e))?;
        if let (Change::Write { sha256, size, .. }, Some(inline)) = (&change, &wire.inline) {
            let bytes = BASE64
                .decode(inline)
                .map_err(|e| Refusal::new(ErrorName::ValidationError, format!("{}: inline: {e}", wire.path)))?;
            if bytes.len() as u64 != *size || *size > INLINE_MAX_BYTES {
                let message = format!(
                    "{}: an inline body must have the size given, at most {INLINE_MAX_BYTES} bytes; upload larger ones first",
                    wire.path
                );
                return Err(Refusal::new(ErrorName::ValidationError, message));
            }
            self.store_claimed_body(caller, sha256, bytes).await?;
        }
        Ok(change)
    }

    /// Refuses a write for run `run` unless it is in flight (what a run left before it ended is
    /// kept, nothing of it lands after) and, when a tab writes, on `tab`: a tab taken for gone
    /// before it acknowledged a run sees it given to another executor with the same token, and
    /// what it still runs of it must not write beside that one.
    fn writing_run(&self, run: &str, tab: Option<&str>) -> std::result::Result<(), HttpError> {
        let Some(on) = self.run_executor(run) else {
            let message = format!(
                "run {run} has ended: a run writes to the workspace only while it runs (what it wrote before it ended is kept)"
            );
            return Err(HttpError::new(ErrorName::Conflict, message));
        };
        not_elsewhere(run, on.as_deref(), tab)
    }
}

/// Refuses what `tab` sends for run `run`, in flight `on` an executor (none yet: not sent),
/// when that is another one.
fn not_elsewhere(run: &str, on: Option<&str>, tab: Option<&str>) -> std::result::Result<(), HttpError> {
    let (Some(on), Some(tab)) = (on, tab) else { return Ok(()) };
    if on == tab {
        return Ok(());
    }
    let tab: String = tab.chars().take(64).collect(); // the sender's words
    let there = if on == EDGE { "the edge executor".to_owned() } else { format!("tab {on}") };
    let message = format!("run {run} went to {there} after tab {tab} took it (it was taken for gone before it acknowledged the run): tab {tab}'s writes for it are not kept; the run goes on there");
    Err(HttpError::new(ErrorName::Conflict, message))
}

fn unavailable_sqlite() -> HttpError {
    HttpError::storage_unavailable("the relay session's SQLite")
}

/// A refusal as a route's error.
fn http_error(refusal: Refusal) -> HttpError {
    HttpError {
        name: refusal.name,
        message: refusal.message,
        retry_after_s: refusal.retry_after_s,
        quota: refusal.quota,
    }
}
