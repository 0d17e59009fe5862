//! The five tools as `tools/list` publishes them: names, titles, descriptions that teach an
//! agent, input schemas of their arguments, output schemas for `structuredContent`,
//! and annotations. The input schema is also what validates a call's arguments, and a call
//! that passes becomes a [`ToolCall`] for the Durable Object to run.

use serde_json::{json, Value};
use std::sync::OnceLock;

use super::era::Era;
use super::logging::LogLevel;
use super::schema;
use crate::capsule::canonical::{canonical_json, sha256_hex};
use crate::error::ErrorName;

/// A validated tool call for the Durable Object to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The JSON-RPC request id the answer must carry.
    pub id: Value,
    pub tool: Tool,
    /// The arguments object, valid against `tool`'s input schema.
    pub arguments: Value,
    /// `params._meta.progressToken`: send `notifications/progress` with it while running.
    pub progress_token: Option<Value>,
    /// The client accepts `text/event-stream`: the answer may be an SSE stream.
    pub stream: bool,
    pub era: Era,
    /// 2026-07-28 `_meta["io.modelcontextprotocol/logLevel"]`; always `None` in legacy.
    pub log_level: Option<LogLevel>,
    /// The legacy `Mcp-Session-Id`, if any.
    pub session_id: Option<String>,
    /// Answer with a task at once (the client declared the tasks extension and the tool is a
    /// run, which may take long), not with the result.
    pub task: bool,
}

/// A tool this server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    RunJs,
    RunPy,
    Read,
    Write,
    Search,
}

impl Tool {
    /// Every tool, in the deterministic `tools/list` order (2026-07-28 server/tools
    /// "Capabilities": a stable order lets clients and LLM prompt caches reuse the list).
    pub const ALL: [Tool; 5] = [Tool::RunJs, Tool::RunPy, Tool::Read, Tool::Write, Tool::Search];

    pub fn name(self) -> &'static str {
        match self {
            Tool::RunJs => "run_js",
            Tool::RunPy => "run_py",
            Tool::Read => "read",
            Tool::Write => "write",
            Tool::Search => "search",
        }
    }

    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The `tools/list` entry.
    pub fn definition(self) -> Value {
        json!({
            "name": self.name(),
            "title": self.title(),
            "description": self.description(),
            "inputSchema": self.input_schema(),
            "outputSchema": self.output_schema(),
            "annotations": self.annotations(),
        })
    }

    /// Checks call arguments against the input schema; the error names the field.
    pub fn validate(self, arguments: &Value) -> Result<(), String> {
        schema::validate(&self.input_schema(), arguments, "")
    }

    fn title(self) -> &'static str {
        match self {
            Tool::RunJs => "Run JavaScript in the attached browser",
            Tool::RunPy => "Run Python in the attached browser",
            Tool::Read => "Read a file",
            Tool::Write => "Write a file",
            Tool::Search => "Search files",
        }
    }

    fn description(self) -> String {
        match self {
            Tool::RunJs => format!(
                "Run JavaScript (an ES module, top-level await allowed) in QuickJS, a WebAssembly \
                 sandbox inside the browser tab attached to this relay session. console.log writes \
                 stdout, console.error stderr; process.argv, process.env, process.stdin.read() and \
                 process.exit() work as in Node. Files: `import fs from \"fs\"` (or \"node:fs\", \
                 \"fs/promises\") gives readFileSync/writeFileSync/appendFileSync/existsSync/\
                 readdirSync/statSync/mkdirSync/unlinkSync/rmSync/renameSync and their promise forms. \
                 Network: `await fetch(url, init)` returns a Response (status, headers, text(), json(), \
                 arrayBuffer()); every request and redirect is checked against \
                 policy.network. Packages: `npm: {{\"dependencies\": {{\"lodash\": \"^4.17.0\"}}}}`, then \
                 `import _ from \"lodash\"` (CommonJS packages give module.exports as the default \
                 export, as in Node); the tab bundles them once and identical calls reuse the build. \
                 Subpaths the code imports by a string literal (`import chunk from \"lodash/chunk\"`) \
                 are bundled too, through the package's exports. Packages needing Node built-ins \
                 (fs, path, ...) or native addons fail with DepsResolutionFailed. Not available: \
                 other Node built-ins. {RUN_COMMON}"
            ),
            Tool::RunPy => format!(
                "Run Python (Pyodide, WebAssembly) inside the browser tab attached to this relay \
                 session; print writes stdout, the standard library is there, open()/os/pathlib work \
                 on the workspace, and the script may use top-level await. Network: \
                 `from pyodide.http import pyfetch; r = await pyfetch(url); text = await r.string()`, or \
                 urllib.request.urlopen(url); every request and redirect is checked against policy.network. Packages: \
                 `pip: {{\"requirements\": [\"python-dateutil\", \"msgpack>=1.2\"]}}` installs the \
                 highest fitting release of each and of what it requires (Requires-Dist, markers and \
                 extras evaluated for Pyodide): pure-Python wheels, and compiled ones built for this \
                 Pyodide (PEP 783 pyemscripten wheels on the index; numpy, pandas and the rest of \
                 Pyodide's own distribution when its CDN or a mirror is reachable). Conflicting \
                 ranges, an sdist-only project or wheels only for other platforms fail with \
                 DepsResolutionFailed saying why. {RUN_COMMON}"
            ),
            Tool::Read => format!(
                "Read a file of the relay session's workspace ({WORKSPACE}) without running code. \
                 encoding utf-8 (the default; a file that is not UTF-8 text is refused: use base64) or \
                 base64. At most maxBytes (default 1 MiB) from offset (default 0); a result too large \
                 for one message is cut, and `truncated` with `nextOffset` says where to read on. \
                 Reading a directory (e.g. /tmp) lists its files and subdirectories with their sizes."
            ),
            Tool::Write => format!(
                "Write a file in the relay session's workspace ({WORKSPACE}); only paths under \
                 policy.filesystem.writable (by default /tmp and /out) may be written. mode create \
                 (the default) fails if the file exists; append adds to it; overwrite replaces it. \
                 encoding base64 for binary content."
            ),
            Tool::Search => format!(
                "Search the text files of the relay session's workspace ({WORKSPACE}) with a regular \
                 expression (grep-like syntax; matching is linear-time, so backreferences and \
                 lookaround are refused). One match per matching line, with line and column (1-based); \
                 paths limits the directories (default: all of the workspace), filePattern filters \
                 file names by glob (*.ts, /host/**/*.md), maxResults caps the matches listed while \
                 totalMatches counts them all."
            ),
        }
    }

    fn annotations(self) -> Value {
        let run = json!({
            "title": self.title(), "readOnlyHint": false, "destructiveHint": true,
            "idempotentHint": false, "openWorldHint": true,
        });
        match self {
            Tool::RunJs | Tool::RunPy => run,
            Tool::Read | Tool::Search => json!({
                "title": self.title(), "readOnlyHint": true, "openWorldHint": false,
            }),
            Tool::Write => json!({
                "title": self.title(), "readOnlyHint": false, "destructiveHint": true,
                "idempotentHint": false, "openWorldHint": false,
            }),
        }
    }

    /// The input schema: the tool's arguments, closed to unknown fields so that a typo
    /// (say `timeoutMs` at the top instead of in `policy.limits`) is named, not ignored.
    pub fn input_schema(self) -> Value {
        match self {
            Tool::RunJs => run_schema(
                "JavaScript source to run, e.g. console.log('hi').",
                "npm",
                json!({
                    "type": "object",
                    "description": "npm packages the tab bundles for the code to import by name (and by subpath, e.g. \"lodash/chunk\").",
                    "properties": { "dependencies": {
                        "type": "object",
                        "description": "Package name to semver range, e.g. {\"lodash\": \"^4.17.21\"}.",
                        "additionalProperties": { "type": "string" },
                    }},
                    "additionalProperties": false,
                }),
            ),
            Tool::RunPy => run_schema(
                "Python source to run, e.g. print('hi').",
                "pip",
                json!({
                    "type": "object",
                    "description": "Python packages and what they require: pure-Python wheels, wheels built for this Pyodide, and Pyodide's own distribution.",
                    "properties": {
                        "requirements": string_array("PEP 508 requirements by name, e.g. [\"attrs==24.2.0\", \"requests[socks]>=2.31\", \"tomli; python_version < '3.11'\"]."),
                        "wheelUrls": string_array("Direct URLs of .whl files."),
                    },
                    "additionalProperties": false,
                }),
            ),
            Tool::Read => object(
                json!({
                    "path": { "type": "string", "description": "Absolute workspace path, e.g. /out/result.json or /host/notes.md." },
                    "encoding": { "type": "string", "enum": ["utf-8", "base64"], "default": "utf-8",
                                  "description": "How to return the content; base64 for binary files." },
                    "maxBytes": { "type": "integer", "minimum": 1, "maximum": 16_777_216, "default": 1_048_576,
                                  "description": "Read at most this many bytes." },
                    "offset": { "type": "integer", "minimum": 0, "default": 0,
                                "description": "Start reading at this byte (a cut result gives nextOffset)." },
                }),
                &["path"],
            ),
            Tool::Write => object(
                json!({
                    "path": { "type": "string", "description": "Absolute workspace path under a writable prefix (by default /tmp or /out), e.g. /out/result.json." },
                    "content": { "type": "string", "description": "The content, in `encoding`." },
                    "encoding": { "type": "string", "enum": ["utf-8", "base64"], "default": "utf-8",
                                  "description": "How `content` is encoded." },
                    "mode": { "type": "string", "enum": ["create", "append", "overwrite"], "default": "create",
                              "description": "create fails if the file exists; append adds; overwrite replaces." },
                }),
                &["path", "content"],
            ),
            Tool::Search => object(
                json!({
                    "pattern": { "type": "string", "description": "Regular expression (grep-like), e.g. function.*export." },
                    "paths": { "type": "array", "items": { "type": "string" },
                               "description": "Directories to search; default: the whole workspace (/tmp, /out, /host, /mcps)." },
                    "filePattern": { "type": "string", "description": "Glob that file names must match, e.g. *.ts or /host/**/*.md." },
                    "caseSensitive": { "type": "boolean", "default": true },
                    "maxResults": { "type": "integer", "minimum": 1, "maximum": 1000, "default": 100,
                                    "description": "List at most this many matches (totalMatches still counts all)." },
                }),
                &["pattern"],
            ),
        }
    }

    /// The shape of `structuredContent`, under a `$id` that names its content
    /// ([`content_id`]). Every tool's admits `{error: {name, message}}`, the shape of a failed
    /// call, so a client validating results accepts failures too.
    pub fn output_schema(self) -> Value {
        let mut schema = self.output_shape();
        schema["$id"] = Value::String(content_id(&schema));
        schema
    }

    fn output_shape(self) -> Value {
        let (properties, required) = match self {
            Tool::RunJs | Tool::RunPy => (
                json!({
                    "exitCode": { "type": "integer" },
                    "stdout": { "type": "string" },
                    "stderr": { "type": "string" },
                    "usage": {
                        "type": "object",
                        "properties": { "wallMs": { "type": "integer", "minimum": 0 },
                                        "memPeakMb": { "type": "integer", "minimum": 0 },
                                        "fetches": { "type": "integer", "minimum": 0, "description": "Requests made through fetch." },
                                        "denied": { "type": "integer", "minimum": 0, "description": "Fetches and workspace writes the policy refused (each is on the audit chain, the first 16 of a run)." },
                                        "fileErrors": { "type": "integer", "minimum": 0, "description": "File changes the run made that the executor tab could not store (see notStored)." },
                                        "contextRuns": { "type": "integer", "minimum": 0, "description": "In a context: the runs its interpreter had served before this one (0: it started with this run, or the run failed before it reached the interpreter)." } },
                        "required": ["wallMs", "memPeakMb"],
                    },
                    "files": {
                        "type": "array",
                        "description": "Files the run left in /out.",
                        "items": {
                            "type": "object",
                            "properties": { "path": { "type": "string" }, "size": { "type": "integer" },
                                            "sha256": { "type": "string" }, "url": { "type": "string" },
                                            "expiresAt": { "type": "integer", "description": "When url stops working (Unix seconds)." } },
                            "required": ["path"],
                        },
                    },
                    "executor": { "type": "string", "enum": ["tab", "edge"], "description": "Where the run executed: the attached browser tab, or the edge executor on the server." },
                    "context": {
                        "type": "object",
                        "description": "Present when the call named a context: fresh (this run started its interpreter), kept (it lives on for the next run), reset, and lost (why the interpreter the call expected was gone).",
                        "properties": { "name": { "type": "string" }, "runtime": { "type": "string" },
                                        "fresh": { "type": "boolean" }, "kept": { "type": "boolean" },
                                        "reset": { "type": "boolean" }, "lost": { "type": "string" } },
                        "required": ["name", "runtime", "fresh", "kept"],
                    },
                    "displays": {
                        "type": "array",
                        "description": "What the code showed with display(), in order (each also a content block: image, embedded resource for HTML and Markdown, text for JSON, tables and plain text): its mimeType, and for JSON its value, or for a list of records or a dict of columns its table {columns, rows}; path and url when it was too large and went to /out; leftOut when the result had no room for it.",
                        "items": { "type": "object", "properties": { "mimeType": { "type": "string" } }, "required": ["mimeType"] },
                    },
                    "notStored": {
                        "type": "object",
                        "description": "Present when file changes the run made (writes or removals) could not be stored by the executor tab: the workspace may lack them, and the result is isError whatever exitCode says.",
                        "properties": { "changes": { "type": "integer", "minimum": 1 }, "message": { "type": "string" } },
                        "required": ["changes", "message"],
                    },
                    "truncated": {
                        "type": "object",
                        "description": "Present when stdout or stderr was cut to keep the result under 1 MiB: each cut stream's whole size in bytes. The whole output was streamed as notifications/message log events while the call ran.",
                        "properties": { "stdout": { "type": "integer", "minimum": 0 },
                                        "stderr": { "type": "integer", "minimum": 0 } },
                        "additionalProperties": false,
                    },
                }),
                vec!["exitCode", "stdout", "stderr", "usage", "files"],
            ),
            Tool::Read => (
                json!({ "path": { "type": "string" }, "content": { "type": "string" }, "encoding": { "type": "string" },
                        "size": { "type": "integer", "minimum": 0, "description": "The whole file's size in bytes." },
                        "offset": { "type": "integer", "minimum": 0 },
                        "bytesRead": { "type": "integer", "minimum": 0 },
                        "truncated": { "type": "boolean", "description": "The file goes on past what content holds." },
                        "nextOffset": { "type": "integer", "minimum": 0, "description": "Where to read on, when truncated." },
                        "entries": { "type": "array", "description": "When path is a directory: its files and subdirectories (content lists them too, one per line).",
                                     "items": { "type": "object",
                                                "properties": { "name": { "type": "string" }, "type": { "type": "string", "enum": ["file", "directory"] },
                                                                "size": { "type": "integer", "minimum": 0 } },
                                                "required": ["name", "type", "size"] } } }),
                vec!["content", "encoding", "size"],
            ),
            Tool::Write => (
                json!({ "path": { "type": "string" }, "bytesWritten": { "type": "integer", "minimum": 0 },
                        "size": { "type": "integer", "minimum": 0, "description": "The file's size after the write." } }),
                vec!["path", "bytesWritten"],
            ),
            Tool::Search => (
                json!({
                    "matches": { "type": "array", "items": {
                        "type": "object",
                        "properties": { "path": { "type": "string" }, "line": { "type": "integer" },
                                        "column": { "type": "integer" }, "text": { "type": "string" } },
                        "required": ["path", "line", "column", "text"],
                    }},
                    "totalMatches": { "type": "integer", "minimum": 0 },
                    "truncated": { "type": "boolean" },
                    "filesSearched": { "type": "integer", "minimum": 0 },
                    "filesSkipped": { "type": "integer", "minimum": 0, "description": "Binary (non-UTF-8) files left out." },
                }),
                vec!["matches", "totalMatches", "truncated"],
            ),
        };
        with_error(properties, required)
    }
}

/// Where files live, for every tool's description.
const WORKSPACE: &str = "/tmp and /out are writable, /host is the tab's own persistent folder \
    (read-only unless the tenant's policy makes it writable), /mcps describes the tenant's upstream \
    MCP servers (read-only: index.json, <server>.d.ts, <server>/tools/<tool>/schema.json); files persist \
    across runs, reloads and timeouts, and run_js, run_py, read, write and search all see the \
    same files";

const RUN_COMMON: &str = "Each run starts in a fresh interpreter unless it names a `context`; the \
    workspace (/tmp, /out, /host) persists between runs and is shared with read, write and search. Returns \
    exitCode, stdout, stderr, usage {wallMs, memPeakMb, fetches, denied} and files (what the run \
    wrote to /out, each with size, sha256 and a download URL valid for an hour: the first 32 in path \
    order, so write an archive for more; images also come back as image content). \
    `display(value)` (a builtin in JS and Python, following IPython: an object's \
    _repr_png_/_repr_svg_/_repr_html_/_repr_markdown_/_repr_json_, a mime bundle with raw=True, raw PNG/JPEG \
    bytes) shows it in the result: images as image content, HTML and Markdown as embedded resources, a list \
    of records or a dict of columns as a Markdown table with its rows in structuredContent.displays, other \
    JSON as text; each up to 96 KiB inline, larger ones are written to /out and listed with their URL. \
    isError is set when the exit code is not 0 or the run failed with ValidationError, \
    PolicyDenied, Timeout, OutputLimitExceeded, NoExecutorAttached, Cancelled, RuntimeCrashed (the \
    code ran the browser out of memory) or Internal. A \
    fetch or write the policy refuses raises PolicyDenied inside the program, naming what to \
    allow. `await mcps.call(server, tool, params)` (JS and Python) calls a tool of the tenant's \
    upstream MCP servers (see /mcps/index.json); their credentials stay on the server. A browser tab runs the code; where the tenant allows \
    it, code with no tab runs at the edge instead (Python there without pip packages, time.sleep or \
    urllib: use await asyncio.sleep and pyfetch; structuredContent.executor says where; \
    EdgeBudgetExceeded when its budget is spent). On NoExecutorAttached ask the user to open the relay page.";

/// The `context` argument: what it keeps, what it shares, how it ends.
const CONTEXT_DESCRIPTION: &str = "Run in the named context: a long-lived interpreter of this \
    relay session and language, kept in the attached tab, so variables, imports and definitions survive \
    into the next call naming it (in Python everything at top level; in JavaScript top-level \
    declarations when the code has no import/export and no top-level await, else only what it puts on \
    globalThis), and a run's last expression is shown as display() shows it, as in a notebook. Runs of one context go one at a time, in order. A context shares its state only with \
    later runs of the same context: never with runs without one, another context, the page or the \
    network; each run is still checked and counted as any other. It ends after an idle time (tenant \
    setting, default 15 minutes), with `reset: true`, when a run in it ends with an error (Timeout, \
    RuntimeCrashed, OutputLimitExceeded, Cancelled: the next run starts afresh and its result says \
    why, in structuredContent.context) or with its tab. A relay session holds a few (tenant setting, \
    default 4); relay://contexts lists them. Name: 1 to 64 characters of A-Z a-z 0-9 _ - . starting \
    with a letter or a digit. Needs a browser tab: there is no context without one.";

/// run_js / run_py: `{code, stdin, args, env, cwd, context, reset, npm|pip, policy}`.
fn run_schema(code: &str, deps_name: &str, deps: Value) -> Value {
    let mut properties = json!({
        "code": { "type": "string", "description": code },
        "stdin": { "type": "string", "default": "", "description": "Text given to the program as standard input." },
        "args": { "type": "array", "items": { "type": "string" }, "default": [],
                  "description": "Command-line arguments (process.argv / sys.argv after the script)." },
        "env": { "type": "object", "additionalProperties": { "type": "string" }, "default": {},
                 "description": "Environment variables. Never put secrets here: capsules are stored by content hash." },
        "cwd": { "type": "string", "default": "/", "description": "Working directory in the VFS." },
        "context": { "type": "string", "description": CONTEXT_DESCRIPTION },
        "reset": { "type": "boolean", "default": false,
                   "description": "With `context`: throw the context's interpreter away and start it afresh for this run." },
        "policy": policy_schema(),
        "executor": { "type": "string", "enum": ["tab", "tab-or-edge", "edge"],
                      "description": "Where the code may run, within the tenant's defaults.executor (a call may only narrow it): a browser tab, a tab when one is attached or coming back else the edge (a fresh sandbox on the server; Python there without pip packages, and with pyfetch rather than urllib), or the edge only." },
    });
    properties[deps_name] = deps;
    object(properties, &["code"])
}

/// The run policy (docs/CAPSULE.md "Policy"): client overrides are intersected with the
/// tenant's, so they can only narrow it.
fn policy_schema() -> Value {
    let count = |d: &str| json!({ "type": "integer", "minimum": 0, "description": d });
    let positive = |d: &str| json!({ "type": "integer", "minimum": 1, "description": d });
    json!({
        "type": "object",
        "description": "Overrides of the tenant's policy; they can only narrow it (the effective policy is the intersection, deny always wins).",
        "properties": {
            "network": object(json!({
                "allowedDomains": string_array("Domains fetch may reach; wildcards like *.example.com."),
                "deniedDomains": string_array("Domains fetch must never reach; deny beats allow."),
                "denyIpLiterals": { "type": "boolean", "description": "Refuse URLs whose host is an IP address." },
                "blockPrivateRanges": { "type": "boolean", "description": "Refuse private, loopback and link-local targets." },
                "maxBodyBytes": count("Largest response body fetch may read."),
                "maxRedirects": count("Most redirects fetch may follow; each hop is re-checked."),
            }), &[]),
            "filesystem": object(json!({
                "readonly": string_array("VFS paths the code may only read."),
                "writable": string_array("VFS paths the code may write (at most /tmp and /out)."),
            }), &[]),
            "limits": object(json!({
                "timeoutMs": positive("Wall-clock limit of the run in milliseconds."),
                "memMb": positive("Memory limit in MiB (a hint in the browser)."),
                "stdoutBytes": positive("Most bytes of stdout and stderr kept."),
            }), &[]),
            "mcps": string_array("Upstream MCP servers the code may call through mcps.call: \"server\" or \"server/tool\" entries (read /mcps/ for what exists)."),
        },
        "additionalProperties": false,
    })
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn string_array(description: &str) -> Value {
    json!({ "type": "array", "items": { "type": "string" }, "description": description })
}

/// A schema's `$id`: a URN holding the sha256 of its canonical JSON, so equal schemas share
/// one (run_js and run_py do) and a changed schema gets a new one. Clients that compile a
/// validator per schema cache it by `$id`: the TypeScript SDK (1.x) compiles one for every
/// `outputSchema` on each `listTools`, unless Ajv already holds that `$id`, in which case the
/// compiled one is reused (docs/BENCHMARKS.md: ~4 ms of the client's CPU per listing
/// without). Content-addressed, a long-lived client never validates against a stale schema
/// after a deploy changes one.
fn content_id(schema: &Value) -> String {
    let digest = sha256_hex(&canonical_json(schema).expect("a tool's schema has no number canonical JSON refuses"));
    format!("urn:relay-edge:schema:sha256:{}", &digest[..CONTENT_ID_HEX])
}

/// 64 bits of the digest: enough to tell this server's few schemas apart, and short.
const CONTENT_ID_HEX: usize = 16;

/// An output schema: the success shape, or `{error}`.
fn with_error(mut properties: Value, required: Vec<&str>) -> Value {
    let names: Vec<&str> = ErrorName::TOOL.iter().map(|n| n.as_str()).collect();
    properties["error"] = json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "enum": names },
            "message": { "type": "string" },
            // A QuotaExceeded's data, as the JSON-RPC refusal -32051 carries it.
            "quota": { "type": "string", "description": "the quota reached: defaults.quotas.<name>" },
            "limit": { "type": "integer" },
            "used": { "type": "integer" },
            "retryAfterS": { "type": "integer", "description": "seconds until the quota comes back" },
        },
        "required": ["name", "message"],
    });
    json!({
        "type": "object",
        "properties": properties,
        "anyOf": [{ "required": required }, { "required": ["error"] }],
    })
}

/// The `tools/list` array, built once per process: it never changes while we run, and building
/// it (with each output schema's `$id` hashed) was most of a `tools/list` request's time in the
/// Worker (docs/BENCHMARKS.md, "the floor").
pub fn list() -> Value {
    static LIST: OnceLock<Value> = OnceLock::new();
    LIST.get_or_init(|| Value::Array(Tool::ALL.iter().map(|t| t.definition()).collect())).clone()
}
