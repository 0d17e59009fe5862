//! The protocol between the Worker, a relay session's DO and its tabs: every Worker→DO request
//! survives its trip through the wire form, an unknown route or a missing parameter is refused
//! naming it, and every tab command is named as the page's generated list names it.

use relay_core::error::ErrorName;
use relay_core::mcp::HttpRequest;
use relay_core::packages::UploadGrant;
use relay_core::protocol::{tab_commands_json, CommandName, Envelope, SessionRequest, TabCommand, TabsCommand};
use serde_json::json;

fn every_request() -> Vec<SessionRequest> {
    use SessionRequest::*;
    let grant = UploadGrant {
        iss: "relay".into(),
        sub: "t_1".into(),
        sid: "default".into(),
        run: "r_1".into(),
        layer: "deps".into(),
        sha256: "ab".repeat(32),
        size: 7,
        iat: 1,
        exp: 2,
        jti: "g_1".into(),
    };
    let tab = || Some("tab_1".to_owned());
    vec![
        Mcp {
            request: HttpRequest {
                method: "DELETE".into(),
                headers: vec![("mcp-session-id".into(), "m".into())],
                body: vec![],
            },
            charge_call: false,
        },
        Mcp {
            request: HttpRequest { method: "POST".into(), headers: vec![], body: b"{}".to_vec() },
            charge_call: false,
        },
        Mcp {
            request: HttpRequest { method: "POST".into(), headers: vec![], body: b"{}".to_vec() },
            charge_call: true,
        },
        Events { previous: None },
        Events { previous: Some("tab_1&previous=tab_9".into()) },
        Result { tab: tab(), batch: b"{\"type\":\"exit\"}\n".to_vec() },
        Result { tab: None, batch: vec![] },
        ResultsSocket { tab: "tab_1".into(), token_expiry_s: 99 },
        LeaseSocket { tab: "tab_1".into(), token_expiry_s: 99 },
        RenewLease { tab: tab() },
        Detach { tab: None },
        Ready { tab: tab(), report: b"{\"runtimes\":{}}".to_vec() },
        McpsRpc { run: "r_1".into(), cap: "c&a=p".into(), call: b"{}".to_vec() },
        McpsTree,
        BuildPresign { run: "r_1".into(), ask: b"{}".to_vec() },
        BuildSpend(grant),
        BuildFinalize { run: "r 1/?".into(), proposal: b"{}".to_vec() },
        ReserveOutFile { run: "r_1".into(), path: "/out/a b&c=%2F.txt".into(), tab: None },
        ReserveOutFile { run: "r_1".into(), path: "/out/a".into(), tab: Some("t&run=r_9#".into()) },
        ReleaseOutFile { run: "r_1".into(), path: "/out/é".into() },
        Metrics,
        Audit,
        Erase,
        SweepBodies { as_of_ms: 1_795_668_764_858 },
        WorkspaceIndex { since: None, run: None, tab: None },
        WorkspaceIndex { since: Some(7), run: Some("r_1".into()), tab: Some("tab_1&run=r_9".into()) },
        WorkspaceBody { sha256: "ab".repeat(32) },
        WorkspacePutBody { run: Some("r_1".into()), sha256: "ab".repeat(32), body: vec![0, 1, 2] },
        WorkspacePutBody { run: None, sha256: "cd".repeat(32), body: vec![] },
        WorkspaceUpload { changes: b"{\"changes\":[]}".to_vec() },
        WorkspaceCommit { run: "r_1".into(), cap: "c".into(), tab: None, changes: b"{\"changes\":[]}".to_vec() },
        WorkspaceCommit { run: "r_1".into(), cap: "c".into(), tab: Some("tab_1".into()), changes: b"{}".to_vec() },
        // A tab id is the sender's words: one shaped to add a parameter stays one value.
        WorkspaceCommit { run: "r_1".into(), cap: "c".into(), tab: Some("t&run=r_9&cap=x#".into()), changes: vec![] },
    ]
}

#[test]
fn every_session_request_decodes_to_what_was_encoded() {
    for request in every_request() {
        assert_eq!(SessionRequest::decode(request.clone().encode()), Ok(request.clone()), "{request:?}");
    }
}

#[test]
fn an_unknown_route_or_a_missing_parameter_is_refused_naming_it() {
    let envelope = |path: &str| Envelope { method: "POST".into(), path: path.into(), headers: vec![], body: vec![] };
    let unknown = SessionRequest::decode(envelope("/shutdown")).unwrap_err();
    assert_eq!((unknown.name, unknown.status()), (ErrorName::NotFound, 404));
    assert!(unknown.message.contains("/shutdown"));
    let missing = SessionRequest::decode(envelope("/mcps-rpc?run=r_1")).unwrap_err();
    assert_eq!(missing.name, ErrorName::ValidationError);
    assert!(missing.message.contains("`cap`"), "{}", missing.message);
    let since = SessionRequest::decode(Envelope { method: "GET".into(), ..envelope("/workspace?since=x") });
    assert!(since.unwrap_err().message.contains("since must be a workspace version"));
    let as_of = SessionRequest::decode(envelope("/sweep-bodies?asOf=soon")).unwrap_err();
    assert!(as_of.message.contains("asOf must be milliseconds"), "{}", as_of.message);
    // Erasing a relay session's storage is a POST: a GET of the path never erases.
    let erase = SessionRequest::decode(Envelope { method: "GET".into(), ..envelope("/erase") }).unwrap_err();
    assert_eq!(erase.name, ErrorName::NotFound);
    let socket = Envelope { method: "GET".into(), ..envelope("/results") };
    assert_eq!(SessionRequest::decode(socket).unwrap_err().name, ErrorName::ValidationError, "a socket names its tab");
}

#[test]
fn every_tab_command_is_named_as_the_pages_list_names_it() {
    let commands = [
        TabCommand::Hello { tab_id: "tab_1".into(), session: "default".into(), lease_ms: 10_000 },
        TabCommand::Tabs(TabsCommand { count: 2, next: Some("tab_2".into()) }),
        TabCommand::Cancel { run_id: "r_1".into() },
    ];
    let table = tab_commands_json();
    let names: Vec<&str> = table["commands"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(names, CommandName::ALL.map(CommandName::as_str));
    assert_eq!(table["runCommands"], json!(["capsule", "build"]));
    for command in commands {
        let frame = String::from_utf8(command.frame()).unwrap();
        assert!(frame.starts_with(&format!("event: {}\n", command.name().as_str())), "{frame}");
        assert!(names.contains(&command.name().as_str()));
    }
    assert_eq!(TabCommand::Cancel { run_id: "r_1".into() }.data(), json!({ "runId": "r_1" }));
    let hello = TabCommand::Hello { tab_id: "tab_1".into(), session: "s".into(), lease_ms: 5 }.data();
    assert_eq!(hello, json!({ "tabId": "tab_1", "session": "s", "leaseMs": 5 }));
}
