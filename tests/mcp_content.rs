//! What the server teaches: the `use-relay` prompt, the `relay://session` resource, the
//! resource template list, and pagination of the lists, in both eras.

#[path = "mcp_common.rs"]
mod common;

use common::*;
use relay_core::error::ErrorName;
use serde_json::{json, Value};

fn prompt_text(params: Value) -> String {
    let result = result(&Server::new().reply(&modern("prompts/get", params)));
    assert_eq!(result["messages"][0]["role"], "user");
    assert_eq!(result["messages"][0]["content"]["type"], "text");
    result["messages"][0]["content"]["text"].as_str().unwrap().to_string()
}

#[test]
fn prompts_list_offers_use_relay() {
    let result = result(&Server::new().reply(&modern("prompts/list", json!({}))));
    let prompts = result["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0]["name"], "use-relay");
    assert!(prompts[0]["description"].as_str().is_some());
    assert_eq!(
        prompts[0]["arguments"],
        json!([{"name": "task", "description": "What you want to get done (optional).", "required": false}])
    );
}

#[test]
fn the_prompt_teaches_vfs_limits_errors_and_the_executor_page() {
    let text = prompt_text(json!({"name": "use-relay"}));
    let needles = [
        PAGE_URL,
        "/tmp",
        "/out",
        "/host",
        "pyfetch",
        "allowedDomains",
        "nextOffset",
        "\"timeoutMs\": 60000",
        "\"stdoutBytes\": 1048576",
        "Tabs attached now: 2",
        "`default`",
        "run_js",
        "run_py",
        "npm.dependencies",
        "pip.requirements",
        "\"lodash/chunk\"",
        "their own requirements followed",
        "numpy, pandas",
        "policy.limits.timeoutMs",
    ];
    for needle in needles {
        assert!(text.contains(needle), "{needle} missing from the prompt");
    }
    for name in ErrorName::TOOL {
        let line = format!("- {} (HTTP {}): {}", name.as_str(), name.http_status(), name.remedy());
        assert!(text.contains(&line), "{line}");
    }
    assert!(!text.contains("## Your task"));
}

#[test]
fn the_prompt_and_the_readme_name_the_same_image_types() {
    let text = prompt_text(json!({"name": "use-relay"}));
    let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));
    let types = "PNG, JPEG, GIF, WebP or SVG up to 96 KiB";
    assert!(text.contains(types), "the prompt: {types}");
    assert!(readme.contains(types), "the README: {types}");
}

#[test]
fn the_prompt_takes_an_optional_task() {
    let text = prompt_text(json!({"name": "use-relay", "arguments": {"task": "plot sales.csv"}}));
    assert!(text.ends_with("## Your task\nplot sales.csv"), "{text}");
}

#[test]
fn prompt_errors_are_invalid_params() {
    let cases = [
        json!({"name": "other"}),
        json!({"name": "use-relay", "arguments": ["task"]}),
        json!({"name": "use-relay", "arguments": {"task": 5}}),
    ];
    for params in cases {
        let response = Server::new().reply(&modern("prompts/get", params.clone()));
        assert_eq!((response.status, code(&response)), (200, Some(-32602)), "{params}");
    }
}

fn result_of_read(uri: &str) -> Value {
    result(&Server::new().reply(&modern("resources/read", json!({ "uri": uri }))))
}

#[test]
fn resources_list_and_templates() {
    let result = result(&Server::new().reply(&modern("resources/list", json!({}))));
    assert_eq!(result["resources"].as_array().unwrap().len(), 5);
    assert_eq!(result["resources"][0]["uri"], "relay://session");
    assert_eq!(result["resources"][0]["mimeType"], "application/json");
    assert_eq!(result["resources"][1]["uri"], "relay://audit");
    assert_eq!(result["resources"][1]["mimeType"], "application/json");
    assert_eq!(result["resources"][2]["uri"], "relay://workspace");
    let read = result_of_read("relay://workspace");
    let listing: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(listing["files"], json!([]), "what the relay session supplies");
    assert_eq!(result["resources"][3]["uri"], "relay://contexts");
    let read = result_of_read("relay://contexts");
    let contexts: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(contexts, json!({ "contexts": [] }), "what the relay session supplies");
    assert_eq!(result["resources"][4]["uri"], "relay://usage");
    let read = result_of_read("relay://usage");
    let usage: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(usage["runsInFlight"]["used"], 1, "what the tenant's ledger supplies");
    let templates = result_of("resources/templates/list");
    assert_eq!(templates["resourceTemplates"], json!([]));
}

#[test]
fn the_audit_resource_shows_the_chain_and_its_head() {
    let result = result(&Server::new().reply(&modern("resources/read", json!({"uri": "relay://audit"}))));
    assert_eq!((result["ttlMs"].as_u64(), &result["cacheScope"]), (Some(0), &json!("private")));
    let contents = result["contents"].as_array().unwrap();
    assert_eq!(contents[0]["uri"], "relay://audit");
    let audit: Value = serde_json::from_str(contents[0]["text"].as_str().unwrap()).unwrap();
    let records: Vec<relay_core::audit::AuditRecord> = serde_json::from_value(audit["records"].clone()).unwrap();
    assert_eq!(records.len(), 3);
    let head = relay_core::audit::verify(&records, None).unwrap();
    assert_eq!(audit["head"], json!({ "seq": head.seq, "chain": head.chain }));
}

/// The relay session fetches the tenant's usage from its ledger only for a request that reads
/// `relay://usage`, as the parser sees it (not a string that merely contains it).
#[test]
fn only_a_read_of_relay_usage_asks_the_ledger() {
    let request = |body: Value| relay_core::mcp::HttpRequest {
        method: "POST".into(),
        headers: vec![],
        body: body.to_string().into_bytes(),
    };
    let read = |uri: &str| json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}});
    assert!(relay_core::mcp::reads_usage(&request(read("relay://usage"))));
    assert!(!relay_core::mcp::reads_usage(&request(read("relay://session"))));
    assert!(!relay_core::mcp::reads_usage(&request(read("relay://usage/x"))));
    let listed = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "relay://usage"}});
    assert!(!relay_core::mcp::reads_usage(&request(listed)));
}

fn result_of(method: &str) -> Value {
    result(&Server::new().reply(&modern(method, json!({}))))
}

#[test]
fn the_session_resource_describes_the_relay_session() {
    let result = result(&Server::new().reply(&modern("resources/read", json!({"uri": "relay://session"}))));
    assert_eq!((result["ttlMs"].as_u64(), &result["cacheScope"]), (Some(0), &json!("private")));
    let contents = result["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 1);
    assert_eq!(contents[0]["uri"], "relay://session");
    assert_eq!(contents[0]["mimeType"], "application/json");
    let status: Value = serde_json::from_str(contents[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        status,
        json!({
            "session": "default",
            "executor": {
                "attached": true, "tabs": 2, "tabIds": ["tab-a", "tab-b"], "pageUrl": PAGE_URL,
                "warmingUp": true, "runtimes": {"pyodide@314": "loading", "quickjs@0.32": "ready"},
            },
            "queueDepth": 3,
            "recentRuns": [{"runId": "r_1", "exitCode": 0}],
            "clients": [{"name": "seen-before", "version": "1", "lastSeenMs": 1}],
        })
    );
}

#[test]
fn the_client_info_of_each_request_is_passed_on_in_either_era() {
    let mut server = Server::new();
    clients_seen();
    server.reply(&modern("tools/list", json!({})));
    assert_eq!(clients_seen(), vec![json!({ "name": "test", "version": "1" })]);
    let session = server.initialize("2025-11-25");
    assert_eq!(clients_seen(), vec![json!({ "name": "legacy-test", "version": "1" })]);
    server.send(&legacy(&session, 1, "ping", json!({ "clientInfo": { "name": "not-initialize" } })));
    assert!(clients_seen().is_empty(), "only initialize carries a legacy client's info");
    server.reply(&modern("tools/list", json!({ "_meta": { "io.modelcontextprotocol/clientInfo": "x" } })));
    assert!(clients_seen().is_empty(), "a clientInfo that is not an object is not passed on");
}

#[test]
fn reading_an_unknown_resource_is_32602_with_the_uri() {
    for params in [json!({"uri": "relay://nope"}), json!({"uri": "file:///etc/passwd"})] {
        let response = Server::new().reply(&modern("resources/read", params.clone()));
        assert_eq!(code(&response), Some(-32602));
        assert_eq!(response.body.unwrap()["error"]["data"]["uri"], params["uri"]);
    }
    let mut no_uri = modern("resources/read", json!({}));
    set_header(&mut no_uri, "mcp-name", None);
    assert_eq!(code(&Server::new().reply(&no_uri)), Some(-32602));
}

#[test]
fn lists_have_one_page_so_any_cursor_is_invalid() {
    for method in ["tools/list", "resources/list", "resources/templates/list", "prompts/list"] {
        let response = Server::new().reply(&modern(method, json!({"cursor": "page-2"})));
        assert_eq!((response.status, code(&response)), (200, Some(-32602)), "{method}");
        let response = Server::new().reply(&modern(method, json!({"cursor": null})));
        assert_eq!(response.status, 200, "{method}");
        assert!(response.body.unwrap().get("result").is_some(), "{method}");
    }
}

#[test]
fn legacy_clients_get_the_same_content_without_cache_hints() {
    let mut server = Server::new();
    let session = server.initialize("2025-06-18");
    let read = result(&server.reply(&legacy(&session, 1, "resources/read", json!({"uri": "relay://session"}))));
    assert!(read.get("ttlMs").is_none() && read.get("resultType").is_none());
    assert!(read["contents"][0]["text"].as_str().unwrap().contains("tab-a"));
    let prompt = result(&server.reply(&legacy(&session, 2, "prompts/get", json!({"name": "use-relay"}))));
    assert!(prompt["messages"][0]["content"]["text"].as_str().unwrap().contains(PAGE_URL));
}
