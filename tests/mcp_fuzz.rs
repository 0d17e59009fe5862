//! Hostile input: arbitrary bytes, arbitrary JSON-RPC-shaped messages, arbitrary headers
//! and tool arguments. `handle` must never panic, and every reply must be well formed: a
//! 4xx (or 2xx/500 for processed requests) with a JSON-RPC error body, or an empty 202/204.

#[path = "mcp_common.rs"]
mod common;

use common::*;
use proptest::prelude::*;
use relay_core::mcp::{handle, Dispatch, HttpRequest, HttpResponse, Tool};
use serde_json::{Map, Value};

const METHODS: [&str; 16] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "logging/setLevel",
    "notifications/initialized",
    "notifications/cancelled",
    "",
    "x/y",
    "TOOLS/LIST",
];
const KEYS: [&str; 20] = [
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "name",
    "arguments",
    "uri",
    "_meta",
    "code",
    "protocolVersion",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/logLevel",
    "progressToken",
    "requestId",
    "cursor",
    "level",
    "task",
];
const WORDS: [&str; 14] = [
    "2.0",
    "2026-07-28",
    "2025-11-25",
    "2025-03-26",
    "run_js",
    "read",
    "use-relay",
    "relay://session",
    "info",
    "console.log(1)",
    "sess-1",
    "=?base64?cnVuX2pz?=",
    "\u{0}",
    "é",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
        prop::sample::select(&WORDS[..]).prop_map(Value::from),
        prop::sample::select(&METHODS[..]).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(prop::sample::select(&KEYS[..]), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

/// Mostly JSON-RPC-shaped objects, so the fuzzing reaches past the envelope checks.
fn message() -> impl Strategy<Value = Value> {
    let params = prop::collection::btree_map(prop::sample::select(&KEYS[..]), json_value(), 0..5);
    (
        prop::option::of(prop_oneof![3 => Just(Value::from("2.0")), 1 => json_value()]),
        prop::option::of(json_value()),
        prop::option::of(prop_oneof![3 => prop::sample::select(&METHODS[..]).prop_map(Value::from), 1 => json_value()]),
        prop::option::of(params),
        prop::option::of(json_value()),
    )
        .prop_map(|(jsonrpc, id, method, params, result)| {
            let mut object = Map::new();
            let params = params.map(|p| Value::Object(p.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
            for (key, value) in
                [("jsonrpc", jsonrpc), ("id", id), ("method", method), ("params", params), ("result", result)]
            {
                if let Some(value) = value {
                    object.insert(key.to_string(), value);
                }
            }
            Value::Object(object)
        })
}

fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(&WORDS[..]).prop_map(str::to_string),
        prop::sample::select(&METHODS[..]).prop_map(str::to_string),
        Just(ACCEPT_BOTH.to_string()),
        Just("application/json".to_string()),
        ".{0,12}",
    ]
}

fn extra_headers() -> impl Strategy<Value = Vec<(String, String)>> {
    const NAMES: [&str; 7] =
        ["mcp-protocol-version", "mcp-method", "mcp-name", "mcp-session-id", "accept", "content-type", "last-event-id"];
    prop::collection::vec((prop::sample::select(&NAMES[..]).prop_map(str::to_string), header_value()), 0..5)
}

/// Every reply is well formed; nothing panics (a panic fails the property).
fn check(outcome: Dispatch) -> Result<(), TestCaseError> {
    if let Dispatch::Reply(response) = outcome {
        check_reply(&response)?;
    }
    Ok(())
}

fn check_reply(response: &HttpResponse) -> Result<(), TestCaseError> {
    let allowed = [200, 202, 204, 400, 404, 405, 406, 413, 415, 500];
    prop_assert!(allowed.contains(&response.status), "status {}", response.status);
    match &response.body {
        None => prop_assert!(matches!(response.status, 202 | 204)),
        Some(body) => {
            prop_assert_eq!(&body["jsonrpc"], "2.0");
            prop_assert!(body.get("result").is_some() != body.get("error").is_some());
            if response.status != 200 {
                prop_assert!(body["error"]["code"].is_i64(), "{}", body);
            }
        }
    }
    Ok(())
}

fn post_with(headers: Vec<(String, String)>, body: Vec<u8>) -> HttpRequest {
    HttpRequest { method: "POST".into(), headers, body }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes are never a valid message: always a 4xx JSON-RPC error (or a 202 for
    /// the vanishingly rare accidental notification).
    #[test]
    fn arbitrary_bytes_get_a_4xx_error(body in prop::collection::vec(any::<u8>(), 0..256)) {
        let pairs = headers(&[("content-type", "application/json"), ("accept", ACCEPT_BOTH)]);
        let Dispatch::Reply(response) = Server::new().send(&post_with(pairs, body)) else {
            return Err(TestCaseError::fail("bytes became a call"));
        };
        prop_assert!(response.status == 202 || (400..500).contains(&response.status));
        check_reply(&response)?;
    }

    #[test]
    fn arbitrary_json_text_never_panics(text in "[\\[\\]{}\",:0-9a-z .\\\\-]{0,64}") {
        let pairs = headers(&[("content-type", "application/json"), ("accept", ACCEPT_BOTH)]);
        check(Server::new().send(&post_with(pairs, text.into_bytes())))?;
    }

    #[test]
    fn arbitrary_messages_and_headers_never_panic(body in message(), extra in extra_headers(), method in prop::sample::select(&["POST", "GET", "DELETE", "PUT"][..])) {
        let mut server = Server::new();
        let session = server.initialize("2025-11-25");
        let mut pairs = headers(&[("content-type", "application/json"), ("accept", ACCEPT_BOTH), ("mcp-session-id", &session)]);
        for (name, value) in extra {
            pairs.retain(|(n, _)| *n != name);
            pairs.push((name, value));
        }
        let req = HttpRequest { method: method.into(), headers: pairs, body: serde_json::to_vec(&body).unwrap() };
        check(handle(&req, &mut server.store, &server.cx))?;
    }

    #[test]
    fn arbitrary_tool_arguments_are_called_or_refused_cleanly(arguments in json_value(), tool in prop::sample::select(&Tool::ALL[..])) {
        let params = serde_json::json!({ "name": tool.name(), "arguments": arguments });
        match Server::new().send(&modern("tools/call", params)) {
            Dispatch::Call(call) => prop_assert!(tool.validate(&call.arguments).is_ok()),
            Dispatch::Reply(response) => {
                check_reply(&response)?;
                let body = response.body.unwrap();
                let validation = body["result"]["structuredContent"]["error"]["name"] == "ValidationError";
                prop_assert!(validation || body["error"]["code"] == -32602, "{}", body);
            }
            other => return Err(TestCaseError::fail(format!("{other:?}"))),
        }
    }
}
