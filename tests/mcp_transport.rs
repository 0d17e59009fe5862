//! Streamable HTTP transport rules shared by both eras: body size, Content-Type, Accept,
//! JSON-RPC envelope errors, notifications, responses from the client (refused), methods
//! other than POST, SSE.

#[path = "mcp_common.rs"]
mod common;

use common::*;
use relay_core::mcp::jsonrpc::QUEUE_FULL;
use relay_core::mcp::{
    queue_full, sse_event, wants_sse, Dispatch, HttpRequest, HttpResponse, MAX_BODY_BYTES, QUEUE_FULL_RETRY_AFTER_S,
    SSE_HEADERS, SSE_KEEPALIVE,
};
use serde_json::{json, Value};

fn raw(pairs: &[(&str, &str)], body: &[u8]) -> HttpRequest {
    HttpRequest { method: "POST".into(), headers: headers(pairs), body: body.to_vec() }
}

const JSON_BOTH: [(&str, &str); 2] = [("content-type", "application/json"), ("accept", ACCEPT_BOTH)];

#[test]
fn oversized_body_is_413() {
    let body = vec![b' '; MAX_BODY_BYTES + 1];
    let response = Server::new().reply(&raw(&JSON_BOTH, &body));
    assert_eq!(response.status, 413);
    assert_eq!(code(&response), Some(-32600));
}

#[test]
fn body_of_exactly_the_limit_is_read() {
    let mut body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "notifications/x"})).unwrap();
    body.resize(MAX_BODY_BYTES, b' ');
    assert_eq!(Server::new().reply(&raw(&JSON_BOTH, &body)).status, 202);
}

#[test]
fn content_type_must_be_json() {
    let note = br#"{"jsonrpc":"2.0","method":"notifications/x"}"#;
    let cases: [(Option<&str>, u16); 6] = [
        (None, 415),
        (Some("text/plain"), 415),
        (Some("application/jsonx"), 415),
        (Some("application/json"), 202),
        (Some("application/json; charset=utf-8"), 202),
        (Some("Application/JSON"), 202),
    ];
    for (content_type, status) in cases {
        let mut pairs = vec![("accept", ACCEPT_BOTH)];
        pairs.extend(content_type.map(|ct| ("content-type", ct)));
        let response = Server::new().reply(&raw(&pairs, note));
        assert_eq!(response.status, status, "{content_type:?}");
    }
}

#[test]
fn accept_must_list_json_and_event_stream() {
    let note = br#"{"jsonrpc":"2.0","method":"notifications/x"}"#;
    let cases: [(Option<&str>, u16); 9] = [
        (None, 406),
        (Some("application/json"), 406),
        (Some("text/event-stream"), 406),
        (Some("text/html"), 406),
        (Some("application/json, text/event-stream;q=0"), 406),
        (Some("application/json, text/event-stream"), 202),
        (Some("text/event-stream; q=0.5, application/json"), 202),
        (Some("*/*"), 202),
        (Some("application/*, text/*"), 202),
    ];
    for (accept, status) in cases {
        let mut pairs = vec![("content-type", "application/json")];
        pairs.extend(accept.map(|a| ("accept", a)));
        let response = Server::new().reply(&raw(&pairs, note));
        assert_eq!(response.status, status, "{accept:?}");
        if status == 406 {
            assert_eq!(code(&response), Some(-32600));
        }
    }
}

#[test]
fn wants_sse_needs_event_stream_listed() {
    let cases = [
        ("application/json, text/event-stream", true),
        ("TEXT/EVENT-STREAM", true),
        ("text/event-stream;q=0", false),
        ("*/*", false),
        ("application/json", false),
    ];
    for (accept, expected) in cases {
        assert_eq!(wants_sse(&headers(&[("accept", accept)])), expected, "{accept}");
    }
    assert!(!wants_sse(&[]));
}

#[test]
fn malformed_bodies_are_jsonrpc_errors() {
    let cases: [(&[u8], i64); 14] = [
        (b"", -32700),
        (b"{", -32700),
        (b"\xff\xfe", -32700),
        (b"not json", -32700),
        (b"null", -32600),
        (b"42", -32600),
        (b"\"text\"", -32600),
        (b"[]", -32600),
        (br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, -32600),
        (br#"{"id":1,"method":"ping"}"#, -32600),
        (br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, -32600),
        (br#"{"jsonrpc":"2.0","id":1,"method":7}"#, -32600),
        (br#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#, -32600),
        (br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}"#, -32602),
    ];
    for (body, expected) in cases {
        let response = Server::new().reply(&raw(&JSON_BOTH, body));
        assert_eq!(response.status, 400, "{}", String::from_utf8_lossy(body));
        assert_eq!(code(&response), Some(expected), "{}", String::from_utf8_lossy(body));
        assert_eq!(response.body.as_ref().unwrap()["jsonrpc"], "2.0");
    }
}

#[test]
fn error_carries_the_id_only_when_readable() {
    let with_id = raw(&JSON_BOTH, br#"{"jsonrpc":"1.0","id":"abc","method":"ping"}"#);
    let body = Server::new().reply(&with_id).body.unwrap();
    assert_eq!(body["id"], "abc");
    let unreadable = raw(&JSON_BOTH, br#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#);
    let body = Server::new().reply(&unreadable).body.unwrap();
    assert!(body.get("id").is_none(), "{body}");
}

#[test]
fn notifications_get_202_with_no_body() {
    let bodies = [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed", "params": {}}),
    ];
    for body in bodies {
        let response = Server::new().reply(&post(&JSON_BOTH, &body));
        assert_eq!(response.status, 202, "{body}");
        assert_eq!(response.body, None);
    }
}

/// The server never sends requests, so a client's response answers nothing: 400 with a
/// JSON-RPC error that has no id (2025-11-25 transports and 2026-07-28 streamable-http,
/// "Sending Messages" rule 4), whichever id and outcome it carries.
#[test]
fn client_responses_are_400_invalid_request_with_no_id() {
    let bodies = [
        json!({"jsonrpc": "2.0", "id": 5, "result": {}}),
        json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "no"}}),
        json!({"jsonrpc": "2.0", "id": 0, "result": null}),
    ];
    for body in bodies {
        for pairs in [&JSON_BOTH[..], &[JSON_BOTH[0], JSON_BOTH[1], ("mcp-protocol-version", MODERN)]] {
            let response = Server::new().reply(&post(pairs, &body));
            assert_eq!((response.status, code(&response)), (400, Some(-32600)), "{body}");
            let answer = response.body.unwrap();
            assert!(answer.get("id").is_none(), "{answer}");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(message.contains("sent no request"), "{message}");
        }
    }
}

/// Objects that are neither a request, a notification nor a well-formed response.
#[test]
fn a_message_without_a_method_or_one_outcome_is_invalid() {
    let bodies = [
        json!({"jsonrpc": "2.0", "id": 5}),
        json!({"jsonrpc": "2.0", "id": 5, "result": {}, "error": {"code": 1, "message": "x"}}),
        json!({"jsonrpc": "2.0", "result": {}}),
        json!({"jsonrpc": "2.0"}),
        json!({"jsonrpc": "2.0", "params": {}}),
    ];
    for body in bodies {
        let response = Server::new().reply(&post(&JSON_BOTH, &body));
        assert_eq!((response.status, code(&response)), (400, Some(-32600)), "{body}");
        let message = response.body.unwrap()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("`method`"), "{message}");
    }
}

#[test]
fn stateless_cancelled_notification_is_checked_then_ignored() {
    // 2026-07-28 cancels by closing the stream; a bare id could name another client's request.
    let body = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 7, "reason": "user"}});
    let outcome = Server::new().send(&post(&JSON_BOTH, &body));
    assert_eq!(outcome, Dispatch::Reply(HttpResponse::accepted()));
    let bad = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}});
    let response = Server::new().reply(&post(&JSON_BOTH, &bad));
    assert_eq!((response.status, code(&response)), (400, Some(-32602)));
}

#[test]
fn other_http_methods_are_405() {
    for method in ["PUT", "PATCH", "OPTIONS", "HEAD", "GET", "DELETE"] {
        let response = Server::new().reply(&bare(method, &[("accept", "text/event-stream")]));
        assert_eq!(response.status, 405, "{method}");
        assert_eq!(header_of(&response, "allow").as_deref(), Some("GET, POST, DELETE"));
    }
}

#[test]
fn post_method_name_is_case_insensitive() {
    let mut req = post(&JSON_BOTH, &json!({"jsonrpc": "2.0", "method": "notifications/x"}));
    req.method = "post".into();
    assert_eq!(Server::new().reply(&req).status, 202);
}

#[test]
fn json_replies_declare_their_content_type() {
    let response = Server::new().reply(&modern("tools/list", json!({})));
    assert_eq!(header_of(&response, "content-type").as_deref(), Some("application/json"));
}

#[test]
fn sse_frames() {
    let message = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"text": "a\nb"}});
    let frame = sse_event(&message, None);
    assert!(frame.starts_with("event: message\ndata: {"));
    assert!(frame.ends_with("}\n\n"));
    assert_eq!(frame.lines().filter(|l| l.starts_with("data:")).count(), 1);
    let data: Value = serde_json::from_str(frame.lines().nth(1).unwrap().trim_start_matches("data: ")).unwrap();
    assert_eq!(data, message);
    let with_id = sse_event(&message, Some("s1-\r\n7"));
    assert!(with_id.starts_with("id: s1-7\nevent: message\n"), "{with_id}");
    assert!(SSE_KEEPALIVE.starts_with(':') && SSE_KEEPALIVE.ends_with("\n\n"));
    assert!(SSE_HEADERS.contains(&("content-type", "text/event-stream")));
    assert!(SSE_HEADERS.contains(&("x-accel-buffering", "no")));
}

#[test]
fn a_full_queue_is_429_with_retry_after_and_a_named_json_rpc_error() {
    let reply = queue_full(&json!(7), 100, "default");
    assert_eq!(reply.status, 429);
    assert_eq!(QUEUE_FULL, -32050, "outside -32000..-32019, which 2026-07-28 reserves");
    assert!(
        reply.headers.contains(&("retry-after".into(), QUEUE_FULL_RETRY_AFTER_S.to_string())),
        "{:?}",
        reply.headers
    );
    assert!(reply.headers.contains(&("content-type".into(), "application/json".into())));
    let body = reply.body.unwrap();
    assert_eq!(body["id"], 7);
    assert_eq!(body["error"]["code"], QUEUE_FULL);
    assert_eq!(body["error"]["data"], json!({ "name": "QueueFull", "maxQueued": 100, "retryAfterS": 5 }));
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("queue full: 100 run(s) already waiting in relay session 'default'"), "{message}");
    assert!(message.contains("retry in 5 s"), "{message}");
}
