//! A run's workspace carried in its command (`relay_session::tab_sync`), on the test platform:
//! a tab that synced gets the changes since in its next run's command, with the run's workspace
//! before it recorded for its audit then (the tab will not ask); a busy tab, a tab never
//! synced, a resent run and too many changes get none (the tab asks, as before); the version a
//! tab was given follows its syncs and its commands, and is forgotten with the tab.

#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use base64::Engine;
use platform::{call_of, caller, last_command, run, start, tool_call, with_tabs, Session};
use proptest::prelude::*;
use relay_core::capsule::canonical::sha256_hex;
use relay_core::mcp::{Era, Tool};
use relay_core::relay_session::tab_sync::{inline_delta, TabVersions, INLINE_DELTA_MAX_ENTRIES};
use relay_core::relay_session::workspace::Changes;
use relay_core::relay_session::Sql;
use relay_core::run::backchannel::parse_batch;
use relay_core::run::machine::Input;
use relay_core::workspace::FileEntry;
use serde_json::{json, Value};

const CAP: u64 = 64 * 1024 * 1024;

/// Admits and prepares run `run` (a `run_js`): its command goes to the newest tab.
fn start_run(session: &Session, run_id: &str) -> String {
    let call = call_of(&**session, run_id, tool_call(Tool::RunJs, json!({ "code": "1" }), Era::Modern, None));
    start(session, &call);
    let relay_core::relay_session::runs::Job::Capsule { capsule, .. } = call.job.as_ref() else {
        panic!("a capsule job")
    };
    capsule.hash.clone()
}

fn end_run(session: &Session, tab: &str, run_id: &str) {
    let batch = json!({ "runId": run_id, "seq": 0, "type": "exit", "exitCode": 0, "usage": { "wallMs": 5 } });
    session.feed(Input::Heard { tab: Some(tab.into()), events: parse_batch(batch.to_string().as_bytes()).unwrap() });
}

/// Run `run_id` of capsule `cap` commits a small file.
fn commit(session: &Session, run_id: &str, cap: &str, path: &str, bytes: &[u8]) {
    let inline = base64::engine::general_purpose::STANDARD.encode(bytes);
    let change = json!({ "path": path, "sha256": sha256_hex(bytes), "size": bytes.len(), "inline": inline });
    let body = json!({ "changes": [change] }).to_string();
    run(session.commit_run(&caller(), (run_id, None), cap, body.as_bytes())).expect("committed");
}

/// An agent's `write` (the file tool: no run, no tab).
fn write(session: &Session, path: &str, content: &str) {
    let arguments = json!({ "path": path, "content": content, "mode": "overwrite" });
    run(session.file_tool(&caller(), "write", &arguments, CAP, &[])).expect("written");
}

fn workspace_before(session: &Session, run_id: &str) -> Option<String> {
    let rows =
        session.platform.sql.rows::<Value>("SELECT workspace_before FROM runs WHERE run_id = ?", &[run_id.into()]);
    rows.unwrap()[0]["workspace_before"].as_str().map(str::to_owned)
}

#[test]
fn a_tab_that_synced_gets_the_changes_since_in_its_next_runs_command_and_the_runs_root_is_recorded_then() {
    let session = with_tabs(&["tab_1"]);
    let cap = start_run(&session, "r_1");
    assert!(last_command(&session, "tab_1").get("workspace").is_none(), "a tab never given a version asks");
    let index = session.workspace_index(None, (Some("r_1"), Some("tab_1")), CAP).unwrap();
    commit(&session, "r_1", &cap, "/tmp/a", b"one");
    end_run(&session, "tab_1", "r_1");
    write(&session, "/tmp/b", "from the agent");

    start_run(&session, "r_2");
    let delta = &last_command(&session, "tab_1")["workspace"];
    let (version, root) = session.store().workspace_root().unwrap();
    assert_eq!((delta["since"].clone(), delta["version"].clone()), (index["version"].clone(), json!(version)));
    assert_eq!(
        (delta["root"].as_str(), delta["full"].clone(), delta["maxBytes"].clone()),
        (Some(&*root), json!(false), json!(CAP))
    );
    let paths: Vec<&str> = delta["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/tmp/a", "/tmp/b"], "the run's own write and the agent's");
    assert_eq!(delta["removed"], json!([]));
    assert_eq!(workspace_before(&session, "r_2").as_deref(), Some(&*root), "recorded as the command leaves");
    let (_, copy) = session.platform.tabs.socket_copies.borrow().last().cloned().unwrap();
    assert!(copy.contains("\"workspace\""), "the socket's copy is the same command");

    // The tab holds that version now: the next run's command carries what changed since.
    let body = json!({ "changes": [{ "path": "/tmp/a", "removed": true }] }).to_string();
    run(session.commit_run(&caller(), ("r_2", None), &cap, body.as_bytes())).expect("removed");
    end_run(&session, "tab_1", "r_2");
    write(&session, "/tmp/c", "later");
    start_run(&session, "r_3");
    let delta = &last_command(&session, "tab_1")["workspace"];
    assert_eq!(delta["since"], json!(version));
    let paths: Vec<&str> = delta["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/tmp/c"]);
    assert_eq!(delta["removed"], json!(["/tmp/a"]));
    end_run(&session, "tab_1", "r_3");
    let record = session.store().audit_records(1).unwrap().remove(0);
    assert_eq!(
        record.workspace_before,
        Some(delta["root"].as_str().unwrap().to_owned()),
        "its audit has the root it was sent"
    );
}

#[test]
fn a_tab_with_a_run_in_hand_gets_no_changes_and_asks_as_before() {
    let session = with_tabs(&["tab_1"]);
    start_run(&session, "r_1");
    session.workspace_index(None, (Some("r_1"), Some("tab_1")), CAP).unwrap();
    start_run(&session, "r_2");
    assert!(last_command(&session, "tab_1").get("workspace").is_none(), "r_1 may still write");
    // One run at a time: r_2 waits in the relay session's queue, so no tab holds it yet, and a
    // sync naming it (a tab's mistake, or a stale tab's) records nothing for it.
    session.workspace_index(Some(0), (Some("r_2"), Some("tab_1")), CAP).unwrap();
    assert_eq!(workspace_before(&session, "r_2"), None);
    end_run(&session, "tab_1", "r_1");
    assert_eq!(last_command(&session, "tab_1")["runId"], json!("r_2"));
    let index = session.workspace_index(Some(0), (Some("r_2"), Some("tab_1")), CAP).unwrap();
    assert_eq!(workspace_before(&session, "r_2").as_deref(), index["root"].as_str(), "its tab's sync records it");
}

#[test]
fn a_stale_tabs_sync_for_a_run_does_not_move_the_version_the_runs_tab_is_said_to_hold() {
    // tab_0 was taken for gone and r_1 went to tab_1; tab_0 still syncs for it, later than
    // tab_1 did, after the agent wrote a file. Taken as tab_1's, that sync would have the next
    // command to tab_1 carry only what changed since, and tab_1 would never get the file.
    let session = with_tabs(&["tab_0", "tab_1"]);
    start_run(&session, "r_1");
    let synced = session.workspace_index(None, (Some("r_1"), Some("tab_1")), CAP).unwrap();
    write(&session, "/tmp/agent.txt", "written while r_1 ran");
    session.workspace_index(None, (Some("r_1"), Some("tab_0")), CAP).unwrap();
    end_run(&session, "tab_1", "r_1");
    start_run(&session, "r_2");
    let delta = &last_command(&session, "tab_1")["workspace"];
    assert_eq!(delta["since"], synced["version"], "{delta}");
    let paths: Vec<&str> = delta["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/tmp/agent.txt"]);
}

#[test]
fn more_changes_than_a_command_carries_leave_the_tab_to_ask() {
    let session = with_tabs(&["tab_1"]);
    start_run(&session, "r_1");
    session.workspace_index(None, (Some("r_1"), Some("tab_1")), CAP).unwrap();
    end_run(&session, "tab_1", "r_1");
    for n in 0..INLINE_DELTA_MAX_ENTRIES {
        write(&session, &format!("/tmp/{n}"), "x");
    }
    start_run(&session, "r_2");
    let delta = &last_command(&session, "tab_1")["workspace"];
    assert_eq!(delta["files"].as_array().map(Vec::len), Some(INLINE_DELTA_MAX_ENTRIES), "as many as it carries");
    end_run(&session, "tab_1", "r_2");
    for n in 0..=INLINE_DELTA_MAX_ENTRIES {
        write(&session, &format!("/tmp/{n}"), "y");
    }
    start_run(&session, "r_3");
    assert!(last_command(&session, "tab_1").get("workspace").is_none(), "one more than it carries");
    assert_eq!(workspace_before(&session, "r_3"), None, "left to the tab's sync");
}

#[test]
fn a_new_tab_asks_first() {
    let session = with_tabs(&["tab_1"]);
    start_run(&session, "r_1");
    session.workspace_index(None, (Some("r_1"), Some("tab_1")), CAP).unwrap();
    end_run(&session, "tab_1", "r_1");
    session.platform.tabs.attach("tab_2");
    session.feed(Input::TabAttached { tab: "tab_2".into() });
    start_run(&session, "r_2");
    assert!(last_command(&session, "tab_2").get("workspace").is_none(), "tab_2 was never given a version");
}

#[test]
fn a_tab_is_given_no_changes_when_busy_or_resent_and_forgotten_when_gone() {
    let mut versions = TabVersions::default();
    assert_eq!(versions.since("tab_1", false, false), None);
    versions.gave("tab_1", 7);
    assert_eq!(versions.since("tab_1", false, false), Some(7));
    assert_eq!(versions.since("tab_1", true, false), None);
    assert_eq!(versions.since("tab_1", false, true), None);
    versions.gave("tab_1", 9);
    assert_eq!(versions.since("tab_1", false, false), Some(9));
    versions.keep_only(&["tab_2".to_owned()]);
    assert_eq!(versions.since("tab_1", false, false), None);
}

fn entry(n: usize) -> FileEntry {
    FileEntry {
        path: format!("/f{n}"),
        sha256: sha256_hex(&n.to_le_bytes()),
        size: 8,
        mtime_ms: 0,
        version: n as u64 + 1,
    }
}

proptest! {
    /// A delta is carried exactly when the changes are not the whole index and are few enough,
    /// and then it is those changes, unaltered.
    #[test]
    fn a_delta_is_the_changes_when_they_are_few_and_not_the_whole_index(
        files in 0..80usize, removed in 0..80usize, full: bool, since in 0..100u64,
    ) {
        let changes = Changes {
            version: since + 1,
            root: "r".into(),
            full,
            files: (0..files).map(entry).collect(),
            removed: (0..removed).map(|n| format!("/gone{n}")).collect(),
        };
        let delta = inline_delta(since, changes.clone(), CAP);
        prop_assert_eq!(delta.is_some(), !full && files + removed <= INLINE_DELTA_MAX_ENTRIES);
        if let Some(delta) = delta {
            prop_assert_eq!((delta.since, delta.version, delta.root, delta.full), (since, changes.version, changes.root, false));
            prop_assert_eq!((delta.files, delta.removed, delta.max_bytes), (changes.files, changes.removed, CAP));
        }
    }
}
