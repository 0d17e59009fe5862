//! Results: the shape every result takes in each era, answers to tool calls and the
//! notifications sent while a call runs: run results with `structuredContent`, tool errors
//! (named by `crate::error::ErrorName`), the refusal of a call when the queue is full,
//! progress and log messages.
//!
//! Every message stays well under 1 MiB serialized, whatever a run printed: that is the most
//! one SSE event may hold in the official Python SDK by default. Output is measured as the
//! JSON serde_json writes (an escaped control character takes 6 bytes), cut on a char
//! boundary, and each cut is said so in the message.

use serde_json::{json, Map, Value};

use super::content;
use super::display::display_content;
use super::era::Era;
use super::http::HttpResponse;
use super::jsonrpc::{notification, response_envelope, RpcError, QUEUE_FULL, QUOTA_EXCEEDED};
use super::logging::LogLevel;
use super::tasks::TaskRecord;
use super::tools::{Tool, ToolCall};
use crate::error::ErrorName;
use crate::run::backchannel::Display;
use crate::run::contexts::Report;
use crate::workspace::rules::Refusal;

/// The most run output, in serialized JSON bytes, that one message carries in each place it
/// appears: `structuredContent.stdout` and `.stderr` together, the text content, and the data
/// of one `notifications/message`. A result carries it twice; with the summary, two error
/// messages and the envelope it stays under 830 KB (820 330 bytes at worst in the tests; the
/// list of files in /out is not bounded here, and runs return none yet).
pub const OUTPUT_BUDGET: usize = 384 * 1024;
/// The most serialized bytes of an error message a result repeats (structured, then text).
const ERROR_MESSAGE_BUDGET: usize = 16 * 1024;
/// The most base64 image data (and `display()` data) a run result carries (beside twice
/// [`OUTPUT_BUDGET`]); an image past it is only listed in `files`, with its download URL.
pub const IMAGE_BUDGET: usize = 128 * 1024;
// A budget below one escaped char (6 bytes) would cut nothing and split forever.
const _: () = assert!(OUTPUT_BUDGET >= 6 && ERROR_MESSAGE_BUDGET >= 6);

/// How long, and by whom, a list or read result may be cached (2026-07-28
/// server/utilities/caching).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cache {
    /// The same for every caller: shared caches may keep it.
    Public(u64),
    /// Depends on the caller's relay session.
    Private(u64),
}

/// Seconds a call refused for a full queue is told to wait (`Retry-After`).
pub const QUEUE_FULL_RETRY_AFTER_S: u64 = 5;

/// The answer to a `tools/call` refused because `max` runs already wait in relay session
/// `session`: 429 with `Retry-After`, and a JSON-RPC error whose data names it (`QueueFull`).
pub fn queue_full(id: &Value, max: u32, session: &str) -> HttpResponse {
    let retry = QUEUE_FULL_RETRY_AFTER_S;
    let message = format!(
        "queue full: {max} run(s) already waiting in relay session '{session}'; retry in {retry} s, when some have run"
    );
    let data = json!({ "name": "QueueFull", "maxQueued": max, "retryAfterS": retry });
    let refused = RpcError::failed(QUEUE_FULL, message).with_status(429).with_data(data);
    refused.into_response(Some(id)).with_header("retry-after", &retry.to_string())
}

/// The answer to a `tools/call` refused by one of the tenant's quotas: 429 with `Retry-After`,
/// as a full queue's, and a JSON-RPC error whose data names it (`QuotaExceeded`, the quota).
pub fn quota_exceeded(id: &Value, refusal: &crate::quota::Refusal) -> HttpResponse {
    let refused = RpcError::failed(QUOTA_EXCEEDED, refusal.message()).with_status(429).with_data(refusal.data());
    refused.into_response(Some(id)).with_header("retry-after", &refusal.retry_after_s.to_string())
}

/// Completes a result for `era`: 2026-07-28 requires `resultType` on every result (`complete`
/// unless it has one: a task handle is `task`) and caching hints on cacheable ones, and asks
/// for `serverInfo` in `_meta` (next to what the result keeps there); legacy results stay as
/// their revision defined them.
pub fn shape_result(era: Era, mut result: Value, cache: Option<Cache>) -> Value {
    if era == Era::Legacy {
        return result;
    }
    if result.get("resultType").is_none() {
        result["resultType"] = json!("complete");
    }
    if !result["_meta"].is_object() {
        result["_meta"] = json!({});
    }
    result["_meta"]["io.modelcontextprotocol/serverInfo"] = content::server_info();
    if let Some(cache) = cache {
        let (ttl, scope) = match cache {
            Cache::Public(ttl) => (ttl, "public"),
            Cache::Private(ttl) => (ttl, "private"),
        };
        result["ttlMs"] = json!(ttl);
        result["cacheScope"] = json!(scope);
    }
    result
}

/// The outcome of a `run_js` / `run_py` run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolResult {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub wall_ms: u64,
    pub mem_peak_mb: u64,
    /// Requests made through the guarded fetch, and how many the policy denied.
    pub fetches: u64,
    pub denied: u64,
    /// File changes the run made that the tab could not store: the workspace may lack them.
    pub file_errors: u64,
    /// In a context: the runs its interpreter served before this one.
    pub context_runs: u64,
    /// Files left in `/out`: objects with at least `path` (see the run tools' outputSchema).
    pub files: Vec<Value>,
    /// Images left in `/out`, as `(mimeType, base64 data)`, shown to the model as image content
    /// while they fit [`IMAGE_BUDGET`] together.
    pub images: Vec<(String, String)>,
    pub error: Option<(ErrorName, String)>,
    /// Where the run executed (`tab` or `edge`), if it was sent anywhere.
    pub executor: Option<&'static str>,
    /// What became of the run's context, if it named one.
    pub context: Option<Report>,
    /// What the run's code showed with `display()`, and its run id (their resources' URIs).
    pub displays: Vec<Display>,
    pub run: String,
}

/// The JSON-RPC response to a run: a text summary for the model, `structuredContent` per the
/// run tools' outputSchema, `isError` when the exit code is not 0, an error is named, or file
/// changes the run made were not stored (2026-07-28 server/tools: tool failures are results,
/// so the model can self-correct; a run whose files were lost did not do what was asked, even
/// if the program's own exit code, kept as it was, says it succeeded). Output over
/// [`OUTPUT_BUDGET`] is cut, and `structuredContent.truncated` gives each cut stream's whole size.
pub fn tool_result(call: &ToolCall, result: ToolResult) -> Value {
    let is_error = result.exit_code != 0 || result.error.is_some() || result.file_errors > 0;
    let kept = Kept::of(&result, OUTPUT_BUDGET);
    let error = result.error.as_ref().map(|(name, message)| (*name, clip_message(message)));
    let mut structured = json!({
        "exitCode": result.exit_code,
        "stdout": kept.stdout,
        "stderr": kept.stderr,
        "usage": { "wallMs": result.wall_ms, "memPeakMb": result.mem_peak_mb,
                   "fetches": result.fetches, "denied": result.denied, "fileErrors": result.file_errors,
                   "contextRuns": result.context_runs },
        "files": result.files,
    });
    if let Some(executor) = result.executor {
        structured["executor"] = json!(executor);
    }
    let truncated = kept.truncated(&result);
    if !truncated.is_empty() {
        structured["truncated"] = Value::Object(truncated);
    }
    if let Some((name, message)) = &error {
        structured["error"] = error_object(*name, message);
    }
    if let Some(context) = &result.context {
        structured["context"] = context.to_json();
    }
    if result.file_errors > 0 {
        structured["notStored"] = json!({ "changes": result.file_errors, "message": not_stored(result.file_errors) });
    }
    let mut summary = summary(&result, &kept, error.as_ref());
    if let Some(note) = result.context.as_ref().and_then(Report::note) {
        summary = format!("{note}\n{summary}");
    }
    let mut content = vec![text(&summary)];
    // Displays first: the code asked for them; /out images get what they leave of the budget.
    let (shown, displays, left) = display_content(&result.run, &result.displays, &result.files, IMAGE_BUDGET);
    if !displays.is_empty() {
        structured["displays"] = Value::Array(displays);
    }
    content.extend(shown);
    content.extend(images_within(&result.images, left));
    let body = json!({ "content": content, "structuredContent": structured, "isError": is_error });
    envelope(call, body)
}

/// Image content for each image, in order, while their data fits `budget` together.
fn images_within(images: &[(String, String)], budget: usize) -> impl Iterator<Item = Value> + '_ {
    let mut used = 0;
    images.iter().filter_map(move |(mime_type, data)| {
        used += data.len();
        (used <= budget).then(|| json!({ "type": "image", "data": data, "mimeType": mime_type }))
    })
}

/// A failed call with no run output: `isError`, text "Name: message", and
/// `structuredContent.error {name, message}` (every tool's outputSchema admits it).
pub fn tool_error(call: &ToolCall, name: ErrorName, message: &str) -> Value {
    tool_error_to(&call.id, call.era, name, message)
}

/// [`tool_error`] for a refusal a route would answer with: a quota's carries its data
/// (`{quota, limit, used, retryAfterS}`, as the JSON-RPC refusal -32051) in its structured
/// error, so a client reads when to retry without parsing the message.
pub fn refused_tool(call: &ToolCall, refusal: &Refusal) -> Value {
    let mut body = error_result(refusal.name, &refusal.message);
    if let (Some(Value::Object(data)), Some(Value::Object(error))) =
        (&refusal.quota, body.pointer_mut("/structuredContent/error"))
    {
        for (key, value) in data {
            error.entry(key.as_str()).or_insert_with(|| value.clone());
        }
    }
    envelope(call, body)
}

/// The answer to a `tools/call` that became a task: its CreateTaskResult (tasks extension).
pub fn task_created(call: &ToolCall, task: &TaskRecord) -> Value {
    response_envelope(&call.id, shape_result(Era::Modern, task.to_json("task", false), None))
}

/// [`tool_error`] for a request known only by its id and era (a resumed stream whose call
/// did not survive a restart).
pub fn tool_error_to(id: &Value, era: Era, name: ErrorName, message: &str) -> Value {
    response_envelope(id, shape_result(era, error_result(name, message), None))
}

/// A successful `read` / `write` / `search` answer: `structured` as `structuredContent`,
/// and its serialization as text, as server/tools "Structured Content" asks for clients
/// that predate structured results.
pub fn data_result(call: &ToolCall, structured: Value) -> Value {
    let body = json!({
        "content": [text(&structured.to_string())],
        "structuredContent": structured,
        "isError": false,
    });
    envelope(call, body)
}

/// The answer to a `read`, `write` or `search` the tab executed, `value` being what the tab
/// reported (the tools' outputSchema). A read's content is also the text content, so a model
/// reads the file itself; it is cut to [`OUTPUT_BUDGET`] on a boundary where reading on from
/// `nextOffset` continues it. A search keeps the matches that fit the budget.
pub fn file_result(call: &ToolCall, mut value: Value) -> Value {
    match call.tool {
        Tool::Read => {
            fit_read(&mut value, OUTPUT_BUDGET);
            let content = value["content"].as_str().unwrap_or_default().to_owned();
            let mut shown = content;
            if let Some(next) = value.get("nextOffset") {
                shown.push_str(&format!("\n[cut here: read again with offset {next} for the rest of the file]"));
            }
            let body = json!({ "content": [text(&shown)], "structuredContent": value, "isError": false });
            envelope(call, body)
        }
        Tool::Search => {
            fit_matches(&mut value, OUTPUT_BUDGET);
            data_result(call, value)
        }
        _ => data_result(call, value),
    }
}

/// Cuts a read's `content` to `budget` serialized bytes, keeping `bytesRead`, `truncated`
/// and `nextOffset` true to what was kept (base64 is cut on a 4-character group).
fn fit_read(value: &mut Value, budget: usize) {
    let content = value["content"].as_str().unwrap_or_default();
    let base64 = value["encoding"] == "base64";
    let kept = if base64 { &content[..content.len().min(budget) / 4 * 4] } else { cut(content, budget) };
    if kept.len() < content.len() {
        let bytes = if base64 { kept.len() / 4 * 3 } else { kept.len() };
        value["content"] = json!(kept);
        value["bytesRead"] = json!(bytes);
        value["truncated"] = json!(true);
    }
    if value["truncated"] == true {
        let next = value["offset"].as_u64().unwrap_or(0) + value["bytesRead"].as_u64().unwrap_or(0);
        value["nextOffset"] = json!(next);
    }
}

/// Drops a search's last matches until its serialization fits `budget`, saying `truncated`.
fn fit_matches(value: &mut Value, budget: usize) {
    while value.to_string().len() > budget {
        let Some(matches) = value["matches"].as_array_mut().filter(|m| !m.is_empty()) else { return };
        let drop = matches.len().div_ceil(8);
        matches.truncate(matches.len() - drop);
        value["truncated"] = json!(true);
    }
}

/// A `notifications/progress` for a call's progress token.
pub fn progress_notification(token: &Value, progress: f64, total: Option<f64>, message: Option<&str>) -> Value {
    let mut params = json!({ "progressToken": token, "progress": progress });
    if let Some(total) = total {
        params["total"] = json!(total);
    }
    if let Some(message) = message {
        params["message"] = json!(message);
    }
    notification("notifications/progress", params)
}

/// The `notifications/message` events carrying one piece of run output: none when they must
/// not be sent (only on a streamed answer; in 2026-07-28 only when the request set
/// `io.modelcontextprotocol/logLevel` and `level` is at or above it, server/utilities/logging
/// "Per-request log level"; legacy clients always get them on a streamed answer), else one
/// per [`OUTPUT_BUDGET`] of `data`, in order, so no event grows past it.
pub fn log_notifications(call: &ToolCall, level: LogLevel, logger: &str, data: &str) -> Vec<Value> {
    let wanted = match call.era {
        Era::Modern => call.log_level.is_some_and(|min| level >= min),
        Era::Legacy => true,
    };
    if !(call.stream && wanted) {
        return Vec::new();
    }
    pieces(data, OUTPUT_BUDGET)
        .map(|piece| {
            let params = json!({ "level": level.as_str(), "logger": logger, "data": piece });
            notification("notifications/message", params)
        })
        .collect()
}

/// The result body of a failed call (no envelope), shared with argument validation.
pub(crate) fn error_result(name: ErrorName, message: &str) -> Value {
    let message = clip_message(message);
    json!({
        "content": [text(&format!("{}: {message}", name.as_str()))],
        "structuredContent": { "error": error_object(name, &message) },
        "isError": true,
    })
}

fn envelope(call: &ToolCall, body: Value) -> Value {
    response_envelope(&call.id, shape_result(call.era, body, None))
}

fn error_object(name: ErrorName, message: &str) -> Value {
    json!({ "name": name.as_str(), "message": message })
}

fn text(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

/// The model-facing summary: the error first, then exit and usage, output (as much as
/// `kept` holds, saying what was cut), files.
fn summary(result: &ToolResult, kept: &Kept, error: Option<&(ErrorName, String)>) -> String {
    let mut out = String::new();
    if let Some((name, message)) = error {
        out.push_str(&format!("{}: {message}\n", name.as_str()));
    }
    if never_ran(error) {
        out.push_str(&format!("exit code {}: the code did not run\n", result.exit_code));
    } else {
        out.push_str(&format!(
            "exit code {} in {} ms, peak memory {} MB\n",
            result.exit_code, result.wall_ms, result.mem_peak_mb
        ));
    }
    if result.file_errors > 0 {
        out.push_str(&format!("{}\n", not_stored(result.file_errors)));
    }
    for (label, whole, shown) in [("stdout", &result.stdout, kept.stdout), ("stderr", &result.stderr, kept.stderr)] {
        if !whole.is_empty() {
            out.push_str(&format!("--- {label} ---\n{shown}\n"));
        }
        if shown.len() < whole.len() {
            out.push_str(&format!(
                "[{label} cut here: {} of its {} bytes are not shown, to keep this message under 1 MiB; \
                 the whole output was streamed as notifications/message log events while the call ran, \
                 for clients that asked for them]\n",
                whole.len() - shown.len(),
                whole.len()
            ));
        }
    }
    if !result.files.is_empty() {
        out.push_str("--- files in /out ---\n");
        for file in &result.files {
            out.push_str(&format!("{}\n", file_line(file)));
        }
    }
    out.trim_end().to_string()
}

/// What a result says of `changes` file changes the tab could not store (the program was told
/// they were made: it cannot have noticed).
fn not_stored(changes: u64) -> String {
    let (changes, were) =
        if changes == 1 { ("1 file change".to_owned(), "was") } else { (format!("{changes} file changes"), "were") };
    format!(
        "{changes} the run made {were} not stored by the executor tab, so the workspace may lack them \
         (the tab's page says why: its storage failed or was full). Read or list the files the next \
         step needs, and write again what is missing."
    )
}

/// Whether a run ended with an error that comes before any code runs: no tab took it, or its
/// dependencies could not be built. Its time and memory say nothing, so the summary omits them.
fn never_ran(error: Option<&(ErrorName, String)>) -> bool {
    matches!(error, Some((ErrorName::NoExecutorAttached | ErrorName::DepsResolutionFailed, _)))
}

/// What a result carries of a run's output: a prefix of each stream, within a budget shared by
/// the two. A stream that fits in half keeps all of it and leaves the rest to the other.
struct Kept<'a> {
    stdout: &'a str,
    stderr: &'a str,
}

impl<'a> Kept<'a> {
    fn of(result: &'a ToolResult, budget: usize) -> Self {
        let stdout_len = json_len(&result.stdout);
        let stderr_room = json_len(&result.stderr).min(budget - stdout_len.min(budget / 2));
        let stderr = cut(&result.stderr, stderr_room);
        let stdout = cut(&result.stdout, budget - json_len(stderr));
        Kept { stdout, stderr }
    }

    /// `{stream: whole size in bytes}` for each stream that was cut.
    fn truncated(&self, result: &ToolResult) -> Map<String, Value> {
        [("stdout", self.stdout, &result.stdout), ("stderr", self.stderr, &result.stderr)]
            .into_iter()
            .filter(|(_, kept, whole)| kept.len() < whole.len())
            .map(|(name, _, whole)| (name.to_owned(), json!(whole.len())))
            .collect()
    }
}

/// An error message within [`ERROR_MESSAGE_BUDGET`], saying so when it was cut.
fn clip_message(message: &str) -> String {
    let kept = cut(message, ERROR_MESSAGE_BUDGET);
    if kept.len() == message.len() {
        return message.to_owned();
    }
    format!("{kept} [message cut: {} of its {} bytes are not shown]", message.len() - kept.len(), message.len())
}

/// The bytes serde_json writes for `c` inside a JSON string: two-character escapes for `"`,
/// `\` and five control characters, `\u00XX` for the other control characters, else UTF-8.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\t' | '\n' | '\u{c}' | '\r' => 2,
        '\0'..='\u{1f}' => 6,
        c => c.len_utf8(),
    }
}

/// The serialized length of `text` as a JSON string, without its quotes.
fn json_len(text: &str) -> usize {
    text.chars().map(escaped_len).sum()
}

/// The longest prefix of `text` that serializes to at most `budget` bytes (a char boundary).
fn cut(text: &str, budget: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        used += escaped_len(c);
        if used > budget {
            return &text[..i];
        }
    }
    text
}

/// `text` in consecutive pieces of at most `budget` serialized bytes each.
fn pieces(text: &str, budget: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let piece = cut(rest, budget);
        rest = &rest[piece.len()..];
        (!piece.is_empty()).then_some(piece)
    })
}

/// `path url` when the file entry has them, else its JSON.
fn file_line(file: &Value) -> String {
    let field = |name| file.get(name).and_then(Value::as_str);
    match (field("path"), field("url")) {
        (Some(path), Some(url)) => format!("{path} {url}"),
        (Some(path), None) => path.to_string(),
        _ => file.to_string(),
    }
}
