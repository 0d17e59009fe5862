//! One function per MCP method, for a request whose era checks have passed. Each returns
//! the bare result (the caller shapes it per era) or a JSON-RPC error.

use serde_json::{json, Map, Value};

use super::content::{self, AUDIT_SHOWN, AUDIT_URI, CONTEXTS_URI, PROMPT_NAME, SESSION_URI, USAGE_URI, WORKSPACE_URI};
use super::context::Context;
use super::era::{Era, SUPPORTED_VERSIONS};
use super::jsonrpc::{RpcError, INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND_LEGACY};
use super::logging::LogLevel;
use super::results::{error_result, Cache};
use super::tasks;
use super::tools::{self, Tool, ToolCall};
use crate::audit;
use crate::error::ErrorName;

/// How long lists that never change at run time stay fresh: one hour.
const STATIC_TTL_MS: u64 = 3_600_000;

/// A request as the methods see it.
pub struct Req<'a> {
    pub id: &'a Value,
    pub method: &'a str,
    pub params: &'a Map<String, Value>,
    pub era: Era,
    pub session_id: Option<&'a str>,
    pub stream: bool,
    pub log_level: Option<LogLevel>,
}

/// A method's answer.
pub enum Answer {
    /// A result body, cacheable or not.
    Result(Value, Option<Cache>),
    /// A tool call for the Durable Object to run.
    Call(ToolCall),
    /// `tasks/cancel` of a working task: the Durable Object cancels its run, then acknowledges.
    CancelRun(String),
}

/// Runs one method. `ping` and `logging/setLevel` exist only in the legacy era (2026-07-28
/// changelog item 5 removed them), `server/discover` only in 2026-07-28.
pub fn dispatch(req: &Req, cx: &Context) -> Result<Answer, RpcError> {
    match (req.era, req.method) {
        (Era::Modern, "server/discover") => Ok(discover(cx)),
        (Era::Legacy, "ping") => Ok(Answer::Result(json!({}), None)),
        (Era::Legacy, "logging/setLevel") => set_level(req.params),
        (_, "tools/list") => list(req.params, "tools", tools::list()),
        (_, "tools/call") => call_tool(req),
        (_, "resources/list") => {
            let resources = [
                content::session_resource(),
                content::audit_resource(),
                content::workspace_resource(),
                content::contexts_resource(),
                content::usage_resource(),
            ];
            list(req.params, "resources", json!(resources))
        }
        (_, "resources/templates/list") => list(req.params, "resourceTemplates", json!([])),
        (_, "resources/read") => read_resource(req, cx),
        (_, "prompts/list") => list(req.params, "prompts", json!([content::prompt()])),
        (_, "prompts/get") => get_prompt(req.params, cx),
        (Era::Modern, "tasks/get" | "tasks/update" | "tasks/cancel") => task_method(req, cx),
        _ => Err(method_not_found(req.era, req.method)),
    }
}

/// A list result: one page, the same for every caller, unchanging while we run.
fn list(params: &Map<String, Value>, key: &str, items: Value) -> Result<Answer, RpcError> {
    no_cursor(params)?;
    let result = Value::Object(Map::from_iter([(key.to_string(), items)]));
    Ok(Answer::Result(result, Some(Cache::Public(STATIC_TTL_MS))))
}

/// 2026-07-28 streamable-http: an unknown method is HTTP 404 with -32601. Not in the legacy
/// era: there a 404 tells the client its session is gone, so the error rides on a 200.
fn method_not_found(era: Era, method: &str) -> RpcError {
    let error = RpcError::failed(METHOD_NOT_FOUND, format!("Method not found: {method}"));
    match era {
        Era::Modern => error.with_status(404),
        Era::Legacy => error,
    }
}

/// `server/discover` (2026-07-28 server/discover). Private: the instructions name this
/// deployment's executor page.
fn discover(cx: &Context) -> Answer {
    let mut capabilities = content::capabilities();
    capabilities["extensions"] = json!({ tasks::EXTENSION: {} });
    let result = json!({
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": capabilities,
        "instructions": content::instructions(cx),
    });
    Answer::Result(result, Some(Cache::Private(STATIC_TTL_MS)))
}

/// Legacy `logging/setLevel`: the level is checked, then left to the per-call rule of
/// `log_notifications` (streamed run output is always sent to legacy clients).
fn set_level(params: &Map<String, Value>) -> Result<Answer, RpcError> {
    match params.get("level").and_then(LogLevel::from_json) {
        Some(_) => Ok(Answer::Result(json!({}), None)),
        None => Err(invalid_params(
            "logging/setLevel needs `level`: one of debug, info, notice, warning, error, critical, alert, emergency",
        )),
    }
}

/// Every list fits one page, so any cursor is one we never issued (server/utilities/
/// pagination: an invalid cursor is -32602).
fn no_cursor(params: &Map<String, Value>) -> Result<(), RpcError> {
    match params.get("cursor") {
        None | Some(Value::Null) => Ok(()),
        Some(_) => Err(invalid_params("Invalid cursor: every list here fits one page")),
    }
}

/// `tools/call`. Protocol errors (no name, an unknown tool, non-object arguments: the call
/// fails the CallToolRequest schema) are JSON-RPC -32602, as server/tools "Error Handling"
/// lists them. Arguments that fail the tool's input schema are a tool execution error
/// (isError + ValidationError naming the field): the spec files input validation there so
/// the model sees the message and corrects itself.
fn call_tool(req: &Req) -> Result<Answer, RpcError> {
    let name = req.params.get("name").and_then(Value::as_str);
    let name = name.ok_or_else(|| invalid_params("tools/call needs `name`, a string"))?;
    let tool = Tool::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        invalid_params(format!("Unknown tool: {name}")).with_data(json!({ "tools": known }))
    })?;
    let arguments = match req.params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(args @ Value::Object(_)) => args.clone(),
        Some(_) => return Err(invalid_params("tools/call `arguments` must be an object")),
    };
    let progress_token = progress_token(req.params)?;
    if let Err(message) = tool.validate(&arguments) {
        let message = format!("{name}: {message}");
        return Ok(Answer::Result(error_result(ErrorName::ValidationError, &message), None));
    }
    Ok(Answer::Call(ToolCall {
        id: req.id.clone(),
        tool,
        arguments,
        progress_token,
        stream: req.stream,
        era: req.era,
        log_level: req.log_level,
        session_id: req.session_id.map(str::to_string),
        task: req.era == Era::Modern && matches!(tool, Tool::RunJs | Tool::RunPy) && tasks::declared(req.params),
    }))
}

/// `tasks/get`, `tasks/update`, `tasks/cancel`: only for a request that declared the extension,
/// and of a task the relay session has. Cancelling a task that ended is acknowledged as well.
fn task_method(req: &Req, cx: &Context) -> Result<Answer, RpcError> {
    if !tasks::declared(req.params) {
        return Err(tasks::missing_capability());
    }
    let task_id = tasks::task_id(req.params)?;
    let task = (cx.task)(task_id).ok_or_else(|| tasks::unknown_task(task_id))?;
    match req.method {
        "tasks/get" => Ok(Answer::Result(task.to_json("complete", true), None)),
        "tasks/update" => match req.params.get("inputResponses") {
            None | Some(Value::Object(_)) => Ok(Answer::Result(json!({}), None)),
            Some(_) => Err(invalid_params("tasks/update `inputResponses` must be an object")),
        },
        _ if task.status.is_terminal() => Ok(Answer::Result(json!({}), None)),
        _ => Ok(Answer::CancelRun(task.run_id)),
    }
}

/// basic/patterns/progress: a progress token is a string or an integer.
fn progress_token(params: &Map<String, Value>) -> Result<Option<Value>, RpcError> {
    let token = params.get("_meta").and_then(|m| m.get("progressToken"));
    match token {
        None => Ok(None),
        Some(t) if t.is_string() || t.is_i64() || t.is_u64() => Ok(Some(t.clone())),
        Some(_) => Err(invalid_params("`_meta.progressToken` must be a string or an integer")),
    }
}

/// `resources/read` of `relay://session` or `relay://audit`: live data, so private and never
/// fresh.
fn read_resource(req: &Req, cx: &Context) -> Result<Answer, RpcError> {
    let uri = req.params.get("uri").and_then(Value::as_str);
    let uri = uri.ok_or_else(|| invalid_params("resources/read needs `uri`, a string"))?;
    let body = match uri {
        SESSION_URI => content::session_json(&cx.relay, &cx.page_url),
        AUDIT_URI => audit::audit_json(&(cx.audit_records)(AUDIT_SHOWN)),
        WORKSPACE_URI => (cx.workspace)(),
        CONTEXTS_URI => cx.relay.contexts.clone(),
        USAGE_URI => cx.relay.usage.clone(),
        _ => return Err(resource_not_found(req.era, uri)),
    };
    let text = serde_json::to_string_pretty(&body).unwrap_or_default();
    let contents = json!([{ "uri": uri, "mimeType": "application/json", "text": text }]);
    Ok(Answer::Result(json!({ "contents": contents }), Some(Cache::Private(0))))
}

fn resource_not_found(era: Era, uri: &str) -> RpcError {
    // -32002 up to 2025-11-25, -32602 since 2026-07-28 (server/resources "Error Handling").
    let code = match era {
        Era::Legacy => RESOURCE_NOT_FOUND_LEGACY,
        Era::Modern => INVALID_PARAMS,
    };
    RpcError::failed(code, "Resource not found").with_data(json!({ "uri": uri }))
}

/// `prompts/get` of `use-relay`, whose one optional argument is `task`.
fn get_prompt(params: &Map<String, Value>, cx: &Context) -> Result<Answer, RpcError> {
    let name = params.get("name").and_then(Value::as_str);
    if name != Some(PROMPT_NAME) {
        let shown = name.unwrap_or("(none)");
        return Err(invalid_params(format!("Unknown prompt: {shown} (this server has `{PROMPT_NAME}`)")));
    }
    let task = match params.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(args)) => task_argument(args)?,
        Some(_) => return Err(invalid_params("prompts/get `arguments` must be an object of strings")),
    };
    Ok(Answer::Result(content::prompt_messages(cx, task), None))
}

fn task_argument(args: &Map<String, Value>) -> Result<Option<&str>, RpcError> {
    match args.get("task") {
        None => Ok(None),
        Some(Value::String(task)) => Ok(Some(task.as_str())),
        Some(_) => Err(invalid_params("prompt argument `task` must be a string")),
    }
}

fn invalid_params(message: impl Into<String>) -> RpcError {
    RpcError::failed(INVALID_PARAMS, message)
}
