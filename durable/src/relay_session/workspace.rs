//! The relay session's workspace routes, as responses: the decisions are the core's
//! (`relay_core::relay_session::workspace`), this only writes the answers.

use super::shared::Shared;
use crate::platform::http::{error, json};
use relay_core::protocol::Caller;
use worker::{Headers, Response, Result};

/// `/workspace?since=&run=&tab=`: the changes since a version, or the whole index, with the cap.
pub fn index(shared: &Shared, caller: &Caller, since: Option<u64>, run_on: (Option<&str>, Option<&str>)) -> Response {
    let max_bytes = caller.tenant.defaults.workspace.max_bytes;
    shared.workspace_index(since, run_on, max_bytes).map_or_else(error, |index| json(200, &index))
}

/// `/workspace/body?sha256=`: a body's bytes, immutable (named by its hash).
pub async fn body(shared: &Shared, caller: &Caller, sha256: &str) -> Result<Response> {
    match shared.workspace_body_bytes(&caller.object_name(), sha256).await {
        Ok(bytes) => {
            let headers = Headers::new();
            headers.set("content-type", "application/octet-stream")?;
            headers.set("cache-control", "private, max-age=31536000, immutable")?;
            Ok(Response::from_bytes(bytes)?.with_headers(headers))
        }
        Err(refusal) => Ok(error(refusal)),
    }
}

/// `POST /workspace/body?run=&sha256=`: a body, stored before a commit names it.
pub async fn put_body(shared: &Shared, caller: &Caller, run: Option<&str>, sha256: &str, bytes: Vec<u8>) -> Response {
    shared.put_body(caller, run, sha256, bytes).await.map_or_else(error, |stored| json(201, &stored))
}

/// `POST /workspace/upload`: a tab's files from before, only where the index has none.
pub async fn upload(shared: &Shared, caller: &Caller, changes: &[u8]) -> Response {
    shared.upload_from_tab(caller, changes).await.map_or_else(error, |answer| json(200, &answer))
}

/// `POST /workspace/commit?run=&cap=&tab=`: a run's changes, committed in order.
pub async fn commit(
    shared: &Shared,
    caller: &Caller,
    run: (&str, Option<&str>),
    cap: &str,
    changes: &[u8],
) -> Response {
    shared.commit_run(caller, run, cap, changes).await.map_or_else(error, |answer| json(200, &answer))
}
