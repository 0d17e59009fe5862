//! What a tab says of its runtimes (`POST /session/:id/ready`): each one `loading` while the
//! tab warms up after attaching (Pyodide takes seconds cold), then `ready`, or `failed` (it
//! loads again on first use). The relay session shows it in `relay://session`, and a run sent
//! to a tab still loading its runtime is told why it waits, instead of looking stuck.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The most runtimes one report may name (the page has two).
pub const MAX_RUNTIMES: usize = 8;
/// The longest runtime id accepted (`pyodide@0.29.0`-like ids are far shorter).
const MAX_ID_LEN: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeState {
    Loading,
    Ready,
    Failed,
}

/// One tab's report: runtime id -> state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Readiness {
    pub runtimes: BTreeMap<String, RuntimeState>,
}

impl Readiness {
    /// Parses a report, `{"runtimes": {"<family>@<version>": "loading"|"ready"|"failed"}}`; the
    /// error says what is wrong with it.
    pub fn parse(body: &[u8]) -> Result<Readiness, String> {
        let readiness: Readiness = serde_json::from_slice(body).map_err(|e| {
            format!("readiness report: {e}; expected {{\"runtimes\": {{\"<runtime id>\": \"loading\" | \"ready\" | \"failed\"}}}}")
        })?;
        if readiness.runtimes.len() > MAX_RUNTIMES {
            return Err(format!("readiness report: at most {MAX_RUNTIMES} runtimes"));
        }
        if let Some(bad) = readiness.runtimes.keys().find(|id| !runtime_id_ok(id)) {
            return Err(format!(
                "readiness report: runtime id {bad:?} is not <family>@<version> of at most {MAX_ID_LEN} characters [a-z0-9.-]"
            ));
        }
        Ok(readiness)
    }

    /// Whether the tab is still loading any runtime.
    pub fn warming_up(&self) -> bool {
        self.runtimes.values().any(|state| *state == RuntimeState::Loading)
    }

    /// Why a run of `runtime_id` sent to this tab waits before it starts, if it does: the tab
    /// is still loading that runtime.
    pub fn wait_note(&self, runtime_id: &str) -> Option<String> {
        (self.runtimes.get(runtime_id) == Some(&RuntimeState::Loading)).then(|| {
            format!("the executor tab is still loading {runtime_id} after attaching; the run starts when it is ready")
        })
    }
}

fn runtime_id_ok(id: &str) -> bool {
    let Some((family, version)) = id.split_once('@') else { return false };
    id.len() <= MAX_ID_LEN
        && !family.is_empty()
        && !version.is_empty()
        && family.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && version.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
}
