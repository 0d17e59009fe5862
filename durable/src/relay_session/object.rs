//! The Session DO itself: one per relay session (`<tenantId>/<name>`). It decodes each request
//! the Worker forwards into the core's typed `SessionRequest` (with its `Caller`; the Worker
//! has already authenticated it) and dispatches on it, and takes the messages of results and
//! lease sockets. A relay session whose SQLite could not be migrated serves nothing: every
//! request is answered 503 `StorageUnavailable` until an instance migrates it.

use super::edge::EdgeRuns;
use super::leases::{EVENTS_TAG, LEASE_TAG};
use super::shared::{schedule, DoPlatform, Shared};
use super::{builds, mcp, out_files, tabs, upstreams, workspace};
use crate::platform::http::{error, json, refuse, storage_unavailable};
use crate::platform::sql::DoSql;
use crate::platform::{kv, stub, wasm_memory_bytes};
use relay_core::error::ErrorName;
use relay_core::metrics::Wake;
use relay_core::protocol::{Caller, SessionRequest};
use std::cell::Cell;
use std::rc::Rc;
use worker::{
    durable_object, DurableObject, Env, Request, Response, Result, State, WebSocket, WebSocketIncomingMessage,
};

#[durable_object]
pub struct SessionDO {
    shared: Rc<Shared>,
    /// For the results sockets, which the runtime keeps (`tabs::open_results`).
    state: State,
    /// Why the relay session's SQLite could not be brought up to date, if it could not.
    unmigrated: Option<String>,
    /// Whether this instance has served a request yet (see `register`).
    served: Cell<bool>,
    /// Whether this instance has attached again the tabs an earlier one had (`tabs::reattach`).
    reattached: Cell<bool>,
}

impl DurableObject for SessionDO {
    fn new(state: State, env: Env) -> Self {
        let sql = DoSql(state.storage().sql());
        // The Worker's own entrypoints (the edge executor's among them: durable/js/entry.mjs).
        let exports = worker::js_sys::Reflect::get(state.as_raw(), &"exports".into()).unwrap_or_default();
        let shared = Shared::new(DoPlatform::new(&state, env, sql, EdgeRuns::new(exports)));
        let unmigrated = shared.open().err().map(|e| {
            worker::console_error!("relay session storage: {e}");
            e.to_string()
        });
        let shared = Rc::new(shared);
        shared.woke(Wake::Start);
        shared.platform.edge.set_home(&shared);
        // Tabs are taken back at once when the run machine is configured (an earlier instance
        // kept its settings): so an alarm or a tab's batch finds them, not only a request.
        let reattached = unmigrated.is_none() && shared.configured();
        if reattached {
            tabs::reattach(&shared, &state);
        }
        let (served, reattached) = (Cell::new(false), Cell::new(reattached));
        SessionDO { shared, state, unmigrated, served, reattached }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        if let Some(why) = &self.unmigrated {
            let message = format!("this relay session's storage could not be brought up to date ({why}); retry later");
            return Ok(refuse(ErrorName::StorageUnavailable, message));
        }
        if self.shared.platform.erased.get() {
            return Ok(refuse(ErrorName::NotFound, "this relay session was erased with its tenant"));
        }
        let (caller, request) = match stub::receive(req).await? {
            Ok(received) => received,
            Err(refusal) => return Ok(error(refusal)),
        };
        let shared = self.shared.clone();
        shared.woke(Wake::Request);
        shared.configure(&caller.tenant.defaults.queue, caller.tenant.defaults.edge);
        // The run machine exists once configured: only then can it take the tabs back.
        if !self.reattached.replace(true) {
            tabs::reattach(&shared, &self.state);
        }
        // An erasure must not list the relay session under its tenant again; a sweep comes
        // from that listing.
        let listed = matches!(request, SessionRequest::Erase | SessionRequest::SweepBodies { .. });
        if !listed && !self.served.replace(true) {
            register(&shared, &caller).await;
        }
        let response = self.dispatch(shared.clone(), caller, request).await;
        if self.serving() {
            schedule(&shared);
        }
        response
    }

    async fn websocket_message(&self, ws: WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
        if !self.serving() {
            return Ok(());
        }
        self.shared.woke(Wake::SocketMessage);
        let tags = self.state.get_tags(&ws);
        if tags.iter().any(|tag| tag == LEASE_TAG) {
            return tabs::lease_message(&ws);
        }
        if tags.iter().any(|tag| tag == EVENTS_TAG) {
            return Ok(()); // the Worker sends nothing on a tab's command socket
        }
        let answered = tabs::socket_batch(&self.shared, &self.state, &ws, message);
        schedule(&self.shared);
        answered
    }

    /// The run machine's next deadline came (`shared::schedule` set it): tick it, then set the
    /// alarm for the one after.
    async fn alarm(&self) -> Result<Response> {
        self.shared.platform.alarm.fired();
        if self.serving() {
            self.shared.woke(Wake::Alarm);
            self.shared.tick();
            schedule(&self.shared);
        }
        Response::empty()
    }

    /// A socket closed: a results socket gets no more command copies; a command socket's
    /// tab is gone (its stream ended). A socket that closes unreported says nothing: liveness
    /// is the lease's.
    async fn websocket_close(&self, ws: WebSocket, _code: usize, _reason: String, _clean: bool) -> Result<()> {
        self.socket_ended(&ws).await
    }

    async fn websocket_error(&self, ws: WebSocket, _error: worker::Error) -> Result<()> {
        self.socket_ended(&ws).await
    }
}

impl SessionDO {
    /// Whether this instance serves: its storage is migrated and not erased.
    fn serving(&self) -> bool {
        self.unmigrated.is_none() && !self.shared.platform.erased.get()
    }

    async fn socket_ended(&self, ws: &WebSocket) -> Result<()> {
        self.shared.platform.roster.forget_socket(ws);
        if !self.serving() {
            return Ok(());
        }
        self.shared.woke(Wake::SocketMessage);
        if self.state.get_tags(ws).iter().any(|tag| tag == EVENTS_TAG) {
            tabs::stream_closed(&self.shared, &self.state, ws);
            schedule(&self.shared);
        }
        Ok(())
    }

    /// One handler per route: a new `SessionRequest` variant is a compile error here until it
    /// has one.
    async fn dispatch(&self, shared: Rc<Shared>, caller: Caller, request: SessionRequest) -> Result<Response> {
        use SessionRequest::*;
        match request {
            Mcp { request, charge_call } => mcp::handle(shared, request, caller, charge_call).await,
            Events { previous } => tabs::attach(&shared, &self.state, &caller, previous.as_deref()),
            Result { tab, batch } => Ok(tabs::result(&shared, tab, &batch)),
            ResultsSocket { tab, token_expiry_s } => tabs::open_results(&shared, &self.state, tab, token_expiry_s),
            LeaseSocket { tab, token_expiry_s } => tabs::open_lease(&shared, &self.state, tab, token_expiry_s),
            RenewLease { tab } => tabs::renew(&shared, tab),
            Detach { tab } => tabs::detach(&shared, tab),
            Ready { tab, report } => tabs::ready(&shared, tab, &report),
            McpsRpc { run, cap, call } => upstreams::call(&shared, &caller, run, &cap, &call).await,
            McpsTree => upstreams::tree(&shared, &caller).await,
            BuildPresign { run, ask } => builds::presign(&shared, &caller, &run, &ask),
            BuildSpend(grant) => builds::spend(&shared, &grant),
            BuildFinalize { run, proposal } => builds::finalize(&shared, &caller, &run, &proposal).await,
            ReserveOutFile { run, path, tab } => Ok(out_files::reserve(&shared, (&run, tab.as_deref()), &path)),
            ReleaseOutFile { run, path } => Ok(out_files::release(&shared, &run, &path)),
            Metrics => Ok(metrics(&shared)),
            Audit => Ok(audit(&shared)),
            Erase => self.erase().await,
            SweepBodies { as_of_ms } => Ok(sweep_bodies(&shared, &caller, as_of_ms).await),
            WorkspaceIndex { since, run, tab } => {
                Ok(workspace::index(&shared, &caller, since, (run.as_deref(), tab.as_deref())))
            }
            WorkspaceBody { sha256 } => workspace::body(&shared, &caller, &sha256).await,
            WorkspacePutBody { run, sha256, body } => {
                Ok(workspace::put_body(&shared, &caller, run.as_deref(), &sha256, body).await)
            }
            WorkspaceUpload { changes } => Ok(workspace::upload(&shared, &caller, &changes).await),
            WorkspaceCommit { run, cap, tab, changes } => {
                Ok(workspace::commit(&shared, &caller, (&run, tab.as_deref()), &cap, &changes).await)
            }
        }
    }

    /// Deletes all of this relay session's storage (SQLite and all: runs, audit, workspace
    /// index, inline bodies) and its alarm, and drops its tabs (their streams end, their sockets
    /// close: a tab attaching again is refused, its tenant gone); this instance then answers
    /// every request 404, and is not listed under its tenant again. The flag is this
    /// instance's only: an instance woken later finds empty storage, and no route of the Worker
    /// reaches it for a tenant with no record (keys revoked, tokens refused, the sweep skips it).
    async fn erase(&self) -> Result<Response> {
        self.shared.platform.erased.set(true);
        self.shared.platform.roster.drop_all();
        let storage = self.state.storage();
        storage.delete_alarm().await?;
        storage.delete_all().await?;
        Ok(json(200, &serde_json::json!({ "erased": true })))
    }
}

/// The retention sweep of the relay session's workspace bodies (`body_sweep`): its counts.
async fn sweep_bodies(shared: &Shared, caller: &Caller, as_of_ms: u64) -> Response {
    match shared.sweep_bodies(&caller.object_name(), as_of_ms).await {
        Ok(sweep) => json(200, &serde_json::to_value(sweep).expect("a sweep serializes")),
        Err(e) => storage_unavailable("the relay session's storage", &e),
    }
}

/// The relay session's whole audit chain, oldest first (`relay://audit`'s shape).
fn audit(shared: &Shared) -> Response {
    match shared.store().audit_records(relay_core::audit::RETENTION as usize) {
        Ok(records) => json(200, &relay_core::audit::audit_json(&records)),
        Err(e) => storage_unavailable("the relay session's SQLite", &e),
    }
}

/// The relay session's metrics, with what only this instance knows (its wasm memory, the
/// writes to its storage that failed, its wake-ups).
fn metrics(shared: &Shared) -> Response {
    match shared.metrics(wasm_memory_bytes()) {
        Ok(snapshot) => json(200, &serde_json::to_value(snapshot).expect("metrics serialize")),
        Err(e) => storage_unavailable("the relay session's SQLite", &e),
    }
}

/// Lists this relay session under its tenant in KV, once per instance, so the tenant's
/// metrics can find it. A failure only delays that to the next instance.
async fn register(shared: &Shared, caller: &Caller) {
    if let Err(e) = kv::register_relay_session(&shared.platform.env, &caller.tenant.id, &caller.session).await {
        worker::console_error!("registering relay session {}/{}: {e}", caller.tenant.id, caller.session);
    }
}
