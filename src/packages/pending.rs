//! A build in progress on a tab, as the Session DO keeps it: the grants it handed out and
//! which were spent, and the checks `finalize` makes on what the tab proposes. The tab is
//! trusted with nothing: a layer counts only if it was uploaded under a grant of this build
//! with the declared sha256 and size, and the policy it proposes may only narrow the run's.

use super::grant::{RunRef, UploadGrant};
use super::record::BuildRecord;
use super::request::DepsRequest;
use crate::capsule::limits::check_sizes;
use crate::capsule::{layer_entry, CapsuleSpec, Deps};
use crate::error::{ErrorName, HttpError};
use crate::policy::{intersect, Policy, PolicyOverride};
use serde::Deserialize;

/// Most `name@version` lines a proposal may list.
const MAX_RESOLVED: usize = 1000;

/// A refused presign, upload or finalize.
fn invalid(message: String) -> HttpError {
    HttpError::new(ErrorName::ValidationError, message)
}

/// A layer as a tab declares it, to presign or to finalize.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerClaim {
    pub id: String,
    pub sha256: String,
    pub size: u64,
}

/// What a tab proposes to `/capsule/finalize`: its layers, optionally a policy (only ever
/// narrower than the run's), and what the request resolved to.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    pub layers: Vec<LayerClaim>,
    #[serde(default)]
    pub policy: Option<Policy>,
    #[serde(default)]
    pub resolved: Vec<String>,
}

#[derive(Debug, Clone)]
struct Granted {
    jti: String,
    layer: String,
    sha256: String,
    size: u64,
    spent: bool,
}

/// One run's build, from its `build` command to its finalize: the request, its key, and the
/// capsule spec (code, entry, the run's effective policy) the uploaded layer completes.
#[derive(Debug, Clone)]
pub struct PendingBuild {
    pub key: String,
    pub request: DepsRequest,
    pub spec: CapsuleSpec,
    granted: Vec<Granted>,
}

impl PendingBuild {
    pub fn new(key: String, request: DepsRequest, spec: CapsuleSpec) -> Self {
        PendingBuild { key, request, spec, granted: Vec::new() }
    }

    /// Grants for `layers` (only `deps`: the DO zips the code layer from the call itself),
    /// checked for shape and size; `jti` makes each grant's unique id.
    pub fn presign(
        &mut self,
        run: &RunRef,
        layers: &[LayerClaim],
        now_s: u64,
        mut jti: impl FnMut() -> String,
    ) -> Result<Vec<UploadGrant>, HttpError> {
        if layers.is_empty() {
            return Err(invalid("layers: list the deps layer to upload".into()));
        }
        for claim in layers {
            check_claim(claim)?;
        }
        Ok(layers
            .iter()
            .map(|claim| {
                let grant = UploadGrant::new(run, &claim.id, &claim.sha256, claim.size, now_s, jti());
                self.granted.push(Granted {
                    jti: grant.jti.clone(),
                    layer: claim.id.clone(),
                    sha256: claim.sha256.clone(),
                    size: claim.size,
                    spent: false,
                });
                grant
            })
            .collect())
    }

    /// Spends `grant` for an upload whose bytes matched it: refused if this build never gave
    /// it or it was spent already.
    pub fn spend(&mut self, grant: &UploadGrant) -> Result<(), HttpError> {
        let Some(granted) = self.granted.iter_mut().find(|g| g.jti == grant.jti) else {
            return Err(HttpError::new(
                ErrorName::NotFound,
                "this build gave no such grant (it was finalized or ended); ask POST /capsule/presign for a new one",
            ));
        };
        if granted.spent {
            return Err(HttpError::new(
                ErrorName::GrantSpent,
                format!("the upload grant for layer {} was already used; a grant uploads once", granted.layer),
            ));
        }
        granted.spent = true;
        Ok(())
    }

    /// Checks a proposal against what was uploaded and the run's effective policy; returns
    /// the spec to sign (with the uploaded deps layer, and the proposal's policy if it only
    /// narrows the run's) and the build's record.
    pub fn finalize(&self, proposal: &Proposal, now_ms: u64) -> Result<(CapsuleSpec, BuildRecord), HttpError> {
        let [claim] = proposal.layers.as_slice() else {
            return Err(invalid(format!(
                "layers: expected exactly the deps layer, got {} layers",
                proposal.layers.len()
            )));
        };
        check_claim(claim)?;
        let uploaded = self
            .granted
            .iter()
            .any(|g| g.spent && g.layer == claim.id && g.sha256 == claim.sha256 && g.size == claim.size);
        if !uploaded {
            return Err(HttpError::new(ErrorName::LayerNotUploaded,
                format!(
                    "layer {} (sha256 {}, {} bytes) was not uploaded under a grant of this build; upload it with the URL /capsule/presign gave, then finalize",
                    claim.id, claim.sha256, claim.size
                ),
            ));
        }
        let policy = match &proposal.policy {
            None => self.spec.policy.clone(),
            Some(proposed) => narrower(proposed, &self.spec.policy)?,
        };
        if proposal.resolved.len() > MAX_RESOLVED || proposal.resolved.iter().any(|r| r.len() > 300) {
            return Err(invalid(format!("resolved: at most {MAX_RESOLVED} name@version lines of 300 characters")));
        }
        let layer = layer_entry(&claim.id, &claim.sha256, claim.size);
        let record = BuildRecord {
            layer: layer.clone(),
            resolved: proposal.resolved.clone(),
            built_at_ms: now_ms,
            pinned: self.request.pinned(),
        };
        let spec = CapsuleSpec { deps: Deps::Uploaded(layer), policy, ..self.spec.clone() };
        Ok((spec, record))
    }
}

fn check_claim(claim: &LayerClaim) -> Result<(), HttpError> {
    if claim.id != "deps" {
        return Err(invalid(format!(
            "layers: {:?} is not a layer a build uploads; only \"deps\" (the code layer is made from the call)",
            claim.id
        )));
    }
    let hex =
        claim.sha256.len() == 64 && claim.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !hex {
        return Err(invalid(format!("layers: sha256 {:?} is not 64 lowercase hex digits", claim.sha256)));
    }
    if claim.size == 0 {
        return Err(invalid("layers: size must be the layer's byte count, above 0".into()));
    }
    check_sizes(0, claim.size).map_err(|e| HttpError::new(ErrorName::PayloadTooLarge, e.to_string()))
}

/// `proposed`, if it is no wider than `effective` anywhere: intersecting it with `effective`
/// must leave it as it is. Otherwise a PolicyDenied naming the first section it widens.
fn narrower(proposed: &Policy, effective: &Policy) -> Result<Policy, HttpError> {
    proposed.validate().map_err(|why| invalid(format!("policy: {why}")))?;
    let as_override: PolicyOverride =
        serde_json::to_value(proposed).and_then(serde_json::from_value).map_err(|e| invalid(format!("policy: {e}")))?;
    let narrowed = intersect(effective, Some(&as_override));
    let widened = [
        ("network", narrowed.network != proposed.network),
        ("filesystem", narrowed.filesystem != proposed.filesystem),
        ("limits", narrowed.limits != proposed.limits),
        ("mcps", narrowed.mcps != proposed.mcps),
    ];
    match widened.iter().find(|(_, differs)| *differs) {
        Some((section, _)) => Err(HttpError::new(ErrorName::PolicyDenied,
            format!("policy.{section}: the proposed policy is wider than the run's; a build may only narrow it (leave policy out to keep the run's)"),
        )),
        None => Ok(narrowed),
    }
}
