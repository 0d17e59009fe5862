//! Runs with dependencies (`relay_core::packages`): a tenant's earlier build of the same
//! request is reused; otherwise the run's tab gets a `build` command and this DO holds the
//! build until the tab's `finalize`, answering its presign and spending its grants on the way.
//! The Worker forwards `/build/presign`, `/build/spend` and `/build/finalize` here.

use super::commands::{build_frame, capsule_command, capsule_frame, store_new};
use super::shared::Shared;
use super::store;
use crate::edge::capsules::{layer_key, signer};
use crate::edge::http::{error, json, named, storage_unavailable};
use crate::edge::{now_ms, random};
use relay_core::capsule::jws::Signer;
use relay_core::capsule::layer::check_deps_layer;
use relay_core::capsule::{build_capsule, CapsuleSpec, Deps, FsLayer};
use relay_core::error::ErrorName;
use relay_core::forward::Caller;
use relay_core::mcp;
use relay_core::packages::grant::{RunRef, UPLOAD_PATH};
use relay_core::packages::{BuildError, BuildRecord, DepsRequest, LayerClaim, PendingBuild, Proposal, UploadGrant};
use serde::Deserialize;
use serde_json::{json, Value};
use worker::{Bucket, Request, Response, Result};

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
    let bucket = shared.env.bucket("R2_CAPSULES").map_err(|e| format!("R2 is unavailable ({e}); retry the call"))?;
    if let Some(record) = reusable(&bucket, &caller.tenant.id, &job.key).await {
        let spec = CapsuleSpec { deps: Deps::Uploaded(record.layer), ..job.spec.clone() };
        let capsule = build_capsule(spec, &job.signer).map_err(|e| e.to_string())?;
        store_new(shared, caller, &capsule).await?;
        store::audit_capsule(&shared.storage.sql(), run, &capsule.hash);
        return Ok(capsule_frame(&job.signer, caller, run, &capsule));
    }
    shared.start_build(run, PendingBuild::new(job.key.clone(), job.request.clone(), job.spec.clone()));
    Ok(build_frame(&job.signer, caller, run, &job.spec, &job.request))
}

/// Where a tenant's build of request `key` is recorded.
fn record_key(tenant_id: &str, key: &str) -> String {
    format!("builds/{tenant_id}/{key}.json")
}

/// The tenant's build of `key`, if it may be reused now and its layer is stored. Any failure
/// to read it just means building again.
async fn reusable(bucket: &Bucket, tenant_id: &str, key: &str) -> Option<BuildRecord> {
    let object = bucket.get(record_key(tenant_id, key)).execute().await.ok()??;
    let bytes = object.body()?.bytes().await.ok()?;
    let record: BuildRecord = serde_json::from_slice(&bytes).ok()?;
    let head = bucket.head(layer_key(&record.layer.sha256)).await.ok()??;
    (record.reusable(now_ms()) && head.size() == record.layer.size).then_some(record)
}

/// The run a request names in `?run=`.
fn run_of(req: &Request) -> Result<String> {
    Ok(req.url()?.query_pairs().find(|(k, _)| k == "run").map(|(_, v)| v.into_owned()).unwrap_or_default())
}

fn no_build(run: &str) -> Response {
    error(
        404,
        "NotFound",
        format!("run {run} has no build in progress (it ended, or was finalized); call the tool again"),
    )
}

fn refused(e: BuildError) -> Response {
    error(e.status, e.name, e.message)
}

/// The uploaded deps layer's bytes, read from R2 within the size its claim was held to (the
/// 20 MiB limit), or the answer to give instead.
async fn stored_layer(bucket: &Bucket, layer: &FsLayer) -> std::result::Result<Vec<u8>, Response> {
    let missing = || {
        let message = format!("layer deps ({}) is not in storage; upload it again under a new grant", layer.sha256);
        error(409, "LayerNotUploaded", message)
    };
    let object = match bucket.get(layer_key(&layer.sha256)).execute().await {
        Ok(Some(object)) if object.size() == layer.size => object,
        Ok(_) => return Err(missing()),
        Err(e) => return Err(storage_unavailable("R2", &e)),
    };
    match object.body() {
        Some(body) => body.bytes().await.map_err(|e| storage_unavailable("R2", &e)),
        None => Err(missing()),
    }
}

/// `/build/presign?run=`: upload grants for the layers the tab built, `{layers: [{id, sha256,
/// size}]}` -> `{grants: [{layer, url, grant, expiresAt}]}`: `PUT url` with `Authorization:
/// Bearer <grant>`.
pub async fn presign(shared: &Shared, mut req: Request, caller: &Caller) -> Result<Response> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Ask {
        layers: Vec<LayerClaim>,
    }
    let run = run_of(&req)?;
    let ask: Ask = match serde_json::from_slice(&req.bytes().await?) {
        Ok(ask) => ask,
        Err(e) => {
            return Ok(named(
                ErrorName::ValidationError,
                format!("presign: {e}; expected {{\"layers\": [{{\"id\": \"deps\", \"sha256\", \"size\"}}]}}"),
            ))
        }
    };
    let signer = signer(&shared.env)?;
    let who = RunRef { tenant: caller.tenant.id.clone(), session: caller.session.clone(), run: run.clone() };
    let jti = || format!("g_{}", hex::encode(random::<12>()));
    let Some(granted) = shared.with_build(&run, |build| build.presign(&who, &ask.layers, now_ms() / 1000, jti)) else {
        return Ok(no_build(&run));
    };
    Ok(match granted {
        Ok(grants) => {
            let listed: Vec<Value> = grants
                .iter()
                .map(|g| json!({ "layer": g.layer, "url": UPLOAD_PATH, "grant": g.sign(&signer), "expiresAt": g.exp * 1000 }))
                .collect();
            json(200, &json!({ "grants": listed }))
        }
        Err(e) => refused(e),
    })
}

/// `/build/spend`: the Worker received bytes matching the grant in the body; the grant is
/// spent here, once, before the Worker stores them (204).
pub async fn spend(shared: &Shared, mut req: Request) -> Result<Response> {
    let grant: UploadGrant = serde_json::from_slice(&req.bytes().await?)?;
    Ok(match shared.with_build(&grant.run, |build| build.spend(&grant)) {
        None => no_build(&grant.run),
        Some(Ok(())) => Response::empty()?.with_status(204),
        Some(Err(e)) => refused(e),
    })
}

/// `/build/finalize?run=`: checks the tab's proposal and the uploaded deps layer's entries
/// (`check_deps_layer`), signs the capsule with that layer, stores it and the build's record,
/// and answers with the `capsule` command's data (plus `capsuleUrl`), which the tab runs at
/// once. Nothing is stored before every check passed, and the record (what later calls reuse)
/// only after the capsule.
pub async fn finalize(shared: &Shared, mut req: Request, caller: &Caller) -> Result<Response> {
    let run = run_of(&req)?;
    let proposal: Proposal = match serde_json::from_slice(&req.bytes().await?) {
        Ok(proposal) => proposal,
        Err(e) => return Ok(named(ErrorName::ValidationError, format!("finalize: {e}"))),
    };
    let checked =
        shared.with_build(&run, |build| build.finalize(&proposal, now_ms()).map(|(s, r)| (s, r, build.key.clone())));
    let Some(checked) = checked else {
        return Ok(no_build(&run));
    };
    let (spec, record, key) = match checked {
        Ok(checked) => checked,
        Err(e) => return Ok(refused(e)),
    };
    let bucket = shared.env.bucket("R2_CAPSULES")?;
    let layer = match stored_layer(&bucket, &record.layer).await {
        Ok(layer) => layer,
        Err(refusal) => return Ok(refusal),
    };
    // Before anything is signed or recorded: a layer the page would refuse to run must not
    // become a capsule, nor a build that later calls reuse.
    if let Err(e) = check_deps_layer(&layer) {
        return Ok(error(400, e.error_name(), e.to_string()));
    }
    let signer = signer(&shared.env)?;
    let capsule = match build_capsule(spec, &signer) {
        Ok(capsule) => capsule,
        Err(e) => return Ok(error(400, e.error_name(), e.to_string())),
    };
    if let Err(why) = store_new(shared, caller, &capsule).await {
        return Ok(error(503, "StorageUnavailable", why));
    }
    let stored = serde_json::to_vec(&record)?;
    if let Err(e) = bucket.put(record_key(&caller.tenant.id, &key), stored).execute().await {
        worker::console_error!("recording build {key}: {e}"); // the next call builds again
    }
    shared.end_build(&run);
    store::audit_capsule(&shared.storage.sql(), &run, &capsule.hash);
    let mut command = capsule_command(&signer, caller, &run, &capsule);
    let frame = mcp::sse_frame("capsule", &command, None).into_bytes();
    shared.set_command(&run, frame, Some(&capsule.manifest.runtime.id));
    command["capsuleUrl"] = command["manifestUrl"].clone();
    Ok(json(200, &command))
}
