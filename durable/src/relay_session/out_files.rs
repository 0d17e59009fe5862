//! The count of each run's published `/out` files (`PUT /files`, `edge/files.rs`): the Worker
//! reserves a path's slot here before it stores the file in R2, and releases it when storing
//! fails. It is counted here, not in the Worker, because the relay session's DO takes one
//! request's synchronous part at a time: the count and the reservation are one step, so uploads
//! racing each other cannot pass `files::MAX_FILES_PER_RUN`.

use super::shared::Shared;
use crate::platform::http::{error, json, refuse, storage_unavailable};
use relay_core::error::ErrorName;
use relay_core::files::{too_many_files, Slot};
use serde_json::json;
use worker::Response;

/// Reserves `path`'s slot for run `run` on `tab` (the core's `reserve_out_file`): 200
/// `{"slot": "take" | "replace"}`, 413 when the run has published as many files as it may, 409
/// when it is no longer in flight there.
pub fn reserve(shared: &Shared, (run, tab): (&str, Option<&str>), path: &str) -> Response {
    match shared.reserve_out_file((run, tab), path) {
        Ok(Slot::Take) => json(200, &json!({ "slot": "take" })),
        Ok(Slot::Replace) => json(200, &json!({ "slot": "replace" })),
        Ok(Slot::Full) => refuse(ErrorName::OutputLimitExceeded, too_many_files(path)),
        Err(refusal) => error(refusal),
    }
}

/// Gives back a slot whose file could not be stored.
pub fn release(shared: &Shared, run: &str, path: &str) -> Response {
    match shared.store().release_out_file(run, path) {
        Ok(()) => json(200, &json!({ "released": path })),
        Err(e) => storage_unavailable("the relay session's SQLite", &e),
    }
}
