//! The relay session's storage decisions (`relay_session::store`) on real SQLite: the
//! migrations as an upgrade of a relay session that has data, admitting and finishing runs with
//! their chained audit records, denials and upstream calls on the chain, the metrics, legacy
//! resumption, tasks, the count of a run's `/out` files, legacy MCP sessions, and storage that
//! fails loudly.

mod support;

use relay_core::audit::{self, Kind, Scope};
use relay_core::files::{Slot, MAX_FILES_PER_RUN};
use relay_core::mcp::tasks::{TaskRecord, TASK_TTL_MS};
use relay_core::mcp::{SessionStatus, SessionStore};
use relay_core::relay_session::{McpSessions, Queued, Sql, Store, MIGRATIONS};
use relay_core::run::backchannel::{Exit, RunError, Usage};
use relay_core::run::machine::Outcome;
use serde::Deserialize;
use serde_json::{json, Value};
use support::{Failing, Sqlite};

fn migrated() -> Sqlite {
    let db = Sqlite::new();
    Store::new(&db).migrate().expect("the migrations apply to an empty database");
    db
}

fn queued<'a>(run_id: &'a str, args: &'a Value, request_id: &'a Value) -> Queued<'a> {
    Queued {
        run_id,
        tool: "run_js",
        capsule_hash: "cafe",
        mcp_session: Some("mcp_1"),
        request_id,
        tenant: "t_1",
        relay_session: "default",
        args,
    }
}

fn outcome(exit_code: i32, error: Option<(&str, &str)>, stdout: &str, by_relay: bool) -> Outcome {
    let error = error.map(|(name, message)| RunError { name: name.into(), message: message.into() });
    let usage = Usage { wall_ms: 40, ..Usage::default() };
    let exit = Exit { exit_code, usage, error, files: Vec::new(), displays: Vec::new() };
    Outcome {
        exit,
        stdout: stdout.into(),
        stderr: String::new(),
        by_relay,
        context: None,
        executor: Some("tab"),
        edge_ms: 0,
    }
}

/// Runs migrations `1..=n` the way `migrate` does, so a test can stop half way.
fn migrate_to(db: &Sqlite, n: usize) {
    db.script("CREATE TABLE schema_version (version INTEGER NOT NULL)").unwrap();
    for (i, migration) in MIGRATIONS.iter().enumerate().take(n) {
        db.script(migration).unwrap();
        db.exec("INSERT INTO schema_version (version) VALUES (?)", &[(i as i64 + 1).into()]).unwrap();
    }
}

#[derive(Debug, Deserialize, PartialEq)]
struct Count {
    n: i64,
}

fn count(db: &Sqlite, table: &str) -> i64 {
    db.rows::<Count>(&format!("SELECT COUNT(*) AS n FROM {table}"), &[]).unwrap()[0].n
}

#[test]
fn a_relay_session_at_migration_0001_with_data_upgrades_to_the_latest_and_keeps_every_row() {
    let db = Sqlite::new();
    migrate_to(&db, 1);
    // Rows in every table 0001 has: a legacy MCP session, a finished run, one still in flight.
    db.script(
        "INSERT INTO mcp_sessions (id, protocol_version, created_ms, ended_ms) VALUES ('mcp_old', '2025-06-18', 1000, NULL);
         INSERT INTO runs (run_id, tool, capsule_hash, queued_ms, finished_ms, exit_code, error_name, wall_ms, stdout_bytes, stdout_sha256, stderr_bytes, stderr_sha256)
           VALUES ('r_done', 'run_py', 'beef', 1000, 2000, 0, NULL, 500, 3, 'aa', 0, 'bb');
         INSERT INTO runs (run_id, tool, capsule_hash, queued_ms) VALUES ('r_open', 'run_js', 'cafe', 1500);",
    )
    .unwrap();
    let store = Store::new(&db);
    store.migrate().unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
    assert_eq!(count(&db, "mcp_sessions"), 1);
    assert_eq!(count(&db, "runs"), 2);
    let sessions = McpSessions { sql: &db, now_ms: 3000, failed: None };
    assert_eq!(sessions.status("mcp_old"), SessionStatus::Active, "the legacy session still serves");
    // The run cut off by the upgrade's restart is closed and sealed with what 0001 kept.
    let sealed = store.close_unfinished(3000).unwrap();
    assert_eq!(sealed.len(), 1);
    let record = &sealed[0];
    assert_eq!((record.run_id.as_str(), record.tool.as_str(), record.seq), ("r_open", "run_js", 0));
    assert_eq!((record.tenant.as_str(), record.relay_session.as_str(), &record.args), ("", "", &Value::Null));
    assert_eq!(record.error_name.as_deref(), Some("Internal"));
    // The finished run keeps its columns; the new ones are empty.
    #[derive(Deserialize)]
    struct Old {
        wall_ms: i64,
        stdout_sha256: String,
        error_message: Option<String>,
        tenant: Option<String>,
    }
    let old =
        db.rows::<Old>("SELECT wall_ms, stdout_sha256, error_message, tenant FROM runs WHERE run_id = 'r_done'", &[]);
    let old = old.unwrap().remove(0);
    assert_eq!((old.wall_ms, old.stdout_sha256.as_str(), old.error_message, old.tenant), (500, "aa", None, None));
    assert_eq!(store.metrics().unwrap().runs.get("js|Internal"), Some(&1));
    // Migrating again changes nothing.
    store.migrate().unwrap();
    assert_eq!((count(&db, "runs"), count(&db, "audit")), (2, 1));
}

#[test]
fn every_table_filled_as_it_appears_survives_each_later_migration() {
    let db = Sqlite::new();
    let fill = [
        "INSERT INTO mcp_sessions (id, protocol_version, created_ms) VALUES ('mcp_1', '2025-11-25', 1)",
        "UPDATE runs SET error_message = 'kept', mcp_session = 'mcp_1', request_id = '7'",
        "INSERT INTO audit (seq, record, chain) VALUES (0, '{}', 'c0')",
        "INSERT INTO tasks (task_id, created_ms, record) VALUES ('task_1', 1, '{}')",
        "INSERT INTO metrics (id, snapshot) VALUES (1, '{\"runs\": {\"js|ok\": 4}}')",
        "INSERT INTO out_files (run, path, reserved_ms) VALUES ('r_1', '/out/a', 1)",
    ];
    migrate_to(&db, 1);
    db.exec("INSERT INTO runs (run_id, tool, capsule_hash, queued_ms) VALUES ('r_1', 'run_js', 'cafe', 1)", &[])
        .unwrap();
    for (version, statement) in fill.iter().enumerate() {
        db.script(statement).unwrap();
        if version + 1 < MIGRATIONS.len() {
            db.script(MIGRATIONS[version + 1]).unwrap();
            db.exec("INSERT INTO schema_version (version) VALUES (?)", &[(version as i64 + 2).into()]).unwrap();
        }
    }
    let store = Store::new(&db);
    store.migrate().unwrap();
    for table in ["mcp_sessions", "runs", "audit", "tasks", "metrics", "out_files"] {
        assert_eq!(count(&db, table), 1, "{table}");
    }
    assert_eq!(store.ended_run("r_1", "mcp_1").unwrap().map(|e| e.error_message), None, "r_1 never finished");
    assert_eq!(store.metrics().unwrap().runs.get("js|ok"), Some(&4));
}

#[test]
fn a_migration_that_fails_is_an_error_naming_it_and_the_schema_stays_where_it_was() {
    let db = Sqlite::new();
    migrate_to(&db, 3);
    let failing = Failing::new(db, &["CREATE TABLE tasks"]);
    let store = Store::new(&failing);
    let error = store.migrate().unwrap_err();
    assert!(error.0.starts_with("migration 4: "), "{error}");
    assert_eq!(store.schema_version().unwrap(), 3);
    failing.failing.borrow_mut().clear();
    store.migrate().unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
}

#[test]
fn a_run_admitted_and_finished_leaves_one_sealed_record_with_hashes_and_counts_in_the_metrics() {
    let db = migrated();
    let store = Store::new(&db);
    let (args, id) = (json!({"code": "***"}), json!(7));
    store.audit_queued(&queued("r_1", &args, &id), 1_000).unwrap();
    let record = store.audit_finished("r_1", &outcome(0, None, "hello\n", false), 2_000).unwrap().unwrap();
    assert_eq!(
        (record.kind, record.tool.as_str(), record.exit_code, record.ts_ms),
        (Kind::ToolCall, "run_js", Some(0), 2_000)
    );
    assert_eq!((record.tenant.as_str(), record.relay_session.as_str(), &record.args), ("t_1", "default", &args));
    assert_eq!(record.stdout_bytes, 6);
    assert_eq!(record.stdout_sha256, relay_core::capsule::canonical::sha256_hex(b"hello\n"));
    let metrics = store.metrics().unwrap();
    assert_eq!(metrics.runs.get("js|ok"), Some(&1));
    assert_eq!((metrics.queue_wait_ms.sum, metrics.run_ms.sum), (960, 40), "admission to end less the run's own time");
    let records = store.audit_records(100).unwrap();
    assert_eq!(records, vec![record]);
    audit::verify(&records, None).expect("the chain verifies");
}

#[test]
fn only_the_relays_own_error_message_is_kept_and_a_legacy_client_finds_its_ended_run() {
    let db = migrated();
    let store = Store::new(&db);
    let (args, id) = (json!({}), json!("req-1"));
    store.audit_queued(&queued("r_tab", &args, &id), 1).unwrap();
    store.audit_queued(&queued("r_relay", &args, &id), 1).unwrap();
    store.audit_finished("r_tab", &outcome(1, Some(("Internal", "quotes the output: secret")), "", false), 2).unwrap();
    store.audit_finished("r_relay", &outcome(124, Some(("Timeout", "over 60000 ms")), "", true), 2).unwrap();
    let tab = store.ended_run("r_tab", "mcp_1").unwrap().unwrap();
    assert_eq!((tab.error_name.as_deref(), tab.error_message), (Some("Internal"), None));
    let relay = store.ended_run("r_relay", "mcp_1").unwrap().unwrap();
    assert_eq!((relay.request_id.as_str(), relay.exit_code), ("\"req-1\"", Some(124)));
    assert_eq!(relay.error_message.as_deref(), Some("over 60000 ms"));
    assert!(store.ended_run("r_relay", "mcp_other").unwrap().is_none(), "another MCP session's run");
    store.audit_queued(&queued("r_open", &args, &id), 3).unwrap();
    assert!(store.ended_run("r_open", "mcp_1").unwrap().is_none(), "a run in flight has not ended");
}

#[test]
fn a_refused_run_leaves_no_row_and_a_build_names_its_capsule_later() {
    let db = migrated();
    let store = Store::new(&db);
    let (args, id) = (json!({}), json!(1));
    store.audit_queued(&queued("r_refused", &args, &id), 1).unwrap();
    store.forget_run("r_refused").unwrap();
    assert_eq!(count(&db, "runs"), 0);
    store.audit_queued(&Queued { capsule_hash: "build:k", ..queued("r_built", &args, &id) }, 1).unwrap();
    store.audit_capsule("r_built", "f00d").unwrap();
    let runs = store.recent_runs(10);
    assert_eq!(runs[0]["capsuleHash"], "f00d");
}

#[test]
fn recent_runs_are_newest_first_even_when_admitted_in_the_same_millisecond() {
    let db = migrated();
    let store = Store::new(&db);
    let (args, id) = (json!({}), json!(1));
    for run in ["r_b", "r_c", "r_a"] {
        store.audit_queued(&queued(run, &args, &id), 7).unwrap();
    }
    store.audit_queued(&queued("r_0", &args, &id), 6).unwrap();
    let order: Vec<_> = store.recent_runs(10).as_array().unwrap().iter().map(|r| r["runId"].clone()).collect();
    assert_eq!(order, ["r_a", "r_c", "r_b", "r_0"]);
}

#[test]
fn denials_and_upstream_calls_join_the_same_chain_in_the_runs_tenant() {
    let db = migrated();
    let store = Store::new(&db);
    let (args, id) = (json!({}), json!(1));
    store.audit_queued(&queued("r_1", &args, &id), 1).unwrap();
    let denial = store.audit_denial("r_1", ["fetch", "https://evil.example/", "not allowed"], 5).unwrap().unwrap();
    assert_eq!((denial.kind, denial.tool.as_str(), denial.tenant.as_str()), (Kind::PolicyDenial, "fetch", "t_1"));
    assert!(store.audit_denial("r_unknown", ["fetch", "x", "y"], 5).unwrap().is_none(), "no run, no record");
    let scope = Scope { ts_ms: 6, tenant: "t_1".into(), relay_session: "default".into(), run_id: "r_1".into() };
    let call = store.append_record(scope.upstream_call("srv/tool", &json!({}), 3, Ok(b"{}"))).unwrap();
    assert_eq!((call.seq, call.prev.as_str()), (1, denial.chain.as_str()));
    store.audit_finished("r_1", &outcome(0, None, "", false), 7).unwrap();
    let records = store.audit_records(100).unwrap();
    assert_eq!(
        records.iter().map(|r| r.kind).collect::<Vec<_>>(),
        [Kind::PolicyDenial, Kind::UpstreamCall, Kind::ToolCall]
    );
    audit::verify(&records, None).unwrap();
    assert_eq!(store.metrics().unwrap().denials.get("fetch"), Some(&1));
}

#[test]
fn a_failed_audit_append_is_an_error_for_the_caller_never_dropped() {
    let db = migrated();
    let (args, id) = (json!({}), json!(1));
    Store::new(&db).audit_queued(&queued("r_1", &args, &id), 1).unwrap();
    let failing = Failing::new(db, &["INSERT INTO audit"]);
    let store = Store::new(&failing);
    let error = store.audit_finished("r_1", &outcome(0, None, "", false), 2).unwrap_err();
    assert!(error.0.contains("storage unavailable"), "{error}");
    let error = store.audit_denial("r_1", ["fetch", "x", "y"], 3).unwrap_err();
    assert!(error.0.contains("storage unavailable"), "{error}");
    assert!(store.audit_records(10).unwrap().is_empty());
}

#[test]
fn a_run_publishes_at_most_its_share_of_out_files_replacing_and_releasing_slots() {
    let db = migrated();
    let store = Store::new(&db);
    for i in 0..MAX_FILES_PER_RUN {
        assert_eq!(store.reserve_out_file("r_1", &format!("/out/{i}"), 10).unwrap(), Slot::Take);
    }
    assert_eq!(store.reserve_out_file("r_1", "/out/0", 10).unwrap(), Slot::Replace, "a path published again");
    assert_eq!(store.reserve_out_file("r_1", "/out/extra", 10).unwrap(), Slot::Full);
    assert_eq!(store.reserve_out_file("r_2", "/out/extra", 10).unwrap(), Slot::Take, "another run's count");
    store.release_out_file("r_1", "/out/0").unwrap();
    assert_eq!(store.reserve_out_file("r_1", "/out/extra", 10).unwrap(), Slot::Take, "a released slot is free");
    let a_day_later = 10 + 24 * 60 * 60 * 1000 + 1;
    assert_eq!(
        store.reserve_out_file("r_1", "/out/late", a_day_later).unwrap(),
        Slot::Take,
        "stale slots are forgotten"
    );
}

#[test]
fn a_task_is_kept_until_its_ttl_and_its_end_replaces_it() {
    let db = migrated();
    let store = Store::new(&db);
    let task = TaskRecord::working("task_1", "r_1", 1_000);
    store.save_task(&task).unwrap();
    assert_eq!(store.task("task_1", 2_000).unwrap(), Some(task.clone()));
    let ended = task.ended(&json!({"result": {}}), false, 3_000);
    store.save_task(&ended).unwrap();
    assert_eq!(store.task("task_1", 4_000).unwrap(), Some(ended));
    assert_eq!(store.task("task_1", 1_000 + TASK_TTL_MS).unwrap(), None, "past its TTL");
    assert_eq!(store.task("task_other", 4_000).unwrap(), None);
}

#[test]
fn legacy_mcp_sessions_open_end_and_report_a_failed_write() {
    let db = migrated();
    let mut sessions = McpSessions { sql: &db, now_ms: 50, failed: None };
    assert_eq!(sessions.status("mcp_1"), SessionStatus::Unknown);
    sessions.create("mcp_1", "2025-11-25", 10);
    assert_eq!(sessions.status("mcp_1"), SessionStatus::Active);
    sessions.end("mcp_1");
    assert_eq!(sessions.status("mcp_1"), SessionStatus::Ended);
    assert!(sessions.failed.is_none());
    let failing = Failing::new(db, &["INSERT OR REPLACE INTO mcp_sessions"]);
    let mut sessions = McpSessions { sql: &failing, now_ms: 60, failed: None };
    sessions.create("mcp_2", "2025-11-25", 60);
    assert!(sessions.failed.as_ref().is_some_and(|e| e.0.contains("storage unavailable")));
}
