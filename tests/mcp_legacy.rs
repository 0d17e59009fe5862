//! The legacy era (2025-03-26 to 2025-11-25): `initialize` and version negotiation, the
//! `Mcp-Session-Id` lifecycle (use, DELETE, 404), the GET stream, legacy-only methods.

#[path = "mcp_common.rs"]
mod common;

use common::*;
use relay_core::mcp::{Context, Dispatch, Era, RelayView, Tool};
use serde_json::json;

#[test]
fn initialize_answers_capabilities_identity_instructions_and_a_session() {
    let mut server = Server::new();
    let req = post(
        &[("content-type", "application/json"), ("accept", ACCEPT_BOTH)],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}),
    );
    let response = server.reply(&req);
    let session = header_of(&response, "mcp-session-id").expect("session header");
    assert!(session.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    let result = result(&response);
    assert_eq!(result["protocolVersion"], "2025-11-25");
    for capability in ["tools", "resources", "prompts", "logging"] {
        assert!(result["capabilities"][capability].is_object(), "{capability}");
    }
    assert_eq!(result["serverInfo"]["name"], "relay-edge");
    assert!(result["instructions"].as_str().unwrap().contains(PAGE_URL));
    assert!(result.get("resultType").is_none(), "legacy results keep their shape");
    let (version, created, ended) = &server.store.sessions[&session];
    assert_eq!((version.as_str(), *created, *ended), ("2025-11-25", server.cx.now_ms, false));
}

#[test]
fn version_negotiation() {
    let cases = [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("not-a-version", "2025-11-25"),
    ];
    for (asked, negotiated) in cases {
        let mut server = Server::new();
        let session = server.initialize(asked);
        assert_eq!(server.store.sessions[&session].0, negotiated, "{asked}");
    }
}

#[test]
fn initialize_needs_a_protocol_version() {
    for params in [json!({}), json!({"protocolVersion": 20251125})] {
        let req = post(
            &[("content-type", "application/json"), ("accept", ACCEPT_BOTH)],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}),
        );
        let response = Server::new().reply(&req);
        assert_eq!(code(&response), Some(-32602), "{params}");
        assert_eq!(header_of(&response, "mcp-session-id"), None);
    }
}

#[test]
fn session_lifecycle_initialize_use_delete_then_404() {
    let mut server = Server::new();
    let session = server.initialize("2025-11-25");
    let initialized = post(
        &[("content-type", "application/json"), ("accept", ACCEPT_BOTH), ("mcp-session-id", &session)],
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(server.reply(&initialized).status, 202);
    let listed = result(&server.reply(&legacy(&session, 2, "tools/list", json!({}))));
    assert_eq!(listed["tools"].as_array().unwrap().len(), 5);
    assert!(listed.get("resultType").is_none() && listed.get("ttlMs").is_none());

    let delete = bare("DELETE", &[("mcp-session-id", &session)]);
    let response = server.reply(&delete);
    assert_eq!((response.status, response.body), (204, None));
    assert!(server.store.sessions[&session].2, "ended in the store");

    let after = server.reply(&legacy(&session, 3, "tools/list", json!({})));
    assert_eq!(after.status, 404);
    assert_eq!(code(&after), Some(-32600));
    assert_eq!(after.body.unwrap()["id"], 3);
    assert_eq!(server.reply(&delete).status, 404);
    let get = bare("GET", &[("mcp-session-id", &session), ("accept", "text/event-stream")]);
    assert_eq!(server.reply(&get).status, 404);
    assert_eq!(server.reply(&initialized).status, 404, "notifications too");
}

#[test]
fn requests_without_a_session_are_400_and_unknown_sessions_404() {
    let mut server = Server::new();
    let no_session = post(
        &[("content-type", "application/json"), ("accept", ACCEPT_BOTH), ("mcp-protocol-version", "2025-06-18")],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    let response = server.reply(&no_session);
    assert_eq!((response.status, code(&response)), (400, Some(-32600)));
    assert!(response.body.unwrap()["error"]["message"].as_str().unwrap().contains("Mcp-Session-Id"));
    let response = server.reply(&legacy("never-minted", 1, "tools/list", json!({})));
    assert_eq!(response.status, 404);
}

#[test]
fn protocol_version_header_must_be_a_legacy_version_we_speak() {
    let mut server = Server::new();
    let session = server.initialize("2025-06-18");
    let cases = [
        (None, 200),
        (Some("2025-06-18"), 200),
        (Some("2025-11-25"), 200),
        (Some("2025-03-26"), 200),
        (Some("1999-01-01"), 400),
        (Some("2024-11-05"), 400),
    ];
    for (version, status) in cases {
        let mut req = legacy(&session, 1, "tools/list", json!({}));
        set_header(&mut req, "mcp-protocol-version", version);
        let response = server.reply(&req);
        assert_eq!(response.status, status, "{version:?}");
        if status == 400 {
            assert_eq!(code(&response), Some(-32022));
        }
    }
}

#[test]
fn ping_set_level_and_unknown_methods() {
    let mut server = Server::new();
    let session = server.initialize("2025-11-25");
    assert_eq!(result(&server.reply(&legacy(&session, 1, "ping", json!({})))), json!({}));
    let set = legacy(&session, 2, "logging/setLevel", json!({"level": "debug"}));
    assert_eq!(result(&server.reply(&set)), json!({}));
    let bad = server.reply(&legacy(&session, 3, "logging/setLevel", json!({"level": "loud"})));
    assert_eq!((bad.status, code(&bad)), (200, Some(-32602)));
    // Not 404: to a legacy client a 404 says its session is gone.
    let unknown = server.reply(&legacy(&session, 4, "server/discover", json!({})));
    assert_eq!((unknown.status, code(&unknown)), (200, Some(-32601)));
}

#[test]
fn get_opens_the_stream_of_a_live_session() {
    let mut server = Server::new();
    let session = server.initialize("2025-11-25");
    let get = bare("GET", &[("mcp-session-id", &session), ("accept", "text/event-stream")]);
    assert_eq!(server.send(&get), Dispatch::OpenStream { session_id: session.clone(), last_event_id: None });
    let json_only = bare("GET", &[("mcp-session-id", &session), ("accept", "application/json")]);
    assert_eq!(server.reply(&json_only).status, 406);
    let bad_version = bare(
        "GET",
        &[("mcp-session-id", &session), ("accept", "text/event-stream"), ("mcp-protocol-version", "2000-01-01")],
    );
    assert_eq!(server.reply(&bad_version).status, 400);
}

#[test]
fn get_with_last_event_id_resumes_that_stream() {
    let mut server = Server::new();
    let session = server.initialize("2025-11-25");
    let resume =
        bare("GET", &[("mcp-session-id", &session), ("accept", "text/event-stream"), ("last-event-id", "r_0011")]);
    assert_eq!(
        server.send(&resume),
        Dispatch::OpenStream { session_id: session, last_event_id: Some("r_0011".into()) }
    );
    // Resuming needs the session like any GET: without one there is no stream at all.
    let sessionless = bare("GET", &[("accept", "text/event-stream"), ("last-event-id", "r_0011")]);
    assert_eq!(server.reply(&sessionless).status, 405);
}

#[test]
fn tool_calls_carry_the_session_and_no_log_level() {
    let mut server = Server::new();
    let session = server.initialize("2025-03-26");
    let mut req = legacy(
        &session,
        9,
        "tools/call",
        json!({"name": "search", "arguments": {"pattern": "x"},
                                                           "_meta": {"progressToken": 5}}),
    );
    set_header(&mut req, "accept", Some("application/json, text/event-stream"));
    let Dispatch::Call(call) = server.send(&req) else { panic!("expected a call") };
    assert_eq!(call.tool, Tool::Search);
    assert_eq!(call.era, Era::Legacy);
    assert_eq!(call.session_id.as_deref(), Some(session.as_str()));
    assert_eq!(call.log_level, None);
    assert_eq!(call.progress_token, Some(json!(5)));
}

#[test]
fn cancel_and_responses_in_a_session() {
    let mut server = Server::new();
    let session = server.initialize("2025-11-25");
    let headers = [("content-type", "application/json"), ("accept", ACCEPT_BOTH), ("mcp-session-id", session.as_str())];
    let cancel =
        post(&headers, &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}}));
    assert_eq!(server.send(&cancel), Dispatch::Cancel { request_id: json!(4), session_id: Some(session.clone()) });
    // A response answers nothing (the server sends no requests): 400, once the session is checked.
    let response = server.reply(&post(&headers, &json!({"jsonrpc": "2.0", "id": 1, "result": {}})));
    assert_eq!((response.status, code(&response)), (400, Some(-32600)));
    let stale = [("content-type", "application/json"), ("accept", ACCEPT_BOTH), ("mcp-session-id", "gone")];
    assert_eq!(server.reply(&post(&stale, &json!({"jsonrpc": "2.0", "id": 1, "result": {}}))).status, 404);
    let missing = server.reply(&post(
        &[("content-type", "application/json"), ("accept", ACCEPT_BOTH), ("mcp-protocol-version", "2025-11-25")],
        &json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
    ));
    let message = missing.body.unwrap()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("Mcp-Session-Id"), "a legacy response without a session is told so first: {message}");
}

#[test]
fn each_request_looks_its_session_up_once_at_most() {
    let mut server = Server::new();
    let session = server.initialize("2025-11-25");
    let headers = [("content-type", "application/json"), ("accept", ACCEPT_BOTH), ("mcp-session-id", session.as_str())];
    let stream = [("mcp-session-id", session.as_str()), ("accept", "text/event-stream")];
    let requests = [
        (legacy(&session, 1, "tools/list", json!({})), 1),
        (post(&headers, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})), 1),
        (post(&headers, &json!({"jsonrpc": "2.0", "id": 1, "result": {}})), 1),
        (legacy("gone", 2, "tools/list", json!({})), 1),
        (modern("tools/list", json!({})), 0),
        (bare("GET", &stream), 1),
        (bare("DELETE", &[("mcp-session-id", session.as_str())]), 1),
    ];
    for (req, lookups) in requests {
        server.store.lookups.set(0);
        server.send(&req);
        assert_eq!(server.store.lookups.get(), lookups, "{} {:?}", req.method, String::from_utf8_lossy(&req.body));
    }
    server.store.lookups.set(0);
    server.initialize("2025-11-25");
    assert_eq!(server.store.lookups.get(), 0, "initialize opens a session: nothing to look up");
}

#[test]
fn unknown_resource_is_32002_in_the_legacy_era() {
    let mut server = Server::new();
    let session = server.initialize("2025-11-25");
    let response = server.reply(&legacy(&session, 1, "resources/read", json!({"uri": "relay://nope"})));
    assert_eq!(code(&response), Some(-32002));
    assert_eq!(response.body.unwrap()["error"]["data"]["uri"], "relay://nope");
}

#[test]
fn a_bad_minted_session_id_is_an_internal_error() {
    fn spaced() -> String {
        "has space".into()
    }
    let mut server = Server::new();
    server.cx = Context { new_session_id: &spaced, relay: RelayView::default(), ..common::cx() };
    let req = post(
        &[("content-type", "application/json"), ("accept", ACCEPT_BOTH)],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}),
    );
    let response = server.reply(&req);
    assert_eq!((response.status, code(&response)), (500, Some(-32603)));
    assert!(server.store.sessions.is_empty());
}
