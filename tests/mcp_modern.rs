//! The 2026-07-28 (stateless) era: required `_meta`, mirrored headers, version errors,
//! `server/discover`, `resultType`, caching hints, unknown methods, no sessions.

#[path = "mcp_common.rs"]
mod common;

use common::*;
use relay_core::mcp::{Dispatch, LogLevel, Tool, SUPPORTED_VERSIONS};
use serde_json::{json, Value};

#[test]
fn discover_advertises_versions_capabilities_identity_and_instructions() {
    let response = Server::new().reply(&modern("server/discover", json!({})));
    let result = result(&response);
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"], json!(SUPPORTED_VERSIONS));
    assert_eq!(result["supportedVersions"][0], MODERN);
    for capability in ["tools", "resources", "prompts", "logging"] {
        assert!(result["capabilities"][capability].is_object(), "{capability}");
    }
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "relay-edge");
    assert!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["version"].is_string());
    assert!(result["instructions"].as_str().unwrap().contains(PAGE_URL));
    assert!(result["ttlMs"].as_u64().is_some());
    assert_eq!(result["cacheScope"], "private");
}

#[test]
fn every_result_is_complete_and_cacheable_ones_carry_hints() {
    let cases: [(&str, Value, Option<&str>); 7] = [
        ("server/discover", json!({}), Some("private")),
        ("tools/list", json!({}), Some("public")),
        ("resources/list", json!({}), Some("public")),
        ("resources/templates/list", json!({}), Some("public")),
        ("prompts/list", json!({}), Some("public")),
        ("resources/read", json!({"uri": "relay://session"}), Some("private")),
        ("prompts/get", json!({"name": "use-relay"}), None),
    ];
    for (method, params, scope) in cases {
        let result = result(&Server::new().reply(&modern(method, params)));
        assert_eq!(result["resultType"], "complete", "{method}");
        assert!(result["_meta"]["io.modelcontextprotocol/serverInfo"].is_object(), "{method}");
        match scope {
            Some(scope) => {
                assert_eq!(result["cacheScope"], scope, "{method}");
                assert!(result["ttlMs"].as_u64().is_some(), "{method}");
            }
            None => assert!(result.get("ttlMs").is_none() && result.get("cacheScope").is_none()),
        }
    }
}

#[test]
fn no_session_id_is_minted_or_required() {
    let mut server = Server::new();
    let mut req = modern("tools/list", json!({}));
    set_header(&mut req, "mcp-session-id", Some("stale-from-another-era"));
    let response = server.reply(&req);
    assert_eq!(response.status, 200);
    assert_eq!(header_of(&response, "mcp-session-id"), None);
    assert!(server.store.sessions.is_empty());
}

/// Header rules of streamable-http "Server Validation": each broken header is 400 -32020.
#[test]
fn mirrored_headers_must_match_the_body() {
    let call = || modern("tools/call", json!({"name": "run_js", "arguments": {"code": "1"}}));
    let cases: [(&str, &str, Option<&str>); 10] = [
        ("tools/call", "mcp-protocol-version", None),
        ("tools/call", "mcp-protocol-version", Some("2025-11-25")),
        ("tools/call", "mcp-method", None),
        ("tools/call", "mcp-method", Some("tools/list")),
        ("tools/call", "mcp-method", Some("TOOLS/CALL")),
        ("tools/call", "mcp-name", None),
        ("tools/call", "mcp-name", Some("run_py")),
        ("tools/call", "mcp-name", Some("=?base64?cnVuX3B5?=")),
        ("tools/call", "mcp-name", Some("=?base64?!!!?=")),
        ("tools/call", "mcp-name", Some("run_js\u{e9}")),
    ];
    for (method, name, value) in cases {
        let mut req = call();
        assert_eq!(method, "tools/call");
        set_header(&mut req, name, value);
        let response = Server::new().reply(&req);
        assert_eq!(response.status, 400, "{name}: {value:?}");
        assert_eq!(code(&response), Some(-32020), "{name}: {value:?}");
        assert!(response.body.as_ref().unwrap()["error"]["message"].as_str().unwrap().starts_with("Header mismatch"));
    }
}

#[test]
fn mcp_name_mirrors_name_or_uri_per_method() {
    let cases = [
        ("tools/call", json!({"name": "read", "arguments": {"path": "/out/x"}}), "read"),
        ("prompts/get", json!({"name": "use-relay"}), "use-relay"),
        ("resources/read", json!({"uri": "relay://session"}), "relay://session"),
    ];
    for (method, params, name) in cases {
        let mut req = modern(method, params.clone());
        set_header(&mut req, "mcp-name", Some("something-else"));
        assert_eq!(code(&Server::new().reply(&req)), Some(-32020), "{method}");
        set_header(&mut req, "mcp-name", Some(name));
        match Server::new().send(&req) {
            Dispatch::Reply(response) => assert_eq!(response.status, 200, "{method}"),
            outcome => assert!(matches!(outcome, Dispatch::Call(_)), "{method}"),
        }
    }
}

#[test]
fn mcp_name_may_be_base64_encoded() {
    // "=?base64?cnVuX2pz?=" is run_js; a URI with a space needs the encoding.
    let mut req = modern("tools/call", json!({"name": "run_js", "arguments": {"code": "1"}}));
    set_header(&mut req, "mcp-name", Some("=?base64?cnVuX2pz?="));
    assert!(matches!(Server::new().send(&req), Dispatch::Call(_)));
    let mut req = modern("resources/read", json!({"uri": "relay://a b"}));
    set_header(&mut req, "mcp-name", Some("=?base64?cmVsYXk6Ly9hIGI=?="));
    let response = Server::new().reply(&req);
    assert_eq!(code(&response), Some(-32602), "not a header error: the resource is unknown");
}

#[test]
fn mcp_name_is_not_required_for_other_methods() {
    for method in ["tools/list", "server/discover", "prompts/list", "resources/list"] {
        let mut req = modern(method, json!({}));
        set_header(&mut req, "mcp-name", None);
        assert_eq!(Server::new().reply(&req).status, 200, "{method}");
    }
}

#[test]
fn mcp_name_for_a_body_without_name_is_a_mismatch() {
    let mut req = modern("tools/call", json!({"arguments": {}}));
    set_header(&mut req, "mcp-name", Some("run_js"));
    assert_eq!(code(&Server::new().reply(&req)), Some(-32020));
    set_header(&mut req, "mcp-name", None);
    let response = Server::new().reply(&req);
    assert_eq!((response.status, code(&response)), (200, Some(-32602)));
}

#[test]
fn unsupported_version_is_400_with_supported_list() {
    for version in ["1900-01-01", "2099-01-01", "2024-11-05", ""] {
        let mut req = modern("tools/list", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": version}}));
        set_header(&mut req, "mcp-protocol-version", Some(version));
        let response = Server::new().reply(&req);
        assert_eq!(response.status, 400, "{version}");
        assert_eq!(code(&response), Some(-32022), "{version}");
        let data = &response.body.as_ref().unwrap()["error"]["data"];
        assert_eq!(data["supported"], json!(SUPPORTED_VERSIONS));
        assert_eq!(data["requested"], version);
        assert_eq!(response.body.as_ref().unwrap()["id"], 1);
    }
}

#[test]
fn missing_required_meta_is_400_invalid_params() {
    let broken_metas = [
        json!(null),
        json!({}),
        json!({"io.modelcontextprotocol/clientCapabilities": {}}),
        json!({"io.modelcontextprotocol/protocolVersion": MODERN}),
        json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": []}),
        json!({"io.modelcontextprotocol/protocolVersion": 2026, "io.modelcontextprotocol/clientCapabilities": {}}),
    ];
    for meta in broken_metas {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta}});
        let req = post(
            &[
                ("content-type", "application/json"),
                ("accept", ACCEPT_BOTH),
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "tools/list"),
            ],
            &body,
        );
        let response = Server::new().reply(&req);
        assert_eq!((response.status, code(&response)), (400, Some(-32602)), "{meta}");
    }
}

#[test]
fn a_request_with_no_version_anywhere_is_400() {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let req = post(&[("content-type", "application/json"), ("accept", ACCEPT_BOTH)], &body);
    let response = Server::new().reply(&req);
    assert_eq!((response.status, code(&response)), (400, Some(-32602)));
    let message = response.body.unwrap()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("initialize") && message.contains("2026-07-28"), "{message}");
}

#[test]
fn unknown_and_removed_methods_are_404() {
    for method in ["tools/frobnicate", "ping", "logging/setLevel", "resources/subscribe", "completion/complete"] {
        let response = Server::new().reply(&modern(method, json!({})));
        assert_eq!(response.status, 404, "{method}");
        assert_eq!(code(&response), Some(-32601), "{method}");
    }
}

#[test]
fn initialize_with_modern_meta_is_an_unknown_method() {
    // versioning "Backward Compatibility": modern `_meta` means the stateless era, which has
    // no `initialize` (the conformance suite's server-stateless checks 404 + -32601).
    let req = modern("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}}));
    let response = Server::new().reply(&req);
    assert_eq!((response.status, code(&response)), (404, Some(-32601)));
    assert!(header_of(&response, "mcp-session-id").is_none());
}

#[test]
fn initialize_without_modern_meta_selects_the_legacy_era() {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "_meta": {"progressToken": 1}}});
    let req = post(&[("content-type", "application/json"), ("accept", ACCEPT_BOTH)], &body);
    let response = Server::new().reply(&req);
    assert_eq!(result(&response)["protocolVersion"], "2025-06-18");
    assert!(header_of(&response, "mcp-session-id").is_some());
}

#[test]
fn a_version_header_disagreeing_with_the_body_is_a_mismatch_even_for_unknown_versions() {
    let mut req = modern("server/discover", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "v999.0.0"}}));
    set_header(&mut req, "mcp-protocol-version", Some(MODERN));
    let response = Server::new().reply(&req);
    assert_eq!((response.status, code(&response)), (400, Some(-32020)));
}

#[test]
fn log_level_must_be_a_known_level() {
    let meta = |level: Value| json!({"_meta": {"io.modelcontextprotocol/logLevel": level}});
    let response = Server::new().reply(&modern("tools/list", meta(json!("verbose"))));
    assert_eq!((response.status, code(&response)), (400, Some(-32602)));
    let response = Server::new().reply(&modern("tools/list", meta(json!(3))));
    assert_eq!((response.status, code(&response)), (400, Some(-32602)));
    assert_eq!(Server::new().reply(&modern("tools/list", meta(json!("warning")))).status, 200);
}

#[test]
fn tool_call_carries_era_log_level_progress_token_and_stream() {
    let params = json!({
        "name": "run_py",
        "arguments": {"code": "print('hi')"},
        "_meta": {"progressToken": "p-1", "io.modelcontextprotocol/logLevel": "info"},
    });
    let Dispatch::Call(call) = Server::new().send(&modern("tools/call", params)) else {
        panic!("expected a call");
    };
    assert_eq!(call.tool, Tool::RunPy);
    assert_eq!(call.id, json!(1));
    assert_eq!(call.arguments, json!({"code": "print('hi')"}));
    assert_eq!(call.progress_token, Some(json!("p-1")));
    assert_eq!(call.log_level, Some(LogLevel::Info));
    assert_eq!(call.era, relay_core::mcp::Era::Modern);
    assert_eq!(call.session_id, None);
    assert!(call.stream);
}

#[test]
fn notifications_need_no_headers_in_this_revision() {
    let body = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": "r-9", "_meta": {}}});
    let req = post(&[("content-type", "application/json"), ("accept", ACCEPT_BOTH)], &body);
    assert_eq!(Server::new().reply(&req).status, 202);
}

#[test]
fn string_ids_are_echoed() {
    let mut req = modern("tools/list", json!({}));
    let mut body: Value = serde_json::from_slice(&req.body).unwrap();
    body["id"] = json!("req-α");
    req.body = serde_json::to_vec(&body).unwrap();
    assert_eq!(Server::new().reply(&req).body.unwrap()["id"], "req-α");
}

#[test]
fn the_worker_answers_what_needs_no_relay_session_and_only_that() {
    use relay_core::mcp::answer_stateless;
    for (method, params) in [
        ("tools/list", json!({})),
        ("server/discover", json!({})),
        ("resources/list", json!({})),
        ("prompts/list", json!({})),
    ] {
        let request = modern(method, params);
        let here = answer_stateless(&request, &cx()).unwrap_or_else(|| panic!("{method} answered at the Worker"));
        assert_eq!(here, Server::new().reply(&request), "{method}: the same answer the DO gives");
    }
    let mut server = Server::new();
    let session = server.initialize("2025-11-25");
    for request in [
        modern("tools/call", json!({ "name": "run_js", "arguments": { "code": "1" } })),
        modern("prompts/get", json!({ "name": "use-relay" })),
        modern("resources/read", json!({ "uri": "relay://session" })),
        legacy(&session, 2, "tools/list", json!({})),
        post(
            &[("content-type", "application/json"), ("accept", ACCEPT_BOTH)],
            &json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "x", "version": "1" } } }),
        ),
        post(
            &[("content-type", "application/json"), ("accept", ACCEPT_BOTH)],
            &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        ),
    ] {
        assert_eq!(answer_stateless(&request, &cx()), None, "{:?}", String::from_utf8_lossy(&request.body));
    }
    let mut mismatched = modern("tools/list", json!({}));
    mismatched.headers.retain(|(name, _)| name != "mcp-method");
    assert_eq!(answer_stateless(&mismatched, &cx()).map(|r| r.status), Some(400), "its refusal too");
}
