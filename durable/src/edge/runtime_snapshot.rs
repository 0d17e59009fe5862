//! Python's memory snapshot in R2 (`relay_core::runtime_snapshot`), for the two that need it:
//! the retention sweep (its current key, from the page's assets) and the Worker's own
//! JavaScript that reads and makes it (`durable/js/edge-pyodide.mjs`), through
//! [`RuntimeSnapshot`], which worker-build exports to it: the same key from the same texts,
//! which it has read already. The seal's key stays here: the JavaScript gets MACs and verdicts,
//! never the key, so it cannot reach a log, a job or a dynamic Worker.

use crate::platform::bindings::ASSETS;
use crate::platform::signer::snapshot_seal;
use relay_core::runtime_snapshot::{self, RUNNER_ASSET};
use worker::wasm_bindgen::prelude::wasm_bindgen;
use worker::wasm_bindgen::JsValue;
use worker::{js_sys, Env, Result};

/// The current snapshot's key, from the page's assets (runtimes.json and the edge runner).
pub async fn current_key(env: &Env) -> Result<String> {
    let runtimes = asset(env, "runtimes.json").await?;
    let runner = asset(env, RUNNER_ASSET).await?;
    runtime_snapshot::current_key(&String::from_utf8_lossy(&runtimes), &runner).map_err(worker::Error::RustError)
}

/// `path`'s bytes from the page's assets, or an error saying the page is not built.
async fn asset(env: &Env, path: &str) -> Result<Vec<u8>> {
    let mut res = env.assets(ASSETS)?.fetch(format!("https://assets.invalid/{path}"), None).await?;
    match res.status_code() {
        200 => res.bytes().await,
        status => Err(worker::Error::RustError(format!("the asset {path} answered {status}: is the page built?"))),
    }
}

/// What edge-pyodide.mjs asks of the Rust about the snapshot. Not an entrypoint: entry.mjs
/// does not export it.
#[wasm_bindgen]
pub struct RuntimeSnapshot;

#[wasm_bindgen]
impl RuntimeSnapshot {
    /// The R2 key of the snapshot made with the page's `runtimes_json` and the edge runner's
    /// text (`runner`), as JavaScript read them: the sweep's rule ([`current_key`]).
    pub fn key(runtimes_json: &str, runner: &str) -> std::result::Result<String, JsValue> {
        runtime_snapshot::current_key(runtimes_json, runner.as_bytes()).map_err(|e| js_sys::Error::new(&e).into())
    }

    /// The MAC to store with the snapshot of `sha256` (hex) under `key`.
    pub fn seal(env: Env, key: &str, sha256: &str) -> std::result::Result<String, JsValue> {
        Ok(snapshot_seal(&env).map_err(js_error)?.mac(key, sha256))
    }

    /// Whether `mac` seals the snapshot of `sha256` under `key` (compared in constant time).
    pub fn verify(env: Env, key: &str, sha256: &str, mac: &str) -> std::result::Result<bool, JsValue> {
        Ok(snapshot_seal(&env).map_err(js_error)?.verify(key, sha256, mac))
    }
}

fn js_error(e: worker::Error) -> JsValue {
    js_sys::Error::new(&e.to_string()).into()
}
