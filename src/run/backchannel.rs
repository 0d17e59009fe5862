//! The executor's backchannel (`POST /session/:id/result`): NDJSON batches of numbered events,
//! applied to a run's log exactly once and in order. A batch the tab retries after a lost
//! answer carries the same sequence numbers, so its events are recognised and skipped.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most events one batch may carry.
pub const MAX_BATCH_EVENTS: usize = 10_000;

/// One line of a batch. Unknown fields are refused by `EventBody`: serde's
/// `deny_unknown_fields` cannot sit next to `flatten` (it refused every body field).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TabEvent {
    pub run_id: String,
    pub seq: u64,
    #[serde(flatten)]
    pub body: EventBody,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum EventBody {
    Stdout {
        data: String,
    },
    Stderr {
        data: String,
    },
    /// A phase of the run in the tab: `load-runtime` (with `runtimeId`), `execute`, and a
    /// build's `resolve`, `fetch`, `bundle`, `upload`, `finalize` (with a `detail` such as
    /// "3 of 5 packages, 120 KiB").
    #[serde(rename_all = "camelCase")]
    Progress {
        phase: String,
        runtime_id: Option<String>,
        detail: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Exit {
        exit_code: i32,
        #[serde(default)]
        usage: Usage,
        error: Option<RunError>,
        /// Files the run left in `/out` (uploaded by the tab under the run).
        #[serde(default)]
        files: Vec<OutFile>,
        /// What the run's code showed with `display()`, in order.
        #[serde(default)]
        displays: Vec<Display>,
    },
    Error(RunError),
    /// Guest code tried something the run's policy refused: `what` (`fetch`, `write`) of
    /// `target` (a URL, a path), and why. Sealed onto the audit chain, the first
    /// [`DENIALS_AUDITED`] of a run only.
    Denied {
        what: String,
        target: String,
        reason: String,
    },
}

/// Denials of one run that reach the audit: a program looping on a refused fetch must not
/// push the relay session's history out of retention. Later ones are only counted.
pub const DENIALS_AUDITED: u64 = 16;

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Usage {
    pub wall_ms: u64,
    pub mem_peak_mb: u64,
    /// Requests guest code made through the guarded fetch, and how many fetches and workspace
    /// writes the policy denied.
    pub fetches: u64,
    pub denied: u64,
    /// File changes the run made that the tab could not store (its storage failed, or the
    /// workspace refused the change): the guest was not told, so the result says it.
    pub file_errors: u64,
    /// For a run in a context: how many runs the context's interpreter had served in the tab
    /// before this one (0: the tab started it for this run); none when the run ended before
    /// the interpreter took it up (its deps build, its capsule or the workspace failed first).
    /// See `run::contexts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_runs: Option<u64>,
}

/// A file a run left in `/out`, as the tab reports it after uploading it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutFile {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// Whether the upload was stored (a file over the tenant's cap is listed, not stored).
    pub uploaded: bool,
    /// A small image's bytes (base64) with its MIME type, shown to the agent as image content.
    pub image: Option<InlineImage>,
    /// Why the upload was not stored, as the Worker refused it (`QuotaExceeded` naming
    /// `defaults.quotas.storedBytes`, say), so the result says it.
    pub error: Option<RunError>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InlineImage {
    pub mime_type: String,
    pub data: String,
}

/// One `display()` of a run, as its tab reports it (lib/run-queue.js): a MIME type and either
/// its text (text types, JSON), its bytes in base64 (images), or, when it was too large to
/// ride in the result, the `/out` path the tab wrote it to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Display {
    pub mime_type: String,
    pub text: Option<String>,
    pub data: Option<String>,
    pub path: Option<String>,
}

/// The fields an `exit` event's `usage`, `error` and each of its `files` may carry, by their
/// JSON names: the page builds its exit events from this list (`relay-capsule exit-fields`, at
/// build time), so it never sends a field [`parse_batch`] refuses, which would lose the whole
/// batch. Taken from serializing each type, so a field added here is listed at once.
pub fn exit_fields() -> Value {
    let file = OutFile {
        path: String::new(),
        size: 0,
        sha256: String::new(),
        uploaded: false,
        image: Some(InlineImage { mime_type: String::new(), data: String::new() }),
        error: Some(RunError { name: String::new(), message: String::new() }),
    };
    let error = RunError { name: String::new(), message: String::new() };
    let display = Display {
        mime_type: String::new(),
        text: Some(String::new()),
        data: Some(String::new()),
        path: Some(String::new()),
    };
    serde_json::json!({
        "usage": field_names(&Usage { context_runs: Some(0), ..Usage::default() }),
        "error": field_names(&error),
        "file": field_names(&file),
        "display": field_names(&display),
    })
}

/// The JSON names of a struct's fields, as it serializes.
fn field_names(value: &impl Serialize) -> Vec<String> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map.into_iter().map(|(name, _)| name).collect(),
        _ => Vec::new(),
    }
}

/// An error the executor reports, named with one of [`crate::error::ErrorName`]'s names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunError {
    pub name: String,
    pub message: String,
}

/// Parses a batch. Any bad line refuses the whole batch, naming the line, so nothing is
/// half-applied.
pub fn parse_batch(body: &[u8]) -> Result<Vec<TabEvent>, String> {
    let text = std::str::from_utf8(body).map_err(|_| "batch is not UTF-8".to_owned())?;
    let events: Vec<TabEvent> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect::<Result<_, _>>()?;
    if events.len() > MAX_BATCH_EVENTS {
        return Err(format!("batch has {} events; at most {MAX_BATCH_EVENTS}", events.len()));
    }
    Ok(events)
}

/// Largest result batch in bytes, posted (the Worker's body limit for `POST .../result`) or on a
/// results socket (checked by the DO, answered 413 alike). The page sends a batch once it holds
/// 64 KiB of events, and never more than 1 Mi UTF-16 units in one.
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// A batch on a tab's results socket: `<id>\n<batch>`, the batch as `POST .../result` takes it.
/// Returns the id, echoed in the reply, and the batch.
pub fn parse_socket_batch(message: &str) -> Result<(u64, &str), String> {
    let (id, batch) = message.split_once('\n').unwrap_or((message, ""));
    let id =
        id.parse().map_err(|_| format!("a socket message starts with its batch id and a newline, not {id:.40?}"))?;
    Ok((id, batch))
}

/// The reply to socket batch `id`: the status and body its `POST` would have been answered with.
pub fn socket_reply(id: u64, status: u16, body: &Value) -> String {
    serde_json::json!({ "id": id, "status": status, "body": body }).to_string()
}

/// What applying one event did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// New: forward it to the client.
    New,
    /// Seen before (a retried batch): ignore.
    Duplicate,
    /// An event is missing before it (the tab gave up on a batch): refuse it.
    Gap { expected: u64 },
    /// The run has already ended.
    Finished,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Exit {
    pub exit_code: i32,
    pub usage: Usage,
    pub error: Option<RunError>,
    pub files: Vec<OutFile>,
    pub displays: Vec<Display>,
}

/// Everything a run has produced so far, capped at the policy's output limit.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLog {
    next_seq: u64,
    pub stdout: String,
    pub stderr: String,
    output_cap: usize,
    /// Output the cap kept out of the log.
    pub dropped_bytes: u64,
    pub exit: Option<Exit>,
    /// An `error` event seen before the exit.
    pub error: Option<RunError>,
    /// `denied` events seen.
    pub denials: u64,
}

impl RunLog {
    pub fn new(output_cap: u64) -> Self {
        RunLog {
            next_seq: 0,
            stdout: String::new(),
            stderr: String::new(),
            output_cap: usize::try_from(output_cap).unwrap_or(usize::MAX),
            dropped_bytes: 0,
            exit: None,
            error: None,
            denials: 0,
        }
    }

    pub fn apply(&mut self, event: &TabEvent) -> Applied {
        // A retried batch that carried the exit is a duplicate, not a late event.
        if event.seq < self.next_seq {
            return Applied::Duplicate;
        }
        if self.exit.is_some() {
            return Applied::Finished;
        }
        if event.seq > self.next_seq {
            return Applied::Gap { expected: self.next_seq };
        }
        self.next_seq += 1;
        match &event.body {
            EventBody::Stdout { data } => self.append(true, data),
            EventBody::Stderr { data } => self.append(false, data),
            EventBody::Progress { .. } => {}
            EventBody::Denied { .. } => self.denials += 1,
            EventBody::Error(error) => self.error = Some(error.clone()),
            EventBody::Exit { exit_code, usage, error, files, displays } => {
                let error = error.clone().or_else(|| self.error.clone()).or_else(|| self.cap_error());
                let exit_code = if error.is_some() && *exit_code == 0 { 1 } else { *exit_code };
                let (files, displays) = (files.clone(), displays.clone());
                self.exit = Some(Exit { exit_code, usage: *usage, error, files, displays });
            }
        }
        Applied::New
    }

    /// Appends output while under the cap (stdout and stderr share it), cutting at a char boundary.
    /// Once anything was dropped nothing more is kept, so the log stays a prefix of the output.
    fn append(&mut self, stdout: bool, data: &str) {
        let used = self.stdout.len() + self.stderr.len();
        let room = if self.dropped_bytes > 0 { 0 } else { self.output_cap.saturating_sub(used) };
        let mut keep = data.len().min(room);
        while !data.is_char_boundary(keep) {
            keep -= 1;
        }
        self.dropped_bytes += (data.len() - keep) as u64;
        let target = if stdout { &mut self.stdout } else { &mut self.stderr };
        target.push_str(&data[..keep]);
    }

    fn cap_error(&self) -> Option<RunError> {
        (self.dropped_bytes > 0).then(|| RunError {
            name: "OutputLimitExceeded".into(),
            message: format!(
                "output exceeded the limit of {} bytes ({} more bytes were dropped); raise policy.limits.stdoutBytes or print less",
                self.output_cap, self.dropped_bytes
            ),
        })
    }

    /// Ends the run from the server's side (timeout, tab gone, cancelled), unless it has ended.
    pub fn fail(&mut self, name: &str, message: String, exit_code: i32) {
        if self.exit.is_none() {
            let error = Some(RunError { name: name.into(), message });
            self.exit =
                Some(Exit { exit_code, usage: Usage::default(), error, files: Vec::new(), displays: Vec::new() });
        }
    }
}
