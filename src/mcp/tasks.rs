//! The tasks extension (`io.modelcontextprotocol/tasks`, ext-tasks draft, SEP-2663) in the
//! 2026-07-28 era: a client that declares it in a request's capabilities gets, for `run_js` and
//! `run_py`, a task handle at once instead of holding the request open; it polls `tasks/get`
//! (status, then the tool's result inlined), may `tasks/cancel`, and `tasks/update` is
//! acknowledged (relay never asks a client for input). The tasks themselves live in the relay
//! session's Durable Object; this module decides the wire shapes and the rules.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::jsonrpc::{RpcError, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY};

/// The extension's identifier.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// How long a task can be read after it was created.
pub const TASK_TTL_MS: u64 = 60 * 60 * 1000;
/// How often a client should poll a working task.
pub const POLL_INTERVAL_MS: u64 = 500;

/// A task's status (ext-tasks "Task Status").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Working,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub fn is_terminal(self) -> bool {
        self != TaskStatus::Working
    }
}

/// A task as the Durable Object keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    pub task_id: String,
    /// The run the task stands for.
    pub run_id: String,
    pub status: TaskStatus,
    pub status_message: Option<String>,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// The `tools/call` result (`completed`), or the JSON-RPC error (`failed`).
    pub result: Option<Value>,
    pub error: Option<Value>,
    /// While working: the output so far (`{stdout, stderr}`, their last [`OUTPUT_SHOWN`]
    /// characters), shown in `_meta` so a client can watch a long run. Not kept.
    #[serde(skip)]
    pub output: Option<Value>,
}

/// The most output a working task shows, per stream (its end: the latest lines).
pub const OUTPUT_SHOWN: usize = 16 * 1024;

/// `_meta` key of a working task's output so far.
pub const OUTPUT_META: &str = "dev.relay-edge/output";

impl TaskRecord {
    /// A task that has just started working on `run_id`.
    pub fn working(task_id: &str, run_id: &str, now_ms: u64) -> Self {
        TaskRecord {
            task_id: task_id.to_owned(),
            run_id: run_id.to_owned(),
            status: TaskStatus::Working,
            status_message: Some("queued for the relay session's executor tab".into()),
            created_ms: now_ms,
            updated_ms: now_ms,
            result: None,
            error: None,
            output: None,
        }
    }

    /// The task while its run works: where the run is, and the end of its output so far.
    pub fn in_progress(self, on_tab: bool, stdout: &str, stderr: &str) -> Self {
        let message = match on_tab {
            false => "queued for the relay session's executor tab".to_owned(),
            true => format!(
                "running in the executor tab; {} bytes of stdout and {} of stderr so far",
                stdout.len(),
                stderr.len()
            ),
        };
        let tail = |text: &str| text[boundary_from(text, text.len().saturating_sub(OUTPUT_SHOWN))..].to_owned();
        let output = json!({ "stdout": tail(stdout), "stderr": tail(stderr) });
        TaskRecord { status_message: Some(message), output: Some(output), ..self }
    }

    /// The task as it ended: a JSON-RPC response to its `tools/call` (`result` -> completed,
    /// a tool error included, as the extension says; `error` -> failed), or cancelled.
    pub fn ended(&self, response: &Value, cancelled: bool, now_ms: u64) -> Self {
        let mut ended = TaskRecord { updated_ms: now_ms, status_message: None, ..self.clone() };
        match (cancelled, response.get("result"), response.get("error")) {
            (true, ..) => {
                ended.status = TaskStatus::Cancelled;
                ended.status_message = Some("the run was cancelled".into());
            }
            (false, Some(result), _) => {
                ended.status = TaskStatus::Completed;
                ended.result = Some(result.clone());
            }
            (false, None, error) => {
                ended.status = TaskStatus::Failed;
                ended.error = Some(error.cloned().unwrap_or_else(|| json!({ "code": -32603, "message": "no result" })));
            }
        }
        ended
    }

    /// The `Task` fields on the wire, with `resultType` (`"task"` for a CreateTaskResult,
    /// `"complete"` for `tasks/get`) and, for `tasks/get`, what the status carries.
    pub fn to_json(&self, result_type: &str, detailed: bool) -> Value {
        let mut task = json!({
            "resultType": result_type,
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso8601(self.created_ms),
            "lastUpdatedAt": iso8601(self.updated_ms),
            "ttlMs": TASK_TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
        });
        if let Some(message) = &self.status_message {
            task["statusMessage"] = json!(message);
        }
        if let Some(output) = &self.output {
            task["_meta"] = json!({ OUTPUT_META: output });
        }
        if detailed {
            match self.status {
                TaskStatus::Completed => task["result"] = self.result.clone().unwrap_or_else(|| json!({})),
                TaskStatus::Failed => task["error"] = self.error.clone().unwrap_or_else(|| json!({})),
                TaskStatus::Working | TaskStatus::Cancelled => {}
            }
        }
        task
    }
}

/// Whether a request's `_meta` declares the extension in its client capabilities.
pub fn declared(params: &Map<String, Value>) -> bool {
    params
        .get("_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION))
        .is_some_and(Value::is_object)
}

/// -32021 for a `tasks/*` request that did not declare the extension (SEP-2575 "Missing
/// Required Capabilities").
pub fn missing_capability() -> RpcError {
    RpcError::rejected(MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability")
        .with_data(json!({ "requiredCapabilities": { "extensions": { EXTENSION: {} } } }))
}

/// The `taskId` of a `tasks/*` request.
pub fn task_id(params: &Map<String, Value>) -> Result<&str, RpcError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::rejected(INVALID_PARAMS, "tasks/* needs `taskId`, a string"))
}

/// -32602 for a task this relay session does not have (never had, or past its TTL).
pub fn unknown_task(task_id: &str) -> RpcError {
    RpcError::failed(
        INVALID_PARAMS,
        format!("Unknown taskId: {task_id} (tasks are kept {} minutes)", TASK_TTL_MS / 60_000),
    )
}

/// The char boundary at or after `at`.
fn boundary_from(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// Milliseconds since the epoch as ISO 8601 UTC (`2026-11-23T10:30:00.000Z`).
pub fn iso8601(ms: u64) -> String {
    let (days, rest) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1000 % 60, rest % 1000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}
