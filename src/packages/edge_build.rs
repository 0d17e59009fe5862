//! A deps build with no tab (issue 27 item 5): it runs in a fresh dynamic Worker at the edge
//! (esbuild-wasm and the tab's own bundler), never reused, with no network but the tenant's
//! package sources through the Worker's `/registry` route, and finalized as a tab's build is.
//! What may build there, and the hard caps it builds within (each named in the error past it,
//! with the way around it: a tab builds without them). The caps come from the bench
//! (docs/BENCHMARKS.md, "esbuild-wasm in a dynamic worker"): zod's 5.9 MiB tree peaked at 39 MiB
//! of esbuild's memory, so 8 MiB keeps a build, its tree held twice and esbuild, inside an
//! isolate's 128 MB.

use serde::Serialize;

use crate::capsule::limits::DEPS_LAYER_MAX;
use crate::capsule::Language;
use crate::error::ErrorName;

const MIB: u64 = 1024 * 1024;

/// The caps of one build at the edge, as the build's job carries them to the Worker's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EdgeBuildCaps {
    /// Bytes of the packages' archives, compressed as downloaded.
    pub download_bytes: u64,
    /// Bytes of the package lists (packuments), as decoded: one lists every version of its
    /// package, often bigger than the version's tarball.
    pub list_bytes: u64,
    /// Bytes of the unpacked package tree (every file of every package).
    pub tree_bytes: u64,
    /// Files of the unpacked package tree.
    pub tree_files: u64,
    /// Bytes of the bundles and their source maps, raw (unminified), before the zip.
    pub bundle_bytes: u64,
    /// Bytes of the deps layer built (its zip), the deps layer's own cap.
    pub layer_bytes: u64,
    /// Wall time of the build, on the host's timer (the build yields at each plugin call, so
    /// the timer fires).
    pub wall_ms: u64,
    /// `limits.cpuMs` of the build's isolate: production's wall behind the others.
    pub cpu_ms: u64,
}

pub const EDGE_BUILD_CAPS: EdgeBuildCaps = EdgeBuildCaps {
    download_bytes: 8 * MIB,
    list_bytes: 16 * MIB,
    tree_bytes: 8 * MIB,
    tree_files: 2_000,
    bundle_bytes: 64 * MIB,
    layer_bytes: DEPS_LAYER_MAX,
    wall_ms: 15_000,
    cpu_ms: 10_000,
};

/// What a tab does instead, in every refusal.
const ON_A_TAB: &str = "a browser tab can build it: open the relay page once and call again (later identical calls \
                        reuse that build, at the edge too)";

/// Why a build may not run at the edge, if it may not: Python's (a run naming pip packages goes
/// to a tab before it is built: its compiled modules cannot load at the edge), or an npm build when `claim` (asked only for those) finds another build of the relay
/// session running there (one at a time).
pub fn edge_build_refusal(language: Language, claim: impl FnOnce() -> bool) -> Option<String> {
    match language {
        Language::Py => Some(format!("Python dependencies are built in a browser tab only; {ON_A_TAB}")),
        Language::Js if claim() => None,
        Language::Js => Some(format!(
            "another dependency build of this relay session is running at the edge (one at a time); call again when \
             it has ended (its build stops within {} s, then uploads the layer it built, if any), or {ON_A_TAB}",
            EDGE_BUILD_CAPS.wall_ms / 1000
        )),
    }
}

/// The longest package name (npm's 214 bytes) with a long version: what of the guest's `what`
/// a cap's message repeats.
const MAX_WHAT_CHARS: usize = 256;

/// The message of a build at the edge stopped at cap `cap` (its name as the job carries it)
/// having reached `value` at `what` (the package, or the bundle, that went past it, if one
/// did); None for a name that is no cap.
pub fn over_cap(cap: &str, value: u64, what: Option<&str>) -> Option<String> {
    let caps = EDGE_BUILD_CAPS;
    let (reached, limit, unit) = match cap {
        "downloadBytes" => ("its packages' archives (compressed, as downloaded) reached", caps.download_bytes, "bytes"),
        "listBytes" => ("its package lists (as decoded) reached", caps.list_bytes, "bytes"),
        "treeBytes" => ("its unpacked packages reached", caps.tree_bytes, "bytes"),
        "treeFiles" => ("its unpacked packages reached", caps.tree_files, "files"),
        "bundleBytes" => ("its bundles and their source maps (before the zip) reached", caps.bundle_bytes, "bytes"),
        "layerBytes" => ("the deps layer it built (its zip) reached", caps.layer_bytes, "bytes"),
        "wallMs" => ("it ran for", caps.wall_ms, "ms"),
        _ => return None,
    };
    let at =
        what.map(|what| format!(" at {}", what.chars().take(MAX_WHAT_CHARS).collect::<String>())).unwrap_or_default();
    Some(format!(
        "the dependency build at the edge stopped{at}: {reached} {value} {unit}, past the edge's cap of {limit} {unit} \
         (edge build cap {cap}); list fewer or smaller packages, or {ON_A_TAB}"
    ))
}

/// The outcome of a build at the edge whose Worker entry failed (`why`, its error) rather than
/// answer: its isolate was restarted, say, which calling again mends, or the page's assets it
/// reads (the builder, esbuild.wasm) are of another build than the Worker's (`why` then says
/// the operator's fix), which calling again meets once more: the tab builds it either way.
pub fn build_unstarted(why: &str) -> (ErrorName, String) {
    let why = if why.is_empty() { "it gave no reason" } else { why };
    let message = format!(
        "the dependency build at the edge failed ({why}); call again, and if it fails the same way, {ON_A_TAB}"
    );
    (ErrorName::DepsResolutionFailed, message)
}

/// What the Worker's entry answered for a build at the edge, as the run goes on: `{ok: true}`
/// (finalized: the run now holds its capsule), `{cap, value, what?}` (stopped at a cap), or `{error:
/// {name, message}}` (the build's own error, or the server's refusal of its upload). Anything
/// else, or a name relay-core does not know, is the build failing.
pub fn build_outcome(answer: &serde_json::Value) -> Result<(), (ErrorName, String)> {
    if answer["ok"] == true {
        return Ok(());
    }
    if let (Some(cap), Some(value)) = (answer["cap"].as_str(), answer["value"].as_u64()) {
        if let Some(message) = over_cap(cap, value, answer["what"].as_str()) {
            return Err((ErrorName::DepsResolutionFailed, message));
        }
    }
    let error = &answer["error"];
    let name = error["name"].as_str().and_then(ErrorName::from_name).unwrap_or(ErrorName::DepsResolutionFailed);
    let message = error["message"].as_str().unwrap_or("the build at the edge gave no answer");
    Err((name, format!("the dependency build at the edge failed: {message}")))
}
