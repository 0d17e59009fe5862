//! The upstream MCP servers' core: the admin spec and its sealing, `policy.mcps` and its
//! narrowing, `/mcps-rpc` authorization, the era-detecting client, and the `/mcps` tree.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use proptest::prelude::*;
use relay_core::capsule::jws::Signer;
use relay_core::error::ErrorName;
use relay_core::policy::{check_mcp, intersect, Policy, PolicyOverride};
use relay_core::upstream::client::{Exchange, Known, Next, Received};
use relay_core::upstream::redact::{Redactor, REDACTED};
use relay_core::upstream::seal::{Place, SealingKey};
use relay_core::upstream::tree::{definition, files, segment, Listing, MAX_TREE_BYTES};
use relay_core::upstream::{authorize, RpcCall, Upstream, UpstreamSpec};
use serde_json::{json, Value};

fn key() -> SealingKey {
    SealingKey::of(&Signer::from_seed(&[7; 32]))
}

fn spec(value: Value) -> UpstreamSpec {
    serde_json::from_value(value).unwrap()
}

fn nonces() -> impl FnMut() -> [u8; 12] {
    let mut n = 0u8;
    move || {
        n += 1;
        [n; 12]
    }
}

// --- the admin spec and sealing ---

#[test]
fn a_sealed_header_opens_only_for_its_tenant_server_and_header() {
    let sealed = spec(json!({ "url": "https://mcp.example.com/mcp", "headers": { "Authorization": "Bearer s3cret" } }))
        .seal("search", "t_1", &key(), nonces());
    assert_eq!(sealed.headers[0].0, "authorization");
    assert!(!serde_json::to_string(&sealed).unwrap().contains("s3cret"), "the stored record holds no secret");
    assert_eq!(sealed.open_headers("t_1", &key()).unwrap(), vec![("authorization".into(), "Bearer s3cret".into())]);
    let moved = Upstream { name: "other".into(), ..sealed.clone() };
    assert!(moved.open_headers("t_1", &key()).unwrap_err().contains("cannot be opened"));
    assert!(sealed.open_headers("t_2", &key()).is_err(), "another tenant's record does not open");
    let other_key = SealingKey::of(&Signer::from_seed(&[8; 32]));
    assert!(sealed.open_headers("t_1", &other_key).is_err(), "a rotated key does not open it");
    let mut edited = sealed.clone();
    let flipped = if &edited.headers[0].1[20..21] == "A" { "B" } else { "A" };
    edited.headers[0].1.replace_range(20..21, flipped);
    assert!(edited.open_headers("t_1", &key()).is_err(), "an edited value does not open");
}

#[test]
fn the_same_value_seals_differently_under_each_nonce() {
    let place = Place { tenant: "t", server: "s", header: "x-key" };
    assert_ne!(key().seal(&place, "v", [1; 12]), key().seal(&place, "v", [2; 12]));
}

#[test]
fn the_listing_shows_header_names_and_never_values() {
    let sealed = spec(
        json!({ "url": "https://a.example/mcp", "headers": { "x-api-key": "k_123" }, "tools": ["grep"] }),
    )
    .seal("a", "t", &key(), nonces());
    assert_eq!(
        sealed.view(),
        json!({ "name": "a", "url": "https://a.example/mcp", "headers": ["x-api-key"], "tools": ["grep"] })
    );
}

#[test]
fn a_spec_that_could_never_work_is_refused_by_name() {
    let cases = [
        ("ok", json!({ "url": "https://a.example/mcp" }), None),
        ("bad name", json!({ "url": "https://a.example/mcp" }), Some("upstream server name")),
        ("a", json!({ "url": "/relative" }), Some("url")),
        ("a", json!({ "url": "file:///etc/passwd" }), Some("http:// or https://")),
        ("a", json!({ "url": "https://u:p@a.example/mcp" }), Some("no user info")),
        ("a", json!({ "url": "https://a.example/mcp#x" }), Some("no user info or fragment")),
        ("a", json!({ "url": "https://a.example/mcp", "headers": { "Host": "x" } }), Some("not a header name")),
        (
            "a",
            json!({ "url": "https://a.example/mcp", "headers": { "Mcp-Session-Id": "x" } }),
            Some("not a header name"),
        ),
        ("a", json!({ "url": "https://a.example/mcp", "headers": { "bad header": "x" } }), Some("not a header name")),
        ("a", json!({ "url": "https://a.example/mcp", "headers": { "x-k": "line\nbreak" } }), Some("characters")),
        ("a", json!({ "url": "https://a.example/mcp", "tools": ["ok", "no spaces"] }), Some("not an MCP tool name")),
        (
            "a",
            json!({ "url": "https://a.example/mcp", "headers": { "x-k": "v".repeat(8193) } }),
            Some("longer than 8192"),
        ),
    ];
    for (name, value, expected) in cases {
        let result = spec(value.clone()).validate(name);
        match expected {
            None => assert!(result.is_ok(), "{value}: {result:?}"),
            Some(text) => assert!(result.as_ref().is_err_and(|e| e.contains(text)), "{value}: {result:?}"),
        }
    }
}

// --- policy.mcps ---

#[test]
fn no_list_allows_every_upstream_and_a_list_allows_what_it_names() {
    assert!(check_mcp(None, "any", "tool").is_ok());
    let list = vec!["search".to_owned(), "fs/read".to_owned()];
    assert!(check_mcp(Some(&list), "search", "grep").is_ok());
    assert!(check_mcp(Some(&list), "fs", "read").is_ok());
    let refused = check_mcp(Some(&list), "fs", "write").unwrap_err();
    assert!(refused.contains("\"fs/write\""), "{refused}");
    assert!(check_mcp(Some(&[]), "search", "grep").unwrap_err().contains("(empty)"));
}

#[test]
fn a_call_override_narrows_the_tenant_list_and_never_widens_it() {
    let tenant = Policy { mcps: Some(vec!["search".into(), "fs/read".into()]), ..Default::default() };
    let narrowed = |client: Value| {
        let client: PolicyOverride = serde_json::from_value(json!({ "mcps": client })).unwrap();
        intersect(&tenant, Some(&client)).mcps
    };
    assert_eq!(narrowed(json!(["search/grep"])), Some(vec!["search/grep".into()]));
    assert_eq!(narrowed(json!(["fs"])), Some(vec!["fs/read".into()]));
    assert_eq!(narrowed(json!(["other", "fs/write"])), Some(vec![]));
    assert_eq!(intersect(&tenant, None).mcps, tenant.mcps);
    let open = Policy::default();
    let client: PolicyOverride = serde_json::from_value(json!({ "mcps": ["a", "a"] })).unwrap();
    assert_eq!(intersect(&open, Some(&client)).mcps, Some(vec!["a".into()]));
}

#[test]
fn a_policy_without_mcps_keeps_the_json_it_had() {
    let json = serde_json::to_value(Policy::default()).unwrap();
    assert!(json.get("mcps").is_none(), "capsules made before policy.mcps keep their hashes");
    let bad = Policy { mcps: Some(vec!["a/b/c d".into()]), ..Default::default() };
    assert!(bad.validate().unwrap_err().contains("mcps entry"));
}

fn entry() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["a", "b"]).prop_map(str::to_owned),
        (prop::sample::select(vec!["a", "b"]), prop::sample::select(vec!["x", "y"]))
            .prop_map(|(s, t)| format!("{s}/{t}")),
    ]
}

proptest! {
    #[test]
    fn the_narrowed_list_allows_only_what_both_allow(
        tenant in prop::option::of(prop::collection::vec(entry(), 0..4)),
        client in prop::option::of(prop::collection::vec(entry(), 0..4)),
    ) {
        let policy = Policy { mcps: tenant.clone(), ..Default::default() };
        let client_override = PolicyOverride { mcps: client.clone(), ..Default::default() };
        let narrowed = intersect(&policy, Some(&client_override)).mcps;
        for server in ["a", "b"] {
            for tool in ["x", "y"] {
                let both = check_mcp(tenant.as_deref(), server, tool).is_ok() && check_mcp(client.as_deref(), server, tool).is_ok();
                prop_assert_eq!(check_mcp(narrowed.as_deref(), server, tool).is_ok(), both, "{}/{}", server, tool);
            }
        }
    }
}

// --- /mcps-rpc ---

fn upstreams() -> Vec<Upstream> {
    vec![
        Upstream { name: "search".into(), url: "https://s.example/mcp".into(), headers: vec![], tools: None },
        Upstream {
            name: "fs".into(),
            url: "https://f.example/mcp".into(),
            headers: vec![],
            tools: Some(vec!["read".into()]),
        },
    ]
}

fn rpc(body: Value) -> RpcCall {
    RpcCall::parse(body.to_string().as_bytes()).unwrap()
}

#[test]
fn a_call_body_is_parsed_strictly() {
    let call = rpc(json!({ "mcp": "search", "tool": "grep", "params": { "q": 1 } }));
    assert_eq!((call.target(), call.params["q"].clone()), ("search/grep".into(), json!(1)));
    assert!(rpc(json!({ "mcp": "search", "tool": "grep" })).params.is_empty(), "params may be left out");
    for bad in [
        json!({ "mcp": "search" }),
        json!({ "mcp": "s", "tool": "t", "extra": 1 }),
        json!({ "mcp": "../x", "tool": "t" }),
        json!("x"),
    ] {
        assert!(RpcCall::parse(bad.to_string().as_bytes()).is_err(), "{bad}");
    }
    assert!(RpcCall::parse(b"not json").unwrap_err().contains("\"mcp\""));
}

#[test]
fn a_call_goes_through_only_when_the_tenant_and_the_run_allow_it() {
    let all = upstreams();
    assert_eq!(authorize(&all, None, &rpc(json!({ "mcp": "search", "tool": "grep" }))).unwrap().name, "search");
    let unknown = authorize(&all, None, &rpc(json!({ "mcp": "web", "tool": "get" }))).unwrap_err();
    assert_eq!(unknown.name, ErrorName::ValidationError);
    assert!(unknown.message.contains("this tenant has search, fs"), "{}", unknown.message);
    let hidden = authorize(&all, None, &rpc(json!({ "mcp": "fs", "tool": "write" }))).unwrap_err();
    assert_eq!(hidden.name, ErrorName::PolicyDenied);
    assert!(hidden.message.contains("allowed: read"));
    let narrowed = ["fs".to_owned()];
    let refused = authorize(&all, Some(&narrowed), &rpc(json!({ "mcp": "search", "tool": "grep" }))).unwrap_err();
    assert_eq!(refused.name, ErrorName::PolicyDenied);
    assert!(authorize(&[], None, &rpc(json!({ "mcp": "a", "tool": "b" })))
        .unwrap_err()
        .message
        .contains("this tenant has none"));
}

// --- the client ---

fn answer(status: u16, content_type: &str, body: &str, session: Option<&str>) -> Received {
    let mut headers = vec![("content-type".to_owned(), content_type.to_owned())];
    if let Some(session) = session {
        headers.push(("mcp-session-id".into(), session.into()));
    }
    Received { status, headers, body: body.as_bytes().to_vec() }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

fn body(exchange: &Exchange) -> Value {
    serde_json::from_slice(&exchange.post().body).unwrap()
}

#[test]
fn a_modern_server_answers_the_first_request() {
    let mut exchange =
        Exchange::new("tools/call", json!({ "name": "grep", "arguments": {} }), Known::Unknown, Redactor::default());
    let post = exchange.post();
    assert_eq!(header(&post.headers, "mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(header(&post.headers, "mcp-method"), Some("tools/call"));
    assert_eq!(header(&post.headers, "mcp-name"), Some("grep"));
    assert_eq!(body(&exchange)["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    let next =
        exchange.answer(&answer(200, "application/json", r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#, None));
    assert_eq!(next, Next::Done(Ok(json!({ "content": [] }))));
    assert_eq!(exchange.known(), &Known::Modern);
}

#[test]
fn a_legacy_server_is_found_by_its_4xx_then_initialized_and_called_in_its_session() {
    let mut exchange = Exchange::new("tools/list", json!({}), Known::Unknown, Redactor::default());
    let refused = answer(
        400,
        "application/json",
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}"#,
        None,
    );
    assert_eq!(exchange.answer(&refused), Next::Send);
    assert_eq!(body(&exchange)["method"], "initialize");
    assert_eq!(body(&exchange)["params"]["protocolVersion"], "2025-11-25");
    let initialized = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"x","version":"1"}}}"#;
    assert_eq!(exchange.answer(&answer(200, "application/json", initialized, Some("sess-1"))), Next::Send);
    assert_eq!(body(&exchange)["method"], "notifications/initialized");
    assert_eq!(header(&exchange.post().headers, "mcp-session-id"), Some("sess-1"));
    assert_eq!(exchange.answer(&answer(202, "text/plain", "", None)), Next::Send);
    let post = exchange.post();
    assert_eq!(header(&post.headers, "mcp-protocol-version"), Some("2025-06-18"));
    assert!(body(&exchange)["params"].get("_meta").is_none(), "no modern _meta in a legacy request");
    let sse = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}\n\n";
    assert_eq!(exchange.answer(&answer(200, "text/event-stream", sse, None)), Next::Done(Ok(json!({ "tools": [] }))));
    assert_eq!(exchange.known(), &Known::Legacy { version: "2025-06-18".into(), session: Some("sess-1".into()) });
}

#[test]
fn a_known_legacy_session_is_used_at_once_and_reopened_once_when_it_expired() {
    let known = Known::Legacy { version: "2025-11-25".into(), session: Some("old".into()) };
    let mut exchange = Exchange::new("tools/call", json!({ "name": "t" }), known, Redactor::default());
    assert_eq!(header(&exchange.post().headers, "mcp-session-id"), Some("old"));
    assert_eq!(exchange.answer(&answer(404, "application/json", "{}", None)), Next::Send);
    assert_eq!(body(&exchange)["method"], "initialize");
    let initialized = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}"#;
    assert_eq!(exchange.answer(&answer(200, "application/json", initialized, Some("new"))), Next::Send);
    assert_eq!(exchange.answer(&answer(202, "", "", None)), Next::Send);
    assert_eq!(header(&exchange.post().headers, "mcp-session-id"), Some("new"));
    let Next::Done(Err(why)) = exchange.answer(&answer(404, "application/json", "{}", None)) else {
        panic!("a second 404 ends it")
    };
    assert!(why.contains("404"), "{why}");
}

#[test]
fn a_modern_error_is_reported_not_taken_for_a_legacy_server() {
    let mut exchange = Exchange::new("tools/call", json!({ "name": "t" }), Known::Unknown, Redactor::default());
    let mismatch = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"Header mismatch"}}"#;
    let Next::Done(Err(why)) = exchange.answer(&answer(400, "application/json", mismatch, None)) else { panic!() };
    assert!(why.contains("-32020") && why.contains("Header mismatch"), "{why}");
}

#[test]
fn a_server_of_neither_era_is_named_with_both_answers() {
    let mut exchange = Exchange::new("tools/list", json!({}), Known::Unknown, Redactor::default());
    assert_eq!(exchange.answer(&answer(401, "application/json", r#"{"error":"unauthorized"}"#, None)), Next::Send);
    let Next::Done(Err(why)) = exchange.answer(&answer(401, "application/json", r#"{"error":"unauthorized"}"#, None))
    else {
        panic!()
    };
    assert!(why.contains("neither protocol era") && why.matches("401").count() == 2, "{why}");
}

#[test]
fn tool_errors_and_broken_answers_say_what_the_upstream_said() {
    let cases = [
        (
            answer(
                200,
                "application/json",
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: x"}}"#,
                None,
            ),
            "Unknown tool: x",
        ),
        (answer(500, "text/plain", "boom", None), "HTTP 500: boom"),
        (answer(200, "application/json", "not json", None), "not json"),
        (answer(200, "application/json", r#"{"jsonrpc":"2.0","id":2,"result":{}}"#, None), "HTTP 200"),
    ];
    for (reply, expected) in cases {
        let mut exchange = Exchange::new("tools/call", json!({ "name": "x" }), Known::Modern, Redactor::default());
        let Next::Done(Err(why)) = exchange.answer(&reply) else { panic!("{expected}") };
        assert!(why.contains(expected), "{why}");
    }
}

#[test]
fn a_legacy_server_answering_a_modern_version_to_initialize_is_refused() {
    let mut exchange = Exchange::new(
        "tools/list",
        json!({}),
        Known::Legacy { version: "2025-11-25".into(), session: None },
        Redactor::default(),
    );
    assert_eq!(body(&exchange)["method"], "initialize");
    let odd = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2026-07-28"}}"#;
    let Next::Done(Err(why)) = exchange.answer(&answer(200, "application/json", odd, None)) else { panic!() };
    assert!(why.contains("does not speak"), "{why}");
}

// --- redaction ---

const TOKEN: &str = "tok_7c1e9a40b2d8f3+/x";
const API_KEY: &str = "key-52ab07e9d14c6f";
const PASSWORD: &str = "s3cret-pass-word";

/// The headers a tenant gave an upstream: a bearer token, an API key and Basic credentials.
fn credentials() -> Vec<(String, String)> {
    let basic = STANDARD.encode(format!("alice:{PASSWORD}"));
    [
        ("authorization", format!("Bearer {TOKEN}")),
        ("x-api-key", API_KEY.into()),
        ("proxy-auth", format!("Basic {basic}")),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect()
}

/// Whether `text` still gives away `secret`: as it is, or base64-encoded (standard or URL-safe)
/// inside any run of base64 characters, at any alignment. Decodes the text itself rather than
/// asking the redactor, so it checks the redactor instead of repeating it.
fn gives_away(text: &str, secret: &str) -> bool {
    if text.contains(secret) {
        return true;
    }
    let base64_char = |c: char| c.is_ascii_alphanumeric() || "+/-_".contains(c);
    text.split(|c: char| !base64_char(c)).any(|run| {
        let standard = run.replace('-', "+").replace('_', "/");
        (0..4).any(|offset| {
            let Some(tail) = standard.get(offset..) else { return false };
            let whole = &tail[..tail.len() / 4 * 4];
            STANDARD.decode(whole).is_ok_and(|bytes| bytes.windows(secret.len()).any(|w| w == secret.as_bytes()))
        })
    })
}

#[test]
fn an_echoed_credential_is_removed_in_every_form() {
    let redactor = Redactor::of(&credentials());
    let headers_json =
        serde_json::to_string(&json!({ "authorization": format!("Bearer {TOKEN}"), "x-api-key": API_KEY })).unwrap();
    let dump = format!("POST /mcp\r\nAuthorization: Bearer {TOKEN}\r\nX-Api-Key: {API_KEY}\r\n");
    let echoed = [
        format!("request headers: {headers_json}"),
        format!("Authorization: Bearer {TOKEN}"),
        format!("token={TOKEN} alone"),
        format!("escaped for JSON: {}", serde_json::to_string(&json!({ "h": TOKEN })).unwrap().replace('/', "\\/")),
        format!("in a URL: https://x.example/?k={}", TOKEN.replace('+', "%2B").replace('/', "%2F")),
        format!("the dump in base64: {}", STANDARD.encode(&dump)),
        format!("the dump in base64url, shifted: {}", URL_SAFE_NO_PAD.encode(format!("xy{dump}"))),
        format!("shifted twice: {}", STANDARD.encode(format!("z{dump}"))),
        format!("Basic {} decoded: alice:{PASSWORD}", STANDARD.encode(format!("alice:{PASSWORD}"))),
        format!("the password alone: {PASSWORD}"),
    ];
    for text in &echoed {
        let redacted = redactor.text(text);
        for secret in [TOKEN, API_KEY, PASSWORD, "alice:s3cret"] {
            assert!(!gives_away(&redacted, secret), "{secret} survives in {redacted:?} (from {text:?})");
        }
        assert!(redacted.contains(REDACTED), "{redacted}");
    }
    let plain = "nothing secret here: Bearer, tokens, keys and alice";
    assert_eq!(redactor.text(plain), plain, "text without a credential is left as it is");
    assert_eq!(Redactor::of(&[("x-short".into(), "abc".into())]).text("abc abc"), "abc abc", "too short to redact");
}

#[test]
fn an_upstream_that_quotes_its_headers_gets_them_back_redacted_everywhere() {
    // Issue 23: an upstream's JSON-RPC error quoted its request headers, and mcps.call's
    // UpstreamFailed text carried `Authorization: Bearer <the sealed value>` to guest code.
    let quoted = format!("request was {}", serde_json::to_string(&credentials()).unwrap());
    // Where the error is cut for the message, a secret cut in two must not leave its start.
    let long = format!("{}Authorization: Bearer {TOKEN}", "x".repeat(280));
    for message in [quoted.clone(), long] {
        let error = json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": -32603, "message": message } });
        let mut exchange =
            Exchange::new("tools/call", json!({ "name": "t" }), Known::Modern, Redactor::of(&credentials()));
        let Next::Done(Err(why)) = exchange.answer(&answer(200, "application/json", &error.to_string(), None)) else {
            panic!()
        };
        assert!(!why.contains(&TOKEN[..8]) && !why.contains(API_KEY) && !why.contains(PASSWORD), "{why}");
        let broken = answer(500, "text/plain", &format!("{}{message}", "y".repeat(290)), None);
        let mut exchange =
            Exchange::new("tools/call", json!({ "name": "t" }), Known::Modern, Redactor::of(&credentials()));
        let Next::Done(Err(why)) = exchange.answer(&broken) else { panic!() };
        assert!(!why.contains(&TOKEN[..6]), "the cut left the token's start: {why}");
    }
    let result = json!({ "jsonrpc": "2.0", "id": 1, "result": {
        "content": [{ "type": "text", "text": quoted }],
        "structuredContent": { API_KEY: TOKEN, "blob": STANDARD.encode(&quoted) },
    }});
    let mut exchange = Exchange::new("tools/call", json!({ "name": "t" }), Known::Modern, Redactor::of(&credentials()));
    let Next::Done(Ok(value)) = exchange.answer(&answer(200, "application/json", &result.to_string(), None)) else {
        panic!()
    };
    let text = value.to_string();
    for secret in [TOKEN, API_KEY, PASSWORD] {
        assert!(!gives_away(&text, secret), "{secret} in {text}");
    }
    assert_eq!(value["content"][0]["type"], "text", "the rest of the result is intact");
}

#[test]
fn a_tools_list_that_names_the_credentials_becomes_a_tree_without_them() {
    let listed = json!({ "jsonrpc": "2.0", "id": 1, "result": { "tools": [
        tool(&format!("get_{API_KEY}"), json!({ "type": "object" }), None),
        {
            "name": "search",
            "description": format!("Called with Authorization: Bearer {TOKEN}"),
            "inputSchema": { "type": "object", "properties": { "q": { "type": "string", "default": PASSWORD } } },
        },
    ]}});
    let mut exchange = Exchange::new("tools/list", json!({}), Known::Modern, Redactor::of(&credentials()));
    let Next::Done(Ok(page)) = exchange.answer(&answer(200, "application/json", &listed.to_string(), None)) else {
        panic!()
    };
    let tools = page["tools"].as_array().unwrap().clone();
    let tree = files(&[Listing { server: "s", tools: Ok(&tools) }]);
    let all: String = tree.iter().map(|(path, text)| format!("{path}\n{text}")).collect();
    for secret in [TOKEN, API_KEY, PASSWORD] {
        assert!(!gives_away(&all, secret), "{secret} in the tree");
    }
    assert!(tree.iter().any(|(path, _)| path == "/mcps/s/tools/search/schema.json"), "the other tool is listed");
}

proptest! {
    /// However a credential is embedded (between any text, base64-encoded at any offset of a
    /// longer text, in either alphabet), what comes out never gives it away; and text that holds
    /// no credential comes out as it went in.
    #[test]
    fn no_embedding_gives_a_credential_away(
        secret in "[A-Za-z0-9._~+/=-]{6,40}",
        before in "[ -~]{0,12}",
        after in "[ -~]{0,12}",
        url_safe in any::<bool>(),
        encoded in any::<bool>(),
        innocent in "[a-z ]{0,60}",
    ) {
        let redactor = Redactor::of(&[("x-key".into(), secret.clone())]);
        let embedded = format!("{before}{secret}{after}");
        let text = match (encoded, url_safe) {
            (false, _) => embedded,
            (true, false) => STANDARD.encode(&embedded),
            (true, true) => URL_SAFE_NO_PAD.encode(&embedded),
        };
        let redacted = redactor.text(&format!("{innocent}|{text}|{innocent}"));
        prop_assert!(!gives_away(&redacted, &secret), "{} in {}", secret, redacted);
        if !innocent.contains(&secret) {
            prop_assert_eq!(redactor.text(&innocent), innocent);
        }
    }
}

// --- the /mcps tree ---

fn tool(name: &str, input: Value, output: Option<Value>) -> Value {
    let mut tool = json!({ "name": name, "description": format!("The {name} tool. */ sneaky"), "inputSchema": input });
    if let Some(output) = output {
        tool["outputSchema"] = output;
    }
    tool
}

#[test]
fn the_tree_has_an_index_a_schema_per_tool_and_a_definition_per_server() {
    let tools = vec![
        tool(
            "grep",
            json!({ "type": "object", "properties": { "pattern": { "type": "string" } }, "required": ["pattern"] }),
            None,
        ),
        tool("..", json!({}), None),
        tool("bad name", json!({}), None),
    ];
    let listings =
        [Listing { server: "search", tools: Ok(&tools) }, Listing { server: "down", tools: Err("no answer".into()) }];
    let files = files(&listings);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/mcps/search/tools/grep/schema.json",
            "/mcps/search/tools/%2E%2E/schema.json",
            "/mcps/search.d.ts",
            "/mcps/index.json"
        ]
    );
    let index: Value = serde_json::from_str(&files[3].1).unwrap();
    assert_eq!(index["servers"]["search"]["tools"], json!(["grep", ".."]));
    assert_eq!(index["servers"]["search"]["skipped"], json!(["\"bad name\": not an MCP tool name"]));
    assert_eq!(index["servers"]["down"], json!({ "error": "no answer" }));
    let schema: Value = serde_json::from_str(&files[0].1).unwrap();
    assert_eq!(schema["inputSchema"], tools[0]["inputSchema"]);
}

#[test]
fn no_tool_name_leaves_its_directory() {
    for name in [".", "..", "...", "a/../../b", "%2F", "a/b"] {
        let segment = segment(name);
        assert!(!segment.contains('/') && segment != "." && segment != "..", "{name} -> {segment}");
    }
    assert_eq!(segment("read.file"), "read.file");
}

#[test]
fn the_definition_types_inputs_and_outputs_from_their_schemas() {
    let input = json!({
        "type": "object",
        "properties": {
            "pattern": { "type": "string", "description": "What to find." },
            "limit": { "type": "integer" },
            "mode": { "enum": ["fast", "exact"] },
            "paths": { "type": "array", "items": { "type": "string" } },
            "when": { "anyOf": [{ "type": "string" }, { "type": "null" }] },
            "with-dash": { "type": "boolean" },
            "extra": { "type": "object", "additionalProperties": { "type": "number" } }
        },
        "required": ["pattern"]
    });
    let output = json!({ "type": "object", "properties": { "hits": { "type": "integer" } }, "required": ["hits"] });
    let tools = [tool("search_files", input, Some(output)), tool("search-files", json!({ "type": "object" }), None)];
    let refs: Vec<&Value> = tools.iter().collect();
    let dts = definition("fs", &refs);
    for expected in [
        "export type SearchFilesInput = {",
        "  pattern: string;",
        "  limit?: number;",
        "  mode?: \"fast\" | \"exact\";",
        "  paths?: Array<string>;",
        "  when?: string | null;",
        "  \"with-dash\"?: boolean;",
        "    [key: string]: number;",
        "export type SearchFilesOutput = {\n  hits: number;\n};",
        "export type SearchFiles2Input = Record<string, unknown>;",
        "  search_files: (params: SearchFilesInput) => Promise<CallToolResult<SearchFilesOutput>>;",
        "  \"search-files\": (params: SearchFiles2Input) => Promise<CallToolResult<unknown>>;",
        "call<N extends keyof Tools>(server: \"fs\", tool: N",
        "What to find.",
    ] {
        assert!(dts.contains(expected), "missing {expected:?} in\n{dts}");
    }
    assert!(!dts.contains("*/ sneaky"), "a description cannot close its comment early");
}

#[test]
fn a_schema_nested_without_end_becomes_unknown_past_the_depth_limit() {
    let mut schema = json!({ "type": "string" });
    for _ in 0..40 {
        schema = json!({ "type": "array", "items": schema });
    }
    let tools = [tool("deep", json!({ "type": "object", "properties": { "x": schema } }), None)];
    let dts = definition("d", &tools.iter().collect::<Vec<_>>());
    assert!(dts.contains("Array<unknown>"), "{dts}");
    assert!(dts.len() < 10_000);
}

#[test]
fn a_server_whose_descriptions_would_overflow_the_tree_is_named_not_written() {
    let big = "x".repeat(MAX_TREE_BYTES / 2 + 1);
    let tools = vec![tool("huge", json!({ "type": "object", "description": big }), None)];
    let small = vec![tool("ok", json!({}), None)];
    let listings = [
        Listing { server: "a", tools: Ok(&tools) },
        Listing { server: "b", tools: Ok(&tools) },
        Listing { server: "c", tools: Ok(&small) },
    ];
    let files = files(&listings);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        paths.contains(&"/mcps/a.d.ts") && !paths.contains(&"/mcps/b.d.ts") && paths.contains(&"/mcps/c.d.ts"),
        "{paths:?}"
    );
    let index: Value = serde_json::from_str(&files.last().unwrap().1).unwrap();
    assert!(index["servers"]["b"]["error"].as_str().unwrap().contains("past"), "{index}");
}
