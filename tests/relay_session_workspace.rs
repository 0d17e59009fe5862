//! The relay session's workspace (`relay_session::workspace`) on real SQLite and R2 in memory:
//! bodies stored once (inline when small), the index, its version and root, changes since a
//! version, commits under the rules (the cap, files against directories, bodies that must be
//! stored, hashes that must match), the file tools answered with no tab, and storage that fails
//! leaving the index as it was. A property test drives random changes against a model.

#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use std::collections::BTreeMap;

use base64::Engine;
use platform::{call_of, caller, run, session, signer, start, tool_call, with_tabs, work_of, Session, TestPlatform};
use proptest::prelude::*;
use relay_core::capsule::canonical::sha256_hex;
use relay_core::error::ErrorName;
use relay_core::files::Slot;
use relay_core::keys;
use relay_core::mcp::{Era, Tool};
use relay_core::relay_session::runs::{FileCall, Job, Work};
use relay_core::relay_session::workspace_routes::MAX_COMMIT_CHANGES;
use relay_core::relay_session::{RelaySession, Sql};
use relay_core::run::backchannel::parse_batch;
use relay_core::run::machine::Input;
use relay_core::upstream::seal::SealingKey;
use relay_core::workspace::rules::MAX_FILES;
use relay_core::workspace::{root, Change, EMPTY_ROOT, INLINE_MAX_BYTES};
use serde_json::{json, Value};
use support::{Failing, Sqlite};

/// The relay session of `platform::caller()`, as its Durable Object is named (bodies go under it).
const RELAY_SESSION: &str = "t_1/default";
const CAP: u64 = 64 * 1024 * 1024;
const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn tool(session: &Session, tool: &str, arguments: Value) -> Result<Value, (ErrorName, String)> {
    run(session.file_tool(&caller(), tool, &arguments, CAP, &[])).map_err(|r| (r.name, r.message))
}

fn write(session: &Session, path: &str, content: &str) -> Value {
    tool(session, "write", json!({ "path": path, "content": content, "mode": "overwrite" })).expect("written")
}

fn listing(session: &Session) -> Vec<(String, String, u64)> {
    let files = session.store().workspace_files().unwrap();
    files.into_iter().map(|f| (f.path, f.sha256, f.size)).collect()
}

#[test]
fn a_new_workspace_is_empty_at_version_zero() {
    let session = session();
    assert_eq!(session.store().workspace_root().unwrap(), (0, EMPTY_ROOT.to_owned()));
    let (name, message) = tool(&session, "read", json!({ "path": "/tmp" })).unwrap_err();
    assert_eq!(name, ErrorName::ValidationError);
    assert!(message.starts_with("no file or directory /tmp"), "{message}");
}

#[test]
fn write_then_read_with_no_tab() {
    let session = session();
    let answer = tool(&session, "write", json!({ "path": "/tmp/a.txt", "content": "hello" })).unwrap();
    assert_eq!(answer, json!({ "path": "/tmp/a.txt", "bytesWritten": 5, "size": 5 }));
    let read = tool(&session, "read", json!({ "path": "/tmp/a.txt" })).unwrap();
    assert_eq!(read["content"], "hello");
    tool(&session, "write", json!({ "path": "/tmp/a.txt", "content": " world", "mode": "append" })).unwrap();
    assert_eq!(tool(&session, "read", json!({ "path": "/tmp/a.txt" })).unwrap()["content"], "hello world");
    let again = tool(&session, "write", json!({ "path": "/tmp/a.txt", "content": "x" })).unwrap_err();
    assert!(again.1.contains("already exists"), "{again:?}");
    let dir = tool(&session, "read", json!({ "path": "/tmp" })).unwrap();
    assert_eq!(dir["content"], "a.txt\t11");
    assert!(session.platform.tabs.streams.borrow().is_empty(), "no tab took part");
}

#[test]
fn small_bodies_stay_inline_and_large_ones_go_to_r2_once() {
    let session = session();
    write(&session, "/tmp/small", &"s".repeat(INLINE_MAX_BYTES as usize));
    assert_eq!(session.platform.blobs.puts.get(), 0, "a body of 4 KiB stays in SQLite");
    let large = "L".repeat(INLINE_MAX_BYTES as usize + 1);
    write(&session, "/tmp/large1", &large);
    write(&session, "/tmp/large2", &large);
    write(&session, "/out/large3", &large);
    assert_eq!(session.platform.blobs.puts.get(), 1, "identical bodies are stored once");
    let key = keys::workspace_body(RELAY_SESSION, &sha256_hex(large.as_bytes()));
    assert!(session.platform.blobs.objects.borrow().contains_key(&key), "under {key}");
    assert_eq!(tool(&session, "read", json!({ "path": "/out/large3" })).unwrap()["content"], large);
}

#[test]
fn every_change_makes_a_version_and_the_root_follows_the_index() {
    let session = session();
    let v = |s: &Session| s.store().workspace_root().unwrap();
    write(&session, "/tmp/a", "1");
    write(&session, "/tmp/b", "2");
    let (version, root_now) = v(&session);
    assert_eq!(version, 2);
    let files = listing(&session);
    assert_eq!(root_now, root(files.iter().map(|(p, s, n)| (p.as_str(), s.as_str(), *n))));
    let outcomes = session.store().commit(&[Change::Remove { path: "/tmp/a".into() }], CAP, 0);
    assert_eq!(outcomes, vec![Ok(3)]);
    let after = v(&session);
    assert_ne!(after.1, root_now);
    // Removing what is not there changes nothing, not even the version.
    assert_eq!(session.store().commit(&[Change::Remove { path: "/tmp/a".into() }], CAP, 0), vec![Ok(3)]);
    assert_eq!(v(&session), after);
    // Writing the same bytes again is a change (its mtime), but the root stays.
    write(&session, "/tmp/b", "2");
    assert_eq!(v(&session), (4, after.1));
}

#[test]
fn a_tab_catches_up_by_the_changes_since_its_version() {
    let session = session();
    write(&session, "/tmp/a", "1");
    write(&session, "/tmp/b", "2");
    let held = session.store().workspace_version().unwrap();
    write(&session, "/tmp/c", "3");
    session.store().commit(&[Change::Remove { path: "/tmp/a".into() }], CAP, 0);
    let changes = session.store().workspace_changes(Some(held)).unwrap();
    assert!(!changes.full);
    assert_eq!(changes.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["/tmp/c"]);
    assert_eq!(changes.removed, ["/tmp/a"]);
    assert_eq!(changes.version, 4);
    // A version the relay session never made (a tab of another world): the whole index.
    let unknown = session.store().workspace_changes(Some(99)).unwrap();
    assert!(unknown.full);
    assert_eq!(unknown.files.len(), 2);
    assert_eq!(unknown.root, changes.root);
}

#[test]
fn files_and_directories_exclude_each_other() {
    let session = session();
    write(&session, "/tmp/d/x", "1");
    let (name, message) = tool(&session, "write", json!({ "path": "/tmp/d", "content": "no" })).unwrap_err();
    assert_eq!(name, ErrorName::ValidationError);
    assert!(message.contains("it is a directory (it holds 1 file)"), "{message}");
    let (_, message) = tool(&session, "write", json!({ "path": "/tmp/d/x/y", "content": "no" })).unwrap_err();
    assert!(message.contains("/tmp/d/x is a file"), "{message}");
    // "/tmp/d0" and "/tmp/d.txt" sort beside "/tmp/d/" but are not below it.
    write(&session, "/tmp/d0", "ok");
    write(&session, "/tmp/d.txt", "ok");
    assert_eq!(listing(&session).len(), 3);
}

#[test]
fn the_cap_is_counted_on_the_index_and_names_what_to_delete() {
    let session = session();
    let big = "x".repeat(60);
    let answer = run(session.file_tool(&caller(), "write", &json!({ "path": "/tmp/a", "content": big }), 100, &[]));
    answer.unwrap();
    let before = session.store().workspace_root().unwrap();
    let refused = run(session.file_tool(&caller(), "write", &json!({ "path": "/tmp/b", "content": big }), 100, &[]));
    let refusal = refused.unwrap_err();
    assert_eq!(refusal.name, ErrorName::OutputLimitExceeded);
    assert!(refusal.message.contains("120 bytes") && refusal.message.contains("delete files"), "{}", refusal.message);
    assert_eq!(session.store().workspace_root().unwrap(), before, "nothing changed");
    // Replacing a file counts what it replaces.
    let replaced = run(session.file_tool(
        &caller(),
        "write",
        &json!({ "path": "/tmp/a", "content": "y".repeat(100), "mode": "overwrite" }),
        100,
        &[],
    ));
    assert!(replaced.is_ok());
}

#[test]
fn the_count_of_files_is_followed_through_commits_so_empty_files_cannot_grow_the_index_forever() {
    let session = session();
    let empty = run(session.store_body(&caller(), Vec::new())).unwrap();
    let write = |path: String| Change::Write { path, sha256: empty.clone(), size: 0 };
    let changes: Vec<Change> = (0..MAX_FILES).map(|i| write(format!("/tmp/f{i}"))).collect();
    let outcomes = session.store().commit(&changes, CAP, 1);
    assert!(outcomes.iter().all(|o| o.is_ok()), "up to the limit, in one batch");
    let refused = session.store().commit(&[write("/tmp/one-more".into())], CAP, 2).remove(0).unwrap_err();
    assert_eq!(refused.name, ErrorName::OutputLimitExceeded, "{}", refused.message);
    assert!(
        session.store().commit(&[write("/tmp/f0".into())], CAP, 3).remove(0).is_ok(),
        "an overwrite is no new file"
    );
    // A removal in the same batch makes room for the write after it.
    let batch = [Change::Remove { path: "/tmp/f1".into() }, write("/tmp/one-more".into())];
    assert!(session.store().commit(&batch, CAP, 4).iter().all(|o| o.is_ok()));
    assert_eq!(session.store().workspace_totals().unwrap().files, MAX_FILES);
}

#[test]
fn a_body_must_be_stored_and_match_its_hash_before_a_file_names_it() {
    let session = session();
    let bytes = b"the body".to_vec();
    let claimed = sha256_hex(b"another body");
    let refusal = run(session.store_claimed_body(&caller(), &claimed, bytes.clone())).unwrap_err();
    assert_eq!(refusal.name, ErrorName::ValidationError);
    assert!(refusal.message.contains("nothing was stored"), "{}", refusal.message);
    assert!(session.store().workspace_body(&claimed).unwrap().is_none());
    let change = Change::Write { path: "/tmp/a".into(), sha256: claimed, size: 8 };
    let outcome = session.store().commit(&[change], CAP, 0).remove(0).unwrap_err();
    assert!(outcome.message.contains("is not stored; upload it"), "{}", outcome.message);
    // Stored under its own hash, it may be committed, with its own size only.
    let sha = sha256_hex(&bytes);
    run(session.store_claimed_body(&caller(), &sha, bytes)).unwrap();
    let wrong_size = Change::Write { path: "/tmp/a".into(), sha256: sha.clone(), size: 9 };
    assert!(session.store().commit(&[wrong_size], CAP, 0)[0].is_err());
    let right = Change::Write { path: "/tmp/a".into(), sha256: sha, size: 8 };
    assert_eq!(session.store().commit(&[right], CAP, 0), vec![Ok(1)]);
    // A large body with a wrong hash never reaches R2.
    let large = vec![7u8; 10_000];
    assert!(run(session.store_claimed_body(&caller(), &sha256_hex(b"x"), large)).is_err());
    assert_eq!(session.platform.blobs.puts.get(), 0);
}

#[test]
fn a_batch_commits_each_change_on_its_own_in_order() {
    let session = session();
    let a = run(session.store_body(&caller(), b"aaaa".to_vec())).unwrap();
    let changes = [
        Change::Write { path: "/tmp/f".into(), sha256: a.clone(), size: 4 },
        Change::Write { path: "/tmp/f/g".into(), sha256: a.clone(), size: 4 }, // below a file: refused
        Change::Write { path: "/tmp/g".into(), sha256: a.clone(), size: 4 },
        Change::Remove { path: "/tmp/f".into() },
    ];
    let outcomes = session.store().commit(&changes, CAP, 0);
    assert_eq!(outcomes[0], Ok(1));
    assert!(outcomes[1].is_err());
    assert_eq!((outcomes[2].clone(), outcomes[3].clone()), (Ok(2), Ok(3)));
    assert_eq!(listing(&session), vec![("/tmp/g".to_owned(), a, 4)]);
}

#[test]
fn search_reads_the_workspace_with_no_tab() {
    let session = session();
    write(&session, "/tmp/b.txt", "one TODO\ntwo");
    write(&session, "/tmp/a.txt", "TODO first");
    write(&session, "/out/c.bin", "\0TODO");
    let found = tool(&session, "search", json!({ "pattern": "TODO", "paths": ["/tmp", "/out"] })).unwrap();
    let paths: Vec<&str> = found["matches"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/tmp/a.txt", "/tmp/b.txt"], "in path order");
    assert_eq!((found["filesSearched"].clone(), found["filesSkipped"].clone()), (json!(2), json!(1)));
    let (name, message) = tool(&session, "search", json!({ "pattern": "(a)\\1", "paths": ["/tmp"] })).unwrap_err();
    assert_eq!(name, ErrorName::ValidationError);
    assert!(message.contains("backreferences"), "{message}");
}

#[test]
fn r2_failing_leaves_the_index_as_it_was() {
    let session = session();
    write(&session, "/tmp/kept", "kept");
    let before = session.store().workspace_root().unwrap();
    session.platform.blobs.failing.set(true);
    let large = "L".repeat(10_000);
    let (name, message) = tool(&session, "write", json!({ "path": "/tmp/large", "content": large })).unwrap_err();
    assert_eq!(name, ErrorName::StorageUnavailable);
    assert!(message.contains("the workspace is unchanged"), "{message}");
    assert_eq!(session.store().workspace_root().unwrap(), before);
    assert!(session.store().workspace_body(&sha256_hex(large.as_bytes())).unwrap().is_none(), "no body row");
    // Small files need no R2: still readable and writable.
    assert_eq!(tool(&session, "read", json!({ "path": "/tmp/kept" })).unwrap()["content"], "kept");
}

#[test]
fn sqlite_failing_on_the_index_leaves_it_as_it_was() {
    let session = std::rc::Rc::new(RelaySession::new(TestPlatform::over(Failing::new(Sqlite::new(), &[]))));
    session.open().unwrap();
    let answer = run(session.file_tool(&caller(), "write", &json!({ "path": "/tmp/a", "content": "1" }), CAP, &[]));
    answer.unwrap();
    let before = session.store().workspace_root().unwrap();
    session.platform.sql.failing.borrow_mut().push("INSERT INTO workspace_files");
    let refused = run(session.file_tool(&caller(), "write", &json!({ "path": "/tmp/b", "content": "2" }), CAP, &[]));
    assert_eq!(refused.unwrap_err().name, ErrorName::StorageUnavailable);
    session.platform.sql.failing.borrow_mut().clear();
    assert_eq!(session.store().workspace_root().unwrap(), before, "the body's row alone shows no file");
    let read = run(session.file_tool(&caller(), "read", &json!({ "path": "/tmp/b" }), CAP, &[]));
    assert!(read.unwrap_err().message.starts_with("no file or directory /tmp/b"));
}

/// A change the property test makes: write `body` (an index into a few bodies) at `path`, or remove.
#[derive(Debug, Clone)]
enum Op {
    Write(String, usize),
    Remove(String),
}

fn op() -> impl Strategy<Value = Op> {
    let path = prop::sample::select(vec!["/tmp/a", "/tmp/a/b", "/tmp/b", "/tmp/a/c", "/out/x", "/out/x/y"]);
    prop_oneof![
        3 => (path.clone(), 0usize..4).prop_map(|(p, b)| Op::Write(p.to_owned(), b)),
        1 => path.prop_map(|p| Op::Remove(p.to_owned())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever the changes, the index is what a plain model of files says (a file never below
    /// another, never over the cap), the version counts the changes made, and the root is the
    /// model's.
    #[test]
    fn commits_agree_with_a_model(ops in proptest::collection::vec(op(), 1..30)) {
        let session = session();
        let bodies: Vec<Vec<u8>> = vec![vec![1; 10], vec![2; 30], vec![3; 5000], vec![4; 0]];
        let hashes: Vec<String> = bodies.iter().map(|b| run(session.store_body(&caller(), b.clone())).unwrap()).collect();
        let cap = 6000;
        let mut model: BTreeMap<String, usize> = BTreeMap::new();
        let mut version = 0;
        for op in ops {
            let (change, accepted) = match &op {
                Op::Write(path, b) => {
                    let conflict = model.keys().any(|p| p.starts_with(&format!("{path}/")) || path.starts_with(&format!("{p}/")));
                    let total: usize = model.iter().filter(|(p, _)| *p != path).map(|(_, b)| bodies[*b].len()).sum();
                    let fits = total + bodies[*b].len() <= cap as usize;
                    let change = Change::Write { path: path.clone(), sha256: hashes[*b].clone(), size: bodies[*b].len() as u64 };
                    (change, !conflict && fits)
                }
                Op::Remove(path) => (Change::Remove { path: path.clone() }, model.contains_key(path)),
            };
            let outcome = session.store().commit(&[change], cap, 0).remove(0);
            match (&op, accepted) {
                (Op::Write(path, b), true) => { model.insert(path.clone(), *b); version += 1; }
                (Op::Remove(path), true) => { model.remove(path); version += 1; }
                _ => {}
            }
            if matches!(op, Op::Write(..)) {
                prop_assert_eq!(outcome.is_ok(), accepted, "{:?}", op);
            }
            let expected: Vec<(String, String, u64)> =
                model.iter().map(|(p, b)| (p.clone(), hashes[*b].clone(), bodies[*b].len() as u64)).collect();
            prop_assert_eq!(&listing(&session), &expected);
            let model_root = root(expected.iter().map(|(p, s, n)| (p.as_str(), s.as_str(), *n)));
            prop_assert_eq!(session.store().workspace_root().unwrap(), (version, model_root));
        }
    }
}

fn key() -> SealingKey {
    SealingKey::of(&signer())
}

/// Answers a file tool's call as the DO does (`answer_file`), as run `run`.
fn answer(session: &Session, run_id: &str, tool: Tool, arguments: Value) -> Result<Value, String> {
    let tool_call = tool_call(tool, arguments, Era::Modern, None);
    let Work::File(op) = work_of(&**session, &tool_call) else { panic!("a file tool's call") };
    let call = FileCall { tool_call, caller: caller(), run: run_id.into(), op };
    run(session.answer_file(&call, &key())).map_err(|e| e.0)
}

#[test]
fn file_tools_are_answered_with_no_tab_and_audited_with_the_roots_before_and_after() {
    let session = session();
    let written = answer(&session, "r_w", Tool::Write, json!({ "path": "/tmp/a", "content": "hi" })).unwrap();
    assert_eq!(written["result"]["structuredContent"], json!({ "path": "/tmp/a", "bytesWritten": 2, "size": 2 }));
    let read = answer(&session, "r_r", Tool::Read, json!({ "path": "/tmp/a" })).unwrap();
    assert_eq!(read["result"]["structuredContent"]["content"], "hi");
    let refused = answer(&session, "r_x", Tool::Write, json!({ "path": "/tmp/a", "content": "again" })).unwrap();
    assert_eq!(refused["result"]["isError"], true);
    assert_eq!(refused["result"]["structuredContent"]["error"]["name"], "ValidationError");
    let records = session.store().audit_records(10).unwrap();
    let roots: Vec<(&str, Option<&str>, Option<&str>)> = records
        .iter()
        .map(|r| (r.run_id.as_str(), r.workspace_before.as_deref(), r.workspace_after.as_deref()))
        .collect();
    let one_file = root([("/tmp/a", sha256_hex(b"hi").as_str(), 2)]);
    assert_eq!(
        roots,
        [
            ("r_w", Some(EMPTY_ROOT), Some(one_file.as_str())),
            ("r_r", Some(one_file.as_str()), Some(one_file.as_str())),
            ("r_x", Some(one_file.as_str()), Some(one_file.as_str())),
        ],
        "the roots change exactly when a call wrote"
    );
    assert_eq!(records[0].args["content"]["bytes"], 2, "the content is audited as its size and hash");
    assert_eq!(records[2].error_name.as_deref(), Some("ValidationError"));
    assert!(relay_core::audit::verify(&records, None).is_ok());
}

#[test]
fn a_file_tool_whose_storage_fails_is_a_storage_error_and_still_audited() {
    let session = session();
    session.platform.blobs.failing.set(true);
    let large = "L".repeat(10_000);
    let failed = answer(&session, "r_1", Tool::Write, json!({ "path": "/tmp/big", "content": large })).unwrap_err();
    assert!(failed.contains("the workspace is unchanged"), "{failed}");
    let record = session.store().audit_records(1).unwrap().remove(0);
    assert_eq!(record.error_name.as_deref(), Some("StorageUnavailable"));
    assert_eq!(record.workspace_before, record.workspace_after);
}

/// A relay session with a tab, running run `r_1` (`run_js` with the default policy): the
/// session and the run's capsule hash.
fn running() -> (Session, String) {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&*session, "r_1", tool_call(Tool::RunJs, json!({ "code": "1" }), Era::Modern, None));
    start(&session, &call);
    let Job::Capsule { capsule, .. } = call.job.as_ref() else { panic!("a capsule job") };
    (session, capsule.hash.clone())
}

/// Run `r_1`'s commit of `changes` from its tab, `tab_1`.
fn commit(session: &Session, cap: &str, changes: Value) -> Result<Value, (ErrorName, String)> {
    commit_from(session, Some("tab_1"), cap, changes)
}

fn commit_from(session: &Session, tab: Option<&str>, cap: &str, changes: Value) -> Result<Value, (ErrorName, String)> {
    let body = json!({ "changes": changes }).to_string();
    run(session.commit_run(&caller(), ("r_1", tab), cap, body.as_bytes())).map_err(|e| (e.name, e.message))
}

fn inline(path: &str, bytes: &[u8]) -> Value {
    json!({ "path": path, "sha256": sha256_hex(bytes), "size": bytes.len(), "inline": BASE64.encode(bytes) })
}

#[test]
fn a_commit_of_more_changes_than_the_bound_is_refused_whole() {
    let (session, cap) = running();
    let changes: Vec<Value> = (0..=MAX_COMMIT_CHANGES).map(|i| inline(&format!("/tmp/f{i}"), b"x")).collect();
    let (name, message) = commit(&session, &cap, Value::Array(changes.clone())).unwrap_err();
    assert_eq!(name, ErrorName::PayloadTooLarge);
    assert!(message.contains(&format!("at most {MAX_COMMIT_CHANGES} changes")), "{message}");
    assert_eq!(listing(&session), [], "nothing of it committed");
    assert!(commit(&session, &cap, Value::Array(changes[..MAX_COMMIT_CHANGES].to_vec())).is_ok(), "the bound itself");
}

#[test]
fn a_run_commits_its_writes_in_order_each_on_its_own() {
    let (session, cap) = running();
    let large = vec![9u8; 100_000];
    let sha = sha256_hex(&large);
    let stored = run(session.put_body(&caller(), Some("r_1"), &sha, large.clone())).unwrap();
    assert_eq!(stored, json!({ "sha256": sha, "size": 100_000 }));
    assert_eq!(listing(&session), [], "an uploaded body is not a file until committed");
    let answer = commit(
        &session,
        &cap,
        json!([
            inline("/tmp/a", b"one"),
            { "path": "/tmp/big", "sha256": sha, "size": 100_000 },
            inline("/host/h", b"read-only"),
            { "path": "/tmp/a", "removed": true },
            inline("/out/o", b"kept"),
        ]),
    )
    .unwrap();
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results[0], json!({ "version": 1 }));
    assert_eq!(results[1], json!({ "version": 2 }));
    assert_eq!(results[2]["error"]["name"], "PolicyDenied", "the run's policy: /host is read-only");
    assert_eq!((results[3].clone(), results[4].clone()), (json!({ "version": 3 }), json!({ "version": 4 })));
    let files: Vec<String> = listing(&session).into_iter().map(|f| f.0).collect();
    assert_eq!(files, ["/out/o", "/tmp/big"]);
    assert_eq!(answer["root"], json!(session.store().workspace_root().unwrap().1));
    let read = tool(&session, "read", json!({ "path": "/tmp/big", "encoding": "base64", "maxBytes": 3 })).unwrap();
    assert_eq!(read["content"], "CQkJ", "read with no tab sees what the run wrote");
}

#[test]
fn a_tampered_or_oversized_body_is_refused_and_nothing_is_stored() {
    let (session, cap) = running();
    let claimed = sha256_hex(b"what the tab hashed");
    let puts = session.platform.blobs.puts.get();
    let refusal = run(session.put_body(&caller(), Some("r_1"), &claimed, vec![1; 10_000])).unwrap_err();
    assert_eq!(refusal.name, ErrorName::ValidationError);
    assert_eq!(session.platform.blobs.puts.get(), puts, "no body stored");
    let tampered = json!({ "path": "/tmp/a", "sha256": claimed, "size": 3, "inline": BASE64.encode(b"abc") });
    let answer = commit(&session, &cap, json!([tampered])).unwrap();
    assert_eq!(answer["results"][0]["error"]["name"], "ValidationError");
    assert_eq!(listing(&session), []);
    let mut small = caller();
    small.tenant.defaults.workspace.max_bytes = 1000;
    let too_big = run(session.put_body(&small, Some("r_1"), &sha256_hex(&[0; 2000]), vec![0; 2000])).unwrap_err();
    assert_eq!(too_big.name, ErrorName::PayloadTooLarge);
    let bad = commit(&session, &cap, json!([{ "path": "/tmp/a", "sha256": claimed }])).unwrap();
    assert!(bad["results"][0]["error"]["message"].as_str().unwrap().contains("give {path, sha256, size"));
}

#[test]
fn a_tab_that_no_longer_holds_the_run_writes_nothing_for_it() {
    // tab_0 had run r_1 first and was taken for gone before it acknowledged it: the run went to
    // tab_1 with the same token. What tab_0 still runs of it must not write beside tab_1.
    let (session, cap) = running();
    let stale = commit_from(&session, Some("tab_0"), &cap, json!([inline("/tmp/a", b"stale")])).unwrap_err();
    assert_eq!(stale.0, ErrorName::Conflict);
    assert!(
        stale.1.contains("went to tab tab_1 after tab tab_0 took it") && stale.1.contains("not kept"),
        "{}",
        stale.1
    );
    assert_eq!(listing(&session), [], "nothing of tab_0's landed");
    let long = format!("tab_{}", "9".repeat(5_000));
    let (_, message) = commit_from(&session, Some(&long), &cap, json!([inline("/tmp/a", b"stale")])).unwrap_err();
    assert!(message.contains(&long[..64]) && !message.contains(&long[..65]), "the sender's id, cut: {}", message.len());
    commit(&session, &cap, json!([inline("/tmp/a", b"live")])).expect("tab_1 writes");
    commit_from(&session, None, &cap, json!([inline("/tmp/b", b"no tab named")]))
        .expect("a writer naming no tab (the edge's)");
    assert_eq!(listing(&session).len(), 2);
}

#[test]
fn a_tab_that_no_longer_holds_the_run_neither_sets_its_audited_root_nor_publishes_its_out_files_beside_it() {
    let (session, cap) = running();
    let before = || {
        let rows = session.platform.sql.rows::<Value>("SELECT workspace_before FROM runs WHERE run_id = 'r_1'", &[]);
        rows.unwrap()[0]["workspace_before"].as_str().map(str::to_owned)
    };
    session.workspace_index(None, (Some("r_1"), Some("tab_1")), CAP).unwrap();
    assert_eq!(before().as_deref(), Some(EMPTY_ROOT));
    commit(&session, &cap, json!([inline("/tmp/a", b"live")])).unwrap();
    // tab_0, taken for gone, syncs late: it is answered, but the run's root stays the one its
    // own tab synced to (and so does the version tab_1 is said to hold: relay_session_tab_sync.rs).
    for tab in [Some("tab_0"), None] {
        let index = session.workspace_index(None, (Some("r_1"), tab), CAP).unwrap();
        assert_ne!(index["root"], json!(EMPTY_ROOT), "the index itself is the current one");
        assert_eq!(before().as_deref(), Some(EMPTY_ROOT), "{tab:?} rewrote the run's audited root");
    }

    let reserve = |tab| session.reserve_out_file(("r_1", tab), "/out/a.csv").map_err(|e| (e.name, e.message));
    let stale = reserve(Some("tab_0")).unwrap_err();
    assert_eq!(stale.0, ErrorName::Conflict);
    assert!(stale.1.contains("went to tab tab_1 after tab tab_0 took it"), "{}", stale.1);
    assert_eq!(reserve(Some("tab_1")), Ok(Slot::Take));
    assert_eq!(reserve(None), Ok(Slot::Replace), "a publisher naming no tab is not refused");
}

#[test]
fn nothing_of_a_run_lands_after_it_ended_and_its_audit_has_both_roots() {
    let (session, cap) = running();
    let index = session.workspace_index(None, (Some("r_1"), Some("tab_1")), CAP).unwrap();
    assert_eq!((index["version"].clone(), index["root"].clone()), (json!(0), json!(EMPTY_ROOT)));
    assert_eq!(index["maxBytes"], json!(CAP), "the tab's copy holds to the tenant's cap");
    commit(&session, &cap, json!([inline("/tmp/a", b"before the end")])).unwrap();
    let batch = json!({ "runId": "r_1", "seq": 0, "type": "exit", "exitCode": 0, "usage": { "wallMs": 5 } });
    let events = parse_batch(batch.to_string().as_bytes()).unwrap();
    session.feed(Input::Heard { tab: Some("tab_1".into()), events });
    let late = commit(&session, &cap, json!([inline("/tmp/b", b"after")])).unwrap_err();
    assert_eq!(late.0, ErrorName::Conflict);
    assert!(late.1.contains("has ended") && late.1.contains("is kept"), "{}", late.1);
    assert_eq!(listing(&session).len(), 1, "what it wrote before its end is kept");
    let record = session.store().audit_records(1).unwrap().remove(0);
    assert_eq!(record.workspace_before.as_deref(), Some(EMPTY_ROOT));
    let one = root([("/tmp/a", sha256_hex(b"before the end").as_str(), 14)]);
    assert_eq!(record.workspace_after, Some(one));
}

#[test]
fn a_tab_reads_only_its_relay_sessions_bodies() {
    let session = session();
    write(&session, "/tmp/a", "mine");
    assert_eq!(run(session.workspace_body_bytes(RELAY_SESSION, &sha256_hex(b"mine"))).unwrap(), b"mine");
    let other = run(session.workspace_body_bytes(RELAY_SESSION, &sha256_hex(b"not here"))).unwrap_err();
    assert_eq!(other.name, ErrorName::NotFound);
}

#[test]
fn a_tab_uploads_its_files_from_before_once_and_the_relay_sessions_own_stay() {
    let session = session();
    write(&session, "/tmp/both", "the relay session's");
    let large = vec![5u8; 9000];
    let sha = sha256_hex(&large);
    run(session.put_body(&caller(), None, &sha, large)).unwrap();
    let body = json!({ "changes": [
        inline("/tmp/both", b"the tab's"),
        inline("/tmp/only-tab", b"old"),
        { "path": "/tmp/large-old", "sha256": sha, "size": 9000 },
        inline("/host/h", b"read-only by default"),
        { "path": "/tmp/both", "removed": true },
    ] });
    let answer = run(session.upload_from_tab(&caller(), body.to_string().as_bytes())).unwrap();
    let names: Vec<Value> = answer["results"].as_array().unwrap().iter().map(|r| r["error"]["name"].clone()).collect();
    assert_eq!(names, [json!("Conflict"), Value::Null, Value::Null, json!("PolicyDenied"), json!("Conflict")]);
    assert_eq!(tool(&session, "read", json!({ "path": "/tmp/both" })).unwrap()["content"], "the relay session's");
    let files: Vec<String> = listing(&session).into_iter().map(|f| f.0).collect();
    assert_eq!(files, ["/tmp/both", "/tmp/large-old", "/tmp/only-tab"]);
    // Uploading again changes nothing: every path is the relay session's now.
    let again = run(session.upload_from_tab(&caller(), body.to_string().as_bytes())).unwrap();
    assert_eq!(again["version"], answer["version"]);
}

#[test]
fn read_and_search_see_the_mcps_tree_listed_from_the_upstream_servers() {
    let session = session();
    write(&session, "/tmp/a", "servers here too");
    let index = answer(&session, "r_1", Tool::Read, json!({ "path": "/mcps/index.json" })).unwrap();
    let text = index["result"]["structuredContent"]["content"].as_str().unwrap().to_owned();
    let parsed: Value = serde_json::from_str(&text).expect("the tree's index is JSON");
    assert!(parsed.get("servers").is_some(), "{parsed}");
    let dir = answer(&session, "r_2", Tool::Read, json!({ "path": "/mcps" })).unwrap();
    assert!(dir["result"]["structuredContent"]["content"].as_str().unwrap().contains("index.json"), "{dir}");
    let found = answer(&session, "r_3", Tool::Search, json!({ "pattern": "servers" })).unwrap();
    let paths: Vec<&str> = found["result"]["structuredContent"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.first(), Some(&"/mcps/index.json"), "in path order, the tree's files among the index's");
    assert!(paths.contains(&"/tmp/a"));
    assert!(listing(&session).iter().all(|f| !f.0.starts_with("/mcps")), "the tree is never stored");
}

#[test]
fn old_removals_are_forgotten_and_a_tab_behind_them_gets_the_whole_index() {
    let session = session();
    for i in 0..5 {
        write(&session, &format!("/tmp/f{i}"), "x");
    }
    let held = session.store().workspace_version().unwrap();
    for i in 0..4 {
        session.store().commit(&[Change::Remove { path: format!("/tmp/f{i}") }], CAP, 0);
    }
    let version = session.store().workspace_version().unwrap();
    session.store().prune_removals(2).unwrap();
    assert_eq!(session.store().workspace_version().unwrap(), version, "the version never goes back");
    let behind = session.store().workspace_changes(Some(held)).unwrap();
    assert!(behind.full, "its version is below what is kept of removals");
    assert_eq!(behind.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["/tmp/f4"]);
    let recent = session.store().workspace_changes(Some(version - 2)).unwrap();
    assert!(!recent.full);
    assert_eq!(recent.removed, ["/tmp/f2", "/tmp/f3"]);
    // Pruning every removal still keeps the version: the floor holds it.
    session.store().prune_removals(0).unwrap();
    assert_eq!(session.store().workspace_version().unwrap(), version);
}

#[test]
fn a_write_whose_body_would_pass_the_tenants_stored_bytes_is_refused_and_changes_nothing() {
    let session = session();
    let mut small = caller();
    small.tenant.defaults.quotas.stored_bytes = 1 << 20;
    let write = |path: &str, content: String| {
        let arguments = json!({ "path": path, "content": content });
        run(session.file_tool(&small, "write", &arguments, CAP, &[])).map_err(|r| (r.name, r.message, r.retry_after_s))
    };
    write("/tmp/a", "a".repeat(600_000)).unwrap();
    let (name, message, retry_after) = write("/tmp/b", "b".repeat(600_000)).unwrap_err();
    assert_eq!(name, ErrorName::QuotaExceeded, "{message}");
    // Never measured: the next measurement may come within the hour.
    assert_eq!(retry_after, Some(3600));
    assert!(message.contains("retry in 3600 s"), "{message}");
    // The retry may come before the room: a removed file's body counts until it may be swept
    // (a run's longest life and an hour, `retention::BODY_GRACE_MS`).
    assert!(
        message
            .contains("a removed file's body counts until the first measurement 123 minutes after it was last stored"),
        "{message}"
    );
    assert!(message.contains("defaults.quotas.storedBytes") && message.contains("600000 of 1048576 bytes stored (capsules and their layers, build records, /out files, workspace bodies), which a put of 600000 bytes would pass"), "{message}");
    assert!(tool(&session, "read", json!({ "path": "/tmp/b" })).is_err(), "no file was made");
    assert_eq!(session.platform.blobs.objects.borrow().len(), 1, "nothing more is in R2");
    // A body kept inline (in the relay session's SQLite, not R2) is not charged, nor is a body
    // stored already (the same content again).
    write("/tmp/small", "s".repeat(INLINE_MAX_BYTES as usize)).unwrap();
    write("/tmp/a2", "a".repeat(600_000)).unwrap();
    // A put through the tab's route is refused alike (413 is for the workspace's own cap).
    let large = vec![7; 600_000];
    let refused = run(session.put_body(&small, None, &sha256_hex(&large), large)).unwrap_err();
    assert_eq!(
        (refused.name, refused.retry_after_s),
        (ErrorName::QuotaExceeded, Some(3600)),
        "the route's 429 says when"
    );
    assert_eq!(
        session.platform.store_hops.get(),
        3,
        "one charge per body new to R2, none for one kept inline or stored"
    );
}

#[test]
fn a_body_whose_put_fails_gives_its_charge_back() {
    let session = session();
    let body = "f".repeat(600_000);
    session.platform.blobs.failing.set(true);
    let (name, _) = tool(&session, "write", json!({ "path": "/tmp/f", "content": body })).unwrap_err();
    assert_eq!(name, ErrorName::StorageUnavailable);
    assert_eq!(session.platform.stored_used(), 0, "the failed put's bytes came back");
    // Retried once R2 answers: charged once, for the one put made.
    session.platform.blobs.failing.set(false);
    tool(&session, "write", json!({ "path": "/tmp/f", "content": body })).unwrap();
    assert_eq!(session.platform.stored_used(), 600_000);
}
