//! The workspace's routes (docs/ARCHITECTURE.md "The workspace"): a tab reads the index and
//! the bodies it lacks with its attach token; a run uploads bodies and commits its changes with
//! its run token. Each is checked here for its credential and its shape, then answered by the
//! relay session's DO.

use super::egress::to_run_session;
use super::session::to_tab_session;
use super::Who;
use crate::platform::http::refuse;
use relay_core::error::ErrorName;
use relay_core::protocol::{SessionRequest, TAB_HEADER};
use relay_core::workspace::check_sha256;
use worker::{Env, Request, Response, Result};

/// The largest body one upload carries: the most a Worker reads of a request.
const BODY_MAX: usize = 100 * 1024 * 1024;
/// The largest commit: `MAX_COMMIT_CHANGES` changes, each with an inline body in base64.
const COMMIT_MAX: usize = 8 * 1024 * 1024;

/// `GET /session/<id>/workspace?since=<version>&run=<run>` (attach token): the changes since
/// the version the tab (its `x-relay-tab`) holds, or the whole index.
pub async fn index(req: Request, env: &Env, session: &str, who: &Who) -> Result<Response> {
    let url = req.url()?;
    let query = |name: &str| url.query_pairs().find_map(|(k, v)| (k == name).then(|| v.into_owned()));
    let since = match query("since").map(|v| v.parse::<u64>()).transpose() {
        Ok(since) => since,
        Err(_) => return Ok(refuse(ErrorName::ValidationError, "since must be a workspace version (a whole number)")),
    };
    let run = query("run");
    to_tab_session(req, env, session, who, None, |tab, _| SessionRequest::WorkspaceIndex { since, run, tab }).await
}

/// `GET /session/<id>/workspace/bodies/<sha256>` (attach token): a body of the workspace.
pub async fn body(req: Request, env: &Env, session: &str, sha256: &str, who: &Who) -> Result<Response> {
    if let Err(e) = check_sha256(sha256) {
        return Ok(refuse(ErrorName::ValidationError, e));
    }
    let sha256 = sha256.to_owned();
    to_tab_session(req, env, session, who, None, |_, _| SessionRequest::WorkspaceBody { sha256 }).await
}

/// `PUT /workspace/bodies/<sha256>` (run token): a body the run will commit.
pub async fn put_body(req: Request, env: &Env, sha256: &str, who: &Who) -> Result<Response> {
    if let Err(e) = check_sha256(sha256) {
        return Ok(refuse(ErrorName::ValidationError, e));
    }
    let sha256 = sha256.to_owned();
    to_run_session(req, env, who, BODY_MAX, |claims, body| SessionRequest::WorkspacePutBody {
        run: Some(claims.run.clone()),
        sha256,
        body,
    })
    .await
}

/// `PUT /session/<id>/workspace/bodies/<sha256>` (attach token): a body of a file the tab held
/// from before, which its upload will name.
pub async fn put_tab_body(req: Request, env: &Env, session: &str, sha256: &str, who: &Who) -> Result<Response> {
    if let Err(e) = check_sha256(sha256) {
        return Ok(refuse(ErrorName::ValidationError, e));
    }
    let sha256 = sha256.to_owned();
    let request = |_, body| SessionRequest::WorkspacePutBody { run: None, sha256, body };
    to_tab_session(req, env, session, who, Some(BODY_MAX), request).await
}

/// `POST /session/<id>/workspace/upload` (attach token): the files the tab held from before the
/// relay session kept the workspace, `{changes: [...]}` (only paths the index does not have).
pub async fn upload(req: Request, env: &Env, session: &str, who: &Who) -> Result<Response> {
    let request = |_, changes| SessionRequest::WorkspaceUpload { changes };
    to_tab_session(req, env, session, who, Some(COMMIT_MAX), request).await
}

/// `POST /workspace/commit` (run token): the run's changes, `{changes: [...]}`, from the tab
/// its `x-relay-tab` names, if any.
pub async fn commit(req: Request, env: &Env, who: &Who) -> Result<Response> {
    let tab = req.headers().get(TAB_HEADER)?;
    to_run_session(req, env, who, COMMIT_MAX, |claims, changes| SessionRequest::WorkspaceCommit {
        run: claims.run.clone(),
        cap: claims.cap.clone(),
        tab,
        changes,
    })
    .await
}
