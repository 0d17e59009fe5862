//! Capsules stored in R2 before their command is sent (once per hash and instance), and runs
//! with dependencies (`crate::packages`): a tenant's earlier build of the same request is
//! reused; otherwise the run's tab gets a `build` command and the relay session holds the
//! build until the tab's finalize, answering its presign and spending its grants on the way.
//! The Worker forwards a build's presign, spend and finalize here (`SessionRequest::Build*`).

use serde::Deserialize;
use serde_json::{json, Value};

use super::{Platform, RelaySession};
use crate::capsule::jws::Signer;
use crate::capsule::layer::check_deps_layer;
use crate::capsule::{build_capsule, Capsule, CapsuleSpec, Deps};
use crate::error::{ErrorName, HttpError};
use crate::keys;
use crate::packages::grant::{RunRef, UPLOAD_PATH};
use crate::packages::{BuildRecord, DepsRequest, LayerClaim, PendingBuild, Proposal, UploadGrant};
use crate::protocol::{BuildCommand, Caller, TabCommand};
use crate::run::machine::{Cancel, Outcome};
use crate::stores;

/// A run whose capsule needs a deps layer: the call's spec, its dependencies and their key.
pub struct Packaged {
    pub spec: CapsuleSpec,
    pub request: DepsRequest,
    pub key: String,
    pub signer: Signer,
}

fn no_build(run: &str) -> HttpError {
    HttpError::new(
        ErrorName::NotFound,
        format!("run {run} has no build in progress (it ended, or was finalized); call the tool again"),
    )
}

/// Why a run ends whose capsule R2 did not take.
const CAPSULE_UNSTORED: &str = "its capsule could not be stored; retry the call";

/// Why a run ends whose capsule was not stored: R2's failure, or the quota's refusal (its
/// message says when to retry).
pub fn unprepared(refused: HttpError) -> Cancel {
    match refused.name {
        ErrorName::StorageUnavailable => Cancel::Unprepared(refused.message),
        name => Cancel::Failed(name, refused.message),
    }
}

impl<P: Platform> RelaySession<P> {
    /// Stores a capsule in R2 unless this instance already did (content-addressed: stored once
    /// is stored), and counts the time it took in the metrics; a failure is the quota's refusal
    /// (with its `Retry-After`) or `StorageUnavailable` ([`unprepared`] makes either why a run ends).
    /// Its bytes (`stores::capsule_bytes`) count to the tenant's `storedBytes`: charged at
    /// `charged_ms` already (by the run's admission, `quota::Charge::Run`), else charged here
    /// first; given back when no put is made or the put fails.
    pub async fn store_capsule(
        &self,
        caller: &Caller,
        capsule: &Capsule,
        charged_ms: Option<u64>,
    ) -> Result<(), HttpError> {
        let started = self.now_ms();
        let bytes = stores::capsule_bytes(capsule);
        if self.caches.stored(&capsule.hash, started) {
            if let Some(charged_ms) = charged_ms {
                self.platform.store_failed(&caller.tenant.id, bytes, charged_ms);
            }
            return Ok(());
        }
        let charged_ms = match charged_ms {
            Some(charged_ms) => charged_ms,
            None => {
                self.platform.charge_stored(&caller.tenant, bytes).await?;
                started
            }
        };
        if let Err(e) = stores::store_capsule(self.platform.blobs(), &caller.tenant.id, capsule, started).await {
            self.platform.store_failed(&caller.tenant.id, bytes, charged_ms);
            self.platform.log_error(&format!("storing capsule {}: {e}", capsule.hash));
            return Err(HttpError::new(ErrorName::StorageUnavailable, CAPSULE_UNSTORED));
        }
        self.caches.mark_stored(&capsule.hash, started);
        let stored_in = self.now_ms().saturating_sub(started);
        self.persisted("metrics", self.store().update_metrics(|m| m.observe_build(stored_in)));
        Ok(())
    }

    /// A run that ended `Internal` may have found its capsule gone from R2 (a tab's fetch of
    /// it failed: swept while this instance remembered storing it): forget storing it, so the
    /// next call stores it again (one R2 put, rare) rather than fail for up to an hour.
    pub(super) fn forget_if_unread(&self, hash: &str, outcome: &Outcome) {
        if outcome.exit.error.as_ref().is_some_and(|error| error.name == ErrorName::Internal.as_str()) {
            self.caches.forget_stored(hash);
        }
    }

    /// The command for a packaged run's tab: the capsule, when this tenant built the same
    /// request before and its layer is still there, else a `build` command. A failure is the
    /// reason to end the run with.
    pub async fn prepare_packaged(&self, caller: &Caller, run: &str, job: &Packaged) -> Result<TabCommand, Cancel> {
        let reusable = stores::reusable_build(self.platform.blobs(), &caller.tenant.id, &job.key, self.now_ms()).await;
        if let Some(record) = reusable {
            self.renew_build(caller, &job.key, &record).await;
            let spec = CapsuleSpec { deps: Deps::Uploaded(record.layer), ..job.spec.clone() };
            let capsule = build_capsule(spec, &job.signer).map_err(|e| Cancel::Unprepared(e.to_string()))?;
            self.store_capsule(caller, &capsule, None).await.map_err(unprepared)?;
            self.persisted("runs", self.store().audit_capsule(run, &capsule.hash));
            return Ok(self.capsule_command(&job.signer, caller, run, &capsule));
        }
        self.start_build(run, PendingBuild::new(job.key.clone(), job.request.clone(), job.spec.clone()));
        let now_s = self.now_ms() / 1000;
        Ok(TabCommand::Build(BuildCommand::new(&job.signer, caller, run, &job.spec, &job.request, now_s)))
    }

    /// Records a reused build again when this instance has not stored it for
    /// `retention::STORED_REFRESH_MS` (so that R2 shows the retention sweep it is in use).
    /// A failure is only logged: the record stands, and the next reuse tries again.
    async fn renew_build(&self, caller: &Caller, key: &str, record: &BuildRecord) {
        let (memo, now_ms) = (keys::build_record(&caller.tenant.id, key), self.now_ms());
        if self.caches.stored(&memo, now_ms) {
            return;
        }
        match stores::record_build(self.platform.blobs(), &caller.tenant.id, key, record).await {
            Ok(()) => self.caches.mark_stored(&memo, now_ms),
            Err(e) => self.platform.log_error(&format!("recording build {key} again: {e}")),
        }
    }

    /// A build's presign: upload grants for the layers the tab built, `{layers: [{id, sha256,
    /// size}]}` -> `{grants: [{layer, url, grant, expiresAt}]}`: `PUT url` with
    /// `Authorization: Bearer <grant>`.
    pub fn presign(&self, caller: &Caller, run: &str, ask: &[u8], signer: &Signer) -> Result<Value, HttpError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Ask {
            layers: Vec<LayerClaim>,
        }
        let ask: Ask = serde_json::from_slice(ask).map_err(|e| {
            let message =
                format!("presign: {e}; expected {{\"layers\": [{{\"id\": \"deps\", \"sha256\", \"size\"}}]}}");
            HttpError::new(ErrorName::ValidationError, message)
        })?;
        let who = RunRef { tenant: caller.tenant.id.clone(), session: caller.session.clone(), run: run.to_owned() };
        let jti = || self.random_id::<12>("g_");
        let now_s = self.now_ms() / 1000;
        let grants = self
            .with_build(run, |build| build.presign(&who, &ask.layers, now_s, jti))
            .ok_or_else(|| no_build(run))??;
        let listed: Vec<Value> = grants
            .iter()
            .map(
                |g| json!({ "layer": g.layer, "url": UPLOAD_PATH, "grant": g.sign(signer), "expiresAt": g.exp * 1000 }),
            )
            .collect();
        Ok(json!({ "grants": listed }))
    }

    /// A build's spend: the Worker received bytes matching `grant`; the grant is spent here,
    /// once, before the Worker stores them.
    pub fn spend(&self, grant: &UploadGrant) -> Result<(), HttpError> {
        self.with_build(&grant.run, |build| build.spend(grant)).ok_or_else(|| no_build(&grant.run))?
    }

    /// A build's finalize: checks the tab's proposal and the uploaded deps layer's entries
    /// (`check_deps_layer`), signs the capsule with that layer, stores it and the build's
    /// record, and answers with the `capsule` command's data (plus `capsuleUrl`), which the tab
    /// runs at once. Nothing is stored before every check passed, and the record (what later
    /// calls reuse) only after the capsule.
    pub async fn finalize(
        &self,
        caller: &Caller,
        run: &str,
        proposal: &[u8],
        signer: &Signer,
    ) -> Result<Value, HttpError> {
        let proposal: Proposal = serde_json::from_slice(proposal)
            .map_err(|e| HttpError::new(ErrorName::ValidationError, format!("finalize: {e}")))?;
        let now_ms = self.now_ms();
        let checked =
            self.with_build(run, |build| build.finalize(&proposal, now_ms).map(|(s, r)| (s, r, build.key.clone())));
        let (spec, record, key) = checked.ok_or_else(|| no_build(run))??;
        let layer = stores::stored_layer(self.platform.blobs(), &record.layer).await?;
        // Before anything is signed or recorded: a layer the page would refuse to run must not
        // become a capsule, nor a build that later calls reuse.
        check_deps_layer(&layer)?;
        let capsule = build_capsule(spec, signer)?;
        self.store_capsule(caller, &capsule, None).await?;
        if let Err(e) = stores::record_build(self.platform.blobs(), &caller.tenant.id, &key, &record).await {
            self.platform.log_error(&format!("recording build {key}: {e}")); // the next call builds again
        }
        self.end_build(run);
        self.persisted("runs", self.store().audit_capsule(run, &capsule.hash));
        let command = self.capsule_command(signer, caller, run, &capsule);
        let mut answer = command.data();
        self.set_command(run, command, &capsule.manifest.runtime.id);
        answer["capsuleUrl"] = answer["manifestUrl"].clone();
        Ok(answer)
    }
}
