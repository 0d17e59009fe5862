//! What the Worker and the relay session's Durable Object stand on besides the core: the
//! runtime's clock, randomness and timers (here), the bindings by name (`bindings`), the
//! stores (`kv`, `r2`, `sql`: the core's `Records`, `Blobs` and `Sql`), the signer
//! (`signer`), the run-token guard (`run_token`), the one place an error becomes a response
//! (`http`), the typed hop to a relay session (`stub`) and to a tenant's ledger (`ledger`), and a POST to an upstream MCP server
//! (`upstream`). `edge/` (the Worker's handlers) and `relay_session/` (the DO) both import
//! from here and never from each other.

pub mod bindings;
pub mod http;
pub mod kv;
pub mod ledger;
pub mod r2;
pub mod run_token;
pub mod signer;
pub mod sql;
pub mod stub;
pub mod upstream;

use worker::wasm_bindgen_futures;

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
    fill_random(&mut bytes);
    bytes
}

/// Fills `bytes` from the runtime's CSPRNG.
pub fn fill_random(bytes: &mut [u8]) {
    getrandom::getrandom(bytes).expect("crypto.getRandomValues");
}
