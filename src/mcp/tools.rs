//! The five tools as `tools/list` publishes them: names, titles, descriptions that teach an
//! agent, input schemas of their arguments, output schemas for `structuredContent`,
//! and annotations. The input schema is also what validates a call's arguments, and a call
//! that passes becomes a [`ToolCall`] for the Durable Object to run.

use serde_json::{json, Value};

use super::era::Era;
use super::logging::LogLevel;
use super::schema;
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
                 process.exit() work as in Node. Not available yet: npm dependencies \
                 (`npm.dependencies` is refused), Node built-ins (no fs, no net), network. \
                 {RUN_COMMON}"
            ),
            Tool::RunPy => format!(
                "Run Python (Pyodide, WebAssembly) inside the browser tab attached to this relay \
                 session; print writes stdout, and the standard library is there (asyncio.run \
                 works). Not available yet: third-party packages (`pip.requirements` and \
                 `pip.wheelUrls` are refused), network. Files written under /tmp last one run. \
                 {RUN_COMMON}"
            ),
            Tool::Read => format!(
                "{NOT_YET} It will read a file (utf-8 or base64, at most maxBytes, default 1 MiB) \
                 from /host, /tmp, /out or /mcps."
            ),
            Tool::Write => format!(
                "{NOT_YET} It will write a file in /tmp or /out (mode create, overwrite or \
                 append; base64 for binary content)."
            ),
            Tool::Search => {
                format!("{NOT_YET} It will search file contents with a grep-compatible regular expression.")
            }
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
                    "description": "npm packages to bundle with the code.",
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
                    "description": "Python packages, wheel-only (py3-none-any or Pyodide-compatible).",
                    "properties": {
                        "requirements": string_array("Pinned requirements, e.g. [\"requests==2.32.0\"]."),
                        "wheelUrls": string_array("Direct URLs of .whl files."),
                    },
                    "additionalProperties": false,
                }),
            ),
            Tool::Read => object(
                json!({
                    "path": { "type": "string", "description": "Absolute VFS path, e.g. /host/myfile.txt or /out/result.json." },
                    "encoding": { "type": "string", "enum": ["utf-8", "base64", "binary"], "default": "utf-8",
                                  "description": "How to return the content; base64 for binary files." },
                    "maxBytes": { "type": "integer", "minimum": 1, "default": 1_048_576,
                                  "description": "Read at most this many bytes." },
                }),
                &["path"],
            ),
            Tool::Write => object(
                json!({
                    "path": { "type": "string", "description": "Absolute VFS path under /tmp or /out, e.g. /out/result.json." },
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
                    "pattern": { "type": "string", "description": "grep-compatible regular expression, e.g. function.*export." },
                    "paths": { "type": "array", "items": { "type": "string" }, "default": ["/host"],
                               "description": "Directories to search (policy-enforced)." },
                    "filePattern": { "type": "string", "description": "Glob that file names must match, e.g. *.ts." },
                    "caseSensitive": { "type": "boolean", "default": true },
                    "maxResults": { "type": "integer", "minimum": 1, "default": 100,
                                    "description": "Stop after this many matches." },
                }),
                &["pattern"],
            ),
        }
    }

    /// The shape of `structuredContent`. Every tool's admits `{error: {name, message}}`, the
    /// shape of a failed call, so a client validating results accepts failures too.
    pub fn output_schema(self) -> Value {
        let (properties, required) = match self {
            Tool::RunJs | Tool::RunPy => (
                json!({
                    "exitCode": { "type": "integer" },
                    "stdout": { "type": "string" },
                    "stderr": { "type": "string" },
                    "usage": {
                        "type": "object",
                        "properties": { "wallMs": { "type": "integer", "minimum": 0 },
                                        "memPeakMb": { "type": "integer", "minimum": 0 } },
                        "required": ["wallMs", "memPeakMb"],
                    },
                    "files": {
                        "type": "array",
                        "description": "Files the run left in /out.",
                        "items": {
                            "type": "object",
                            "properties": { "path": { "type": "string" }, "size": { "type": "integer" },
                                            "sha256": { "type": "string" }, "url": { "type": "string" } },
                            "required": ["path"],
                        },
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
                json!({ "content": { "type": "string" }, "encoding": { "type": "string" },
                        "size": { "type": "integer", "minimum": 0 } }),
                vec!["content", "encoding", "size"],
            ),
            Tool::Write => (
                json!({ "path": { "type": "string" }, "bytesWritten": { "type": "integer", "minimum": 0 } }),
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
                }),
                vec!["matches", "totalMatches", "truncated"],
            ),
        };
        with_error(properties, required)
    }
}

const RUN_COMMON: &str = "Each run starts fresh: nothing from an earlier run is there. Returns \
    exitCode, stdout, stderr, usage {wallMs, memPeakMb} and files (always empty until /out is \
    built); isError is set when the exit code is not 0 or the run failed with ValidationError, \
    Timeout, OutputLimitExceeded, NoExecutorAttached, Cancelled or Internal. A browser tab must \
    be attached: on NoExecutorAttached ask the user to open the relay page.";

/// How read, write and search describe themselves until the tab's filesystem exists.
const NOT_YET: &str = "Not available yet: the tab's persistent filesystem is not built, so \
    this answers with an error.";

/// run_js / run_py: `{code, stdin, args, env, cwd, npm|pip, policy}`.
fn run_schema(code: &str, deps_name: &str, deps: Value) -> Value {
    let mut properties = json!({
        "code": { "type": "string", "description": code },
        "stdin": { "type": "string", "default": "", "description": "Text given to the program as standard input." },
        "args": { "type": "array", "items": { "type": "string" }, "default": [],
                  "description": "Command-line arguments (process.argv / sys.argv after the script)." },
        "env": { "type": "object", "additionalProperties": { "type": "string" }, "default": {},
                 "description": "Environment variables. Never put secrets here: capsules are stored by content hash." },
        "cwd": { "type": "string", "default": "/", "description": "Working directory in the VFS." },
        "policy": policy_schema(),
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

/// An output schema: the success shape, or `{error}`.
fn with_error(mut properties: Value, required: Vec<&str>) -> Value {
    let names: Vec<&str> = ErrorName::ALL.iter().map(|n| n.as_str()).collect();
    properties["error"] = json!({
        "type": "object",
        "properties": { "name": { "type": "string", "enum": names }, "message": { "type": "string" } },
        "required": ["name", "message"],
    });
    json!({
        "type": "object",
        "properties": properties,
        "anyOf": [{ "required": required }, { "required": ["error"] }],
    })
}

/// The `tools/list` array.
pub fn list() -> Value {
    Value::Array(Tool::ALL.iter().map(|t| t.definition()).collect())
}
