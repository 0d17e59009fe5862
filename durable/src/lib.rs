//! relay-edge: the managed tier of relay-mcp as a Cloudflare Worker, over `relay-core` (the
//! protocol and the rules, with no Workers types). `edge` holds the Worker's handlers,
//! `relay_session` the Session Durable Object (one per relay session); both stand side by
//! side on `platform` (bindings, stores, signer, clock, the typed hop to a relay session) and
//! stay thin layers of I/O over the core. The route table below is the whole of the Worker's
//! entry.

mod edge;
mod ledger;
mod platform;
mod relay_session;

use edge::Who;
use platform::bindings::{self, LOG_LEVEL};
use platform::now_ms;
use relay_core::log::{self, Level, LogLine};
use std::sync::OnceLock;
use worker::{
    event, js_sys, wasm_bindgen::JsValue, web_sys, Context, Env, Method, Request, Response, Result, ScheduleContext,
    ScheduledEvent,
};

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// Answers a request by the route table, then logs one line for it (`relay_core::log`: the
/// route's pattern, status, time to the response's head, and who, when a credential said),
/// unless the deployment's `LOG_LEVEL` keeps only more important lines.
#[event(fetch)]
async fn fetch(raw: web_sys::Request, env: Env, ctx: Context) -> Result<Response> {
    let started = now_ms();
    let req = without_cf(raw);
    let route = log::route(req.method().as_ref(), &req.path());
    let who = Who::default();
    let response = edge::http::with_cors(routes(req, &env, &ctx, &who).await.unwrap_or_else(edge::http::internal));
    let line = LogLine::request(now_ms(), route, response.status_code(), now_ms() - started, who.take());
    write_log(&env, &line);
    Ok(response)
}

/// The Cron Trigger (wrangler.toml `[triggers]`): the retention sweep, as of its scheduled time.
#[event(scheduled)]
async fn scheduled(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    edge::retention::run(&env, event.schedule() as u64).await;
}

/// The request as workers-rs wraps it, without the `cf` object its conversion reads eagerly:
/// workerd builds that object afresh on each read, 0.14-0.29 ms of the entry's ~1.25 ms in
/// profiles under `wrangler dev` (docs/BENCHMARKS.md, "the floor"), and no route uses it. An own `cf` of
/// `undefined` hides the getter from the conversion.
fn without_cf(raw: web_sys::Request) -> Request {
    let hidden = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&hidden, &"value".into(), &JsValue::UNDEFINED);
    let _ = js_sys::Reflect::define_property(&raw, &"cf".into(), &hidden);
    Request::from(raw)
}

/// Writes `line` if the deployment keeps lines of its level.
fn write_log(env: &Env, line: &LogLine) {
    if line.kept(log_threshold(env)) {
        worker::console_log!("{}", line.to_json());
    }
}

/// The deployment's `LOG_LEVEL`, read once per isolate (a variable is fixed for its life); one
/// that is no level is said once, and every line written.
fn log_threshold(env: &Env) -> Level {
    static THRESHOLD: OnceLock<Level> = OnceLock::new();
    *THRESHOLD.get_or_init(|| {
        Level::threshold(bindings::var(env, LOG_LEVEL).as_deref()).unwrap_or_else(|why| {
            worker::console_error!("{why}");
            Level::Info
        })
    })
}

/// The route table. Every answer, errors included, is JSON or a stream; nothing is left hanging.
async fn routes(req: Request, env: &Env, ctx: &Context, who: &Who) -> Result<Response> {
    use edge::{
        capsules, egress, files, http, mcp, metrics, oauth, packages, session, tenant_life, tenants, upstreams,
        workspace,
    };
    use session::{TabRoute, TabSocket};
    let path = req.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (req.method(), segments.as_slice()) {
        (Method::Options, _) => Ok(http::preflight()),
        (Method::Get, ["healthz"]) => http::healthz(env),
        (Method::Get | Method::Head, ["sandbox.html" | "sandbox"]) => http::sandbox_frame(&req, env).await,
        (Method::Get, [".well-known", "relay-keys.json"]) => capsules::jwks(env),
        (Method::Get, [".well-known", "oauth-protected-resource", ..]) => oauth::resource_metadata(&req, env),
        (Method::Get, [".well-known", "oauth-authorization-server", ..]) => oauth::server_metadata(&req, env),
        (Method::Post, ["oauth", "register"]) => oauth::register(req, env).await,
        (Method::Get, ["oauth", "authorize"]) => oauth::authorize(req, env).await,
        (Method::Post, ["oauth", "authorize"]) => oauth::consent(req, env).await,
        (Method::Get, ["oauth", "consent"]) => oauth::consent_view(req, env).await,
        (Method::Post, ["oauth", "token"]) => oauth::token(req, env).await,
        (Method::Post, ["oauth", "revoke"]) => oauth::revoke(req, env).await,
        (_, ["mcp"]) => mcp::forward(req, env, who).await,
        (Method::Post, ["session"]) => session::attach(req, env, who).await,
        (Method::Post, ["session", id, "refresh"]) => session::refresh(req, env, id).await,
        (Method::Get, ["session", id, "events"]) => session::events(req, env, id, who).await,
        (Method::Post, ["session", id, "result"]) => session::forward(req, env, id, TabRoute::Result, who).await,
        (Method::Get, ["session", id, "results"]) => session::tab_socket(req, env, id, who, TabSocket::Results).await,
        (Method::Get, ["session", id, "lease"]) => session::tab_socket(req, env, id, who, TabSocket::Lease).await,
        (Method::Post, ["session", id, "lease"]) => session::forward(req, env, id, TabRoute::RenewLease, who).await,
        (Method::Get, ["session", id, "mcps"]) => session::forward(req, env, id, TabRoute::Mcps, who).await,
        (Method::Post, ["session", id, "detach"]) => session::forward(req, env, id, TabRoute::Detach, who).await,
        (Method::Post, ["session", id, "ready"]) => session::forward(req, env, id, TabRoute::Ready, who).await,
        (Method::Get, ["session", id, "workspace"]) => workspace::index(req, env, id, who).await,
        (Method::Get, ["session", id, "workspace", "bodies", sha]) => workspace::body(req, env, id, sha, who).await,
        (Method::Put, ["session", id, "workspace", "bodies", sha]) => {
            workspace::put_tab_body(req, env, id, sha, who).await
        }
        (Method::Post, ["session", id, "workspace", "upload"]) => workspace::upload(req, env, id, who).await,
        (Method::Put, ["workspace", "bodies", sha]) => workspace::put_body(req, env, sha, who).await,
        (Method::Post, ["workspace", "commit"]) => workspace::commit(req, env, who).await,
        (Method::Post, ["capsules"]) => capsules::create(req, env).await,
        (Method::Post, ["capsules", "verify"]) => capsules::verify(req, env).await,
        (Method::Get | Method::Head, ["capsules", hash, file]) => capsules::fetch(&req, env, hash, file).await,
        (Method::Post, ["capsule", "presign"]) => packages::presign(req, env, who).await,
        (Method::Put, ["capsule", "upload"]) => packages::upload(req, env, who).await,
        (Method::Post, ["capsule", "finalize"]) => packages::finalize(req, env, who).await,
        (Method::Get, ["registry"]) => packages::registry(req, env, who).await,
        (Method::Post, ["egress"]) => egress::handle(req, env, ctx, who).await,
        (Method::Post, ["mcps-rpc"]) => upstreams::rpc(req, env, who).await,
        (Method::Put, ["files", run, path @ ..]) if !path.is_empty() => files::put(req, env, run, path, who).await,
        (Method::Get | Method::Head, ["files", tenant, run, path @ ..]) if !path.is_empty() => {
            files::get(&req, env, tenant, run, path).await
        }
        (Method::Post, ["admin", "tenants"]) => tenants::create(req, env).await,
        (Method::Get, ["admin", "tenants"]) => tenant_life::list(req, env).await,
        (Method::Delete, ["admin", "tenants", id]) => tenant_life::delete(req, env, id).await,
        (Method::Get, ["admin", "tenants", id, "keys"]) => tenant_life::keys(req, env, id).await,
        (Method::Post, ["admin", "tenants", id, "keys"]) => tenant_life::rotate(req, env, id).await,
        (Method::Delete, ["admin", "tenants", id, "keys", key]) => tenant_life::revoke(req, env, id, key).await,
        (Method::Get, ["admin", "tenants", id, "audit"]) => tenant_life::audit(req, env, id).await,
        (Method::Get, ["admin", "tenants", id, "usage"]) => tenants::usage(req, env, id).await,
        (Method::Get, ["admin", "tenants", id]) => tenants::show(req, env, id).await,
        (Method::Patch, ["admin", "tenants", id]) => tenants::patch(req, env, id).await,
        (Method::Get, ["admin", "metrics"]) => metrics::tenant(req, env).await,
        (Method::Get, ["admin", "tenants", id, "upstreams"]) => upstreams::list(req, env, id).await,
        (Method::Put, ["admin", "tenants", id, "upstreams", name]) => upstreams::put(req, env, id, name).await,
        (Method::Delete, ["admin", "tenants", id, "upstreams", name]) => upstreams::remove(req, env, id, name).await,
        _ => Ok(http::not_found(&path)),
    }
}
