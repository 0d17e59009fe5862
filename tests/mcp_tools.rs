//! The tools: `tools/list` (order, input schemas, output schemas,
//! annotations), argument validation, `tools/call` outcomes, and the result and
//! notification builders the Durable Object answers with.

#[path = "mcp_common.rs"]
mod common;

use std::collections::BTreeSet;

use common::*;
use relay_core::capsule::canonical::{canonical_json, sha256_hex};
use relay_core::error::ErrorName;
use relay_core::mcp::{
    data_result, file_result, log_notifications, progress_notification, refused_tool, tool_error, tool_result,
    Dispatch, Era, LogLevel, Tool, ToolCall, ToolResult, OUTPUT_BUDGET,
};
use relay_core::quota;
use relay_core::run::backchannel::exit_fields;
use relay_core::workspace::Refusal;
use serde_json::{json, Value};

fn tools() -> Vec<Value> {
    let listed = result(&Server::new().reply(&modern("tools/list", json!({}))));
    listed["tools"].as_array().unwrap().clone()
}

fn tool(name: &str) -> Value {
    tools().into_iter().find(|t| t["name"] == name).unwrap()
}

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn tools_are_listed_in_a_fixed_order() {
    let names: Vec<Value> = tools().iter().map(|t| t["name"].clone()).collect();
    assert_eq!(names, json!(["run_js", "run_py", "read", "write", "search"]).as_array().unwrap().clone());
    assert_eq!(tools(), tools(), "deterministic");
    let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["run_js", "run_py", "read", "write", "search"]);
}

/// The properties of each tool's arguments, and which are required: what clients call with.
#[test]
fn input_schemas_have_each_tools_properties() {
    let run_common = ["code", "stdin", "args", "env", "cwd", "context", "reset", "policy", "executor"];
    let cases: [(&str, Vec<&str>, &[&str]); 5] = [
        ("run_js", [&run_common[..], &["npm"]].concat(), &["code"]),
        ("run_py", [&run_common[..], &["pip"]].concat(), &["code"]),
        ("read", vec!["path", "encoding", "maxBytes", "offset"], &["path"]),
        ("write", vec!["path", "content", "encoding", "mode"], &["path", "content"]),
        ("search", vec!["pattern", "paths", "filePattern", "caseSensitive", "maxResults"], &["pattern"]),
    ];
    for (name, properties, required) in cases {
        let schema = &tool(name)["inputSchema"];
        assert_eq!(schema["type"], "object", "{name}");
        assert_eq!(keys(&schema["properties"]), set(&properties), "{name}");
        assert_eq!(schema["required"], json!(required), "{name}");
        assert_eq!(schema["additionalProperties"], false, "{name}");
    }
}

#[test]
fn input_schema_details_follow_the_seed() {
    let run_js = tool("run_js")["inputSchema"]["properties"].clone();
    assert_eq!(keys(&run_js["npm"]["properties"]), set(&["dependencies"]));
    assert_eq!(run_js["npm"]["properties"]["dependencies"]["additionalProperties"]["type"], "string");
    assert_eq!(run_js["args"]["items"]["type"], "string");
    assert_eq!(run_js["env"]["additionalProperties"]["type"], "string");
    assert_eq!(run_js["stdin"]["type"], "string");
    assert_eq!(run_js["cwd"]["default"], "/");
    let policy = &run_js["policy"]["properties"];
    assert_eq!(keys(policy), set(&["network", "filesystem", "limits", "mcps"]));
    assert_eq!(
        keys(&policy["network"]["properties"]),
        set(&[
            "allowedDomains",
            "deniedDomains",
            "denyIpLiterals",
            "blockPrivateRanges",
            "maxBodyBytes",
            "maxRedirects"
        ])
    );
    assert_eq!(keys(&policy["filesystem"]["properties"]), set(&["readonly", "writable"]));
    assert_eq!(keys(&policy["limits"]["properties"]), set(&["timeoutMs", "memMb", "stdoutBytes"]));
    let pip = &tool("run_py")["inputSchema"]["properties"]["pip"]["properties"];
    assert_eq!(keys(pip), set(&["requirements", "wheelUrls"]));
    let read = tool("read")["inputSchema"]["properties"].clone();
    assert_eq!(read["encoding"]["enum"], json!(["utf-8", "base64"]));
    assert_eq!(read["maxBytes"]["default"], 1_048_576);
    let write = tool("write")["inputSchema"]["properties"].clone();
    assert_eq!(write["encoding"]["enum"], json!(["utf-8", "base64"]));
    assert_eq!(write["mode"]["enum"], json!(["create", "append", "overwrite"]));
    assert_eq!(write["mode"]["default"], "create");
    let search = tool("search")["inputSchema"]["properties"].clone();
    assert_eq!(search["caseSensitive"]["default"], true);
    assert_eq!(search["maxResults"]["default"], 100);
    assert_eq!(search["maxResults"]["maximum"], 1000);
}

#[test]
fn a_number_past_its_maximum_is_refused_by_name() {
    let error = Tool::Search.validate(&json!({"pattern": "x", "maxResults": 1001})).unwrap_err();
    assert_eq!(error, "`maxResults` must be at most 1000");
    assert!(Tool::Search.validate(&json!({"pattern": "x", "maxResults": 1000})).is_ok());
}

/// The validator understands these keywords; the schemas may use nothing else.
fn check_keywords(schema: &Value, path: &str) {
    const KNOWN: [&str; 12] = [
        "type",
        "maximum",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "minimum",
        "description",
        "default",
        "title",
        "examples",
    ];
    let Some(object) = schema.as_object() else {
        return;
    };
    for (key, value) in object {
        assert!(KNOWN.contains(&key.as_str()), "{path}: unsupported keyword {key}");
        match key.as_str() {
            "properties" => {
                value.as_object().unwrap().iter().for_each(|(name, sub)| check_keywords(sub, &format!("{path}.{name}")))
            }
            "items" | "additionalProperties" => check_keywords(value, &format!("{path}[{key}]")),
            _ => {}
        }
    }
}

#[test]
fn input_schemas_use_only_validated_keywords() {
    for tool in tools() {
        check_keywords(&tool["inputSchema"], tool["name"].as_str().unwrap());
    }
}

#[test]
fn output_schemas_describe_structured_content() {
    let cases: [(&str, &[&str]); 5] = [
        ("run_js", &["exitCode", "stdout", "stderr", "usage", "files"]),
        ("run_py", &["exitCode", "stdout", "stderr", "usage", "files"]),
        ("read", &["content", "encoding", "size"]),
        ("write", &["path", "bytesWritten"]),
        ("search", &["matches", "totalMatches", "truncated"]),
    ];
    for (name, required) in cases {
        let schema = &tool(name)["outputSchema"];
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["anyOf"], json!([{"required": required}, {"required": ["error"]}]), "{name}");
        for field in required.iter().chain(&["error"]) {
            assert!(schema["properties"][field].is_object(), "{name}.{field}");
        }
    }
    // The usage a result shows is what a tab reports (the exit event's usage), all of it.
    let usage = &tool("run_js")["outputSchema"]["properties"]["usage"];
    let fields = exit_fields();
    let reported: Vec<&str> = fields["usage"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(keys(&usage["properties"]), set(&reported));
    let shown = tool_result(&a_call(Era::Modern, false, None), ToolResult::default());
    assert_eq!(keys(&shown["result"]["structuredContent"]["usage"]), set(&reported));
    assert_eq!(set(&reported), set(&["wallMs", "memPeakMb", "fetches", "denied", "fileErrors", "contextRuns"]));
}

/// A client that caches compiled validators by `$id` (the TypeScript SDK's Ajv) compiles each
/// output schema once: the `$id` names the schema's content, so equal schemas share one and a
/// changed schema never reuses an old one.
#[test]
fn output_schemas_are_named_by_their_content() {
    let mut ids = std::collections::BTreeMap::new();
    for tool in tools() {
        let mut schema = tool["outputSchema"].clone();
        let id = schema.as_object_mut().unwrap().remove("$id").expect("an outputSchema has a $id");
        let digest = sha256_hex(&canonical_json(&schema).unwrap());
        assert_eq!(id, format!("urn:relay-edge:schema:sha256:{}", &digest[..16]), "{}", tool["name"]);
        ids.insert(tool["name"].as_str().unwrap().to_string(), id.as_str().unwrap().to_string());
    }
    assert_eq!(ids["run_js"], ids["run_py"], "the run tools' results have one shape");
    let distinct: BTreeSet<_> = ids.values().collect();
    assert_eq!(distinct.len(), 4, "read, write and search each have their own: {ids:?}");
    assert_eq!(tools(), tools(), "the same ids on every listing");
}

#[test]
fn the_run_tools_say_which_packages_work_and_which_do_not() {
    let description = |name: &str| tools().into_iter().find(|t| t["name"] == name).unwrap()["description"].to_string();
    let js = description("run_js");
    assert!(js.contains("lodash/chunk") && js.contains("exports"), "{js}");
    let py = description("run_py");
    for needle in [
        "Requires-Dist",
        "PEP 783",
        "numpy, pandas",
        "when its CDN or a mirror is reachable",
        "sdist-only",
        "other platforms",
    ] {
        assert!(py.contains(needle), "{needle} missing from {py}");
    }
}

#[test]
fn annotations_and_titles() {
    for tool in tools() {
        let name = tool["name"].as_str().unwrap();
        let hints = &tool["annotations"];
        assert!(tool["title"].as_str().is_some_and(|t| !t.is_empty()), "{name}");
        assert!(tool["description"].as_str().unwrap().len() > 80, "{name}");
        match name {
            "read" | "search" => {
                assert_eq!((&hints["readOnlyHint"], &hints["openWorldHint"]), (&json!(true), &json!(false)))
            }
            "run_js" | "run_py" => {
                assert_eq!(hints["openWorldHint"], true);
                assert_eq!(hints["readOnlyHint"], false);
                assert_eq!(hints["destructiveHint"], true);
            }
            "write" => {
                assert_eq!(hints["readOnlyHint"], false);
                assert_eq!(hints["destructiveHint"], true);
                assert_eq!(hints["openWorldHint"], false);
            }
            other => panic!("unexpected tool {other}"),
        }
    }
}

fn call(name: &str, arguments: Value) -> Dispatch {
    Server::new().send(&modern("tools/call", json!({"name": name, "arguments": arguments})))
}

/// Arguments failing the input schema: a tool result with isError + ValidationError that
/// names the field (a tool execution error, so the model can correct itself).
#[test]
fn invalid_arguments_are_validation_errors_naming_the_field() {
    let cases = [
        ("run_js", json!({}), "`code`"),
        ("run_js", json!({"code": 42}), "`code` must be a string"),
        ("run_js", json!({"code": "", "args": ["a", 1]}), "`args[1]`"),
        ("run_js", json!({"code": "", "env": {"A": 1}}), "`env.A`"),
        ("run_js", json!({"code": "", "npm": {"dependencies": {"lodash": 4}}}), "`npm.dependencies.lodash`"),
        ("run_js", json!({"code": "", "pip": {}}), "unknown field `pip`"),
        ("run_js", json!({"code": "", "timeoutMs": 10}), "unknown field `timeoutMs`"),
        (
            "run_py",
            json!({"code": "", "policy": {"limits": {"timeoutMs": "10"}}}),
            "`policy.limits.timeoutMs` must be an integer",
        ),
        (
            "run_py",
            json!({"code": "", "policy": {"limits": {"timeoutMs": 0}}}),
            "`policy.limits.timeoutMs` must be at least 1",
        ),
        (
            "run_py",
            json!({"code": "", "policy": {"network": {"allowed": []}}}),
            "unknown field `policy.network.allowed`",
        ),
        ("run_py", json!({"code": "", "pip": {"requirements": "requests"}}), "`pip.requirements` must be an array"),
        ("read", json!({"path": "/out/x", "encoding": "utf-16"}), "`encoding` must be one of"),
        ("read", json!({"path": "/out/x", "maxBytes": 1.5}), "`maxBytes` must be an integer"),
        ("write", json!({"path": "/out/x"}), "missing required field `content`"),
        ("write", json!({"path": "/out/x", "content": "", "mode": "replace"}), "`mode` must be one of"),
        ("search", json!({"pattern": "x", "maxResults": 0}), "`maxResults` must be at least 1"),
        ("search", json!({"pattern": "x", "caseSensitive": "yes"}), "`caseSensitive` must be a boolean"),
    ];
    for (name, arguments, fragment) in cases {
        let Dispatch::Reply(response) = call(name, arguments.clone()) else {
            panic!("{name} {arguments}: expected a validation error");
        };
        let result = result(&response);
        assert_eq!(result["isError"], true);
        assert_eq!(result["resultType"], "complete");
        assert_eq!(result["structuredContent"]["error"]["name"], "ValidationError");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("ValidationError: "), "{text}");
        assert!(text.contains(fragment), "{name} {arguments}: {text}");
    }
}

/// Typical calls, every argument used, are valid.
#[test]
fn typical_calls_are_valid() {
    let cases = [
        (
            "run_js",
            json!({"code": "console.log('hi')", "stdin": "", "args": [], "env": {}, "cwd": "/",
                          "npm": {"dependencies": {"lodash": "^4.17.21"}},
                          "policy": {"network": {"allowedDomains": ["api.github.com", "*.npmjs.org"], "deniedDomains": [],
                                     "denyIpLiterals": true, "blockPrivateRanges": true, "maxBodyBytes": 5242880, "maxRedirects": 5},
                                     "filesystem": {"readonly": ["/"], "writable": ["/tmp", "/out"]},
                                     "limits": {"timeoutMs": 60000, "memMb": 256, "stdoutBytes": 1048576}}}),
        ),
        (
            "run_py",
            json!({"code": "print('hi')", "stdin": "", "args": [], "env": {}, "cwd": "/",
                          "pip": {"requirements": ["requests==2.32.0"], "wheelUrls": []}, "policy": {}}),
        ),
        ("read", json!({"path": "/host/myfile.txt", "encoding": "utf-8", "maxBytes": 1048576})),
        (
            "write",
            json!({"path": "/out/result.json", "content": "{\"result\": 42}", "encoding": "utf-8", "mode": "create"}),
        ),
        (
            "search",
            json!({"pattern": "function.*export", "paths": ["/host"], "filePattern": "*.ts",
                          "caseSensitive": true, "maxResults": 100}),
        ),
    ];
    for (name, arguments) in cases {
        match call(name, arguments.clone()) {
            Dispatch::Call(call) => {
                assert_eq!(call.tool.name(), name);
                assert_eq!(call.arguments, arguments);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn protocol_errors_of_tools_call_are_32602() {
    let cases = [
        json!({"name": "rm_rf", "arguments": {}}),
        json!({"arguments": {"code": "1"}}),
        json!({"name": 7}),
        json!({"name": "run_js", "arguments": ["code"]}),
        json!({"name": "run_js", "arguments": {"code": "1"}, "_meta": {"progressToken": true}}),
        json!({"name": "run_js", "arguments": {"code": "1"}, "_meta": {"progressToken": 1.5}}),
    ];
    for params in cases {
        let mut req = modern("tools/call", params.clone());
        if params["name"].is_string() {
            set_header(&mut req, "mcp-name", params["name"].as_str());
        }
        let response = Server::new().reply(&req);
        assert_eq!((response.status, code(&response)), (200, Some(-32602)), "{params}");
    }
    let response = Server::new().reply(&modern("tools/call", json!({"name": "rm_rf"})));
    let error = &response.body.unwrap()["error"];
    assert_eq!(error["message"], "Unknown tool: rm_rf");
    assert_eq!(error["data"]["tools"], json!(["run_js", "run_py", "read", "write", "search"]));
}

#[test]
fn missing_arguments_count_as_empty() {
    let Dispatch::Reply(response) = Server::new().send(&modern("tools/call", json!({"name": "run_js"}))) else {
        panic!("expected a validation error");
    };
    assert!(result(&response)["content"][0]["text"].as_str().unwrap().contains("`code`"));
}

fn run(exit_code: i32, error: Option<(ErrorName, String)>) -> ToolResult {
    ToolResult {
        exit_code,
        stdout: "hello\n".into(),
        stderr: "warn\n".into(),
        wall_ms: 812,
        mem_peak_mb: 74,
        files: vec![json!({"path": "/out/a.png", "size": 3, "url": "https://x/a.png"})],
        error,
        ..ToolResult::default()
    }
}

#[test]
fn tool_result_shape() {
    let response = tool_result(&a_call(Era::Modern, true, None), run(0, None));
    assert_eq!(response["jsonrpc"], "2.0");
    assert_eq!(response["id"], 11);
    let result = &response["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["isError"], false);
    assert_eq!(
        result["structuredContent"],
        json!({"exitCode": 0, "stdout": "hello\n", "stderr": "warn\n",
               "usage": {"wallMs": 812, "memPeakMb": 74, "fetches": 0, "denied": 0, "fileErrors": 0, "contextRuns": 0},
               "files": [{"path": "/out/a.png", "size": 3, "url": "https://x/a.png"}]})
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    for needle in ["exit code 0", "812 ms", "74 MB", "hello", "warn", "/out/a.png https://x/a.png"] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
    let legacy = tool_result(&a_call(Era::Legacy, true, None), run(0, None));
    assert!(legacy["result"].get("resultType").is_none());
    assert!(legacy["result"].get("_meta").is_none());
}

#[test]
fn tool_result_is_error_on_nonzero_exit_or_named_error() {
    let failed = tool_result(&a_call(Era::Modern, false, None), run(1, None));
    assert_eq!(failed["result"]["isError"], true);
    assert!(failed["result"]["structuredContent"].get("error").is_none());
    let timed_out = tool_result(
        &a_call(Era::Modern, false, None),
        run(124, Some((ErrorName::Timeout, "deadline of 60000 ms hit".into()))),
    );
    let result = &timed_out["result"];
    assert_eq!(result["isError"], true);
    assert_eq!(result["structuredContent"]["error"], json!({"name": "Timeout", "message": "deadline of 60000 ms hit"}));
    assert_eq!(result["structuredContent"]["exitCode"], 124);
    assert!(result["content"][0]["text"].as_str().unwrap().starts_with("Timeout: deadline"));
}

#[test]
fn a_run_whose_file_changes_were_not_stored_is_an_error_that_says_so() {
    for (changes, counted) in
        [(1, "1 file change the run made was not stored"), (3, "3 file changes the run made were not stored")]
    {
        let lost = ToolResult { file_errors: changes, ..run(0, None) };
        let response = tool_result(&a_call(Era::Modern, false, None), lost);
        let result = &response["result"];
        assert_eq!(result["isError"], true, "the workspace lacks what the program believes it wrote");
        let structured = &result["structuredContent"];
        assert_eq!(structured["exitCode"], 0, "the program's own exit code is kept");
        assert_eq!(structured["usage"]["fileErrors"], changes);
        assert_eq!(structured["notStored"]["changes"], changes);
        let message = structured["notStored"]["message"].as_str().unwrap();
        assert!(message.starts_with(counted) && message.contains("the workspace may lack them"), "{message}");
        assert!(structured.get("error").is_none(), "no error name: the program did not fail");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(&format!("exit code 0 in 812 ms, peak memory 74 MB\n{message}\n")), "{text}");
    }
    let stored = tool_result(&a_call(Era::Modern, false, None), run(0, None));
    assert_eq!(stored["result"]["isError"], false);
    assert!(stored["result"]["structuredContent"].get("notStored").is_none());
}

#[test]
fn a_run_that_never_ran_says_so_instead_of_a_time_and_memory() {
    for name in [ErrorName::NoExecutorAttached, ErrorName::DepsResolutionFailed] {
        let never = ToolResult { exit_code: 1, error: Some((name, "why".into())), ..ToolResult::default() };
        let response = tool_result(&a_call(Era::Modern, false, None), never);
        let text = response["result"]["content"][0]["text"].as_str().unwrap().to_owned();
        assert_eq!(text, format!("{}: why\nexit code 1: the code did not run", name.as_str()));
        assert_eq!(response["result"]["structuredContent"]["usage"]["wallMs"], 0, "the schema's fields stay");
    }
    let ran = tool_result(&a_call(Era::Modern, false, None), run(124, Some((ErrorName::Timeout, "late".into()))));
    assert!(ran["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("exit code 124 in 812 ms, peak memory 74 MB"));
}

#[test]
fn tool_error_shape() {
    let message = format!("no executor attached: open {PAGE_URL}");
    let response = tool_error(&a_call(Era::Modern, false, None), ErrorName::NoExecutorAttached, &message);
    let result = &response["result"];
    assert_eq!(response["id"], 11);
    assert_eq!(result["isError"], true);
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["content"][0], json!({"type": "text", "text": format!("NoExecutorAttached: {message}")}));
    assert_eq!(result["structuredContent"], json!({"error": {"name": "NoExecutorAttached", "message": message}}));
}

#[test]
fn data_result_shape() {
    let structured = json!({"path": "/out/result.json", "bytesWritten": 16});
    let response = data_result(&a_call(Era::Legacy, false, None), structured.clone());
    let result = &response["result"];
    assert_eq!(result["structuredContent"], structured);
    assert_eq!(result["isError"], false);
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, structured, "the text block is the serialized JSON");
}

#[test]
fn progress_notification_shape() {
    let full = progress_notification(&json!("tok"), 2.0, Some(4.0), Some("building capsule"));
    assert_eq!(
        full,
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": "tok", "progress": 2.0, "total": 4.0, "message": "building capsule"}})
    );
    let bare = progress_notification(&json!(3), 1.0, None, None);
    assert_eq!(bare["params"], json!({"progressToken": 3, "progress": 1.0}));
}

#[test]
fn log_notifications_follow_the_era_rules() {
    use LogLevel::*;
    let cases = [
        (Era::Modern, true, None, Info, false),
        (Era::Modern, true, Some(Info), Info, true),
        (Era::Modern, true, Some(Info), Error, true),
        (Era::Modern, true, Some(Warning), Info, false),
        (Era::Modern, false, Some(Debug), Error, false),
        (Era::Legacy, true, None, Debug, true),
        (Era::Legacy, false, None, Error, false),
    ];
    for (era, stream, wanted, level, sent) in cases {
        let notes = log_notifications(&a_call(era, stream, wanted), level, "stdout", "line");
        assert_eq!(notes.len(), usize::from(sent), "{era:?} stream={stream} {wanted:?} {level:?}");
        for note in notes {
            assert_eq!(note["method"], "notifications/message");
            assert_eq!(note["params"], json!({"level": level.as_str(), "logger": "stdout", "data": "line"}));
        }
    }
}

#[test]
fn error_names_and_statuses() {
    let expected = [
        (ErrorName::ValidationError, "ValidationError", 400),
        (ErrorName::PolicyDenied, "PolicyDenied", 403),
        (ErrorName::Timeout, "Timeout", 408),
        (ErrorName::OutputLimitExceeded, "OutputLimitExceeded", 413),
        (ErrorName::DepsResolutionFailed, "DepsResolutionFailed", 424),
        (ErrorName::NoExecutorAttached, "NoExecutorAttached", 425),
        (ErrorName::Cancelled, "Cancelled", 499),
        (ErrorName::UpstreamFailed, "UpstreamFailed", 502),
        (ErrorName::RuntimeCrashed, "RuntimeCrashed", 500),
        (ErrorName::EdgeBudgetExceeded, "EdgeBudgetExceeded", 429),
        (ErrorName::QuotaExceeded, "QuotaExceeded", 429),
        (ErrorName::Internal, "Internal", 500),
    ];
    assert_eq!(ErrorName::TOOL.len(), expected.len());
    for (name, text, status) in expected {
        assert_eq!((name.as_str(), name.http_status()), (text, status));
        assert!(!name.remedy().is_empty());
    }
}

#[test]
fn the_error_table_the_page_reads_lists_every_name_with_its_status_and_exit_code() {
    let table = relay_core::error::table_json();
    assert_eq!(table.as_object().unwrap().len(), ErrorName::ALL.len());
    for name in ErrorName::ALL {
        let tool = name.in_tool_results();
        assert_eq!(
            table[name.as_str()],
            json!({ "status": name.http_status(), "exitCode": name.exit_code(), "tool": tool })
        );
        assert_eq!(ErrorName::from_name(name.as_str()), Some(name));
    }
    assert_eq!(ErrorName::from_name("internal"), None, "names are exact");
}

fn file_call(tool: Tool) -> ToolCall {
    ToolCall { tool, ..a_call(Era::Modern, true, None) }
}

#[test]
fn a_read_is_its_content_as_text_and_structured() {
    let value = json!({"path": "/tmp/a", "content": "abc", "encoding": "utf-8", "size": 3, "offset": 0,
                       "bytesRead": 3, "truncated": false});
    let result = &file_result(&file_call(Tool::Read), value.clone())["result"];
    assert_eq!(result["isError"], false);
    assert_eq!(result["content"][0]["text"], "abc");
    assert_eq!(result["structuredContent"], value);
}

#[test]
fn a_read_too_big_for_one_message_is_cut_where_reading_on_continues_it() {
    let content = "\u{1}".repeat(OUTPUT_BUDGET); // escapes to 6 bytes each
    let value = json!({"path": "/tmp/a", "content": content, "encoding": "utf-8", "size": OUTPUT_BUDGET + 10,
                       "offset": 10, "bytesRead": OUTPUT_BUDGET, "truncated": false});
    let response = file_result(&file_call(Tool::Read), value);
    assert!(response.to_string().len() < 1024 * 1024, "under the 1 MiB SSE event cap");
    let structured = &response["result"]["structuredContent"];
    let kept = structured["content"].as_str().unwrap().len();
    assert_eq!(kept, OUTPUT_BUDGET / 6);
    assert_eq!(structured["bytesRead"], kept);
    assert_eq!(structured["truncated"], true);
    assert_eq!(structured["nextOffset"], 10 + kept);
    let text = response["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.ends_with(&format!("read again with offset {} for the rest of the file]", 10 + kept)),
        "{}",
        &text[text.len() - 120..]
    );

    let base64 = "QUJD".repeat(OUTPUT_BUDGET / 3);
    let value = json!({"content": base64, "encoding": "base64", "size": OUTPUT_BUDGET, "offset": 0,
                       "bytesRead": OUTPUT_BUDGET, "truncated": false});
    let structured = file_result(&file_call(Tool::Read), value)["result"]["structuredContent"].clone();
    let kept = structured["content"].as_str().unwrap().len();
    assert_eq!(kept % 4, 0, "whole base64 groups only");
    assert_eq!(structured["nextOffset"], kept / 4 * 3);
}

#[test]
fn a_search_keeps_the_matches_that_fit() {
    let line = "x".repeat(500);
    let matches: Vec<Value> =
        (1..=1000).map(|i| json!({"path": "/tmp/f", "line": i, "column": 1, "text": line})).collect();
    let value = json!({"matches": matches, "totalMatches": 1000, "truncated": false});
    let response = file_result(&file_call(Tool::Search), value);
    assert!(response.to_string().len() < 1024 * 1024);
    let structured = &response["result"]["structuredContent"];
    let kept = structured["matches"].as_array().unwrap();
    assert!(!kept.is_empty() && kept.len() < 1000);
    assert_eq!(kept[0]["line"], 1, "the first matches are kept");
    assert_eq!(structured["truncated"], true);
    assert_eq!(structured["totalMatches"], 1000);
}

#[test]
fn a_run_result_shows_images_within_their_budget() {
    let small = "A".repeat(1000);
    let big = "B".repeat(200 * 1024);
    let result = ToolResult {
        images: vec![("image/png".into(), small.clone()), ("image/png".into(), big), ("image/svg+xml".into(), small)],
        ..ToolResult::default()
    };
    let content = tool_result(&a_call(Era::Modern, true, None), result)["result"]["content"].clone();
    let images: Vec<&Value> = content.as_array().unwrap().iter().filter(|c| c["type"] == "image").collect();
    assert_eq!(images.len(), 1, "the first fits; the big one and everything after it does not");
    assert_eq!(images[0]["mimeType"], "image/png");
}

/// Whether `value` conforms to `schema`, for the keywords the tools' output schemas use (what a
/// schema-validating client, the official SDK's `callTool`, checks even when `isError`).
fn conforms(schema: &Value, value: &Value) -> Result<(), String> {
    let typed = match schema["type"].as_str() {
        None => true,
        Some("object") => value.is_object(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_u64() || value.is_i64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("array") => value.is_array(),
        Some(other) => return Err(format!("no check for type {other}")),
    };
    if !typed {
        return Err(format!("{value} is not {}", schema["type"]));
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(value) {
            return Err(format!("{value} is not one of {}", schema["enum"]));
        }
    }
    if let Some(any) = schema["anyOf"].as_array() {
        if !any.iter().any(|s| conforms(s, value).is_ok()) {
            return Err(format!("{value} matches none of anyOf"));
        }
    }
    for key in schema["required"].as_array().into_iter().flatten() {
        if value.get(key.as_str().unwrap()).is_none() {
            return Err(format!("{key} is missing from {value}"));
        }
    }
    let (Some(properties), Some(object)) = (schema["properties"].as_object(), value.as_object()) else {
        return Ok(());
    };
    for (key, item) in object {
        match properties.get(key) {
            Some(property) => conforms(property, item).map_err(|e| format!("{key}: {e}"))?,
            None if schema["additionalProperties"] == false => return Err(format!("{key} is not allowed")),
            None => {}
        }
    }
    Ok(())
}

#[test]
fn every_name_a_tool_result_may_carry_passes_every_tools_output_schema() {
    let quota =
        quota::Refusal { quota: "storedBytes".into(), limit: 1 << 20, used: 600_000, retry_after_s: 3600, wanted: 9 };
    for listed in tools() {
        let tool = Tool::from_name(listed["name"].as_str().unwrap()).unwrap();
        let schema = &listed["outputSchema"];
        for name in ErrorName::ALL.into_iter().filter(|n| n.in_tool_results()) {
            let result = &tool_error(&file_call(tool), name, "why")["result"];
            conforms(schema, &result["structuredContent"]).unwrap_or_else(|e| panic!("{name:?} in {tool:?}: {e}"));
        }
        // A write's quota refusal, as the relay session answers it, with the data to retry by.
        let refused = Refusal::from(quota.error());
        let result = &refused_tool(&file_call(tool), &refused)["result"];
        let error = &result["structuredContent"]["error"];
        conforms(schema, &result["structuredContent"]).unwrap_or_else(|e| panic!("a quota's in {tool:?}: {e}"));
        assert_eq!((result["isError"].clone(), error["name"].clone()), (json!(true), json!("QuotaExceeded")));
        assert_eq!(
            (error["quota"].clone(), error["retryAfterS"].clone()),
            (json!("defaults.quotas.storedBytes"), json!(3600))
        );
        assert_eq!((error["limit"].clone(), error["used"].clone()), (json!(1 << 20), json!(600_000)));
    }
    // The names only a route answers with are not in the schemas: the page maps them.
    assert!(!ErrorName::NotFound.in_tool_results() && !ErrorName::StorageUnavailable.in_tool_results());
}
