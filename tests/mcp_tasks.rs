//! The tasks extension (io.modelcontextprotocol/tasks) in the 2026-07-28 era: negotiation,
//! which calls become tasks, `tasks/get`/`update`/`cancel`, and the wire shapes.

#[path = "mcp_common.rs"]
mod common;

use common::*;
use relay_core::mcp::tasks::{iso8601, TaskRecord, TaskStatus, EXTENSION, OUTPUT_META, OUTPUT_SHOWN};
use relay_core::mcp::Dispatch;
use serde_json::{json, Value};

/// Params whose `_meta` declares the extension.
fn with_tasks(mut params: Value) -> Value {
    params["_meta"] = json!({ "io.modelcontextprotocol/clientCapabilities": { "extensions": { EXTENSION: {} } } });
    params
}

/// An empty acknowledgement: `resultType` complete and no task-envelope field.
fn assert_is_ack(result: &Value) {
    assert_eq!(result["resultType"], "complete");
    for field in ["taskId", "status", "result", "error", "inputRequests"] {
        assert!(result.get(field).is_none(), "{field} in {result}");
    }
}

fn call(params: Value) -> Dispatch {
    Server::new().send(&modern("tools/call", params))
}

#[test]
fn discover_advertises_the_extension_under_extensions() {
    let result = result(&Server::new().reply(&modern("server/discover", json!({}))));
    assert_eq!(result["capabilities"]["extensions"][EXTENSION], json!({}));
    assert!(result["capabilities"].get("tasks").is_none(), "not the v1 slot");
}

#[test]
fn only_runs_of_a_client_that_declared_the_extension_become_tasks() {
    let task = |outcome: Dispatch| match outcome {
        Dispatch::Call(call) => call.task,
        other => panic!("expected a call, got {other:?}"),
    };
    assert!(task(call(with_tasks(json!({ "name": "run_js", "arguments": { "code": "1" } })))));
    assert!(task(call(with_tasks(json!({ "name": "run_py", "arguments": { "code": "1" } })))));
    assert!(!task(call(json!({ "name": "run_js", "arguments": { "code": "1" } }))), "undeclared: a plain result");
    assert!(
        !task(call(with_tasks(json!({ "name": "read", "arguments": { "path": "/tmp/x" } })))),
        "file tools answer at once"
    );
}

#[test]
fn task_methods_need_the_extension_declared_on_the_request() {
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let response = Server::new().reply(&modern(method, json!({ "taskId": "task_working" })));
        assert_eq!(response.status, 400, "{method}");
        assert_eq!(code(&response), Some(-32021), "{method}");
        let body = response.body.clone().unwrap();
        assert_eq!(body["error"]["data"]["requiredCapabilities"]["extensions"][EXTENSION], json!({}));
    }
}

#[test]
fn an_unknown_or_missing_task_id_is_invalid_params() {
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let unknown = Server::new().reply(&modern(method, with_tasks(json!({ "taskId": "nope" }))));
        assert_eq!(code(&unknown), Some(-32602), "{method}");
        let missing = Server::new().reply(&modern(method, with_tasks(json!({}))));
        assert_eq!(code(&missing), Some(-32602), "{method}");
    }
}

#[test]
fn get_shows_a_working_task_and_inlines_a_completed_one_s_result() {
    let working = result(&Server::new().reply(&modern("tasks/get", with_tasks(json!({ "taskId": "task_working" })))));
    assert_eq!(working["resultType"], "complete");
    assert_eq!((working["taskId"].as_str(), working["status"].as_str()), (Some("task_working"), Some("working")));
    assert!(working.get("result").is_none() && working.get("error").is_none());
    assert_eq!(working["createdAt"], "2023-11-14T22:13:20.000Z");
    assert!(working["ttlMs"].as_u64().unwrap() > 0 && working["pollIntervalMs"].as_u64().unwrap() > 0);
    let done = result(&Server::new().reply(&modern("tasks/get", with_tasks(json!({ "taskId": "task_done" })))));
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"], json!({ "content": [], "isError": false }));
    assert_eq!(done["lastUpdatedAt"], "2023-11-14T22:13:21.000Z");
    assert!(done.get("requestState").is_none());
}

#[test]
fn cancel_of_a_working_task_cancels_its_run_and_of_an_ended_one_just_acknowledges() {
    match Server::new().send(&modern("tasks/cancel", with_tasks(json!({ "taskId": "task_working" })))) {
        Dispatch::CancelRun { run_id, reply } => {
            assert_eq!(run_id, "r_w");
            assert_is_ack(&reply.body.unwrap()["result"]);
        }
        other => panic!("expected CancelRun, got {other:?}"),
    }
    assert_is_ack(&result(&Server::new().reply(&modern("tasks/cancel", with_tasks(json!({ "taskId": "task_done" }))))));
}

#[test]
fn update_is_acknowledged_and_its_input_responses_must_be_an_object() {
    assert_is_ack(&result(
        &Server::new()
            .reply(&modern("tasks/update", with_tasks(json!({ "taskId": "task_working", "inputResponses": {} })))),
    ));
    let bad = Server::new()
        .reply(&modern("tasks/update", with_tasks(json!({ "taskId": "task_working", "inputResponses": 3 }))));
    assert_eq!(code(&bad), Some(-32602));
}

#[test]
fn a_legacy_client_has_no_task_methods() {
    let mut server = Server::new();
    let session = server.initialize("2025-11-25");
    let response = server.reply(&legacy(&session, 1, "tasks/get", json!({ "taskId": "task_working" })));
    assert_eq!(code(&response), Some(-32601));
}

#[test]
fn how_a_run_ends_is_how_its_task_ends() {
    let task = TaskRecord::working("t", "r", 0);
    let tool_error = task.ended(&json!({ "result": { "content": [], "isError": true } }), false, 5);
    assert_eq!(tool_error.status, TaskStatus::Completed, "a tool error is a completed task");
    let protocol = task.ended(&json!({ "error": { "code": -32603, "message": "boom" } }), false, 5);
    assert_eq!(protocol.status, TaskStatus::Failed);
    assert_eq!(protocol.to_json("complete", true)["error"]["message"], "boom");
    assert!(protocol.to_json("complete", true).get("result").is_none());
    let cancelled = task.ended(&json!({ "result": {} }), true, 5);
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert!(cancelled.to_json("complete", true).get("result").is_none());
    let created = task.to_json("task", false);
    let answer = relay_core::mcp::task_created(&a_call(relay_core::mcp::Era::Modern, false, None), &task);
    assert_eq!(answer["result"]["resultType"], "task", "shaping keeps a task's resultType");
    assert!(answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
    assert_eq!(created["resultType"], "task");
    for legacy_name in ["ttl", "pollInterval", "task"] {
        assert!(created.get(legacy_name).is_none(), "{legacy_name}");
    }
}

#[test]
fn a_working_task_shows_where_its_run_is_and_the_end_of_its_output() {
    let queued = TaskRecord::working("t", "r", 0).in_progress(false, "", "");
    assert!(queued.status_message.unwrap().contains("queued"));
    let long = format!("{}é{}", "a".repeat(OUTPUT_SHOWN), "last line\n");
    let running = TaskRecord::working("t", "r", 0).in_progress(true, &long, "warn");
    let json = running.to_json("complete", true);
    assert!(json["statusMessage"].as_str().unwrap().contains(&format!("{} bytes of stdout", long.len())));
    let stdout = json["_meta"][OUTPUT_META]["stdout"].as_str().unwrap();
    assert!(stdout.ends_with("last line\n") && stdout.len() <= OUTPUT_SHOWN, "the end, cut at a char boundary");
    assert_eq!(json["_meta"][OUTPUT_META]["stderr"], "warn");
}

#[test]
fn timestamps_are_iso_8601_utc() {
    assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    assert_eq!(iso8601(1_795_478_401_123), "2026-11-24T00:00:01.123Z");
}

#[test]
fn task_requests_mirror_their_task_id_in_mcp_name() {
    let mut request = modern("tasks/get", with_tasks(json!({ "taskId": "task_working" })));
    for (name, value) in request.headers.iter_mut() {
        if name == "mcp-name" {
            *value = "task_done".into();
        }
    }
    assert_eq!(code(&Server::new().reply(&request)), Some(-32020));
}
