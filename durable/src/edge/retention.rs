//! The scheduled cleanup (the Cron Trigger in wrangler.toml): deletes the `/out` files no
//! download URL can reach any more (`relay_core::retention` decides), a page of R2's listing
//! at a time, and logs one line with what it looked at and deleted, by tenant.

use crate::platform::bindings::bucket;
use crate::platform::now_ms;
use relay_core::retention::{Sweep, OUT_PREFIX};
use worker::{Env, Result};

/// Sweeps the `/out` files as of `now_ms` (the trigger's scheduled time) and logs the count.
pub async fn run(env: &Env, scheduled_ms: u64) {
    let started = now_ms();
    match sweep(env, scheduled_ms).await {
        Ok(sweep) => worker::console_log!("{}", sweep.log_line(scheduled_ms, now_ms() - started)),
        // Whatever was deleted stays deleted; the next trigger takes up the rest.
        Err(e) => worker::console_error!("retention: the sweep of /out files stopped: {e}"),
    }
}

async fn sweep(env: &Env, now_ms: u64) -> Result<Sweep> {
    let bucket = bucket(env)?;
    let mut sweep = Sweep::default();
    let mut cursor = None;
    loop {
        let mut list = bucket.list().prefix(OUT_PREFIX);
        if let Some(cursor) = cursor.take() {
            list = list.cursor(cursor);
        }
        let page = list.execute().await?;
        let expired: Vec<String> = page
            .objects()
            .iter()
            .filter(|object| sweep.judge(&object.key(), object.uploaded().as_millis(), now_ms))
            .map(|object| object.key())
            .collect();
        if !expired.is_empty() {
            bucket.delete_multiple(expired).await?;
        }
        if !page.truncated() {
            return Ok(sweep);
        }
        cursor = page.cursor();
    }
}
