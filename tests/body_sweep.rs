//! The retention sweep of a relay session's workspace bodies (`relay_session::body_sweep`, the
//! rule `retention::body_expired`), on the test platform: a body no file names goes once its
//! grace is over (from R2 and its row), never a body a file names, one uploaded and not yet
//! committed within its grace, one stored again since, a key of another shape, nor another
//! relay session's; every file reads whole after any sweep.

// Each test crate uses part of the test backends.
#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use futures::channel::oneshot;
use futures::executor::LocalPool;
use futures::future::{FutureExt, Shared};
use futures::task::LocalSpawnExt;
use platform::{caller, run, session, Session, LIST_PAGE};
use proptest::prelude::*;
use relay_core::capsule::canonical::sha256_hex;
use relay_core::keys;
use relay_core::relay_session::Sql;
use relay_core::retention::{body_expired, BodyFacts, Sweep, BODY_GRACE_MS, RUN_END_AFTER_UPLOAD_S};
use relay_core::workspace::{Change, INLINE_MAX_BYTES};
use serde_json::{json, Value};

const RELAY_SESSION: &str = "t_1/default";
const CAP: u64 = 64 * 1024 * 1024;

/// A body too large to be kept inline, different for each `seed`.
fn large(seed: &str) -> String {
    seed.repeat(1 + INLINE_MAX_BYTES as usize / seed.len())
}

fn write(session: &Session, path: &str, content: &str) {
    let arguments = json!({ "path": path, "content": content, "mode": "overwrite" });
    run(session.file_tool(&caller(), "write", &arguments, CAP, &[])).expect("written");
}

fn read(session: &Session, path: &str) -> Value {
    let arguments = json!({ "path": path, "maxBytes": 100_000 });
    run(session.file_tool(&caller(), "read", &arguments, CAP, &[])).expect("read")
}

fn remove(session: &Session, path: &str) {
    let outcome = session.store().commit(&[Change::Remove { path: path.into() }], CAP, session.now_ms()).remove(0);
    outcome.expect("removed");
}

fn sweep(session: &Session, as_of: u64) -> Sweep {
    run(session.sweep_bodies(RELAY_SESSION, as_of)).expect("swept")
}

fn in_r2(session: &Session, content: &str) -> bool {
    session
        .platform
        .blobs
        .objects
        .borrow()
        .contains_key(&keys::workspace_body(RELAY_SESSION, &sha256_hex(content.as_bytes())))
}

fn rows(session: &Session) -> usize {
    session.platform.sql.rows::<Value>("SELECT sha256 FROM workspace_bodies", &[]).unwrap().len()
}

#[test]
fn a_body_no_file_names_goes_after_its_grace_and_a_named_one_stays_readable() {
    let session = session();
    let (kept, replaced, small) = (large("kept"), large("replaced"), "small and inline");
    write(&session, "/tmp/kept", &kept);
    write(&session, "/tmp/file", &replaced);
    write(&session, "/tmp/file", "now something else, inline");
    write(&session, "/tmp/small", small);
    remove(&session, "/tmp/small");
    let written = session.now_ms();
    assert_eq!(rows(&session), 4);

    let early = sweep(&session, written + BODY_GRACE_MS - 1);
    assert_eq!((early.deleted, early.kept), (0, 2), "the 2 in R2 stay (and the inline rows): {early:?}");
    let swept = sweep(&session, written + BODY_GRACE_MS);
    let judged = (swept.deleted, swept.kept);
    assert_eq!(judged, (2, 2), "the replaced body in R2 and the removed inline one; 1 in R2, 1 inline: {swept:?}");
    assert_eq!(swept.deleted_by_tenant["t_1"], 2);
    assert!(!in_r2(&session, &replaced) && in_r2(&session, &kept));
    assert_eq!(rows(&session), 2, "their rows went with them");
    assert!(read(&session, "/tmp/kept")["content"].as_str().unwrap().starts_with("keptkept"));
    assert_eq!(read(&session, "/tmp/file")["content"], "now something else, inline");
    // Written again, the deleted body is stored again and reads whole.
    write(&session, "/tmp/again", &replaced);
    assert!(in_r2(&session, &replaced));
    assert_eq!(read(&session, "/tmp/again")["content"].as_str().unwrap().len(), replaced.len());
}

#[test]
fn a_body_uploaded_before_its_commit_stays_its_grace_and_storing_it_again_renews_it() {
    let session = session();
    let body = large("uploaded");
    let sha = run(session.store_body(&caller(), body.as_bytes().to_vec())).unwrap();
    let uploaded = session.now_ms();
    assert_eq!(sweep(&session, uploaded + BODY_GRACE_MS - 1).deleted, 0, "uploaded, not yet committed: stays");
    // A run's longest life later the tab uploads it again (it is there: only noted) and commits.
    session.platform.advance(RUN_END_AFTER_UPLOAD_S * 1000);
    run(session.store_body(&caller(), body.as_bytes().to_vec())).unwrap();
    let puts = session.platform.blobs.puts.get();
    assert_eq!(sweep(&session, uploaded + BODY_GRACE_MS).deleted, 0, "stored again: its grace starts over");
    assert_eq!(session.platform.blobs.puts.get(), puts);
    let change = Change::Write { path: "/tmp/late".into(), sha256: sha, size: body.len() as u64 };
    session.store().commit(&[change], CAP, session.now_ms()).remove(0).expect("the commit finds its body");
    assert_eq!(sweep(&session, u64::MAX / 2).deleted, 0, "named: never deleted");
    assert_eq!(read(&session, "/tmp/late")["content"].as_str().unwrap().len(), body.len());
}

#[test]
fn a_sweep_crosses_pages_and_leaves_keys_of_another_shape_and_other_relay_sessions() {
    let session = session();
    for i in 0..(2 * LIST_PAGE + 1) {
        let _ = run(session.store_body(&caller(), large(&format!("orphan {i} ")).into_bytes())).unwrap();
    }
    let odd = format!("{}not-a-sha256", keys::workspace_body(RELAY_SESSION, ""));
    let other = keys::workspace_body("t_1/other", &"ab".repeat(32));
    let legacy = keys::tenant_workspace_body("t_1", &"cd".repeat(32));
    for key in [&odd, &other, &legacy] {
        session.platform.blobs.objects.borrow_mut().insert(key.clone(), b"x".to_vec());
    }
    let swept = sweep(&session, session.now_ms() + BODY_GRACE_MS);
    assert_eq!((swept.deleted, swept.kept), (2 * LIST_PAGE as u64 + 1, 1), "{swept:?}");
    let left: Vec<String> = session.platform.blobs.objects.borrow().keys().cloned().collect();
    assert_eq!(left, [legacy, odd, other], "only this relay session's bodies are judged");
    assert_eq!(rows(&session), 0);
}

#[test]
fn a_body_stored_before_bodies_were_per_relay_session_is_read_and_its_row_forgotten_not_its_object() {
    let session = session();
    let body = large("legacy");
    let sha = sha256_hex(body.as_bytes());
    let legacy = keys::tenant_workspace_body("t_1", &sha);
    session.platform.blobs.objects.borrow_mut().insert(legacy.clone(), body.clone().into_bytes());
    let row = "INSERT INTO workspace_bodies (sha256, size, inline) VALUES (?, ?, NULL)";
    session.platform.sql.exec(row, &[sha.as_str().into(), (body.len() as u64).into()]).unwrap();
    let change = Change::Write { path: "/tmp/old".into(), sha256: sha.clone(), size: body.len() as u64 };
    session.store().commit(&[change], CAP, session.now_ms()).remove(0).unwrap();
    assert_eq!(read(&session, "/tmp/old")["content"].as_str().unwrap().len(), body.len(), "read from the tenant's key");
    assert_eq!(sweep(&session, u64::MAX / 2).deleted, 0);
    remove(&session, "/tmp/old");
    assert_eq!(sweep(&session, session.now_ms() + 1).deleted, 1, "its row, stored before the migration (0), goes");
    assert_eq!(rows(&session), 0);
    assert!(session.platform.blobs.objects.borrow().contains_key(&legacy), "the object may be another relay session's");
}

#[test]
fn the_rule_keeps_what_is_named_uploading_recent_or_nowhere() {
    let as_of = 10 * BODY_GRACE_MS;
    let old = Some(as_of - BODY_GRACE_MS);
    let facts = BodyFacts { named: false, uploading: false, uploaded_ms: old, row_stored_ms: old };
    assert!(body_expired(facts, as_of));
    assert!(!body_expired(BodyFacts { named: true, ..facts }, as_of));
    assert!(!body_expired(BodyFacts { uploading: true, ..facts }, as_of));
    assert!(!body_expired(BodyFacts { uploaded_ms: Some(as_of - BODY_GRACE_MS + 1), ..facts }, as_of));
    assert!(!body_expired(BodyFacts { row_stored_ms: Some(as_of - BODY_GRACE_MS + 1), ..facts }, as_of));
    assert!(!body_expired(BodyFacts { uploaded_ms: Some(as_of + 5), ..facts }, as_of), "a clock ahead keeps it");
    assert!(body_expired(BodyFacts { row_stored_ms: None, ..facts }, as_of), "an object with no row");
    assert!(body_expired(BodyFacts { uploaded_ms: None, ..facts }, as_of), "a row with no object");
    assert!(!body_expired(BodyFacts { uploaded_ms: None, row_stored_ms: None, ..facts }, as_of));
    assert_eq!(BODY_GRACE_MS, (RUN_END_AFTER_UPLOAD_S + 3600) * 1000, "a run's life and an hour");
}

proptest! {
    /// Whatever is written, replaced, removed and uploaded when, and whenever the sweep runs,
    /// every file reads back whole after it, and nothing stored within the grace is gone.
    #[test]
    fn after_any_sweep_every_file_reads_whole(
        steps in prop::collection::vec((0u8..4, 0usize..4, 0usize..6, 0u64..BODY_GRACE_MS), 1..24),
        sweep_after in 0u64..3 * BODY_GRACE_MS,
    ) {
        let session = session();
        let mut uploads = Vec::new();
        for (kind, path, content, wait) in steps {
            session.platform.advance(wait);
            let (path, content) = (format!("/tmp/{path}"), large(&format!("c{content} ")));
            match kind {
                0 | 1 => write(&session, &path, &content),
                2 if session.store().workspace_file(&path).unwrap().is_some() => remove(&session, &path),
                _ => uploads.push((run(session.store_body(&caller(), content.into_bytes())).unwrap(), session.now_ms())),
            }
        }
        let as_of = session.now_ms() + sweep_after;
        sweep(&session, as_of);
        for file in session.store().workspace_files().unwrap() {
            let content = read(&session, &file.path)["content"].as_str().unwrap().len() as u64;
            prop_assert_eq!(content, file.size, "{} reads whole", file.path);
        }
        for (sha, at) in uploads {
            if as_of < at + BODY_GRACE_MS {
                prop_assert!(session.store().workspace_body(&sha).unwrap().is_some(), "an upload within its grace stays");
            }
        }
    }
}

/// Holds what waits on `slot` until the returned sender is dropped.
fn hold(slot: &std::cell::RefCell<Option<Shared<oneshot::Receiver<()>>>>) -> oneshot::Sender<()> {
    let (release, held) = oneshot::channel();
    *slot.borrow_mut() = Some(held.shared());
    release
}

/// Holds R2's puts and deletes until the returned sender is dropped.
fn hold_r2(session: &Session) -> oneshot::Sender<()> {
    hold(&session.platform.blobs.hold)
}

#[test]
fn a_store_of_a_body_being_deleted_waits_for_the_deletion_and_then_uploads_it_again() {
    let session = session();
    let body = large("deleted, then wanted again");
    write(&session, "/tmp/a", &body);
    remove(&session, "/tmp/a");
    let mut pool = LocalPool::new();
    let release = hold_r2(&session);
    let (sweeper, writer) = (session.clone(), session.clone());
    let as_of = session.now_ms() + BODY_GRACE_MS;
    pool.spawner()
        .spawn_local(async move { sweeper.sweep_bodies(RELAY_SESSION, as_of).await.map(drop).unwrap() })
        .unwrap();
    pool.run_until_stalled(); // the sweep decided, dropped the row, and waits on R2's delete
    assert_eq!(rows(&session), 0);
    let puts = session.platform.blobs.puts.get();
    let bytes = body.clone().into_bytes();
    pool.spawner().spawn_local(async move { writer.store_body(&caller(), bytes).await.map(drop).unwrap() }).unwrap();
    pool.run_until_stalled();
    assert_eq!(session.platform.blobs.puts.get(), puts, "the store waits for the deletion before uploading");
    *session.platform.blobs.hold.borrow_mut() = None;
    drop(release);
    pool.run();
    assert!(in_r2(&session, &body), "uploaded after the deletion: the body is there");
    assert_eq!(rows(&session), 1);
    write(&session, "/tmp/b", &body);
    assert_eq!(read(&session, "/tmp/b")["content"].as_str().unwrap().len(), body.len());
}

#[test]
fn a_body_whose_upload_is_under_way_is_kept_by_a_sweep_that_lists_it() {
    let session = session();
    let body = large("on its way");
    let mut pool = LocalPool::new();
    let release = hold_r2(&session);
    let writer = session.clone();
    let bytes = body.clone().into_bytes();
    pool.spawner().spawn_local(async move { writer.store_body(&caller(), bytes).await.map(drop).unwrap() }).unwrap();
    pool.run_until_stalled(); // in R2, its row not yet written
    assert!(in_r2(&session, &body) && rows(&session) == 0);
    *session.platform.blobs.hold.borrow_mut() = None;
    let swept = sweep(&session, session.now_ms() + 10 * BODY_GRACE_MS);
    assert_eq!((swept.deleted, swept.kept), (0, 1), "an upload under way is kept: {swept:?}");
    drop(release);
    pool.run();
    assert_eq!(rows(&session), 1);
    assert!(in_r2(&session, &body));
}

/// Holds the ledger's charges of stored bytes until the returned sender is dropped.
fn hold_ledger(session: &Session) -> oneshot::Sender<()> {
    hold(&session.platform.charge_hold)
}

#[test]
fn a_body_whose_charge_is_under_way_is_kept_by_a_sweep_and_its_commit_finds_it() {
    let session = session();
    let body = large("in R2 with no row, stored again");
    write(&session, "/tmp/a", &body);
    remove(&session, "/tmp/a");
    // A put whose row was never written (the instance went away between them): R2 holds the
    // body and nothing names it, so a store of it is a new one, charged first.
    session.platform.sql.exec("DELETE FROM workspace_bodies", &[]).unwrap();
    let mut pool = LocalPool::new();
    let release_ledger = hold_ledger(&session);
    let (sweeper, writer) = (session.clone(), session.clone());
    let bytes = body.clone().into_bytes();
    let sha = std::rc::Rc::new(std::cell::RefCell::new(None));
    let stored = sha.clone();
    pool.spawner()
        .spawn_local(async move { *stored.borrow_mut() = Some(writer.store_body(&caller(), bytes).await.unwrap()) })
        .unwrap();
    pool.run_until_stalled(); // the store waits on the ledger's answer
    let release_r2 = hold_r2(&session);
    let as_of = session.now_ms() + 10 * BODY_GRACE_MS;
    let swept = std::rc::Rc::new(std::cell::RefCell::new(None));
    let seen = swept.clone();
    pool.spawner()
        .spawn_local(
            async move { *seen.borrow_mut() = Some(sweeper.sweep_bodies(RELAY_SESSION, as_of).await.unwrap()) },
        )
        .unwrap();
    pool.run_until_stalled(); // the sweep judged the page (and waits on R2 if it deletes)
    *session.platform.charge_hold.borrow_mut() = None;
    drop(release_ledger);
    pool.run_until_stalled(); // charged: the store puts the body (held by R2)
    *session.platform.blobs.hold.borrow_mut() = None;
    drop(release_r2);
    pool.run();
    let swept = swept.borrow_mut().take().expect("the sweep ended");
    assert_eq!(swept.deleted, 0, "a body being stored (its charge under way) is kept: {swept:?}");
    let sha = sha.borrow_mut().take().expect("stored");
    let change = Change::Write { path: "/tmp/b".into(), sha256: sha, size: body.len() as u64 };
    session.store().commit(&[change], CAP, session.now_ms()).remove(0).expect("the commit finds its body");
    assert!(in_r2(&session, &body), "the body the commit names is in R2");
    assert_eq!(read(&session, "/tmp/b")["content"].as_str().unwrap().len(), body.len());
}
