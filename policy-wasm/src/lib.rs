//! relay-core's policy decisions and Python build resolver for the executor page,
//! as a wasm module with a C ABI.
//!
//! The page (public/lib/policy.js) writes a JSON request into memory it got from [`alloc`],
//! calls an export with its pointer and length, and reads the JSON reply at the pointer and
//! length packed into the returned u64 (`ptr << 32 | len`). It frees both buffers with
//! [`dealloc`]. A reply is the decision (`{"allow": ...}`) or `{"error": "..."}` when the
//! request itself is malformed, which is the caller's bug, not a denial.
//!
//! To add an export: a request struct, a function from it to a JSON value, and one
//! `call_json` line.

/// relay-core's `src/policy/`, compiled here as it is there: the very same files, not a copy.
/// They are included by path instead of through a dependency on relay-core because relay-core
/// also holds the capsule's zip layers, and `zip` pulls in wasm-bindgen on wasm32, whose
/// imports would make this module unloadable without its JS glue. (So `src/policy/` must
/// only use serde, serde_json, url and std; this crate's build fails if it reaches further.)
#[path = "../../src/policy/mod.rs"]
pub mod policy;

/// relay-core's `src/packages/python/` (a Python dependency build's rules and resolver), included
/// the same way; it uses serde, serde_json and std only.
#[path = "../../src/packages/python/mod.rs"]
pub mod python;

use policy::{Access, FsPolicy, NetworkPolicy, Verdict};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

/// Memory of `len` bytes for the caller to write a request into.
#[no_mangle]
pub extern "C" fn alloc(len: usize) -> *mut u8 {
    Box::into_raw(vec![0u8; len].into_boxed_slice()).cast()
}

/// Frees memory that [`alloc`] or a reply gave out; `len` must be the length it had.
///
/// # Safety
/// `ptr` and `len` must come from one `alloc(len)` or one reply, freed only once.
#[no_mangle]
pub unsafe extern "C" fn dealloc(ptr: *mut u8, len: usize) {
    drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)));
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UrlRequest {
    network: NetworkPolicy,
    url: String,
}

/// `{"network": {...}, "url": "..."}` → `{"allow": true}` or `{"allow": false, "reason": "..."}`.
///
/// # Safety
/// `ptr` and `len` must describe readable memory holding the request.
#[no_mangle]
pub unsafe extern "C" fn check_url(ptr: *const u8, len: usize) -> u64 {
    call_json(ptr, len, |req: UrlRequest| match policy::check_url(&req.network, &req.url) {
        Verdict::Allow => json!({ "allow": true }),
        Verdict::Deny { reason } => json!({ "allow": false, "reason": reason }),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathRequest {
    filesystem: FsPolicy,
    path: String,
    access: AccessName,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum AccessName {
    Read,
    Write,
}

/// `{"filesystem": {...}, "path": "...", "access": "read"|"write"}` → `{"allow": true, "path":
/// normalized}` or `{"allow": false, "reason": "..."}`.
///
/// # Safety
/// `ptr` and `len` must describe readable memory holding the request.
#[no_mangle]
pub unsafe extern "C" fn check_path(ptr: *const u8, len: usize) -> u64 {
    call_json(ptr, len, |req: PathRequest| {
        let access = match req.access {
            AccessName::Read => Access::Read,
            AccessName::Write => Access::Write,
        };
        match policy::check_path(&req.filesystem, &req.path, access) {
            Ok(path) => json!({ "allow": true, "path": path }),
            Err(reason) => json!({ "allow": false, "reason": reason }),
        }
    })
}

/// One step of a Python build's resolution: what is known so far (`python::Known`) → the
/// resolver's step, `{"fetch": {projects, wheels}}`, `{"done": {install}}` or `{"failed":
/// {message}}`.
///
/// # Safety
/// `ptr` and `len` must describe readable memory holding the request.
#[no_mangle]
pub unsafe extern "C" fn resolve_python(ptr: *const u8, len: usize) -> u64 {
    call_json(ptr, len, |known: python::Known| serde_json::to_value(python::resolve(&known)).expect("steps serialize"))
}

/// Parses the request at `ptr..ptr+len`, answers it with `f`, and returns the reply's packed
/// pointer and length.
unsafe fn call_json<R: DeserializeOwned>(ptr: *const u8, len: usize, f: impl FnOnce(R) -> Value) -> u64 {
    let request = std::slice::from_raw_parts(ptr, len);
    reply(match serde_json::from_slice(request) {
        Ok(request) => f(request),
        Err(e) => json!({ "error": format!("malformed request: {e}") }),
    })
}

/// Hands `reply` to the caller: its packed pointer and length (the caller frees it).
fn reply(reply: Value) -> u64 {
    let bytes = Box::into_raw(reply.to_string().into_bytes().into_boxed_slice());
    // wasm32 pointers and lengths are 32 bits each.
    ((bytes as *mut u8 as u64) << 32) | bytes.len() as u64
}
