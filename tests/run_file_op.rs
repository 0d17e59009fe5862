//! `read`, `write` and `search` calls checked before the relay session answers them: paths
//! against the filesystem policy (PolicyDenied, normalized as the policy reads them), base64
//! and the search pattern (ValidationError).

use relay_core::error::ErrorName;
use relay_core::policy::{FsPolicy, WORKSPACE_ROOTS};
use relay_core::run::file_op::file_op;
use serde_json::{json, Value};

fn refusal(tool: &'static str, arguments: Value) -> (ErrorName, String) {
    let err = file_op(tool, &arguments, &FsPolicy::default()).expect_err("refused");
    (err.name, err.message)
}

#[test]
fn a_read_anywhere_in_the_workspace_is_taken_as_asked() {
    let op = file_op("read", &json!({"path": "/host/notes.md"}), &FsPolicy::default()).unwrap();
    assert_eq!((op.tool, op.arguments), ("read", json!({"path": "/host/notes.md"})));
}

#[test]
fn writes_outside_the_writable_prefixes_and_escapes_are_policy_denied() {
    for path in
        ["/host/x", "/mcps/x", "/tmp/../host/x", "/etc/passwd", "tmp/x", "/tmp/%2e%2e/x", "/tmp\\x", "/tmp/a\0b"]
    {
        let (name, message) = refusal("write", json!({"path": path, "content": "x"}));
        assert_eq!(name, ErrorName::PolicyDenied, "{path}: {message}");
        assert!(!message.is_empty());
    }
    let writable = FsPolicy { writable: vec!["/tmp".into(), "/out".into(), "/host".into()], ..FsPolicy::default() };
    assert!(file_op("write", &json!({"path": "/host/x", "content": "x"}), &writable).is_ok());
}

#[test]
fn bad_base64_is_a_validation_error_that_says_what_to_send() {
    let (name, message) = refusal("write", json!({"path": "/tmp/x", "content": "not base64!", "encoding": "base64"}));
    assert_eq!(name, ErrorName::ValidationError);
    assert!(message.contains("base64") && message.contains("utf-8"), "{message}");
    assert!(file_op(
        "write",
        &json!({"path": "/tmp/x", "content": "aGk=", "encoding": "base64"}),
        &FsPolicy::default()
    )
    .is_ok());
}

#[test]
fn a_search_covers_the_whole_workspace_by_default_and_checks_its_pattern() {
    let op = file_op("search", &json!({"pattern": "x"}), &FsPolicy::default()).unwrap();
    assert_eq!(op.arguments["paths"], json!(WORKSPACE_ROOTS));
    let (name, message) = refusal("search", json!({"pattern": "(a)\\1"}));
    assert_eq!(name, ErrorName::ValidationError);
    assert!(message.to_lowercase().contains("backreference"), "{message}");
    let (name, _) = refusal("search", json!({"pattern": "x", "paths": ["/etc"]}));
    assert_eq!(name, ErrorName::PolicyDenied);
}

#[test]
fn a_call_reads_the_mcps_tree_only_when_it_reads_under_mcps() {
    let fs = FsPolicy::default();
    let reads = |tool: &'static str, arguments: Value| file_op(tool, &arguments, &fs).unwrap().reads_mcps();
    assert!(reads("read", json!({ "path": "/mcps/index.json" })));
    assert!(reads("read", json!({ "path": "/mcps" })));
    assert!(!reads("read", json!({ "path": "/tmp/mcps" })));
    assert!(!reads("read", json!({ "path": "/tmp" })));
    assert!(reads("search", json!({ "pattern": "x" })), "the whole workspace covers /mcps");
    assert!(reads("search", json!({ "pattern": "x", "paths": ["/mcps/server"] })));
    assert!(!reads("search", json!({ "pattern": "x", "paths": ["/tmp", "/out"] })));
    assert!(!reads("write", json!({ "path": "/tmp/a", "content": "" })));
}
