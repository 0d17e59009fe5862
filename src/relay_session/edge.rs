//! A run the machine sent to the edge executor (issue 27): what its fresh isolate starts with,
//! and its events fed back to the machine exactly as a tab's are (`Input::Heard` from the tab
//! id [`EDGE`]). The isolate gets the run's `capsule` command as a tab does, every layer inline
//! (it has no network: `globalOutbound` is null), so it checks the capsule's signature and
//! layer hashes with the page's own code; and the workspace as the run starts, whose root is
//! recorded for the audit as a tab's sync records it. Its writes come back through the run
//! token's routes (`/workspace/bodies`, `/workspace/commit`), as a tab's do.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde_json::{json, Map, Value};

use super::workspace::Changes;
use super::{Platform, RelaySession};
use crate::error::ErrorName;
use crate::keys;
use crate::packages::edge_build::{edge_build_refusal, EDGE_BUILD_CAPS};
use crate::protocol::{BuildCommand, CapsuleCommand, TabCommand};
use crate::run::backchannel::parse_batch;
use crate::run::executor::{EDGE, EDGE_WORKSPACE_MAX_BYTES};
use crate::run::machine::{Cancel, Input, Output};
use crate::stores::Blobs;
use crate::upstream::seal::SealingKey;

/// Why an edge run could not start: the error to end it with.
pub type Refusal = (ErrorName, String);

/// How old the `/mcps` tree an edge run gets may be: as old as a tab's copy may be (the page
/// lists it again every 5 minutes). A listing, which awaits every upstream server (a dead one
/// its timeout), holds the run's start and counts to its edge time, so it is made seldom.
pub const EDGE_TREE_MAX_AGE_MS: u64 = 5 * 60_000;

impl<P: Platform> RelaySession<P> {
    /// What run `run`'s isolate starts with: `{announced, workspace: {path: base64},
    /// workspaceLimit}` (`announced`: the capsule command with every layer inline); or, for a
    /// run whose deps layer was never built, what its build's isolate starts with (`{build,
    /// caps}`: the `build` command a tab would get, and [`EDGE_BUILD_CAPS`]), unless the build may
    /// not run at the edge; a build started holds the relay session's one build at the edge
    /// until [`RelaySession::edge_build_over`]. The workspace has the `/mcps` tree, as a tab's
    /// has (`key` opens the upstream servers' credentials to list them).
    pub async fn edge_job(&self, run: &str, key: &SealingKey) -> Result<Value, Refusal> {
        let (command, caller) = self.edge_start(run).ok_or_else(|| {
            (ErrorName::Internal, "the run was no longer in hand when the edge executor took it".to_owned())
        })?;
        let capsule = match command {
            TabCommand::Capsule(capsule) => capsule,
            TabCommand::Build(build) => return edge_build_job(build, || self.claim_edge_build(run)),
            _ => return Err((ErrorName::Internal, "the run has no capsule for the edge".to_owned())),
        };
        let listing = self.edge_listing()?; // a workspace too big is refused before any R2 read
        let announced = self.inlined(capsule, &caller.tenant.id).await?;
        let mut workspace = self.edge_workspace(run, &caller.object_name(), listing).await?;
        for (path, text) in self.mcps_files(&caller, key, EDGE_TREE_MAX_AGE_MS).await {
            workspace.insert(path, Value::String(BASE64.encode(text)));
        }
        let workspace_limit = caller.tenant.defaults.workspace.max_bytes;
        Ok(json!({ "announced": announced, "workspace": workspace, "workspaceLimit": workspace_limit }))
    }

    /// The capsule command with its manifest and every layer inline, read from R2 where the
    /// command left them out (too large for a tab's SSE event).
    async fn inlined(&self, command: CapsuleCommand, tenant: &str) -> Result<Value, Refusal> {
        let inline = command.inline.clone().unwrap_or_else(|| json!({}));
        let manifest = match inline["manifest"].as_str() {
            Some(manifest) => manifest.to_owned(),
            None => String::from_utf8(self.blob(&keys::manifest(tenant, &command.hash), &command.hash).await?)
                .unwrap_or_default(),
        };
        let parsed: Value = serde_json::from_str(&manifest).unwrap_or_default();
        let mut layers = inline["layers"].as_object().cloned().unwrap_or_default();
        for layer in parsed["fsLayers"].as_array().into_iter().flatten() {
            let (Some(path), Some(sha256)) = (layer["path"].as_str(), layer["sha256"].as_str()) else { continue };
            if !layers.contains_key(path) {
                let bytes = self.blob(&keys::layer(sha256), &command.hash).await?;
                layers.insert(path.to_owned(), Value::String(BASE64.encode(bytes)));
            }
        }
        let mut announced = serde_json::to_value(&command).expect("a capsule command serializes");
        announced["inline"] = json!({ "manifest": manifest, "layers": Value::Object(layers) });
        Ok(announced)
    }

    /// `key`, a file of capsule `hash`. One that is not there was swept while this instance
    /// remembered storing the capsule: it forgets, so that the next call stores it again.
    async fn blob(&self, key: &str, hash: &str) -> Result<Vec<u8>, Refusal> {
        match self.platform.blobs().get(key).await {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => {
                self.caches.forget_stored(hash);
                Err((ErrorName::Internal, format!("{key} is not in storage; run the tool again")))
            }
            Err(e) => Err((ErrorName::Internal, format!("R2 failed reading {key}: {e}; run the tool again"))),
        }
    }

    /// The workspace's index as an edge run starts, unless it is too big for the edge.
    fn edge_listing(&self) -> Result<Changes, Refusal> {
        let listing = self.store().workspace_listing().map_err(|e| unreadable(e.to_string()))?;
        let bytes: u64 = listing.files.iter().map(|file| file.size).sum();
        if bytes > EDGE_WORKSPACE_MAX_BYTES {
            return Err((ErrorName::EdgeBudgetExceeded, too_big_for_the_edge(bytes)));
        }
        Ok(listing)
    }

    /// The workspace `listing` names as run `run` starts (path -> base64), its root recorded as
    /// the run's workspace before it.
    async fn edge_workspace(
        &self,
        run: &str,
        relay_session: &str,
        listing: Changes,
    ) -> Result<Map<String, Value>, Refusal> {
        self.persisted("audit", self.store().audit_workspace(run, Some(&listing.root), None));
        let mut files = Map::new();
        for file in listing.files {
            let bytes = self.body_bytes(relay_session, &file.sha256).await.map_err(|e| unreadable(e.to_string()))?;
            files.insert(file.path, Value::String(BASE64.encode(bytes)));
        }
        Ok(files)
    }

    /// A batch of the edge run's events (NDJSON lines as a tab sends them), fed to the machine.
    /// A batch the machine refuses (the run ended meanwhile) changes nothing: the edge stops
    /// when the stream it writes to is dropped.
    pub fn edge_events(&self, batch: &[u8]) -> Result<(), String> {
        let events = parse_batch(batch)?;
        let outputs = self.feed(Input::Heard { tab: Some(EDGE.to_owned()), events });
        match outputs.into_iter().find_map(|o| if let Output::Reply(reply) = o { Some(reply) } else { None }) {
            Some(reply) if reply.status() != 200 => Err(reply.to_json().to_string()),
            _ => Ok(()),
        }
    }

    /// The edge could not run run `run` (its job, its isolate or its stream failed): it ends
    /// with `name` and `message`, unless it has ended.
    pub fn edge_failed(&self, run: &str, (name, message): Refusal) {
        self.feed(Input::Cancel { run: run.to_owned(), why: Cancel::Failed(name, message) });
    }

    /// [`RelaySession::edge_job`] refused run `run`: it ends as [`RelaySession::edge_failed`]
    /// says, charged nothing of the edge budget (no isolate had it).
    pub fn edge_unstarted(&self, run: &str, (name, message): Refusal) {
        self.feed(Input::Cancel { run: run.to_owned(), why: Cancel::Unstarted(name, message) });
    }
}

/// Why an edge run whose workspace could not be read (`e`) did not start.
fn unreadable(e: String) -> Refusal {
    (ErrorName::Internal, format!("the workspace could not be read: {e}; run again"))
}

/// Why a run whose workspace holds `bytes`, past [`EDGE_WORKSPACE_MAX_BYTES`], cannot run at
/// the edge, and the ways around it.
fn too_big_for_the_edge(bytes: u64) -> String {
    format!(
        "the workspace holds {bytes} bytes, more than a run at the edge can start with ({} MiB, {EDGE_WORKSPACE_MAX_BYTES} bytes): \
         delete files under /tmp or /out you no longer need (fs.rmSync in JavaScript, os.remove in Python, in a \
         run on a tab), or with no tab empty them with the `write` tool (mode \"overwrite\", content \"\"), and call \
         again; or run it on a browser tab: open the relay page and call with executor \"tab\" (a tenant whose defaults.executor is \
         \"edge\" needs its admin to change it)",
        EDGE_WORKSPACE_MAX_BYTES / (1024 * 1024)
    )
}

/// The job of a build at the edge (`{build, caps}`), or why it may not run there (`claim`:
/// whether it may take the relay session's one build at the edge, asked last).
fn edge_build_job(build: BuildCommand, claim: impl FnOnce() -> bool) -> Result<Value, Refusal> {
    if let Some(why) = edge_build_refusal(build.language, claim) {
        return Err((ErrorName::DepsResolutionFailed, why));
    }
    Ok(json!({ "build": build, "caps": EDGE_BUILD_CAPS }))
}
