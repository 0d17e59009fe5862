//! The Session DO itself: one per relay session (`<tenantId>/<name>`). It dispatches the
//! requests the Worker forwards (`/mcp`, `/events`, `/result`, `/results`, `/lease`, `/detach`,
//! `/ready`, `/mcps-rpc`, `/mcps`, `/build/*`, `/files/*`) and the messages of results and lease
//! sockets, each request with its typed
//! [`Caller`](relay_core::forward::Caller); the Worker has already authenticated it.

use super::leases::{Leases, LEASE_TAG};
use super::shared::Shared;
use super::{builds, mcp, out_files, store, tabs, upstreams};
use crate::edge::http::{error, json};
use crate::edge::metrics::session_key;
use crate::edge::{now_ms, wasm_memory_bytes};
use relay_core::forward::{Caller, CALLER_HEADER};
use relay_core::metrics::Snapshot;
use std::rc::Rc;
use worker::{
    durable_object, DurableObject, Env, Method, Request, Response, Result, State, WebSocket, WebSocketIncomingMessage,
};

#[durable_object]
pub struct SessionDO {
    shared: Rc<Shared>,
    /// For the results sockets, which the runtime keeps (`tabs::open_results`).
    state: State,
}

impl DurableObject for SessionDO {
    fn new(state: State, env: Env) -> Self {
        let storage = state.storage();
        let sql = storage.sql();
        match store::migrate(&sql) {
            // No run can be in flight in an instance that is only starting: any still open in
            // the audit were cut off when the previous instance stopped.
            Ok(()) => store::close_unfinished(&sql, now_ms()),
            Err(e) => worker::console_error!("migration failed: {e}"),
        }
        SessionDO { shared: Rc::new(Shared::new(env, storage, Leases::new(&state))), state }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let header = req.headers().get(CALLER_HEADER)?.unwrap_or_default();
        let caller = Caller::decode(&header).map_err(worker::Error::RustError)?;
        let shared = self.shared.clone();
        shared.configure(&caller.tenant.defaults.queue);
        if shared.first_request() {
            register(&shared, &caller).await;
        }
        match req.path().as_str() {
            "/mcp" => mcp::handle(shared, req, caller).await,
            "/events" => tabs::attach(shared, &caller),
            "/result" => tabs::result(shared, req).await,
            "/results" => tabs::open_results(&shared, &self.state, &req),
            "/detach" => tabs::detach(shared, &req),
            "/lease" if req.method() == Method::Post => tabs::renew(shared, &req),
            "/lease" => tabs::open_lease(&shared, &self.state, &req),
            "/ready" => tabs::ready(shared, req).await,
            "/mcps-rpc" => upstreams::call(shared, req, &caller).await,
            "/mcps" => upstreams::tree(shared, &caller).await,
            "/build/presign" => builds::presign(&shared, req, &caller).await,
            "/build/spend" => builds::spend(&shared, req).await,
            "/build/finalize" => builds::finalize(&shared, req, &caller).await,
            "/files/reserve" => out_files::reserve(&shared, &req),
            "/files/release" => out_files::release(&shared, &req),
            "/metrics" => {
                let snapshot =
                    Snapshot { wasm_memory_bytes: wasm_memory_bytes(), ..store::metrics(&shared.storage.sql()) };
                Ok(json(200, &serde_json::to_value(snapshot)?))
            }
            path => Ok(error(404, "NotFound", format!("session object has no route {path}"))),
        }
    }

    async fn websocket_message(&self, ws: WebSocket, message: WebSocketIncomingMessage) -> Result<()> {
        if self.state.get_tags(&ws).iter().any(|tag| tag == LEASE_TAG) {
            return tabs::lease_message(&ws);
        }
        tabs::socket_batch(&self.shared, &self.state, &ws, message)
    }

    /// A results socket closed by its tab: no more command copies on it. (It says nothing of
    /// the tab's liveness: that is the lease's, never a socket's.)
    async fn websocket_close(&self, ws: WebSocket, _code: usize, _reason: String, _clean: bool) -> Result<()> {
        self.shared.forget_socket(&ws);
        Ok(())
    }

    async fn websocket_error(&self, ws: WebSocket, _error: worker::Error) -> Result<()> {
        self.shared.forget_socket(&ws);
        Ok(())
    }
}

/// Lists this relay session under its tenant in KV, once per instance, so the tenant's
/// metrics can find it. A failure only delays that to the next instance.
async fn register(shared: &Shared, caller: &Caller) {
    let key = session_key(&caller.tenant.id, &caller.session);
    let put = shared.env.kv("KV_CONFIG").and_then(|kv| Ok(kv.put(&key, "")?));
    if let Err(e) = async { put?.execute().await.map_err(worker::Error::from) }.await {
        worker::console_error!("registering relay session {key}: {e}");
    }
}
