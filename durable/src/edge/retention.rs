//! The scheduled cleanup (the Cron Trigger in wrangler.toml), `relay_core::retention` deciding:
//! the `/out` files no download URL can reach any more; then the capsules and build records
//! their tenant's `retention.unusedDays` says are unused (R2's `uploaded`, which relay sessions
//! renew while they use them), and the layers no capsule or build record left standing names
//! (`relay_core::retention::sweep` over R2 and [`Edge`]); then each relay session listed in KV
//! is asked to sweep its own workspace bodies (`relay_core::relay_session::body_sweep`: only it
//! knows which its index names); then Python's memory snapshots that are not the current one
//! (`relay_core::runtime_snapshot::stale`); last, what each tenant stores now is measured and
//! sent to its ledger (`storedBytes`: `relay_core::quota`). One log line for each kind, with what it looked at and
//! deleted, by tenant; one error line for each thing that failed.

use super::runtime_snapshot;
use super::tenants::by_id;
use crate::platform::bindings::{bucket, var};
use crate::platform::r2::R2;
use crate::platform::{kv, ledger, now_ms, stub};
use relay_core::auth::Tenant;
use relay_core::keys;
use relay_core::protocol::{Caller, SessionRequest};
use relay_core::retention::sweep::{self, Directory};
use relay_core::retention::{Sweep, OUT_PREFIX};
use relay_core::runtime_snapshot as snapshot;
use relay_core::stores::StorageError;
use worker::{Bucket, Env, Object, Objects, Result};

/// Sweeps as of `scheduled_ms` (the trigger's scheduled time) and logs the counts.
pub async fn run(env: &Env, scheduled_ms: u64) {
    let started = now_ms();
    match sweep_out_files(env, scheduled_ms).await {
        Ok(sweep) => log(&sweep, "out files", scheduled_ms, started),
        // Whatever was deleted stays deleted; the next trigger starts over.
        Err(e) => worker::console_error!("retention: the sweep of /out files stopped: {e}"),
    }
    let (edge, started) = (Edge(env.clone()), now_ms());
    let (stored, problems) = sweep::sweep_stored(&R2(env.clone()), &edge, scheduled_ms).await;
    report(&problems);
    // The durations are the three kinds' together: they are swept in one pass of the core.
    for (sweep, what) in [(&stored.capsules, "capsules"), (&stored.builds, "build records"), (&stored.layers, "layers")]
    {
        log(sweep, what, scheduled_ms, started);
    }
    if stored.unnamed() > 0 {
        let unnamed = stored.unnamed();
        worker::console_log!(
            "retention: layers not swept: {unnamed} capsules or build records left standing could not be read for the layers they name"
        );
    }
    let started = now_ms();
    let (bodies, problems) = sweep::sweep_bodies(&edge, scheduled_ms).await;
    report(&problems);
    log(&bodies, "workspace bodies", scheduled_ms, started);
    let started = now_ms();
    match sweep_snapshots(env, scheduled_ms).await {
        Ok(sweep) => log(&sweep, "runtime snapshots", scheduled_ms, started),
        Err(e) => worker::console_error!("retention: the sweep of runtime snapshots stopped: {e}"),
    }
    measure(env, scheduled_ms).await;
}

/// Python's memory snapshots (no tenant's) that are not the current one, once it and they are
/// a day old. The whole listing is judged at once: one snapshot a deploy, so few pages.
async fn sweep_snapshots(env: &Env, now_ms: u64) -> Result<Sweep> {
    let current = runtime_snapshot::current_key(env).await?;
    let bucket = bucket(env)?;
    let (mut listed, mut cursor) = (Vec::new(), None);
    loop {
        let page = list(&bucket, snapshot::PREFIX, cursor.take()).await?;
        listed.extend(page.objects().iter().map(|o| (o.key(), o.uploaded().as_millis())));
        if !page.truncated() {
            break;
        }
        cursor = page.cursor();
    }
    let (doomed, sweep) = snapshot::stale(&listed, &current, now_ms);
    for page in doomed.chunks(1000) {
        delete(&bucket, page.to_vec()).await?;
    }
    Ok(sweep)
}

/// Measures what each tenant stores, after the sweeps' deletions, and tells its ledger; logs
/// `{"kind":"retention","what":"stored bytes","tenants","bytes","durationMs"}`. A measurement
/// that fails is not sent: each ledger keeps counting its puts on its last one.
async fn measure(env: &Env, at_ms: u64) {
    let started = now_ms();
    let prefix = keys::tenant_by_id("");
    let tenants: Vec<String> = match kv::list(env, &prefix).await {
        Ok(names) => names.iter().filter_map(|name| name.strip_prefix(&prefix).map(str::to_owned)).collect(),
        Err(e) => return worker::console_error!("retention: stored bytes not measured: listing the tenants: {e}"),
    };
    let stored = match sweep::measure_stored(&R2(env.clone()), &tenants, at_ms).await {
        Ok(stored) => stored,
        Err(e) => return worker::console_error!("retention: stored bytes not measured: {e}"),
    };
    for (tenant, bytes) in &stored {
        if let Err(why) = ledger::measured(env, tenant, *bytes, at_ms).await {
            worker::console_error!("retention: the ledger of tenant {tenant} did not take its stored bytes: {why}");
        }
    }
    let line = serde_json::json!({ "kind": "retention", "what": "stored bytes", "asOfMs": at_ms,
        "tenants": stored.len(), "bytes": stored.values().sum::<u64>(), "durationMs": now_ms() - started });
    worker::console_log!("{line}");
}

fn report(problems: &[String]) {
    for problem in problems {
        worker::console_error!("retention: {problem}");
    }
}

/// The Worker's tenants (KV) and relay sessions (KV's list, each one's Durable Object).
struct Edge(Env);

fn kv_failed(e: impl std::fmt::Display) -> StorageError {
    StorageError(e.to_string())
}

impl Directory for Edge {
    async fn tenant(&self, tenant_id: &str) -> std::result::Result<Option<Tenant>, StorageError> {
        by_id(&self.0, tenant_id).await.map_err(kv_failed)
    }

    async fn relay_sessions(&self) -> std::result::Result<Vec<String>, StorageError> {
        kv::list(&self.0, keys::RELAY_SESSION_PREFIX).await.map_err(kv_failed)
    }

    async fn sweep_bodies(&self, tenant: Tenant, session: &str, as_of_ms: u64) -> std::result::Result<Sweep, String> {
        let origin = var(&self.0, "PUBLIC_URL").unwrap_or_default();
        let caller = Caller { tenant, session: session.to_owned(), origin };
        let mut answer =
            stub::send(&self.0, &caller, SessionRequest::SweepBodies { as_of_ms }).await.map_err(|e| e.to_string())?;
        match answer.status_code() {
            200 => answer.json::<Sweep>().await.map_err(|e| e.to_string()),
            status => Err(format!("{status}: {}", answer.text().await.unwrap_or_default())),
        }
    }
}

fn log(sweep: &Sweep, what: &str, as_of_ms: u64, started: u64) {
    worker::console_log!("{}", sweep.log_line(what, as_of_ms, now_ms() - started));
}

/// `/out` files: nothing stores one again, so the listing's `uploaded` is the last word.
async fn sweep_out_files(env: &Env, now_ms: u64) -> Result<Sweep> {
    let bucket = bucket(env)?;
    let mut sweep = Sweep::default();
    let mut cursor = None;
    loop {
        let page = list(&bucket, OUT_PREFIX, cursor.take()).await?;
        let keys: Vec<String> = page
            .objects()
            .iter()
            .filter(|o| sweep.judge(&o.key(), o.uploaded().as_millis(), now_ms))
            .map(Object::key)
            .collect();
        delete(&bucket, keys).await?;
        if !page.truncated() {
            return Ok(sweep);
        }
        cursor = page.cursor();
    }
}

/// A page (up to 1,000 objects) of the listing under `prefix`, from `cursor`.
async fn list(bucket: &Bucket, prefix: &str, cursor: Option<String>) -> Result<Objects> {
    let mut list = bucket.list().prefix(prefix);
    if let Some(cursor) = cursor {
        list = list.cursor(cursor);
    }
    list.execute().await
}

/// Deletes `keys` (one page's). Nothing is credited to a ledger: the measurement after the
/// sweeps (`measure`) no longer finds them.
async fn delete(bucket: &Bucket, keys: Vec<String>) -> Result<()> {
    if !keys.is_empty() {
        bucket.delete_multiple(keys).await?;
    }
    Ok(())
}
