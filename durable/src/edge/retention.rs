//! The scheduled cleanup (the Cron Trigger in wrangler.toml), `relay_core::retention` deciding:
//! the `/out` files no download URL can reach any more; then the capsules and build records
//! their tenant's `retention.unusedDays` says are unused (R2's `uploaded`, which relay sessions
//! renew while they use them), and the layers no capsule or build record left standing names;
//! then each relay session listed in KV is asked to sweep its own workspace bodies
//! (`relay_core::relay_session::body_sweep`: only it knows which its index names). A page of
//! R2's listing at a time; one log line for each kind, with what it looked at and deleted, by
//! tenant.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::tenants::by_id;
use crate::platform::bindings::{bucket, var};
use crate::platform::{kv, now_ms, stub};
use relay_core::auth::Tenant;
use relay_core::keys;
use relay_core::protocol::{Caller, SessionRequest};
use relay_core::retention::{
    stored_owner, RetentionSettings, StoredSweep, Sweep, BUILD_PREFIX, CAPSULE_PREFIX, LAYERS_META, LAYER_PREFIX,
    OUT_PREFIX,
};
use worker::{Bucket, Env, Include, Object, Objects, Result};

/// Sweeps as of `scheduled_ms` (the trigger's scheduled time) and logs the counts.
pub async fn run(env: &Env, scheduled_ms: u64) {
    let started = now_ms();
    match sweep_out_files(env, scheduled_ms).await {
        Ok(sweep) => log(&sweep, "out files", scheduled_ms, started),
        // Whatever was deleted stays deleted; the next trigger takes up the rest.
        Err(e) => worker::console_error!("retention: the sweep of /out files stopped: {e}"),
    }
    let mut stored = StoredSweep::default();
    match sweep_stored(env, scheduled_ms, &mut stored).await {
        Ok(()) => sweep_layers(env, scheduled_ms, stored).await,
        // Layers are judged only once every capsule and build record was: none is, now.
        Err(e) => worker::console_error!("retention: the sweep of capsules and build records stopped: {e}"),
    }
    let started = now_ms();
    match sweep_bodies(env, scheduled_ms).await {
        Ok(sweep) => log(&sweep, "workspace bodies", scheduled_ms, started),
        Err(e) => worker::console_error!("retention: the sweep of workspace bodies stopped: {e}"),
    }
}

/// Layers, once every capsule and build record was judged and all name their layers.
async fn sweep_layers(env: &Env, scheduled_ms: u64, mut stored: StoredSweep) {
    let started = now_ms();
    if stored.unnamed() > 0 {
        let unnamed = stored.unnamed();
        return worker::console_log!(
            "retention: layers not swept: {unnamed} capsules or build records left standing do not name their layers (stored before they did; they name them once stored again)"
        );
    }
    match sweep_each(env, LAYER_PREFIX, |o| stored.judge_layer(&o.key(), uploaded(o), scheduled_ms)).await {
        Ok(()) => log(&stored.layers, "layers", scheduled_ms, started),
        Err(e) => worker::console_error!("retention: the sweep of layers stopped: {e}"),
    }
}

/// Asks each relay session listed in KV to sweep its workspace bodies; adds up their counts.
/// A relay session whose tenant has no record is skipped (a deletion erased it); one that
/// fails is logged, and the next trigger asks it again.
async fn sweep_bodies(env: &Env, as_of_ms: u64) -> Result<Sweep> {
    let listed =
        kv::list(env, keys::RELAY_SESSION_PREFIX).await.map_err(|e| worker::Error::RustError(e.to_string()))?;
    let origin = var(env, "PUBLIC_URL").unwrap_or_default();
    let mut tenants: HashMap<String, Option<Tenant>> = HashMap::new();
    let mut sweep = Sweep::default();
    for key in listed {
        let Some((tenant_id, session)) = keys::listed_relay_session(&key) else { continue };
        if let Entry::Vacant(entry) = tenants.entry(tenant_id.to_owned()) {
            entry.insert(by_id(env, tenant_id).await?);
        }
        let Some(tenant) = tenants[tenant_id].clone() else { continue };
        let caller = Caller { tenant, session: session.to_owned(), origin: origin.clone() };
        let mut answer = stub::send(env, &caller, SessionRequest::SweepBodies { as_of_ms }).await?;
        match answer.status_code() {
            200 => sweep.merge(&answer.json::<Sweep>().await?),
            status => worker::console_error!(
                "retention: relay session {} did not sweep its bodies ({status}): {}",
                caller.object_name(),
                answer.text().await.unwrap_or_default()
            ),
        }
    }
    Ok(sweep)
}

fn log(sweep: &Sweep, what: &str, as_of_ms: u64, started: u64) {
    worker::console_log!("{}", sweep.log_line(what, as_of_ms, now_ms() - started));
}

fn uploaded(object: &Object) -> u64 {
    object.uploaded().as_millis()
}

async fn sweep_out_files(env: &Env, now_ms: u64) -> Result<Sweep> {
    let mut sweep = Sweep::default();
    sweep_each(env, OUT_PREFIX, |o| sweep.judge(&o.key(), uploaded(o), now_ms)).await?;
    Ok(sweep)
}

/// Capsules, then build records, each judged with its tenant's setting (read once a sweep,
/// when a page first lists something of the tenant); a log line for each.
async fn sweep_stored(env: &Env, as_of_ms: u64, stored: &mut StoredSweep) -> Result<()> {
    let bucket = bucket(env)?;
    let mut settings: HashMap<String, RetentionSettings> = HashMap::new();
    for prefix in [CAPSULE_PREFIX, BUILD_PREFIX] {
        let started = now_ms();
        let mut cursor = None;
        loop {
            let page = list(&bucket, prefix, true, cursor.take()).await?;
            for object in page.objects() {
                let Some(owner) = stored_owner(&object.key()).map(str::to_owned) else { continue };
                if let Entry::Vacant(entry) = settings.entry(owner) {
                    // A tenant with no record (deleted, its deletion cut short) keeps the default.
                    let retention = by_id(env, entry.key()).await?.map(|t| t.defaults.retention);
                    entry.insert(retention.unwrap_or_default());
                }
            }
            let mut deleted = Vec::new();
            for object in page.objects() {
                let key = object.key();
                let days = stored_owner(&key).and_then(|owner| settings.get(owner)).cloned().unwrap_or_default();
                let meta = object.custom_metadata()?;
                let layers = meta.get(LAYERS_META).map(String::as_str);
                if stored.judge_stored(&key, uploaded(&object), layers, days.unused_days, as_of_ms) {
                    deleted.push(key);
                }
            }
            delete(&bucket, deleted).await?;
            if !page.truncated() {
                break;
            }
            cursor = page.cursor();
        }
        match prefix {
            CAPSULE_PREFIX => log(&stored.capsules, "capsules", as_of_ms, started),
            _ => log(&stored.builds, "build records", as_of_ms, started),
        }
    }
    Ok(())
}

/// Lists every object under `prefix`, a page at a time, and deletes those `judge` says to.
async fn sweep_each(env: &Env, prefix: &str, mut judge: impl FnMut(&Object) -> bool) -> Result<()> {
    let bucket = bucket(env)?;
    let mut cursor = None;
    loop {
        let page = list(&bucket, prefix, false, cursor.take()).await?;
        delete(&bucket, page.objects().iter().filter(|o| judge(o)).map(Object::key).collect()).await?;
        if !page.truncated() {
            return Ok(());
        }
        cursor = page.cursor();
    }
}

/// A page (up to 1,000 objects) of the listing under `prefix`, from `cursor`, with each
/// object's custom metadata when `metadata`.
async fn list(bucket: &Bucket, prefix: &str, metadata: bool, cursor: Option<String>) -> Result<Objects> {
    let mut list = bucket.list().prefix(prefix);
    if metadata {
        list = list.include(vec![Include::CustomMetadata]);
    }
    if let Some(cursor) = cursor {
        list = list.cursor(cursor);
    }
    list.execute().await
}

/// Deletes `keys` (one page's). The one place the Worker's sweep removes what a tenant stored:
/// once the quota ledger counts stored bytes (README "Quotas", not done yet), the deleted
/// objects' sizes (the listing has them) are credited to their tenants here.
async fn delete(bucket: &Bucket, keys: Vec<String>) -> Result<()> {
    if !keys.is_empty() {
        bucket.delete_multiple(keys).await?;
    }
    Ok(())
}
