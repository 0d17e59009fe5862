//! relay-edge: the managed tier of relay-mcp as a Cloudflare Worker, over `relay-core` (the
//! protocol and the rules, with no Workers types). `edge` holds the Worker's handlers,
//! `relay_session` the Session Durable Object (one per relay session); both stay thin layers
//! of I/O over the core. The route table below is the whole of the Worker's entry.

mod edge;
mod relay_session;

use worker::{event, Context, Env, Method, Request, Response, Result};

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// The route table. Every answer, errors included, is JSON or a stream; nothing is left hanging.
#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    use edge::{capsules, egress, files, http, mcp, session, tenants, upstreams};
    let path = req.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let answer = match (req.method(), segments.as_slice()) {
        (Method::Options, _) => Ok(http::preflight()),
        (Method::Get, ["healthz"]) => http::healthz(&env),
        (Method::Get | Method::Head, ["sandbox.html" | "sandbox"]) => http::sandbox_frame(&req, &env).await,
        (Method::Get, [".well-known", "relay-keys.json"]) => capsules::jwks(&env),
        (_, ["mcp"]) => mcp::forward(req, &env).await,
        (Method::Post, ["session"]) => session::attach(req, &env).await,
        (Method::Post, ["session", id, "refresh"]) => session::refresh(req, &env, id).await,
        (Method::Get, ["session", id, "events"]) => session::forward(req, &env, id, "events").await,
        (Method::Post, ["session", id, "result"]) => session::forward(req, &env, id, "result").await,
        (Method::Get, ["session", id, "mcps"]) => session::forward(req, &env, id, "mcps").await,
        (Method::Post, ["session", id, "detach"]) => session::forward(req, &env, id, "detach").await,
        (Method::Post, ["capsules"]) => capsules::create(req, &env).await,
        (Method::Post, ["capsules", "verify"]) => capsules::verify(req, &env).await,
        (Method::Get | Method::Head, ["capsules", hash, file]) => capsules::fetch(&req, &env, hash, file).await,
        (Method::Post, ["egress"]) => egress::handle(req, &env).await,
        (Method::Post, ["mcps-rpc"]) => upstreams::rpc(req, &env).await,
        (Method::Put, ["files", run, path @ ..]) if !path.is_empty() => files::put(req, &env, run, path).await,
        (Method::Get, ["files", tenant, run, path @ ..]) if !path.is_empty() => {
            files::get(&req, &env, tenant, run, path).await
        }
        (Method::Post, ["admin", "tenants"]) => tenants::create(req, &env).await,
        (Method::Get, ["admin", "tenants", id, "upstreams"]) => upstreams::list(req, &env, id).await,
        (Method::Put, ["admin", "tenants", id, "upstreams", name]) => upstreams::put(req, &env, id, name).await,
        (Method::Delete, ["admin", "tenants", id, "upstreams", name]) => upstreams::remove(req, &env, id, name).await,
        _ => Ok(http::not_found(&path)),
    };
    Ok(http::with_cors(answer.unwrap_or_else(http::internal)))
}
