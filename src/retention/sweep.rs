//! The scheduled sweep's loops over the stores (the Worker gives them R2 and its directory of
//! tenants and relay sessions, `durable/src/edge/retention.rs`; the native tests memory):
//!
//! - [`sweep_stored`]: capsules, then build records, then layers, a page of R2's listing at a
//!   time. A page's doomed objects are looked at again (`head`, one per doomed key) just before
//!   the delete, and one stored again since it was listed (a relay session that uses it, or a
//!   layer stored again) is kept: R2's `uploaded` moved past the one judged.
//! - [`sweep_bodies`]: each relay session listed asked to sweep its workspace bodies, in the
//!   listing's order. A tenant whose record cannot be read, or a relay session that fails, is
//!   noted and skipped: the others are still swept.
//!
//! - [`measure_stored`]: after both, what each tenant stores now, summed from R2's listing,
//!   for its ledger (`quota::Charge::StoredMeasured`).
//!
//! What failed is returned as problems for the Worker to log; nothing is retried within a sweep
//! (the next trigger starts over).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{
    stored_owner, unused, StoredSweep, Sweep, BUILD_PREFIX, CAPSULE_PREFIX, LAYER_GRACE_MS, LAYER_PREFIX, OUT_PREFIX,
    WORKSPACE_PREFIX,
};
use crate::auth::Tenant;
use crate::capsule::Manifest;
use crate::keys;
use crate::packages::BuildRecord;
use crate::stores::{Blobs, Listing, StorageError};

/// What the sweep reads besides R2.
#[allow(async_fn_in_trait)] // as `Blobs`
pub trait Directory {
    /// The tenant's record (KV); `None` when there is none (a deletion erased it).
    async fn tenant(&self, tenant_id: &str) -> Result<Option<Tenant>, StorageError>;
    /// The relay sessions listed in KV, as their keys (`keys::listed_relay_session`).
    async fn relay_sessions(&self) -> Result<Vec<String>, StorageError>;
    /// Asks the tenant's relay session `session` to sweep its bodies as of `as_of_ms`.
    async fn sweep_bodies(&self, tenant: Tenant, session: &str, as_of_ms: u64) -> Result<Sweep, String>;
}

/// The sweep of capsules, build records and layers as of `as_of_ms`, and what went wrong.
/// Layers are judged only if every capsule and build record was.
pub async fn sweep_stored(blobs: &impl Blobs, directory: &impl Directory, as_of_ms: u64) -> (StoredSweep, Vec<String>) {
    let mut run = Run { blobs, directory, as_of_ms, settings: HashMap::new(), stored: StoredSweep::default() };
    let mut problems = Vec::new();
    for prefix in [CAPSULE_PREFIX, BUILD_PREFIX, LAYER_PREFIX] {
        if let Err(e) = run.prefix(prefix, &mut problems).await {
            problems.push(format!("the sweep of {prefix} stopped: {e}"));
            break; // layers are judged against every standing capsule and build record, or not at all
        }
    }
    (run.stored, problems)
}

struct Run<'a, B, D> {
    blobs: &'a B,
    directory: &'a D,
    as_of_ms: u64,
    /// Each tenant's days, read once a sweep (`None`: its record could not be read: keep all).
    settings: HashMap<String, Option<u32>>,
    stored: StoredSweep,
}

impl<B: Blobs, D: Directory> Run<'_, B, D> {
    /// Every object under `prefix`, a page at a time: judged, looked at again, deleted.
    async fn prefix(&mut self, prefix: &str, problems: &mut Vec<String>) -> Result<(), StorageError> {
        let mut cursor = None;
        loop {
            let mut page = self.blobs.list(prefix, cursor.take()).await?;
            self.learn_settings(&page.objects, problems).await;
            let mut doomed = Vec::new();
            for (key, uploaded_ms) in &page.objects {
                let meta = match page.layers.remove(key) {
                    Some(meta) => Some(meta),
                    None => self.layers_read(key, *uploaded_ms).await,
                };
                if self.judge(key, *uploaded_ms, meta.as_deref()) {
                    doomed.push((key.clone(), *uploaded_ms, meta));
                }
            }
            let deleted = self.still_as_listed(doomed).await?;
            if !deleted.is_empty() {
                self.blobs.delete(deleted).await?;
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// Reads the tenant record of each owner on the page not read yet this sweep.
    async fn learn_settings(&mut self, objects: &[(String, u64)], problems: &mut Vec<String>) {
        for (key, _) in objects {
            let Some(owner) = stored_owner(key) else { continue };
            if self.settings.contains_key(owner) {
                continue;
            }
            // A tenant with no record (deleted, its deletion cut short) keeps the default.
            let days = match self.directory.tenant(owner).await {
                Ok(tenant) => Some(tenant.map(|t| t.defaults.retention).unwrap_or_default().unused_days),
                Err(e) => {
                    problems.push(format!("tenant {owner}'s record: {e}; its capsules and build records are kept"));
                    None
                }
            };
            self.settings.insert(owner.to_owned(), days);
        }
    }

    fn judge(&mut self, key: &str, uploaded_ms: u64, meta: Option<&str>) -> bool {
        if key.starts_with(LAYER_PREFIX) {
            return self.stored.judge_layer(key, uploaded_ms, self.as_of_ms);
        }
        let days = stored_owner(key).and_then(|owner| self.settings.get(owner).copied()).flatten();
        // Unknown settings keep everything: days past any `uploaded`.
        self.stored.judge_stored(key, uploaded_ms, meta, days.unwrap_or(u32::MAX), self.as_of_ms)
    }

    /// The layers a capsule.json or build record stored before they were named in its metadata
    /// names, read from the object itself; only for one that will stand (its layers matter).
    /// One that cannot be read stays unnamed (no layer goes this sweep).
    async fn layers_read(&self, key: &str, uploaded_ms: u64) -> Option<String> {
        let owner = stored_owner(key)?;
        let days = self.settings.get(owner).copied().flatten().unwrap_or(u32::MAX);
        if unused(uploaded_ms, self.as_of_ms, days) {
            return None;
        }
        self.blobs.get(key).await.ok()?.and_then(|bytes| layers_in(key, &bytes))
    }

    /// The doomed keys R2 still holds as they were listed; one stored again since (its
    /// `uploaded` moved) or gone already is kept out of the delete, and spared in the count.
    async fn still_as_listed(
        &mut self,
        doomed: Vec<(String, u64, Option<String>)>,
    ) -> Result<Vec<String>, StorageError> {
        let mut deleted = Vec::new();
        for (key, judged_ms, meta) in doomed {
            match self.blobs.head(&key).await? {
                Some(head) if head.uploaded_ms == judged_ms => deleted.push(key),
                _ => self.stored.spare(&key, meta.as_deref()),
            }
        }
        Ok(deleted)
    }
}

/// The layers (as `retention::LAYERS_META` names them) the capsule.json or build record under
/// `key` names in its own bytes; `None` when they do not parse as one.
fn layers_in(key: &str, bytes: &[u8]) -> Option<String> {
    if key.starts_with(BUILD_PREFIX) {
        return serde_json::from_slice::<BuildRecord>(bytes).ok().map(|record| record.layer.sha256);
    }
    let manifest: Manifest = serde_json::from_slice(bytes).ok()?;
    Some(super::layers_meta(manifest.fs_layers.iter().map(|layer| layer.sha256.as_str())))
}

/// Asks each relay session `directory` lists to sweep its workspace bodies as of `as_of_ms`;
/// their counts added up, and what went wrong (a relay session skipped, or a tenant's).
pub async fn sweep_bodies(directory: &impl Directory, as_of_ms: u64) -> (Sweep, Vec<String>) {
    let (mut sweep, mut problems) = (Sweep::default(), Vec::new());
    let listed = match directory.relay_sessions().await {
        Ok(listed) => listed,
        Err(e) => return (sweep, vec![format!("listing the relay sessions: {e}")]),
    };
    // Each tenant read once: `None` when it has no record (skipped) or it could not be read.
    let mut tenants: HashMap<String, Option<Tenant>> = HashMap::new();
    for key in listed {
        let Some((tenant_id, session)) = keys::listed_relay_session(&key) else { continue };
        if !tenants.contains_key(tenant_id) {
            let tenant = directory.tenant(tenant_id).await.unwrap_or_else(|e| {
                problems.push(format!("tenant {tenant_id}'s record: {e}; its relay sessions are not swept"));
                None
            });
            tenants.insert(tenant_id.to_owned(), tenant);
        }
        let Some(tenant) = tenants[tenant_id].clone() else { continue };
        match directory.sweep_bodies(tenant, session, as_of_ms).await {
            Ok(swept) => sweep.merge(&swept),
            Err(e) => problems.push(format!("relay session {tenant_id}/{session} did not sweep its bodies: {e}")),
        }
    }
    (sweep, problems)
}

/// The R2 prefixes whose objects count to a tenant's `storedBytes`, each `<prefix><tenant>/...`.
/// Layers (`layers/<sha256>`, shared by hash) count to every tenant one names: [`measure_stored`].
pub const MEASURED_PREFIXES: [&str; 4] = [CAPSULE_PREFIX, BUILD_PREFIX, OUT_PREFIX, WORKSPACE_PREFIX];

/// What each of `tenants` stores in R2 as of `as_of_ms` (every one of them in the answer, 0 for
/// one with nothing: its files may all have been deleted since the last measurement): the
/// objects listed under [`MEASURED_PREFIXES`], and each layer once for every tenant whose
/// capsules or build records name it (their [`super::LAYERS_META`], or for one stored before
/// its metadata named them, its own bytes, as the sweep reads them): the sweep keeps a layer
/// while any of them stands, so each of those tenants keeps it, and a tenant pays for nothing
/// it does not keep. A layer nothing names is kept for [`LAYER_GRACE_MS`] after its upload
/// (its build's finalize may be coming): its uploader ([`super::UPLOADER_META`]) pays for it
/// meanwhile. Objects of tenants not named (a deletion under way) are not counted. A listing
/// that fails fails the whole measurement: a partial sum would let the tenant store past its
/// quota (an old object's read that fails only drops the layers it names).
pub async fn measure_stored(
    blobs: &impl Blobs,
    tenants: &[String],
    as_of_ms: u64,
) -> Result<BTreeMap<String, u64>, StorageError> {
    let mut stored: BTreeMap<String, u64> = tenants.iter().map(|id| (id.clone(), 0)).collect();
    // Each layer named, with the tenants that name it; the capsules and build records whose
    // metadata names none (stored before it did), with their owners.
    let mut keepers: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut unlabelled: Vec<(String, String)> = Vec::new();
    for prefix in MEASURED_PREFIXES {
        each_page(blobs, prefix, |page| {
            for (key, _) in &page.objects {
                let owner = key.strip_prefix(prefix).and_then(|rest| rest.split_once('/')).map(|(owner, _)| owner);
                let Some((owner, sum)) = owner.and_then(|owner| stored.get_mut(owner).map(|sum| (owner, sum))) else {
                    continue;
                };
                *sum = sum.saturating_add(page.sizes.get(key).copied().unwrap_or(0));
                match page.layers.get(key) {
                    Some(meta) => keep(&mut keepers, owner, Some(meta)),
                    None if prefix == CAPSULE_PREFIX || prefix == BUILD_PREFIX => {
                        unlabelled.push((key.clone(), owner.to_owned()))
                    }
                    None => {}
                }
            }
        })
        .await?;
    }
    // An unreadable one counts no layers, as the sweep reads it: one bad old object (or a
    // spent subrequest budget) must not leave every tenant unmeasured, its charges only growing.
    for (key, owner) in unlabelled {
        let named = blobs.get(&key).await.ok().flatten().and_then(|bytes| layers_in(&key, &bytes));
        keep(&mut keepers, &owner, named.as_deref());
    }
    each_page(blobs, LAYER_PREFIX, |page| {
        for (key, uploaded_ms) in &page.objects {
            let size = page.sizes.get(key).copied().unwrap_or(0);
            let named_by = key.strip_prefix(LAYER_PREFIX).and_then(|sha| keepers.get(sha));
            let in_grace = as_of_ms.saturating_sub(*uploaded_ms) < LAYER_GRACE_MS;
            let uploader = page.uploaders.get(key).filter(|_| named_by.is_none() && in_grace);
            for owner in named_by.into_iter().flatten().chain(uploader) {
                if let Some(sum) = stored.get_mut(owner) {
                    *sum = sum.saturating_add(size);
                }
            }
        }
    })
    .await?;
    Ok(stored)
}

/// Notes that `owner` keeps the layers `meta` names (a [`super::LAYERS_META`] value).
fn keep(keepers: &mut HashMap<String, BTreeSet<String>>, owner: &str, meta: Option<&str>) {
    for layer in meta.and_then(super::layers_named).unwrap_or_default() {
        keepers.entry(layer.to_owned()).or_default().insert(owner.to_owned());
    }
}

/// `each` of the pages R2 lists under `prefix`, in order.
async fn each_page(blobs: &impl Blobs, prefix: &str, mut each: impl FnMut(Listing)) -> Result<(), StorageError> {
    let mut cursor = None;
    loop {
        let page = blobs.list(prefix, cursor.take()).await?;
        let next = page.next.clone();
        each(page);
        match next {
            Some(next) => cursor = Some(next),
            None => return Ok(()),
        }
    }
}
