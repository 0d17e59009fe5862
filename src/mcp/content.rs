//! What the server says about itself: server info, capabilities, instructions, the
//! `use-relay` prompt (how an agent uses relay) and the `relay://session` and `relay://audit`
//! resources.

use serde_json::{json, Value};

use super::context::{Context, RelayView};
use crate::error::ErrorName;
use crate::run::readiness::Readiness;

pub const SERVER_NAME: &str = "relay-edge";
pub const PROMPT_NAME: &str = "use-relay";
pub const SESSION_URI: &str = "relay://session";
pub const AUDIT_URI: &str = "relay://audit";
pub const WORKSPACE_URI: &str = "relay://workspace";
pub const CONTEXTS_URI: &str = "relay://contexts";
pub const USAGE_URI: &str = "relay://usage";
/// How many of the latest audit records `relay://audit` shows.
pub const AUDIT_SHOWN: usize = 100;

/// `Implementation` (serverInfo) in both eras.
pub fn server_info() -> Value {
    json!({
        "name": SERVER_NAME,
        "title": "relay-mcp (managed)",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Runs JavaScript and Python in a browser tab attached as executor.",
    })
}

/// Server capabilities. `logging` because run output is streamed as `notifications/message`
/// (deprecated in 2026-07-28 but still defined); the lists never change at run time.
pub fn capabilities() -> Value {
    json!({
        "tools": { "listChanged": false },
        "resources": { "subscribe": false, "listChanged": false },
        "prompts": { "listChanged": false },
        "logging": {},
    })
}

/// Instructions for the model (`initialize` and `server/discover`).
pub fn instructions(cx: &Context) -> String {
    format!(
        "relay runs code in a browser tab attached to this relay session as executor (a person \
         opens {page} to attach one). Tools: run_js (QuickJS) and run_py (Pyodide), each run in a \
         fresh sandbox over the relay session's persistent workspace (/tmp, /out, /host), with \
         fetch limited to the hosts the policy allows; read, write and search work on the same \
         files without running code. Get the prompt `{PROMPT_NAME}` for limits and what each error means; \
         read `{SESSION_URI}` for live status.",
        page = cx.page_url
    )
}

/// The `prompts/list` entry.
pub fn prompt() -> Value {
    json!({
        "name": PROMPT_NAME,
        "title": "How to use relay",
        "description": "Teaches an agent to run code with relay: the executor tab, the filesystem, limits, and how to fix each error.",
        "arguments": [{ "name": "task", "description": "What you want to get done (optional).", "required": false }],
    })
}

/// The `prompts/get` result body for `use-relay`.
pub fn prompt_messages(cx: &Context, task: Option<&str>) -> Value {
    let mut text = guide(cx);
    if let Some(task) = task {
        text.push_str(&format!("\n\n## Your task\n{task}"));
    }
    json!({
        "description": "How to use relay",
        "messages": [{ "role": "user", "content": { "type": "text", "text": text } }],
    })
}

fn guide(cx: &Context) -> String {
    let tabs = cx.relay.tab_ids.len();
    let limits = serde_json::to_string_pretty(&cx.limits_json).unwrap_or_default();
    let errors: Vec<String> = ErrorName::TOOL
        .iter()
        .map(|e| format!("- {} (HTTP {}): {}", e.as_str(), e.http_status(), e.remedy()))
        .collect();
    format!(
        "# Using relay\n\n\
         Five tools run in a browser tab attached to relay session `{session}`: run_js, run_py, \
         read, write, search.\n\n\
         ## First: a browser tab must be attached\n\
         Code runs in the tab, not on the server. Tabs attached now: {tabs}. If a call fails with \
         NoExecutorAttached, ask the user to open {page} in a browser and keep it open, then retry.\n\n\
         ## Running code\n\
         - run_js: JavaScript (an ES module) in QuickJS, with console, process.argv/env/stdin/exit, \
         timers, `fetch`, and `import fs from \"fs\"` (sync and promise forms); npm packages \
         via `npm.dependencies` (`import _ from \"lodash\"`, or a subpath such as \
         `import chunk from \"lodash/chunk\"`; pure-JS packages only), no other Node built-ins.\n\
         - run_py: Python on Pyodide with its standard library; open()/os/pathlib on the \
         workspace; top-level await, so `r = await pyfetch(url)` (from pyodide.http) works, and so \
         does urllib.request.urlopen; third-party packages via `pip.requirements`, their own \
         requirements followed: pure-Python wheels, wheels built for this Pyodide (msgpack), and \
         Pyodide's distribution (numpy, pandas) where its CDN or a mirror is reachable.\n\
         - Every run starts in a fresh interpreter; pass data in with stdin, args or env, never \
         secrets.\n\
         - To keep state between calls (load data once, then ask questions of it), name a \
         `context`: runs of the same context and language share one interpreter, so variables, \
         imports and definitions survive (Python: everything at top level; JavaScript: top-level \
         declarations of code without import/export or top-level await, else what it puts on \
         globalThis); a run's last expression is shown, as in a notebook. A context shares nothing with runs outside it. `reset: true` starts it \
         afresh; it ends on its own after an idle time, with the tab, or when a run in it ends \
         with an error, and the next call's structuredContent.context says why (`lost`). Few are \
         allowed per relay session (relay://contexts lists them): reuse names.\n\
         - Print what you need, and print summaries of bulky data: output is capped.\n\
         - `policy` can only narrow the tenant's rules and limits (deny wins), e.g. \
         `policy.limits.timeoutMs`.\n\
         - Runs of one relay session execute one at a time, in the order they reached it.\n\
         \n## Files\n\
         - The workspace persists across runs and page reloads: /tmp and /out are writable, \
         /host is the tab's own folder (read-only unless the tenant allows writes). run_js, \
         run_py, read, write and search all see it.\n\
         - read (utf-8 or base64, maxBytes, offset/nextOffset; a directory is listed), write \
         (create, append, overwrite) \
         and search (regular expression, filePattern glob, maxResults) need no runtime: use them \
         to inspect and prepare files.\n\
         - What a run writes to /out comes back in the result's files with a download URL that \
         works for an hour; a PNG, JPEG, GIF, WebP or SVG up to 96 KiB also comes back as an image.\n\
         - To show a result rather than print it, call `display(value)` (JS and Python, as in \
         IPython): a chart's PNG bytes or a figure with _repr_png_ arrive as an image, HTML \
         (_repr_html_, or `display({{\"text/html\": html}}, raw=True)`) and Markdown as embedded \
         resources, a list of records or a dict of columns as a table (Markdown, rows in \
         structuredContent.displays). Up to 96 KiB each inline; larger ones go to /out.\n\n\
         ## Network\n\
         - fetch reaches only the hosts in policy.network.allowedDomains (the tenant's default, \
         which a call can narrow but never widen: to allow a host, ask the user to have the \
         tenant's admin add it); every redirect is checked again, bodies are capped at \
         maxBodyBytes. A refusal raises PolicyDenied inside the program naming the host.\n\n\
         ## The tenant's other MCP servers\n\
         - Code in a run can call the tools of the tenant's upstream MCP servers: \
         `await mcps.call(\"server\", \"tool\", {{...params}})` in JavaScript and in Python (a \
         builtin), or `fetch(\"/mcps-rpc\", {{method: \"POST\", body: JSON.stringify({{mcp, tool, params}})}})`. \
         It returns the tool's result ({{content, structuredContent, isError}}); a refusal throws an \
         error named PolicyDenied, ValidationError or UpstreamFailed (Python: mcps.Error).\n\
         - Discover them first with read: /mcps/index.json lists each server and its tools, \
         /mcps/<server>.d.ts types every tool's params and result, and \
         /mcps/<server>/tools/<tool>/schema.json holds its JSON Schemas. /mcps is read-only.\n\
         - The servers' credentials stay on the relay: never put secrets in params. \
         `policy.mcps` ([\"server\" or \"server/tool\", ...]) can narrow which ones a run may call.\n\n\
         ## Limits in force\n```json\n{limits}\n```\n\n\
         ## Errors and how to fix them\n{errors}",
        session = cx.relay.session,
        page = cx.page_url,
        errors = errors.join("\n"),
    )
}

/// The `resources/list` entry.
pub fn session_resource() -> Value {
    json!({
        "uri": SESSION_URI,
        "name": "relay-session",
        "title": "Relay session status",
        "description": "The relay session: attached executor tabs, queue depth, recent runs, and the page that attaches a tab.",
        "mimeType": "application/json",
    })
}

/// The `resources/list` entry of the audit.
pub fn audit_resource() -> Value {
    json!({
        "uri": AUDIT_URI,
        "name": "relay-audit",
        "title": "Relay session audit",
        "description": "The latest audit records of this relay session, hash-chained: each run's tool, how it ended, output sizes and hashes, redacted arguments. Verify an export with `relay-capsule audit-verify`.",
        "mimeType": "application/json",
    })
}

/// The `resources/list` entry of the workspace.
pub fn workspace_resource() -> Value {
    json!({
        "uri": WORKSPACE_URI,
        "name": "relay-workspace",
        "title": "Relay session workspace",
        "description": "The relay session's files: its version, its root hash (as the audit records it before and after each run) and every file with its size and sha256. Recompute the root with `relay-capsule workspace-root`.",
        "mimeType": "application/json",
    })
}

/// The `resources/list` entry of the contexts.
pub fn contexts_resource() -> Value {
    json!({
        "uri": CONTEXTS_URI,
        "name": "relay-contexts",
        "title": "Relay session contexts",
        "description": "The live contexts of this relay session (run_js/run_py with `context`): name, runtime, the tab holding it, age, time since its last run, runs, memory; and the tenant's limit and idle expiry.",
        "mimeType": "application/json",
    })
}

/// The `resources/list` entry of the tenant's usage.
pub fn usage_resource() -> Value {
    json!({
        "uri": USAGE_URI,
        "name": "relay-usage",
        "title": "Tenant quotas and usage",
        "description": "The tenant's quotas (defaults.quotas) and what it used of each across its relay sessions: tools/call requests this minute, live relay sessions, runs in flight, egress requests and bytes today, and when each window starts again.",
        "mimeType": "application/json",
    })
}

/// The `relay://session` contents.
pub fn session_json(relay: &RelayView, page_url: &str) -> Value {
    json!({
        "session": relay.session,
        "executor": {
            "attached": !relay.tab_ids.is_empty(),
            "tabs": relay.tab_ids.len(),
            "tabIds": relay.tab_ids,
            "pageUrl": page_url,
            // The tab that runs next: still loading a runtime (a run waits for it), and each
            // runtime's state; null until it reports.
            "warmingUp": relay.next_tab.as_ref().is_some_and(Readiness::warming_up),
            "runtimes": relay.next_tab.as_ref().map(|r| &r.runtimes),
        },
        "queueDepth": relay.queue_depth,
        "recentRuns": relay.recent_runs,
        "clients": relay.clients,
    })
}
