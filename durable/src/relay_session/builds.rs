//! Runs with dependencies (`relay_core::packages`): a tenant's earlier build of the same
//! request is reused; otherwise the run's tab gets a `build` command and this DO holds the
//! build until the tab's `finalize`, answering its presign and spending its grants on the way.
//! The Worker forwards a build's presign, spend and finalize here (`SessionRequest::Build*`).

use super::commands::{build_frame, capsule_command, capsule_frame, store_new};
use super::shared::Shared;
use crate::platform::bindings::bucket;
use crate::platform::http::{error, json, refuse};
use crate::platform::r2::{record_build, reusable_build, stored_layer};
use crate::platform::signer::signer;
use crate::platform::{now_ms, random};
use relay_core::capsule::jws::Signer;
use relay_core::capsule::layer::check_deps_layer;
use relay_core::capsule::{build_capsule, CapsuleSpec, Deps};
use relay_core::error::{ErrorName, HttpError};
use relay_core::packages::grant::{RunRef, UPLOAD_PATH};
use relay_core::packages::{DepsRequest, LayerClaim, PendingBuild, Proposal, UploadGrant};
use relay_core::protocol::{Caller, TabCommand};
use serde::Deserialize;
use serde_json::{json, Value};
use worker::{Response, Result};

/// A run whose capsule needs a deps layer: the call's spec, its dependencies and their key.
pub struct Packaged {
    pub spec: CapsuleSpec,
    pub request: DepsRequest,
    pub key: String,
    pub signer: Signer,
}

/// The command for a packaged run's tab: the capsule, when this tenant built the same request
/// before and its layer is still there, else a `build` command. A failure is the reason to
/// end the run with.
pub async fn prepare(
    shared: &Shared,
    caller: &Caller,
    run: &str,
    job: &Packaged,
) -> std::result::Result<Vec<u8>, String> {
    let bucket = bucket(&shared.env).map_err(|e| format!("R2 is unavailable ({e}); retry the call"))?;
    if let Some(record) = reusable_build(&bucket, &caller.tenant.id, &job.key).await {
        let spec = CapsuleSpec { deps: Deps::Uploaded(record.layer), ..job.spec.clone() };
        let capsule = build_capsule(spec, &job.signer).map_err(|e| e.to_string())?;
        store_new(shared, caller, &capsule).await?;
        shared.persisted("runs", shared.store().audit_capsule(run, &capsule.hash));
        return Ok(capsule_frame(&job.signer, caller, run, &capsule));
    }
    shared.start_build(run, PendingBuild::new(job.key.clone(), job.request.clone(), job.spec.clone()));
    Ok(build_frame(&job.signer, caller, run, &job.spec, &job.request))
}

fn no_build(run: &str) -> Response {
    refuse(
        ErrorName::NotFound,
        format!("run {run} has no build in progress (it ended, or was finalized); call the tool again"),
    )
}

/// A build's presign: upload grants for the layers the tab built, `{layers: [{id, sha256,
/// size}]}` -> `{grants: [{layer, url, grant, expiresAt}]}`: `PUT url` with `Authorization:
/// Bearer <grant>`.
pub fn presign(shared: &Shared, caller: &Caller, run: &str, ask: &[u8]) -> Result<Response> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Ask {
        layers: Vec<LayerClaim>,
    }
    let ask: Ask = match serde_json::from_slice(ask) {
        Ok(ask) => ask,
        Err(e) => {
            return Ok(refuse(
                ErrorName::ValidationError,
                format!("presign: {e}; expected {{\"layers\": [{{\"id\": \"deps\", \"sha256\", \"size\"}}]}}"),
            ))
        }
    };
    let signer = signer(&shared.env)?;
    let who = RunRef { tenant: caller.tenant.id.clone(), session: caller.session.clone(), run: run.to_owned() };
    let jti = || format!("g_{}", hex::encode(random::<12>()));
    let Some(granted) = shared.with_build(run, |build| build.presign(&who, &ask.layers, now_ms() / 1000, jti)) else {
        return Ok(no_build(run));
    };
    Ok(match granted {
        Ok(grants) => {
            let listed: Vec<Value> = grants
                .iter()
                .map(|g| json!({ "layer": g.layer, "url": UPLOAD_PATH, "grant": g.sign(&signer), "expiresAt": g.exp * 1000 }))
                .collect();
            json(200, &json!({ "grants": listed }))
        }
        Err(e) => error(e),
    })
}

/// A build's spend: the Worker received bytes matching `grant`; the grant is spent here, once,
/// before the Worker stores them (204).
pub fn spend(shared: &Shared, grant: &UploadGrant) -> Result<Response> {
    Ok(match shared.with_build(&grant.run, |build| build.spend(grant)) {
        None => no_build(&grant.run),
        Some(Ok(())) => Response::empty()?.with_status(204),
        Some(Err(e)) => error(e),
    })
}

/// A build's finalize: checks the tab's proposal and the uploaded deps layer's entries
/// (`check_deps_layer`), signs the capsule with that layer, stores it and the build's record,
/// and answers with the `capsule` command's data (plus `capsuleUrl`), which the tab runs at
/// once. Nothing is stored before every check passed, and the record (what later calls reuse)
/// only after the capsule.
pub async fn finalize(shared: &Shared, caller: &Caller, run: &str, proposal: &[u8]) -> Result<Response> {
    let proposal: Proposal = match serde_json::from_slice(proposal) {
        Ok(proposal) => proposal,
        Err(e) => return Ok(refuse(ErrorName::ValidationError, format!("finalize: {e}"))),
    };
    let checked =
        shared.with_build(run, |build| build.finalize(&proposal, now_ms()).map(|(s, r)| (s, r, build.key.clone())));
    let Some(checked) = checked else {
        return Ok(no_build(run));
    };
    let (spec, record, key) = match checked {
        Ok(checked) => checked,
        Err(e) => return Ok(error(e)),
    };
    let bucket = bucket(&shared.env)?;
    let layer = match stored_layer(&bucket, &record.layer).await {
        Ok(layer) => layer,
        Err(refusal) => return Ok(refusal),
    };
    // Before anything is signed or recorded: a layer the page would refuse to run must not
    // become a capsule, nor a build that later calls reuse.
    if let Err(e) = check_deps_layer(&layer) {
        return Ok(error(HttpError::from(e)));
    }
    let signer = signer(&shared.env)?;
    let capsule = match build_capsule(spec, &signer) {
        Ok(capsule) => capsule,
        Err(e) => return Ok(error(HttpError::from(e))),
    };
    if let Err(why) = store_new(shared, caller, &capsule).await {
        return Ok(refuse(ErrorName::StorageUnavailable, why));
    }
    if let Err(e) = record_build(&bucket, &caller.tenant.id, &key, &record).await {
        worker::console_error!("recording build {key}: {e}"); // the next call builds again
    }
    shared.end_build(run);
    shared.persisted("runs", shared.store().audit_capsule(run, &capsule.hash));
    let command = TabCommand::Capsule(capsule_command(&signer, caller, run, &capsule));
    shared.set_command(run, command.frame(), Some(&capsule.manifest.runtime.id));
    let mut answer = command.data();
    answer["capsuleUrl"] = answer["manifestUrl"].clone();
    Ok(json(200, &answer))
}
