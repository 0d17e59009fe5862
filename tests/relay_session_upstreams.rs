//! Calls to the tenant's upstream MCP servers from a run, and the `/mcps` tree, in the relay
//! session (`relay_session::upstreams`), on the test platform with scripted servers: what is
//! called with which credentials, what is refused, and every call and refusal on the audit
//! chain and in the metrics; the server's era learned once; the tree kept for its TTL.

// Each test crate uses part of the test backends.
#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use std::collections::BTreeMap;

use platform::{call_of, caller, run, signer, start, tool_call, with_tabs, ScriptedUpstream, Session};
use relay_core::audit::{self, Kind};
use relay_core::capsule::canonical::sha256_hex;
use relay_core::error::ErrorName;
use relay_core::keys;
use relay_core::mcp::{Era, Tool};
use relay_core::relay_session::runs::Job;
use relay_core::relay_session::upstreams::TREE_TTL_MS;
use relay_core::upstream::client::Received;
use relay_core::upstream::seal::SealingKey;
use relay_core::upstream::{Upstream, UpstreamSpec};
use serde_json::{json, Value};

const SECRET: &str = "Bearer sk-upstream-secret-0123456789";

fn key() -> SealingKey {
    SealingKey::of(&signer())
}

/// The tenant's servers, their headers sealed as the admin route stores them.
fn store_upstreams(session: &Session, servers: &[(&str, &str, Option<&[&str]>)]) {
    let sealed: Vec<Upstream> = servers
        .iter()
        .map(|(name, url, tools)| {
            let spec = UpstreamSpec {
                url: (*url).into(),
                headers: BTreeMap::from([("authorization".to_owned(), SECRET.to_owned())]),
                tools: tools.map(|tools| tools.iter().map(|t| (*t).to_owned()).collect()),
            };
            spec.seal(name, "t_1", &key(), || [1; 12])
        })
        .collect();
    let bytes = serde_json::to_vec(&sealed).unwrap();
    session.platform.records.values.borrow_mut().insert(keys::upstreams("t_1"), bytes);
}

/// Run `run`, in flight (queued: no tab), whose capsule's policy is `policy`; its capsule hash.
fn running(session: &Session, run_id: &str, policy: Value) -> String {
    let arguments = json!({ "code": "mcps.call()", "policy": policy });
    let call = call_of(&**session, run_id, tool_call(Tool::RunJs, arguments, Era::Modern, None));
    start(session, &call);
    let Job::Capsule { capsule, .. } = call.job.as_ref() else { panic!("a capsule") };
    capsule.hash.clone()
}

fn json_answer(body: Value, session: Option<&str>) -> Received {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    headers.extend(session.map(|s| ("mcp-session-id".to_owned(), s.to_owned())));
    Received { status: 200, headers, body: body.to_string().into_bytes() }
}

fn method_of(post: &relay_core::upstream::client::Post) -> Value {
    serde_json::from_slice::<Value>(&post.body).unwrap()["method"].clone()
}

/// A 2026-07-28 server whose tools are `tools`; a call answers with the tool's name.
fn modern(tools: &'static [&'static str]) -> ScriptedUpstream {
    Box::new(move |headers, post| {
        assert!(headers.iter().any(|(n, v)| n == "authorization" && v == SECRET), "the credential reaches its server");
        let result = match method_of(post).as_str() {
            Some("tools/list") => {
                json!({ "tools": tools.iter().map(|t| json!({ "name": t, "inputSchema": { "type": "object" } })).collect::<Vec<_>>() })
            }
            _ => json!({ "content": [{ "type": "text", "text": "found" }] }),
        };
        Ok(json_answer(json!({ "jsonrpc": "2.0", "id": 1, "result": result }), None))
    })
}

/// A legacy server: 400 until it has been initialized in a session.
fn legacy() -> ScriptedUpstream {
    Box::new(|_, post| {
        let in_session = post.headers.iter().any(|(n, v)| n == "mcp-session-id" && v == "sess-1");
        Ok(match method_of(post).as_str() {
            Some("initialize") => json_answer(
                json!({ "jsonrpc": "2.0", "id": 1, "result": { "protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": { "name": "old", "version": "1" } } }),
                Some("sess-1"),
            ),
            Some("notifications/initialized") => Received { status: 202, headers: vec![], body: vec![] },
            _ if in_session => json_answer(json!({ "jsonrpc": "2.0", "id": 1, "result": { "content": [] } }), None),
            _ => Received {
                status: 400,
                headers: vec![("content-type".into(), "application/json".into())],
                body: br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}"#.to_vec(),
            },
        })
    })
}

fn with_servers(servers: &[(&str, &str, Option<&[&str]>)]) -> Session {
    let session = with_tabs(&[]);
    store_upstreams(&session, servers);
    session
}

fn call_body(server: &str, tool: &str) -> Vec<u8> {
    json!({ "mcp": server, "tool": tool, "params": { "q": "relay" } }).to_string().into_bytes()
}

#[test]
fn a_call_the_tenant_and_the_run_allow_is_made_answered_counted_and_sealed_with_its_hash() {
    let session = with_servers(&[("search", "https://s.example/mcp", None)]);
    session.platform.upstreams.borrow_mut().insert("https://s.example/mcp".into(), modern(&["grep"]));
    let cap = running(&session, "r_1", json!({}));
    let body = run(session.call_upstream(&caller(), "r_1".into(), &cap, &call_body("search", "grep"), &key())).unwrap();
    let result: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(result["content"][0]["text"], "found");
    let posted: Value = serde_json::from_str(&session.platform.posts.borrow()[0].1).unwrap();
    assert_eq!((posted["method"].as_str(), &posted["params"]["name"]), (Some("tools/call"), &json!("grep")));
    assert_eq!(posted["params"]["arguments"], json!({ "q": "relay" }));
    let records = session.store().audit_records(10).unwrap();
    let record = records.last().unwrap();
    assert_eq!((record.kind, record.tool.as_str(), record.run_id.as_str()), (Kind::UpstreamCall, "search/grep", "r_1"));
    assert_eq!((record.stdout_bytes, record.stdout_sha256.clone()), (body.len() as u64, sha256_hex(&body)));
    assert!(audit::verify(&records, None).is_ok());
    assert_eq!(session.metrics(0).unwrap().upstream_calls.get("search|ok"), Some(&1));
}

#[test]
fn a_call_the_tenant_or_the_run_does_not_allow_is_refused_counted_and_sealed_as_a_denial() {
    let session =
        with_servers(&[("search", "https://s.example/mcp", None), ("fs", "https://f.example/mcp", Some(&["read"]))]);
    let cap = running(&session, "r_1", json!({ "mcps": ["fs"] }));
    let cases = [
        (("web", "get"), ErrorName::ValidationError, "this tenant has search, fs"),
        (("fs", "write"), ErrorName::PolicyDenied, "allowed: read"),
        (("search", "grep"), ErrorName::PolicyDenied, "search"),
    ];
    for ((server, tool), name, says) in cases {
        let refused =
            run(session.call_upstream(&caller(), "r_1".into(), &cap, &call_body(server, tool), &key())).unwrap_err();
        assert_eq!(refused.name, name, "{server}/{tool}");
        assert!(refused.message.contains(says), "{}", refused.message);
        let record = session.store().audit_records(1).unwrap().remove(0);
        assert_eq!((record.kind, record.tool.as_str()), (Kind::PolicyDenial, "mcps-rpc"));
        assert_eq!(
            (record.args["target"].as_str(), record.error_name.as_deref()),
            (Some(&*format!("{server}/{tool}")), Some(name.as_str()))
        );
    }
    assert!(session.platform.posts.borrow().is_empty(), "nothing refused reached a server");
    assert_eq!(session.metrics(0).unwrap().denials.get("mcps-rpc"), Some(&3));
}

#[test]
fn only_a_run_in_flight_may_call_and_only_with_a_capsule_of_its_tenant() {
    let session = with_servers(&[("search", "https://s.example/mcp", None)]);
    let ended = run(session.call_upstream(&caller(), "r_9".into(), "cafe", &call_body("search", "grep"), &key()));
    assert_eq!(ended.unwrap_err().name, ErrorName::Conflict);
    running(&session, "r_1", json!({}));
    let unknown = run(session.call_upstream(&caller(), "r_1".into(), "cafe", &call_body("search", "grep"), &key()));
    assert_eq!(unknown.unwrap_err().name, ErrorName::NotFound);
    let malformed = run(session.call_upstream(&caller(), "r_1".into(), "cafe", b"{}", &key()));
    assert_eq!(malformed.unwrap_err().name, ErrorName::ValidationError);
    assert!(session.store().audit_records(10).unwrap().is_empty());
    session.platform.records.failing.set(true);
    let kv_down = run(session.call_upstream(&caller(), "r_1".into(), "cafe", &call_body("search", "grep"), &key()));
    assert_eq!(kv_down.unwrap_err().status(), 503);
}

#[test]
fn a_server_that_fails_is_upstream_failed_naming_it_without_its_credential_and_audited() {
    let session = with_servers(&[("search", "https://s.example/mcp", None)]);
    let echo: ScriptedUpstream = Box::new(|headers, _| Err(format!("no answer: refused {}", headers[0].1)));
    session.platform.upstreams.borrow_mut().insert("https://s.example/mcp".into(), echo);
    let cap = running(&session, "r_1", json!({}));
    let failed =
        run(session.call_upstream(&caller(), "r_1".into(), &cap, &call_body("search", "grep"), &key())).unwrap_err();
    assert_eq!((failed.name, failed.status()), (ErrorName::UpstreamFailed, 502));
    assert!(
        failed.message.starts_with("upstream MCP server \"search\", tool \"grep\": no answer"),
        "{}",
        failed.message
    );
    assert!(!failed.message.contains("sk-upstream-secret"), "{}", failed.message);
    let record = session.store().audit_records(1).unwrap().remove(0);
    assert_eq!((record.kind, record.error_name.as_deref()), (Kind::UpstreamCall, Some("UpstreamFailed")));
    assert_eq!(session.metrics(0).unwrap().upstream_calls.get("search|UpstreamFailed"), Some(&1));
}

#[test]
fn a_legacy_servers_session_is_opened_by_the_first_call_and_used_by_the_next() {
    let session = with_servers(&[("old", "https://o.example/mcp", None)]);
    session.platform.upstreams.borrow_mut().insert("https://o.example/mcp".into(), legacy());
    let cap = running(&session, "r_1", json!({}));
    run(session.call_upstream(&caller(), "r_1".into(), &cap, &call_body("old", "t"), &key())).unwrap();
    let first = session.platform.posts.borrow().len();
    assert_eq!(first, 4, "probe, initialize, initialized, call");
    run(session.call_upstream(&caller(), "r_1".into(), &cap, &call_body("old", "t"), &key())).unwrap();
    assert_eq!(session.platform.posts.borrow().len(), first + 1, "the next call goes straight to the session");
}

#[test]
fn the_mcps_tree_lists_what_code_may_call_names_a_server_that_failed_and_is_kept_for_its_ttl() {
    let session =
        with_servers(&[("search", "https://s.example/mcp", Some(&["grep"])), ("down", "https://d.example/mcp", None)]);
    session.platform.upstreams.borrow_mut().insert("https://s.example/mcp".into(), modern(&["grep", "secret_admin"]));
    let tree = run(session.mcps_tree(&caller(), &key())).unwrap();
    let paths: Vec<&str> = tree["files"].as_array().unwrap().iter().filter_map(|f| f["path"].as_str()).collect();
    assert!(paths.iter().any(|p| p.contains("search") && p.contains("grep")), "{paths:?}");
    assert!(!paths.iter().any(|p| p.contains("secret_admin")), "{paths:?}");
    let index = tree["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().is_some_and(|p| p.ends_with("index.json")));
    assert!(index.unwrap()["text"].as_str().unwrap().contains("https://d.example/mcp is not listening"));
    let posts = session.platform.posts.borrow().len();
    session.platform.advance(TREE_TTL_MS - 1);
    assert_eq!(run(session.mcps_tree(&caller(), &key())).unwrap(), tree);
    assert_eq!(session.platform.posts.borrow().len(), posts, "kept: no server is asked again");
    session.platform.advance(1);
    run(session.mcps_tree(&caller(), &key())).unwrap();
    assert!(session.platform.posts.borrow().len() > posts, "listed again after its TTL");
}
