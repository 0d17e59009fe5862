//! The runs desk and a run's way from `tools/call` to its answer (`relay_session::{desk,
//! runs}`), on the test platform (`support/platform.rs`: SQLite in memory, R2 in memory, tabs
//! that record what they were sent): admission with its audit row, a run's end sealed onto the
//! chain and delivered once, policy denials, lost tabs, cancellation, tasks, legacy resumption,
//! a restart, and storage that fails.

// Each test crate uses part of the test backends.
#[allow(dead_code)]
#[path = "support/platform.rs"]
mod platform;
#[allow(dead_code)]
mod support;

use std::rc::Rc;

use platform::{call_of, caller, run, session, signer, start, tool_call, with_tabs, Session, Stream, TestPlatform};
use relay_core::audit::{self, Kind};
use relay_core::auth::QueueSettings;
use relay_core::capsule::jws::Signer;
use relay_core::mcp::tasks::{TaskRecord, TaskStatus};
use relay_core::mcp::{Era, Tool};
use relay_core::metrics::Wake;
use relay_core::quota::{answer, run_lease, Charge, LedgerRequest};
use relay_core::relay_session::desk::{Unadmitted, ANSWERS_KEPT};
use relay_core::relay_session::runs::{
    prepare, start_task, Answer, Call, CancelOnDrop, Job, Resumed, UnchargeOnDrop, Work,
};
use relay_core::relay_session::{RelaySession, Sql};
use relay_core::run::backchannel::parse_batch;
use relay_core::run::machine::{run_life_ms, Input};
use relay_core::stores;
use serde_json::{json, Value};
use support::{Failing, Sqlite};

fn js(code: &str) -> Value {
    json!({ "code": code, "env": { "API_TOKEN": "sk-live-secret" } })
}

/// A relay session over SQLite whose statements fail once a test names them.
fn failing_session() -> Rc<RelaySession<TestPlatform<Failing>>> {
    let session = Rc::new(RelaySession::new(TestPlatform::over(Failing::new(Sqlite::new(), &[]))));
    session.open().unwrap();
    session.configure(&QueueSettings::default(), None);
    session
}

/// What tab `tab` reports, as NDJSON lines.
fn heard(session: &Session, tab: &str, lines: &[Value]) {
    let batch: Vec<String> = lines.iter().map(Value::to_string).collect();
    let events = parse_batch(batch.join("\n").as_bytes()).expect("a valid batch");
    session.feed(Input::Heard { tab: Some(tab.into()), events });
}

fn exit(run: &str, seq: u64, exit_code: i32) -> Value {
    json!({ "runId": run, "seq": seq, "type": "exit", "exitCode": exit_code, "usage": { "wallMs": 12 } })
}

fn runs_rows(sql: &impl Sql) -> Vec<Value> {
    sql.rows::<Value>("SELECT run_id, capsule_hash, finished_ms, exit_code, error_name FROM runs", &[]).unwrap()
}

#[test]
fn a_run_is_audited_when_admitted_and_sealed_onto_the_chain_when_it_ends_with_its_answer_delivered_once() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("console.log(1)"), Era::Legacy, Some("mcp_1")));
    let stream = start(&session, &call);
    // Admitted with its row; prepared: the capsule is in R2, the tab has its command (and a
    // copy on its results socket).
    let rows = runs_rows(&session.platform.sql);
    assert_eq!(rows.len(), 1);
    let Job::Capsule { capsule, .. } = call.job.as_ref() else { panic!("a capsule job") };
    assert_eq!((rows[0]["run_id"].as_str(), rows[0]["capsule_hash"].as_str()), (Some("r_1"), Some(&*capsule.hash)));
    assert!(rows[0]["finished_ms"].is_null());
    assert!(session
        .platform
        .blobs
        .objects
        .borrow()
        .keys()
        .any(|k| k.ends_with(&format!("{}/capsule.json", capsule.hash))));
    assert_eq!(session.platform.tabs.commands("tab_1"), ["tabs", "capsule"]);
    assert_eq!(session.platform.tabs.socket_copies.borrow().len(), 1);
    heard(
        &session,
        "tab_1",
        &[
            json!({ "runId": "r_1", "seq": 0, "type": "progress", "phase": "execute" }),
            json!({ "runId": "r_1", "seq": 1, "type": "stdout", "data": "1\n" }),
            exit("r_1", 2, 0),
        ],
    );
    // Delivered: the progress note, the output, then the answer, once.
    let messages = stream.messages();
    let progress: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["params"]["message"].as_str().filter(|_| m["method"] == "notifications/progress"))
        .collect();
    assert_eq!(progress.last(), Some(&"execute"), "{progress:?}");
    let output = messages.iter().find(|m| m["method"] == "notifications/message").expect("the output");
    assert_eq!((output["params"]["logger"].as_str(), output["params"]["data"].as_str()), (Some("stdout"), Some("1\n")));
    let answers: Vec<&Value> = messages.iter().filter(|m| m["id"] == json!(7)).collect();
    assert_eq!(answers.len(), 1);
    assert_eq!(messages.last(), Some(answers[0]), "nothing follows the answer");
    assert_eq!(answers[0]["result"]["structuredContent"]["stdout"], "1\n");
    assert!(!session.has_run("r_1"));
    // Its slot of the tenant's runs in flight comes back.
    assert_eq!(*session.platform.ended.borrow(), [("t_1".to_owned(), "r_1".to_owned(), 0)]);
    // Sealed: one tool_call record, its output hashed, its secret redacted, logged as a run.
    let records = session.store().audit_records(10).unwrap();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!((record.kind, record.run_id.as_str(), record.exit_code), (Kind::ToolCall, "r_1", Some(0)));
    assert_eq!(record.stdout_sha256, relay_core::capsule::canonical::sha256_hex(b"1\n"));
    assert_eq!(record.args["env"]["API_TOKEN"], "***");
    assert!(audit::verify(&records, None).is_ok());
    assert!(session.platform.log.borrow().iter().any(|line| line.contains("\"r_1\"")));
    assert_eq!(session.metrics(0).unwrap().runs.get("js|ok"), Some(&1));
}

#[test]
fn a_full_queue_admits_nothing_and_leaves_no_row_behind() {
    let session = session();
    session.configure(&QueueSettings { max_queued: 1, ..QueueSettings::default() }, None);
    let first = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Modern, None));
    session.admit_call(&first, Box::new(Answer::streamed(first.clone(), Stream::default()))).unwrap();
    assert_eq!(session.queue_full(), Some(1));
    let second = call_of(&session, "r_2", tool_call(Tool::RunJs, js("2"), Era::Modern, None));
    let refused = session.admit_call(&second, Box::new(Answer::streamed(second.clone(), Stream::default())));
    assert_eq!(refused, Err(Unadmitted::QueueFull(1)));
    assert!(!session.has_run("r_2"));
    let rows = runs_rows(&session.platform.sql);
    assert_eq!(rows.iter().map(|r| r["run_id"].as_str().unwrap()).collect::<Vec<_>>(), ["r_1"]);
    assert_eq!(second.queue_full(1).status, 429);
}

/// Each request carries the tenant's queue settings as they are now: a `PATCH` lowering
/// `queue.maxQueued` reaches a relay session already running (it used to keep its first ones).
#[test]
fn the_queue_settings_of_each_request_reach_a_live_relay_session() {
    let session = session();
    session.configure(&QueueSettings::default(), None);
    let first = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Modern, None));
    session.admit_call(&first, Box::new(Answer::streamed(first.clone(), Stream::default()))).unwrap();
    assert_eq!(session.queue_full(), None, "the default queue has room");
    session.configure(&QueueSettings { max_queued: 1, ..QueueSettings::default() }, None);
    assert!(session.has_run("r_1"), "the run admitted keeps its place");
    assert_eq!(session.queue_full(), Some(1));
}

#[test]
fn a_run_whose_audit_row_cannot_be_written_is_not_admitted() {
    let session = failing_session();
    session.platform.sql.failing.borrow_mut().push("INSERT INTO runs");
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Modern, None));
    let refused = session.admit_call(&call, Box::new(Answer::streamed(call.clone(), Stream::default())));
    assert!(matches!(refused, Err(Unadmitted::Storage(_))), "{refused:?}");
    assert!(!session.has_run("r_1"));
    assert_eq!(session.view().1, 0, "nothing waits in the queue");
}

#[test]
fn a_run_end_that_cannot_be_sealed_is_logged_and_counted_never_dropped_silently() {
    let session = failing_session();
    session.platform.tabs.attach("tab_1");
    session.feed(Input::TabAttached { tab: "tab_1".into() });
    let call = call_of(&*session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Modern, None));
    let stream = Stream::default();
    session.admit_call(&call, Box::new(Answer::streamed(call.clone(), stream.clone()))).unwrap();
    run(prepare(&session, &call.caller, &call.run, &call.job));
    session.platform.sql.failing.borrow_mut().push("INSERT INTO audit");
    let events = parse_batch(exit("r_1", 0, 0).to_string().as_bytes()).unwrap();
    session.feed(Input::Heard { tab: Some("tab_1".into()), events });
    assert!(stream.messages().iter().any(|m| m["id"] == json!(7)), "the client still gets its answer");
    let errors = session.platform.errors.borrow();
    assert!(errors.iter().any(|e| e.contains("auditing a run's end")), "{errors:?}");
    assert_eq!(session.metrics(0).unwrap().storage_failures.get("audit"), Some(&1));
}

#[test]
fn a_policy_denial_a_tab_reports_is_sealed_onto_the_chain_in_the_runs_tenant() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("fetch()"), Era::Modern, None));
    start(&session, &call);
    let denied = json!({ "runId": "r_1", "seq": 0, "type": "denied", "what": "fetch", "target": "https://evil.example/", "reason": "not in network.allow" });
    heard(&session, "tab_1", &[denied]);
    let records = session.store().audit_records(10).unwrap();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!((record.kind, record.tenant.as_str(), record.tool.as_str()), (Kind::PolicyDenial, "t_1", "fetch"));
    assert_eq!(record.args["target"], "https://evil.example/");
    assert_eq!(session.metrics(0).unwrap().denials.get("fetch"), Some(&1));
}

#[test]
fn a_tab_that_cannot_be_written_to_is_dropped_and_its_run_goes_to_the_next_tab() {
    let session = with_tabs(&["tab_1", "tab_2"]);
    // The newest tab gets the next run; it is gone when the command is written.
    session.platform.tabs.gone.borrow_mut().push("tab_2".into());
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Modern, None));
    start(&session, &call);
    assert_eq!(session.view().0, ["tab_1"]);
    assert!(session.platform.tabs.commands("tab_1").contains(&"capsule".to_owned()));
    // The tab left is told it is the only one and runs next.
    let tabs =
        session.platform.tabs.streams.borrow()["tab_1"].iter().rev().find(|f| f.starts_with("event: tabs")).cloned();
    assert!(tabs.unwrap().contains("\"count\":1"));
}

#[test]
fn a_capsule_is_stored_once_per_instance_and_a_storage_failure_ends_the_run_saying_to_retry() {
    let session = with_tabs(&["tab_1"]);
    let first = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Modern, None));
    start(&session, &first);
    let puts = session.platform.blobs.puts.get();
    heard(&session, "tab_1", &[exit("r_1", 0, 0)]);
    let again = call_of(&session, "r_2", tool_call(Tool::RunJs, js("1"), Era::Modern, None));
    start(&session, &again);
    assert_eq!(session.platform.blobs.puts.get(), puts, "the same capsule is not stored twice");
    assert_eq!(session.metrics(0).unwrap().build_ms.count, 1);
    heard(&session, "tab_1", &[exit("r_2", 0, 0)]);

    session.platform.blobs.failing.set(true);
    let failing = call_of(&session, "r_3", tool_call(Tool::RunJs, js("3"), Era::Modern, None));
    let stream = start(&session, &failing);
    let answer = stream.messages().into_iter().find(|m| m["id"] == json!(7)).expect("an answer");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains("its capsule could not be stored; retry the call"), "{text}");
    assert!(session.platform.errors.borrow().iter().any(|e| e.starts_with("storing capsule")));
}

#[test]
fn a_cancelled_request_gets_no_answer_and_a_closed_modern_stream_cancels_its_run() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Legacy, Some("mcp_1")));
    let stream = start(&session, &call);
    session.cancel_request(Some("mcp_2"), &json!(7));
    assert!(session.has_run("r_1"), "another MCP session's request id cancels nothing");
    session.cancel_request(Some("mcp_1"), &json!(7));
    assert!(!session.has_run("r_1"));
    assert!(stream.messages().iter().all(|m| m["id"] != json!(7)), "no answer to a cancelled request");
    assert!(session.platform.tabs.commands("tab_1").contains(&"cancel".to_owned()));

    let modern = call_of(&session, "r_2", tool_call(Tool::RunJs, js("2"), Era::Modern, None));
    start(&session, &modern);
    drop(CancelOnDrop { session: session.clone(), run: "r_2".into() });
    assert!(!session.has_run("r_2"));
    let record = session.store().audit_records(10).unwrap().pop().unwrap();
    assert_eq!((record.run_id.as_str(), record.error_name.as_deref()), ("r_2", Some("Cancelled")));
}

#[test]
fn a_legacy_client_resumes_a_run_in_flight_on_its_new_stream_and_no_one_else_can() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Legacy, Some("mcp_1")));
    let lost = start(&session, &call);
    lost.closed.set(true);
    let thief = Stream::default();
    let refused = session.resume("mcp_2", "r_1", thief.clone()).unwrap();
    assert!(matches!(refused, Resumed::Refused(ref reply) if reply.status == 404), "{refused:?}");
    let resumed = Stream::default();
    assert!(matches!(session.resume("mcp_1", "r_1", resumed.clone()).unwrap(), Resumed::Streaming));
    heard(
        &session,
        "tab_1",
        &[json!({ "runId": "r_1", "seq": 0, "type": "stdout", "data": "late\n" }), exit("r_1", 1, 0)],
    );
    let answer = resumed.messages().into_iter().find(|m| m["id"] == json!(7)).expect("the answer");
    assert_eq!(answer["result"]["structuredContent"]["stdout"], "late\n");
    assert!(thief.messages().is_empty());
}

#[test]
fn an_ended_legacy_run_is_answered_from_its_kept_answer_once_then_from_the_audit() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Legacy, Some("mcp_1")));
    let lost = start(&session, &call);
    lost.closed.set(true);
    heard(&session, "tab_1", &[exit("r_1", 0, 3)]);
    let Resumed::Answer(kept) = session.resume("mcp_1", "r_1", Stream::default()).unwrap() else { panic!() };
    assert_eq!(kept["result"]["structuredContent"]["exitCode"], 3);
    // Taken once: then the audit answers, saying the output is gone.
    let Resumed::Answer(audited) = session.resume("mcp_1", "r_1", Stream::default()).unwrap() else { panic!() };
    let text = audited["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("exit code 3") && text.contains("run the tool again"), "{text}");
    assert_eq!(audited["id"], json!(7));
}

#[test]
fn only_the_latest_legacy_answers_are_kept() {
    let session = with_tabs(&["tab_1"]);
    for i in 0..=ANSWERS_KEPT {
        let run = format!("r_{i}");
        let call = call_of(&session, &run, tool_call(Tool::RunJs, js(&format!("{i}")), Era::Legacy, Some("mcp_1")));
        start(&session, &call).closed.set(true);
        heard(&session, "tab_1", &[exit(&run, 0, 0)]);
    }
    let Resumed::Answer(oldest) = session.resume("mcp_1", "r_0", Stream::default()).unwrap() else { panic!() };
    assert!(oldest["result"]["content"][0]["text"].as_str().unwrap().contains("lost with the connection"));
    let Resumed::Answer(latest) = session.resume("mcp_1", "r_16", Stream::default()).unwrap() else { panic!() };
    assert_eq!(latest["result"]["structuredContent"]["exitCode"], 0);
}

#[test]
fn a_restart_closes_the_runs_it_cut_off_and_a_resuming_client_hears_why() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Legacy, Some("mcp_1")));
    start(&session, &call);
    // The next instance over the same SQLite.
    let platform = Rc::try_unwrap(session).ok().expect("one owner").platform;
    let restarted = RelaySession::new(TestPlatform::over(platform.sql));
    restarted.open().unwrap();
    let records = restarted.store().audit_records(10).unwrap();
    assert_eq!((records.len(), records[0].error_name.as_deref()), (1, Some("Internal")));
    assert!(restarted.platform.log.borrow().iter().any(|line| line.contains("\"r_1\"")));
    let Resumed::Answer(answer) = restarted.resume("mcp_1", "r_1", Stream::default()).unwrap() else { panic!() };
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("the relay restarted"));
}

#[test]
fn the_do_s_wakeups_are_counted_by_kind_across_its_instances() {
    // A DO that hibernates is a new instance at each wake: the count lives in its SQLite.
    let session = with_tabs(&["tab_1"]);
    for wake in [Wake::Request, Wake::Alarm, Wake::Alarm] {
        session.woke(wake);
    }
    assert_eq!(session.metrics(0).unwrap().wakeups["alarm"], 2, "counted before they are written");
    session.flush_wakeups();
    session.woke(Wake::Tick); // never written: lost with its instance
    let platform = Rc::try_unwrap(session).ok().expect("one owner").platform;
    let woken = RelaySession::new(TestPlatform::over(platform.sql));
    woken.open().unwrap();
    woken.woke(Wake::SocketMessage);
    woken.flush_wakeups();
    woken.woke(Wake::SocketMessage);
    woken.flush_wakeups();
    let wakeups = woken.metrics(0).unwrap().wakeups;
    let expected = [("alarm", 2), ("request", 1), ("socket_message", 2), ("start", 0), ("tick", 0)];
    assert_eq!(
        wakeups,
        expected.into_iter().map(|(k, n)| (k.to_owned(), n)).collect(),
        "every kind, 0 when never counted"
    );
}

#[test]
fn a_relay_session_whose_migration_fails_does_not_open() {
    let sql = Failing::new(Sqlite::new(), &["CREATE TABLE IF NOT EXISTS audit", "CREATE TABLE audit"]);
    let session = RelaySession::new(TestPlatform::over(sql));
    let failed = session.open().expect_err("a migration fails");
    assert!(failed.0.starts_with("migration 3"), "{failed}");
}

#[test]
fn a_task_is_stored_before_its_handle_is_answered_and_its_run_end_is_written_into_it() {
    let session = with_tabs(&["tab_1"]);
    let mut first = tool_call(Tool::RunJs, js("1"), Era::Modern, None);
    first.task = true;
    let call = call_of(&session, "r_1", first);
    let created = run(start_task(&session, call)).expect("a task");
    let task_id = created["result"]["taskId"].as_str().expect("a task id").to_owned();
    assert_eq!(session.task(&task_id).unwrap().status, TaskStatus::Working);
    heard(&session, "tab_1", &[exit("r_1", 0, 0)]);
    assert_eq!(session.task(&task_id).unwrap().status, TaskStatus::Completed);
    // A working task whose run this instance does not have was cut off by a restart.
    let cut_off = TaskRecord::working("task_cut", "r_gone", session.now_ms());
    session.store().save_task(&cut_off).unwrap();
    let failed = session.task("task_cut").unwrap();
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(session.task("task_cut").unwrap().status, TaskStatus::Failed, "and stays so");
}

#[test]
fn a_task_whose_storage_fails_is_refused_before_its_run_is_admitted() {
    let session = failing_session();
    session.platform.sql.failing.borrow_mut().push("INTO tasks");
    let mut task = tool_call(Tool::RunJs, js("1"), Era::Modern, None);
    task.task = true;
    let call = call_of(&*session, "r_1", task);
    assert!(matches!(run(start_task(&session, call)), Err(Unadmitted::Storage(_))));
    assert!(!session.has_run("r_1"));
}

#[test]
fn a_call_with_bad_arguments_is_a_tool_error_and_never_a_run() {
    let session = with_tabs(&["tab_1"]);
    let bad =
        tool_call(Tool::RunJs, json!({ "code": "1", "policy": { "limits": { "timeoutMs": -1 } } }), Era::Modern, None);
    let answer = Work::of(&*session, &caller(), &bad, || Ok::<_, ()>(signer())).unwrap().err().expect("a tool error");
    assert_eq!(answer["result"]["isError"], true);
    assert!(runs_rows(&session.platform.sql).is_empty());
    // A file tool needs no signer.
    let read = tool_call(Tool::Read, json!({ "path": "/tmp/a.txt" }), Era::Modern, None);
    assert!(Work::of(&*session, &caller(), &read, || Err::<Signer, _>("no key")).unwrap().is_ok());
}

#[test]
fn a_run_whose_capsule_would_pass_the_tenants_stored_bytes_ends_quota_exceeded_and_stores_nothing() {
    let session = with_tabs(&["tab_1"]);
    let mut call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Modern, None));
    call.caller.tenant.defaults.quotas.stored_bytes = 1 << 20;
    // The tenant stores all but 10 bytes of its quota already.
    let filled = Charge::Store { bytes: (1 << 20) - 10 };
    let request = LedgerRequest { quotas: call.caller.tenant.defaults.quotas, charge: filled };
    answer(&session.platform.ledger, &request, session.now_ms()).unwrap();
    let stream = start(&session, &call);
    let answered = stream.messages().into_iter().find(|m| m["id"] == json!(7)).expect("an answer");
    let text = answered["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains("QuotaExceeded") && text.contains("defaults.quotas.storedBytes"), "{text}");
    assert_eq!(session.platform.blobs.puts.get(), 0, "nothing was stored");
    // With room, the same call stores its capsule, charged its capsule.json and code layer.
    call.caller.tenant.defaults.quotas.stored_bytes = 1 << 30;
    let again = Call { run: "r_2".into(), ..call };
    start(&session, &again);
    let in_r2: usize = session.platform.blobs.objects.borrow().values().map(Vec::len).sum();
    assert_eq!(session.platform.stored_used(), (1u64 << 20) - 10 + in_r2 as u64);
}

/// The relay session's admission of `call` (`Job::admission`, as its DO sends it to the
/// tenant's ledger, and `Job::admitted` on the answer); the capsule bytes it charged.
fn admitted(session: &Session, call: &Call) -> u64 {
    let charge = call.job.admission(&**session, &call.caller, &call.run, session.now_ms());
    let Charge::Run { stored_bytes, .. } = charge.clone() else { panic!("a run's charge: {charge:?}") };
    let request = LedgerRequest { quotas: call.caller.tenant.defaults.quotas, charge };
    let answered = answer(&session.platform.ledger, &request, session.now_ms()).unwrap();
    call.job.admitted(&request.charge, &answered, session.now_ms());
    stored_bytes
}

#[test]
fn a_runs_admission_leases_its_slot_for_the_runs_whole_life() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("3"), Era::Modern, None));
    let defaults = &call.caller.tenant.defaults;
    let life_ms = run_life_ms(&defaults.queue, defaults.policy.limits.timeout_ms);
    let charge = call.job.admission(&*session, &call.caller, "r_1", session.now_ms());
    let Charge::Run { lease, .. } = charge else { panic!("a run's charge") };
    assert_eq!(lease, run_lease("r_1", session.now_ms(), life_ms));
}

#[test]
fn a_capsule_charged_at_admission_comes_back_if_its_preparation_never_runs() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("4"), Era::Modern, None));
    let bytes = admitted(&session, &call);
    assert!(bytes > 0);
    assert_eq!(session.platform.stored_used(), bytes);
    // A streamed answer whose body is dropped before it is polled: `prepare` never runs.
    drop(UnchargeOnDrop { session: session.clone(), call: call.clone() });
    assert_eq!(session.platform.stored_used(), 0, "given back");
    // Prepared, the charge is the store's: dropping the guard then gives nothing back.
    let again = call_of(&session, "r_2", tool_call(Tool::RunJs, js("4"), Era::Modern, None));
    admitted(&session, &again);
    let guard = UnchargeOnDrop { session: session.clone(), call: again.clone() };
    start(&session, &again);
    drop(guard);
    assert_eq!(session.platform.stored_used(), bytes, "stored once, charged once");
}

#[test]
fn a_capsule_charged_with_its_runs_admission_is_stored_with_no_other_hop_and_a_failed_put_gives_it_back() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("2"), Era::Modern, None));
    // What the relay session's admission charges with the run's slot, in one hop.
    let bytes = admitted(&session, &call);
    let Job::Capsule { capsule, .. } = call.job.as_ref() else { panic!("a capsule job") };
    assert_eq!(bytes, stores::capsule_bytes(capsule));
    session.platform.blobs.failing.set(true);
    let stream = start(&session, &call);
    assert_eq!(session.platform.store_hops.get(), 0, "no hop to the ledger but the admission's");
    let answered = stream.messages().into_iter().find(|m| m["id"] == json!(7)).expect("an answer");
    assert!(answered.to_string().contains("could not be stored"), "{answered}");
    assert_eq!(session.platform.stored_used(), 0, "the failed put's charge came back");
    // Stored, the same capsule is not charged again by the next run's admission.
    session.platform.blobs.failing.set(false);
    let again = call_of(&session, "r_2", tool_call(Tool::RunJs, js("2"), Era::Modern, None));
    start(&session, &again);
    assert_eq!(session.platform.store_hops.get(), 1, "not charged at admission: charged at its store");
    assert_eq!(session.platform.stored_used(), bytes);
    let third = call_of(&session, "r_3", tool_call(Tool::RunJs, js("2"), Era::Modern, None));
    assert_eq!(third.job.stored_bytes(&*session), 0, "stored lately: nothing to charge");
}

#[test]
fn an_out_file_the_worker_refused_is_listed_with_why_and_no_url() {
    let session = with_tabs(&["tab_1"]);
    let call = call_of(&session, "r_1", tool_call(Tool::RunJs, js("1"), Era::Modern, None));
    let stream = start(&session, &call);
    let refusal =
        json!({ "name": "QuotaExceeded", "message": "this tenant's quota defaults.quotas.storedBytes is reached" });
    let files = json!([
        { "path": "/out/big.csv", "size": 9, "sha256": "ab", "uploaded": false, "error": refusal },
        { "path": "/out/ok.txt", "size": 2, "sha256": "cd", "uploaded": true },
    ]);
    let end =
        json!({ "runId": "r_1", "seq": 0, "type": "exit", "exitCode": 0, "usage": { "wallMs": 1 }, "files": files });
    heard(&session, "tab_1", &[end]);
    let answered = stream.messages().into_iter().find(|m| m["id"] == json!(7)).expect("an answer");
    let listed = &answered["result"]["structuredContent"]["files"];
    assert_eq!(listed[0]["error"], refusal, "{listed}");
    assert!(listed[0].get("url").is_none());
    assert!(listed[1].get("error").is_none() && listed[1]["url"].is_string(), "{listed}");
}
