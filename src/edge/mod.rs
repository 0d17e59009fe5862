//! The Worker's handlers (wasm32 only): each turns a `worker::Request` into a call of the pure
//! core and its answer back into a `worker::Response`. Session state lives in `durable`.

pub mod capsules;
pub mod http;
pub mod mcp;
pub mod session;
pub mod tenants;

/// Milliseconds since the epoch, from the runtime's clock.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

/// Random bytes from the runtime's CSPRNG.
pub fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::getrandom(&mut bytes).expect("crypto.getRandomValues");
    bytes
}
