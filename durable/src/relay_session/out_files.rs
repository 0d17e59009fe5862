//! The count of each run's published `/out` files (`PUT /files`, `edge/files.rs`): the Worker
//! reserves a path's slot here before it stores the file in R2, and releases it when storing
//! fails. It is counted here, not in the Worker, because the relay session's DO takes one
//! request's synchronous part at a time: the count and the reservation are one step, so uploads
//! racing each other cannot pass `files::MAX_FILES_PER_RUN`.

use super::shared::Shared;
use super::store;
use crate::edge::http::{error, json};
use crate::edge::now_ms;
use relay_core::files::{too_many_files, Slot};
use serde_json::json;
use worker::{Request, Response, Result};

/// `POST /files/reserve?run=&path=`: 200 `{"slot": "take" | "replace"}`, or 413 when the run
/// has published as many files as it may.
pub fn reserve(shared: &Shared, req: &Request) -> Result<Response> {
    let Some((run, path)) = run_and_path(req)? else { return Ok(bad_request()) };
    let slot = store::reserve_out_file(&shared.storage.sql(), &run, &path, now_ms())?;
    Ok(match slot {
        Slot::Take => json(200, &json!({ "slot": "take" })),
        Slot::Replace => json(200, &json!({ "slot": "replace" })),
        Slot::Full => error(413, "OutputLimitExceeded", too_many_files(&path)),
    })
}

/// `POST /files/release?run=&path=`: gives back a slot whose file could not be stored.
pub fn release(shared: &Shared, req: &Request) -> Result<Response> {
    let Some((run, path)) = run_and_path(req)? else { return Ok(bad_request()) };
    store::release_out_file(&shared.storage.sql(), &run, &path)?;
    Ok(json(200, &json!({ "released": path })))
}

fn run_and_path(req: &Request) -> Result<Option<(String, String)>> {
    let url = req.url()?;
    let query = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    Ok(query("run").zip(query("path")))
}

fn bad_request() -> Response {
    error(400, "ValidationError", "a slot of a run's files needs `run` and `path`")
}
