//! The Worker's handlers (wasm32 only): each turns a `worker::Request` into a call of the pure
//! core and its answer back into a `worker::Response`. Session state lives in `durable`.

pub mod capsules;
pub mod egress;
pub mod files;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod oauth;
pub mod packages;
pub mod session;
pub mod tenants;
pub mod upstreams;

use std::cell::RefCell;
use worker::wasm_bindgen_futures;

/// Who a request turned out to come from, as its handler learned it from a credential (the
/// tenant's id and the relay session): the request's log line names them.
#[derive(Default)]
pub struct Who(RefCell<Option<(String, String)>>);

impl Who {
    pub fn is(&self, tenant: &str, session: &str) {
        *self.0.borrow_mut() = Some((tenant.to_owned(), session.to_owned()));
    }

    pub fn take(&self) -> Option<(String, String)> {
        self.0.borrow_mut().take()
    }
}

/// The origin the Worker's URLs are made with: the `PUBLIC_URL` variable when the deployment
/// sets it (behind a proxy), else the request's own (`relay_core::forward::public_origin`).
/// A malformed `PUBLIC_URL` is an error naming it (500), never a wrong URL.
pub fn public_origin(env: &worker::Env, url: &url::Url) -> worker::Result<String> {
    relay_core::forward::public_origin(public_url(env).as_deref(), &http::own_origin(url))
        .map_err(worker::Error::RustError)
}

/// The `PUBLIC_URL` variable, if the deployment sets it.
pub fn public_url(env: &worker::Env) -> Option<String> {
    env.var("PUBLIC_URL").ok().map(|value| value.to_string())
}

/// Milliseconds since the epoch, from the runtime's clock.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

/// The size of this isolate's wasm linear memory, in bytes (it grows, never shrinks).
pub fn wasm_memory_bytes() -> u64 {
    use worker::{js_sys, wasm_bindgen::JsCast};
    let memory: js_sys::WebAssembly::Memory = worker::wasm_bindgen::memory().unchecked_into();
    memory.buffer().unchecked_into::<js_sys::ArrayBuffer>().byte_length().into()
}

/// Resolves after `ms`. Unlike `worker::Delay`, which keeps the waker of its first poll, this
/// wakes whichever task polled it last: a timer inside a response stream is polled by a new
/// task on every pull, and a stale waker would leave the stream stuck.
pub fn sleep(ms: u64) -> wasm_bindgen_futures::JsFuture {
    use worker::{js_sys, wasm_bindgen::JsCast, wasm_bindgen_futures};
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        let global: worker::web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
        let _ = global.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms.min(i32::MAX as u64) as i32);
    });
    wasm_bindgen_futures::JsFuture::from(promise)
}

/// Random bytes from the runtime's CSPRNG.
pub fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::getrandom(&mut bytes).expect("crypto.getRandomValues");
    bytes
}
