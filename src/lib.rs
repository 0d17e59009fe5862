//! relay-edge: the managed tier of relay-mcp as a Cloudflare Worker.
//!
//! The pure core (`auth`, `capsule`, `mcp`, `policy`, `range`, `run`) never names `worker::`
//! types and is tested natively. `edge` (the Worker's handlers) and `durable` (the Session
//! Durable Object) exist only in the wasm32 build and stay thin layers over the core; the
//! route table below is the whole of the Worker's entry.

pub mod auth;
pub mod capsule;
pub mod forward;
pub mod mcp;
pub mod policy;
pub mod range;
pub mod run;

#[cfg(target_arch = "wasm32")]
#[path = "../durable/mod.rs"]
mod durable;
#[cfg(target_arch = "wasm32")]
mod edge;

#[cfg(target_arch = "wasm32")]
use worker::{event, Context, Env, Method, Request, Response, Result};

#[cfg(target_arch = "wasm32")]
#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// The route table. Every answer, errors included, is JSON or a stream; nothing is left hanging.
#[cfg(target_arch = "wasm32")]
#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    use edge::{capsules, http, mcp, session, tenants};
    let path = req.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let answer = match (req.method(), segments.as_slice()) {
        (Method::Options, _) => Ok(http::preflight()),
        (Method::Get, ["healthz"]) => http::healthz(&env),
        (Method::Get, [".well-known", "relay-keys.json"]) => capsules::jwks(&env),
        (_, ["mcp"]) => mcp::forward(req, &env).await,
        (Method::Post, ["session"]) => session::attach(req, &env).await,
        (Method::Post, ["session", id, "refresh"]) => session::refresh(req, &env, id).await,
        (Method::Get, ["session", id, "events"]) => session::forward(req, &env, id, "events").await,
        (Method::Post, ["session", id, "result"]) => session::forward(req, &env, id, "result").await,
        (Method::Post, ["capsules"]) => capsules::create(req, &env).await,
        (Method::Post, ["capsules", "verify"]) => capsules::verify(req, &env).await,
        (Method::Get | Method::Head, ["capsules", hash, file]) => capsules::fetch(&req, &env, hash, file).await,
        (Method::Post, ["admin", "tenants"]) => tenants::create(req, &env).await,
        _ => Ok(http::not_found(&path)),
    };
    Ok(http::with_cors(answer.unwrap_or_else(http::internal)))
}
