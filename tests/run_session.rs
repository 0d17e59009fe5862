//! The run state machine of one relay session: every fault the end-to-end suite covers,
//! replayed as event sequences, and invariants over random sequences (every admitted run ends
//! exactly once, no run executes twice, one run at a time, runs start in admission order, and
//! no run on a tab whose lease holds ends as lost).

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use relay_core::auth::QueueSettings;
use relay_core::error::ErrorName;
use relay_core::run::backchannel::{EventBody, TabEvent, Usage, DENIALS_AUDITED};
use relay_core::run::executor::Executor;
use relay_core::run::lease::TAB_LEASE_MS;
use relay_core::run::machine::{
    run_life_ms, Cancel, Command, Input, Output, RunMachine, FINISHED_KEPT, LOAD_BUDGET_MS, PROGRESS_EVERY_MS,
    TIMEOUT_GRACE_MS,
};

const SETTINGS: QueueSettings = QueueSettings { max_queued: 100, max_wait_ms: 300_000, attach_wait_ms: 5_000 };
const TIMEOUT: u64 = 60_000;
const CAP: u64 = 1_000;

fn session() -> RunMachine {
    RunMachine::new(SETTINGS.clone())
}

fn admit(run: &str) -> Input {
    Input::Admit { run: run.into(), timeout_ms: TIMEOUT, output_cap: CAP, executor: Executor::Tab }
}

fn ready(run: &str) -> Input {
    Input::Ready { run: run.into() }
}

fn tab(tab: &str) -> Input {
    Input::TabAttached { tab: tab.into() }
}

fn ev(run: &str, seq: u64, body: EventBody) -> TabEvent {
    TabEvent { run_id: run.into(), seq, body }
}

fn progress(phase: &str) -> EventBody {
    EventBody::Progress { phase: phase.into(), runtime_id: None, detail: None }
}

fn stdout(data: &str) -> EventBody {
    EventBody::Stdout { data: data.into() }
}

fn exit(code: i32) -> EventBody {
    EventBody::Exit {
        exit_code: code,
        usage: Usage { wall_ms: 5, mem_peak_mb: 1, ..Usage::default() },
        error: None,
        files: vec![],
        displays: vec![],
    }
}

fn heard(events: Vec<TabEvent>) -> Input {
    Input::Heard { tab: None, events }
}

fn heard_from(tab: &str, events: Vec<TabEvent>) -> Input {
    Input::Heard { tab: Some(tab.into()), events }
}

fn sent(tab: &str, run: &str) -> Output {
    Output::Send { tab: tab.into(), command: Command::Capsule { run: run.into() } }
}

fn cancel_sent(tab: &str, run: &str) -> Output {
    Output::Send { tab: tab.into(), command: Command::Cancel { run: run.into() } }
}

/// Whether `o` is a progress beat the machine forwards of its own (`PROGRESS_EVERY_MS`).
fn is_beat(o: &Output) -> bool {
    matches!(o, Output::Forward { body: EventBody::Progress { phase, .. }, .. } if phase == "running" || phase == "starting")
}

/// The `Finish` outputs: `(run, error name or "", exit code, answer)`.
fn finishes(out: &[Output]) -> Vec<(String, String, i32, bool)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Finish { run, outcome, answer } => Some((
                run.clone(),
                outcome.exit.error.as_ref().map(|e| e.name.clone()).unwrap_or_default(),
                outcome.exit.exit_code,
                *answer,
            )),
            _ => None,
        })
        .collect()
}

fn reply(out: &[Output]) -> (u16, serde_json::Value) {
    out.iter()
        .find_map(|o| match o {
            Output::Reply(reply) => Some((reply.status(), reply.to_json())),
            _ => None,
        })
        .expect("a Heard batch is always answered")
}

fn seen(tab: &str, at_ms: u64) -> Input {
    Input::TabSeen { tab: tab.into(), at_ms }
}

/// Has tab `t` renew its lease every half lease from `from_ms` until just before `until_ms`,
/// saying nothing of its run, with the DO ticking after each renewal; returns the finishes seen.
fn keep_alive(s: &mut RunMachine, t: &str, from_ms: u64, until_ms: u64) -> Vec<(String, String, i32, bool)> {
    let (mut now, mut ended) = (from_ms, Vec::new());
    while now + TAB_LEASE_MS / 2 < until_ms {
        now += TAB_LEASE_MS / 2;
        assert_eq!(s.handle(now, seen(t, now)), vec![], "a renewal moves nothing");
        ended.extend(finishes(&s.handle(now, Input::Tick)));
    }
    ended
}

/// Attaches `tabs` in order, admits `run` and makes it ready: it is sent to the newest tab.
fn started_on_newest(s: &mut RunMachine, run: &str, tabs: &[&str]) {
    for t in tabs {
        s.handle(0, tab(t));
    }
    s.handle(0, admit(run));
    let newest = tabs.last().expect("a tab");
    assert!(s.handle(0, ready(run)).contains(&sent(newest, run)));
}

/// Admits `run`, makes it ready and attaches tab `t`: the run is sent to it at `now`.
fn started(s: &mut RunMachine, now: u64, run: &str, t: &str) {
    s.handle(now, admit(run));
    s.handle(now, ready(run));
    let out = s.handle(now, tab(t));
    assert!(out.contains(&sent(t, run)), "{out:?}");
}

// ---- the happy path ----

#[test]
fn a_run_is_admitted_sent_streamed_and_finished_once() {
    let mut s = session();
    assert_eq!(s.handle(0, admit("a")), vec![Output::Admitted { run: "a".into() }]);
    assert_eq!(s.handle(1, tab("t1")), vec![], "not ready: its capsule is still being stored");
    let out = s.handle(2, ready("a"));
    assert_eq!(out[0], sent("t1", "a"));
    assert!(matches!(&out[1], Output::Forward { body: EventBody::Progress { phase, .. }, .. } if phase == "started"));
    let out = s.handle(
        3,
        heard(vec![ev("a", 0, progress("received")), ev("a", 1, progress("execute")), ev("a", 2, stdout("hi\n"))]),
    );
    assert!(out.contains(&Output::Forward { run: "a".into(), body: stdout("hi\n") }));
    assert_eq!(reply(&out).0, 200);
    let out = s.handle(4, heard(vec![ev("a", 3, exit(0))]));
    assert_eq!(finishes(&out), vec![("a".into(), "".into(), 0, true)]);
    let Some(Output::Finish { outcome, .. }) = out.iter().find(|o| matches!(o, Output::Finish { .. })) else {
        unreachable!()
    };
    assert_eq!(outcome.stdout, "hi\n");
    assert_eq!(outcome.exit.usage.wall_ms, 5);
    assert_eq!(s.next_wake(), None, "nothing left to wait for");
}

#[test]
fn runs_start_in_admission_order_even_when_a_later_one_is_ready_first() {
    let mut s = session();
    s.handle(0, tab("t1"));
    s.handle(0, admit("a"));
    assert_eq!(s.handle(0, admit("b")), vec![Output::Admitted { run: "b".into() }]);
    assert_eq!(s.handle(1, ready("b")), vec![], "b waits for a, which is still being prepared");
    assert!(s.handle(2, ready("a")).contains(&sent("t1", "a")));
    let out = s.handle(3, heard(vec![ev("a", 0, exit(0))]));
    assert!(out.contains(&sent("t1", "b")), "{out:?}");
}

#[test]
fn the_newest_tab_gets_the_next_run() {
    started_on_newest(&mut session(), "a", &["old", "new"]);
}

#[test]
fn one_run_executes_at_a_time_whatever_the_number_of_tabs() {
    let mut s = session();
    s.handle(0, tab("t1"));
    s.handle(0, tab("t2"));
    for run in ["a", "b"] {
        s.handle(0, admit(run));
    }
    assert!(s.handle(0, ready("a")).contains(&sent("t2", "a")));
    let out = s.handle(0, ready("b"));
    assert!(!out.iter().any(|o| matches!(o, Output::Send { .. })), "{out:?}");
    assert_eq!(s.queue_depth(), 1);
}

// ---- admission ----

#[test]
fn a_full_queue_refuses_and_remembers_nothing() {
    let mut s = RunMachine::new(QueueSettings { max_queued: 2, ..SETTINGS });
    s.handle(0, admit("a"));
    s.handle(0, admit("b"));
    assert_eq!(s.queue_full(), Some(2), "asked before admitting: the call is refused at once");
    assert_eq!(s.handle(0, admit("c")), vec![Output::Refused { run: "c".into(), max: 2 }]);
    assert_eq!(s.queue_full(), Some(2));
    let (status, _) = reply(&s.handle(0, heard(vec![ev("c", 0, exit(0))])));
    assert_eq!(status, 404, "a refused run is unknown");
}

#[test]
fn the_queue_has_room_again_once_a_waiting_run_leaves() {
    let mut s = RunMachine::new(QueueSettings { max_queued: 1, ..SETTINGS });
    assert_eq!(s.queue_full(), None);
    s.handle(0, admit("a"));
    assert_eq!(s.queue_full(), Some(1));
    s.handle(0, Input::Cancel { run: "a".into(), why: Cancel::ClientGone });
    assert_eq!(s.queue_full(), None);
    assert_eq!(RunMachine::new(QueueSettings { max_queued: 0, ..SETTINGS }).queue_full(), Some(0));
}

#[test]
fn a_run_id_admitted_twice_is_admitted_once() {
    let mut s = session();
    s.handle(0, admit("a"));
    assert_eq!(s.handle(0, admit("a")), vec![]);
    assert_eq!(s.queue_depth(), 1);
}

#[test]
fn a_run_that_could_not_be_prepared_ends_as_internal_and_frees_the_line() {
    let mut s = session();
    s.handle(0, tab("t1"));
    s.handle(0, admit("a"));
    s.handle(0, admit("b"));
    s.handle(0, ready("b"));
    let out = s.handle(1, Input::Cancel { run: "a".into(), why: Cancel::Unprepared("R2 refused it".into()) });
    assert_eq!(finishes(&out), vec![("a".into(), "Internal".into(), 1, true)]);
    assert!(out.contains(&sent("t1", "b")));
}

/// A `PATCH` of the tenant's `queue` reaches a live relay session: the machine takes the new
/// bounds on the next request, and the runs already admitted go on.
#[test]
fn new_queue_settings_apply_at_once_and_leave_the_runs_admitted_alone() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    for run in ["b", "c"] {
        s.handle(0, admit(run));
        s.handle(0, ready(run));
    }
    s.configure(&QueueSettings { max_queued: 1, ..SETTINGS });
    assert_eq!(s.queue_depth(), 2, "the runs waiting keep their places");
    assert_eq!(s.handle(1, admit("d")), vec![Output::Refused { run: "d".into(), max: 1 }]);
    let out = s.handle(2, heard_from("t1", vec![ev("a", 0, exit(0))]));
    assert_eq!(finishes(&out), vec![("a".into(), String::new(), 0, true)], "the running run ends as it would");
    assert!(out.contains(&sent("t1", "b")), "and the line moves on in order: {out:?}");

    s.configure(&QueueSettings { max_wait_ms: 10_000, ..SETTINGS });
    let ended = keep_alive(&mut s, "t1", 2, 10_000 + TAB_LEASE_MS);
    assert_eq!(ended, vec![("c".into(), "Cancelled".into(), 130, true)], "c waited past the new max (not 300 s)");
}

#[test]
fn a_new_attach_wait_bounds_a_run_already_waiting_for_a_tab() {
    let mut s = session();
    s.handle(0, admit("a"));
    s.handle(0, ready("a"));
    s.configure(&QueueSettings { attach_wait_ms: 1_000, ..SETTINGS });
    assert_eq!(s.next_wake(), Some(1_000));
    let out = s.handle(1_000, Input::Tick);
    assert_eq!(finishes(&out), vec![("a".into(), "NoExecutorAttached".into(), 1, true)]);
}

// ---- no tab ----

#[test]
fn with_no_tab_a_run_ends_with_no_executor_attached_after_the_attach_wait() {
    let mut s = session();
    s.handle(0, admit("a"));
    s.handle(0, ready("a"));
    assert_eq!(s.next_wake(), Some(SETTINGS.attach_wait_ms));
    assert_eq!(finishes(&s.handle(SETTINGS.attach_wait_ms - 1, Input::Tick)), vec![]);
    let out = s.handle(SETTINGS.attach_wait_ms, Input::Tick);
    assert_eq!(finishes(&out), vec![("a".into(), "NoExecutorAttached".into(), 1, true)]);
}

#[test]
fn a_tab_attaching_within_the_wait_gets_the_run() {
    let mut s = session();
    s.handle(0, admit("a"));
    s.handle(0, ready("a"));
    let out = s.handle(SETTINGS.attach_wait_ms - 1, tab("t1"));
    assert!(out.contains(&sent("t1", "a")));
    assert!(finishes(&s.handle(SETTINGS.attach_wait_ms + 1, Input::Tick)).is_empty());
}

// ---- a tab that goes away ----

#[test]
fn a_tab_gone_before_acknowledging_gives_the_run_to_another_tab() {
    let mut s = session();
    started_on_newest(&mut s, "a", &["t1", "t2"]);
    let out = s.handle(100, Input::TabGone { tab: "t2".into() });
    assert!(out.contains(&sent("t1", "a")), "{out:?}");
    assert!(finishes(&out).is_empty());
}

#[test]
fn an_idle_tab_killed_before_a_run_is_not_a_mid_run_failure() {
    // The tab died while idle; the DO learns it when writing to it fails (a heartbeat) or when
    // its lease lapses. Either way the run never started: NoExecutorAttached.
    for how in ["heartbeat fails", "lease lapses"] {
        let mut s = session();
        started(&mut s, 0, "a", "dead");
        let gone = if how == "heartbeat fails" { 2_000 } else { TAB_LEASE_MS };
        if how == "lease lapses" {
            assert_eq!(s.next_wake(), Some(TAB_LEASE_MS), "the DO wakes when the tab's lease lapses");
            assert!(s.handle(gone - 1, Input::Tick).iter().all(is_beat));
        }
        let out = match how {
            "heartbeat fails" => s.handle(gone, Input::TabGone { tab: "dead".into() }),
            _ => s.handle(gone, Input::Tick),
        };
        assert!(finishes(&out).is_empty(), "{how}: {out:?}");
        if how == "lease lapses" {
            assert!(out.contains(&Output::DropTab { tab: "dead".into() }));
        }
        let out = s.handle(gone + SETTINGS.attach_wait_ms, Input::Tick);
        assert_eq!(finishes(&out), vec![("a".into(), "NoExecutorAttached".into(), 1, true)], "{how}");
        assert!(s.tabs().is_empty());
    }
}

#[test]
fn a_tab_that_stops_renewing_its_lease_leaves_within_it_even_with_nothing_to_run() {
    // A browser quit without a goodbye, its stream never reported closed: only the lease tells.
    let mut s = session();
    s.handle(0, tab("ghost"));
    s.handle(0, tab("live"));
    assert_eq!(s.handle(4_000, seen("ghost", 4_000)), vec![]);
    for at in (2_000..=20_000).step_by(2_000) {
        s.handle(at, seen("live", at));
    }
    assert!(s.handle(4_000 + TAB_LEASE_MS - 1, Input::Tick).is_empty());
    assert_eq!(s.tabs(), ["ghost", "live"]);
    let out = s.handle(4_000 + TAB_LEASE_MS, Input::Tick);
    assert_eq!(out, vec![Output::DropTab { tab: "ghost".into() }]);
    assert_eq!(s.tabs(), ["live"]);
}

#[test]
fn a_renewal_read_late_still_counts_and_one_from_the_future_counts_as_now() {
    let mut s = session();
    s.handle(0, tab("t1"));
    // The DO reads when the tab last pinged: 9 s ago, at 1 s.
    s.handle(10_000, seen("t1", 1_000));
    assert!(s.handle(1_000 + TAB_LEASE_MS - 1, Input::Tick).is_empty());
    // A renewal stamped ahead of the DO's clock (which stands still while it computes) is taken
    // as now: no reading can stretch a lease past now + TAB_LEASE_MS.
    let now = 12_000;
    s.handle(now, seen("t1", u64::MAX));
    assert!(s.handle(now + TAB_LEASE_MS - 1, Input::Tick).is_empty());
    assert_eq!(s.handle(now + TAB_LEASE_MS, Input::Tick), vec![Output::DropTab { tab: "t1".into() }]);
    // And an older reading, or one of a tab not attached, changes nothing.
    assert_eq!(s.handle(now + TAB_LEASE_MS, seen("t1", now + TAB_LEASE_MS)), vec![]);
    assert!(s.tabs().is_empty());
}

#[test]
fn a_batch_from_a_named_tab_renews_its_lease() {
    let mut s = session();
    s.handle(0, tab("t1"));
    s.handle(8_000, heard_from("t1", vec![]));
    assert!(s.handle(8_000 + TAB_LEASE_MS - 1, Input::Tick).is_empty(), "renewed at 8 s");
    assert!(s.handle(8_000 + TAB_LEASE_MS, Input::Tick).contains(&Output::DropTab { tab: "t1".into() }));
}

#[test]
fn a_run_is_never_sent_to_a_tab_whose_lease_lapsed() {
    let mut s = session();
    s.handle(0, tab("old"));
    s.handle(0, tab("newest-but-gone"));
    s.handle(TAB_LEASE_MS, seen("old", TAB_LEASE_MS));
    let mut out = s.handle(TAB_LEASE_MS, admit("a"));
    out.extend(s.handle(TAB_LEASE_MS, ready("a")));
    assert!(out.contains(&Output::DropTab { tab: "newest-but-gone".into() }), "{out:?}");
    assert!(out.contains(&sent("old", "a")), "{out:?}");
}

#[test]
fn a_tab_gone_after_acknowledging_ends_the_run() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    s.handle(10, heard(vec![ev("a", 0, progress("received"))]));
    let out = s.handle(20, Input::TabGone { tab: "t1".into() });
    assert_eq!(finishes(&out), vec![("a".into(), "Internal".into(), 1, true)]);
}

#[test]
fn a_tab_whose_lease_lapses_mid_run_ends_the_run_as_lost() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    s.handle(10, heard_from("t1", vec![ev("a", 0, progress("received"))]));
    assert_eq!(s.next_wake(), Some(10 + TAB_LEASE_MS));
    assert!(finishes(&s.handle(10 + TAB_LEASE_MS - 1, Input::Tick)).is_empty());
    let out = s.handle(10 + TAB_LEASE_MS, Input::Tick);
    assert!(out.contains(&Output::DropTab { tab: "t1".into() }));
    assert_eq!(finishes(&out), vec![("a".into(), "Internal".into(), 1, true)]);
    let Some(Output::Finish { outcome, .. }) = out.iter().find(|o| matches!(o, Output::Finish { .. })) else {
        unreachable!()
    };
    assert!(outcome.exit.error.as_ref().unwrap().message.contains("went away mid-run"));
}

/// The message of the one `Finish` in `out`.
fn finish_message(out: &[Output]) -> String {
    let found = out.iter().find_map(|o| match o {
        Output::Finish { outcome, .. } => outcome.exit.error.as_ref().map(|e| e.message.clone()),
        _ => None,
    });
    found.expect("a run that ended with an error")
}

#[test]
fn a_busy_tab_is_never_taken_for_gone_its_run_times_out_saying_what_the_tab_was_busy_with() {
    // Issue 23: the tab took run b, then stored the files of a run the relay had already timed
    // out, for minutes, at 100% CPU. Its lease held all along: b ends by its own deadline.
    let mut s = session();
    started(&mut s, 0, "b", "t1");
    let note = EventBody::Progress {
        phase: "queued".into(),
        runtime_id: None,
        detail: Some("behind run r_a, which is storing its file changes (2400 so far)".into()),
    };
    s.handle(10, heard_from("t1", vec![ev("b", 0, progress("received")), ev("b", 1, note)]));
    let deadline = LOAD_BUDGET_MS + TIMEOUT + TIMEOUT_GRACE_MS;
    assert_eq!(keep_alive(&mut s, "t1", 10, deadline), vec![], "no silence ends a run on a live tab");
    s.handle(deadline - 1, seen("t1", deadline - 1));
    let out = s.handle(deadline, Input::Tick);
    assert!(out.contains(&cancel_sent("t1", "b")));
    assert_eq!(finishes(&out), vec![("b".into(), "Timeout".into(), 124, true)]);
    let message = finish_message(&out);
    assert!(message.contains("was busy and did not start the run"), "{message}");
    assert!(message.contains("(queued: behind run r_a, which is storing its file changes (2400 so far))"), "{message}");
    assert!(!message.contains("went away"), "{message}");
    assert_eq!(s.tabs(), ["t1"], "and the tab stays");
}

#[test]
fn a_busy_tab_runs_its_run_late_once_it_is_free() {
    let mut s = session();
    started(&mut s, 0, "b", "t1");
    s.handle(10, heard_from("t1", vec![ev("b", 0, progress("received"))]));
    assert_eq!(keep_alive(&mut s, "t1", 10, 100_000), vec![]);
    let out = s.handle(
        100_000,
        heard_from("t1", vec![ev("b", 1, progress("execute")), ev("b", 2, stdout("late\n")), ev("b", 3, exit(0))]),
    );
    assert_eq!(finishes(&out), vec![("b".into(), "".into(), 0, true)]);
}

#[test]
fn a_live_tab_that_never_takes_up_a_run_times_out_and_the_message_says_its_page_may_be_stuck() {
    let mut s = session();
    started(&mut s, 0, "a", "stuck");
    let deadline = LOAD_BUDGET_MS + TIMEOUT + TIMEOUT_GRACE_MS;
    assert_eq!(keep_alive(&mut s, "stuck", 0, deadline), vec![]);
    s.handle(deadline - 1, seen("stuck", deadline - 1));
    let out = s.handle(deadline, Input::Tick);
    assert_eq!(finishes(&out), vec![("a".into(), "Timeout".into(), 124, true)]);
    let message = finish_message(&out);
    assert!(message.contains("did not take up the run") && message.contains("reload the tab"), "{message}");
}

#[test]
fn a_run_given_to_another_tab_refuses_the_first_tab_s_events() {
    // t1 was slow to acknowledge and taken for dead; the run went to t2. t1's late events are
    // refused (its page then stops the run), t2's are taken: the run executes on one tab.
    let mut s = session();
    started_on_newest(&mut s, "a", &["t1", "t2"]);
    let out = s.handle(0, Input::TabGone { tab: "t2".into() }); // back to the line, then to t1
    assert!(out.contains(&sent("t1", "a")));
    let out = s.handle(1, heard_from("t2", vec![ev("a", 0, progress("received"))]));
    assert_eq!(reply(&out).1["refused"][0]["code"], "not-on-tab");
    let out = s.handle(2, heard_from("t1", vec![ev("a", 0, progress("received")), ev("a", 1, exit(0))]));
    assert_eq!(reply(&out).0, 200);
    assert_eq!(finishes(&out), vec![("a".into(), "".into(), 0, true)]);
}

#[test]
fn a_requeued_run_refuses_late_events_from_the_tab_that_dropped_it() {
    let mut s = session();
    started(&mut s, 0, "a", "slow");
    s.handle(TAB_LEASE_MS, Input::Tick); // its lease lapsed; a is back in line, no tab to take it
    let (status, body) = reply(&s.handle(TAB_LEASE_MS + 1, heard(vec![ev("a", 0, progress("received"))])));
    assert_eq!(status, 409);
    assert_eq!(body["refused"][0]["code"], "not-on-tab");
    assert!(body["refused"][0]["reason"].as_str().unwrap().contains("not on this tab"));
}

// ---- deadlines ----

#[test]
fn a_run_handed_to_tabs_that_go_silent_ends_at_its_life_and_its_lease_covers_it() {
    // Each tab takes the run and goes before acknowledging it: the run goes back to the front
    // of the line each time, its queue wait starting again. It still ends at its life.
    let mut s = session();
    s.handle(0, admit("a"));
    s.handle(0, ready("a"));
    let life = run_life_ms(&SETTINGS, TIMEOUT);
    let mut now = 0;
    let mut ended = None;
    for n in 0..(2 * life / 4_000) {
        s.handle(now + 2_000, Input::Tick);
        now += 4_000; // within the attach wait
        let out = s.handle(now, tab(&format!("t{n}")));
        if !finishes(&out).is_empty() {
            ended = Some(out);
            break;
        }
        assert!(out.contains(&sent(&format!("t{n}"), "a")), "{out:?}");
        s.handle(now, Input::TabGone { tab: format!("t{n}") });
    }
    let out = ended.expect("the run outlived twice its life");
    assert_eq!(finishes(&out), vec![("a".into(), "Timeout".into(), 124, true)]);
    assert!(finish_message(&out).contains(&format!("did not end within {life} ms of its call")));
    assert!(now >= life && now < life + 4_000, "ended at {now}, its life is {life}");
    assert!(relay_core::quota::run_lease("a", 0, life).until_ms > life);
}

#[test]
fn once_executing_a_run_has_its_timeout_plus_grace() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    s.handle(1_000, heard(vec![ev("a", 0, progress("received")), ev("a", 1, progress("execute"))]));
    let deadline = 1_000 + TIMEOUT + TIMEOUT_GRACE_MS;
    keep_alive(&mut s, "t1", 1_000, deadline);
    assert!(finishes(&s.handle(deadline - 1, Input::Tick)).is_empty());
    let out = s.handle(deadline, Input::Tick);
    assert!(out.contains(&cancel_sent("t1", "a")));
    assert_eq!(finishes(&out), vec![("a".into(), "Timeout".into(), 124, true)]);
    assert!(finish_message(&out).contains("within its 60000 ms timeout (policy.limits.timeoutMs)"));
}

#[test]
fn before_executing_a_run_also_has_the_load_budget() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    let deadline = LOAD_BUDGET_MS + TIMEOUT + TIMEOUT_GRACE_MS;
    keep_alive(&mut s, "t1", 0, deadline);
    s.handle(deadline - 1, seen("t1", deadline - 1));
    assert!(finishes(&s.handle(deadline - 1, Input::Tick)).is_empty());
    assert_eq!(finishes(&s.handle(deadline, Input::Tick)), vec![("a".into(), "Timeout".into(), 124, true)]);
}

#[test]
fn a_run_waiting_past_the_queue_limit_is_cancelled_without_ever_starting() {
    let mut s = session();
    s.handle(
        0,
        Input::Admit {
            run: "a".into(),
            timeout_ms: 10 * SETTINGS.max_wait_ms,
            output_cap: CAP,
            executor: Executor::Tab,
        },
    );
    s.handle(0, ready("a"));
    assert!(s.handle(0, tab("t1")).contains(&sent("t1", "a")));
    s.handle(0, heard(vec![ev("a", 0, progress("received")), ev("a", 1, progress("execute"))]));
    s.handle(0, admit("b"));
    s.handle(0, ready("b"));
    // a runs long on a live tab while b waits past the queue's limit.
    let ended = keep_alive(&mut s, "t1", 0, SETTINGS.max_wait_ms + TAB_LEASE_MS);
    assert_eq!(ended, vec![("b".into(), "Cancelled".into(), 130, true)]);
}

// ---- the backchannel ----

#[test]
fn a_retried_batch_is_applied_once_and_output_is_forwarded_once() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    let batch = vec![ev("a", 0, progress("received")), ev("a", 1, stdout("x"))];
    let first = s.handle(1, heard(batch.clone()));
    let second = s.handle(2, heard(batch));
    let forwarded = |out: &[Output]| out.iter().filter(|o| matches!(o, Output::Forward { .. })).count();
    assert_eq!(forwarded(&first), 2);
    assert_eq!(forwarded(&second), 0);
    assert_eq!(reply(&second).1["duplicates"], 2);
    assert_eq!(reply(&second).0, 200);
}

#[test]
fn an_event_past_a_gap_ends_the_run_its_output_lost_and_its_tab_is_told_to_stop() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    let out = s.handle(1, heard(vec![ev("a", 0, progress("received")), ev("a", 2, exit(0))]));
    let (status, body) = reply(&out);
    assert_eq!(status, 409);
    assert_eq!(body["applied"], 1);
    assert_eq!(body["refused"][0]["code"], "gap");
    assert!(body["refused"][0]["reason"].as_str().unwrap().starts_with("expected seq 1"));
    assert!(out.contains(&cancel_sent("t1", "a")));
    assert_eq!(finishes(&out), vec![("a".into(), "Internal".into(), 1, true)]);
    // A late resend changes nothing: the run ended once.
    let out = s.handle(2, heard(vec![ev("a", 1, stdout("b")), ev("a", 2, exit(0))]));
    assert_eq!(reply(&out).0, 409);
    assert!(finishes(&out).is_empty());
}

#[test]
fn unknown_runs_get_404_and_mixed_refusals_409_with_the_rest_applied() {
    let mut s = session();
    let (status, body) = reply(&s.handle(0, heard(vec![ev("nope", 0, exit(0))])));
    assert_eq!(status, 404);
    assert_eq!(body["error"]["name"], "UnknownRun");
    assert_eq!(body["refused"][0]["code"], "unknown");
    started(&mut s, 0, "a", "t1");
    let out = s.handle(1, heard(vec![ev("nope", 0, exit(0)), ev("a", 0, exit(3))]));
    let (status, body) = reply(&out);
    assert_eq!(status, 409);
    assert_eq!(body["error"]["name"], "EventsRefused");
    assert_eq!(finishes(&out), vec![("a".into(), "".into(), 3, true)]);
}

#[test]
fn late_events_after_the_end_get_409_until_the_run_is_forgotten() {
    let mut s = session();
    s.handle(0, tab("t1"));
    for i in 0..=FINISHED_KEPT {
        let run = format!("r{i}");
        s.handle(0, admit(&run));
        s.handle(0, ready(&run));
        s.handle(0, heard(vec![ev(&run, 0, exit(0))]));
    }
    let late = |s: &mut RunMachine, run: &str| reply(&s.handle(1, heard(vec![ev(run, 1, stdout("late"))]))).0;
    assert_eq!(late(&mut s, &format!("r{FINISHED_KEPT}")), 409);
    assert_eq!(late(&mut s, "r0"), 404, "the oldest ended run was forgotten");
}

#[test]
fn output_past_the_cap_is_not_forwarded_and_the_run_says_so() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    let big = "x".repeat(CAP as usize + 10);
    let out = s.handle(1, heard(vec![ev("a", 0, stdout(&big)), ev("a", 1, stdout("more")), ev("a", 2, exit(0))]));
    let forwarded: Vec<&Output> = out.iter().filter(|o| matches!(o, Output::Forward { .. })).collect();
    assert_eq!(forwarded, vec![&Output::Forward { run: "a".into(), body: stdout(&big[..CAP as usize]) }]);
    assert_eq!(finishes(&out), vec![("a".into(), "OutputLimitExceeded".into(), 1, true)]);
}

#[test]
fn only_the_first_denials_of_a_run_are_forwarded_for_the_audit() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    let denied = |i: u64| EventBody::Denied {
        what: "fetch".into(),
        target: format!("https://x.example/{i}"),
        reason: "no".into(),
    };
    let events = (0..DENIALS_AUDITED + 5).map(|i| ev("a", i, denied(i))).collect();
    let out = s.handle(1, heard(events));
    let forwarded: Vec<&Output> = out.iter().filter(|o| matches!(o, Output::Forward { .. })).collect();
    assert_eq!(forwarded.len() as u64, DENIALS_AUDITED);
    assert_eq!(forwarded[0], &Output::Forward { run: "a".into(), body: denied(0) });
    let line = r#"{"runId":"a","seq":0,"type":"denied","what":"write","target":"/host/x","reason":"r"}"#;
    assert!(matches!(serde_json::from_str::<TabEvent>(line).unwrap().body, EventBody::Denied { .. }));
}

// ---- cancellation ----

#[test]
fn a_waiting_run_cancelled_by_its_client_is_never_sent_and_gets_no_answer() {
    let mut s = session();
    s.handle(0, admit("a"));
    let out = s.handle(1, Input::Cancel { run: "a".into(), why: Cancel::ByClient });
    assert_eq!(finishes(&out), vec![("a".into(), "Cancelled".into(), 130, false)]);
    s.handle(2, ready("a"));
    let out = s.handle(3, tab("t1"));
    assert!(!out.iter().any(|o| matches!(o, Output::Send { .. })), "{out:?}");
}

#[test]
fn a_running_run_whose_client_went_away_is_stopped_in_its_tab() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    let out = s.handle(1, Input::Cancel { run: "a".into(), why: Cancel::ClientGone });
    assert!(out.contains(&cancel_sent("t1", "a")));
    assert_eq!(finishes(&out), vec![("a".into(), "Cancelled".into(), 130, true)]);
    // The tab's exit for it, racing the cancel, is refused: the run ended once.
    let out = s.handle(2, heard(vec![ev("a", 0, exit(0))]));
    assert_eq!(reply(&out).0, 409);
    assert!(finishes(&out).is_empty());
}

#[test]
fn a_cancel_after_the_end_changes_nothing() {
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    s.handle(1, heard(vec![ev("a", 0, exit(0))]));
    assert_eq!(s.handle(2, Input::Cancel { run: "a".into(), why: Cancel::ByClient }), vec![]);
    assert_eq!(s.handle(2, Input::Cancel { run: "zzz".into(), why: Cancel::ClientGone }), vec![]);
}

// ---- invariants over random sequences ----

#[derive(Debug, Clone)]
enum Op {
    Admit,
    Ready(usize),
    Attach,
    Gone(usize),
    /// A tab's lease renewal, as the DO reads it: some milliseconds ago.
    Seen(usize, u64),
    /// The tab holding the running run reports `events` of it, from its next seq (or replays).
    Report {
        events: u8,
        replay: bool,
        exit: bool,
    },
    /// A batch for some run, from any seq: late, early, unknown.
    Stray {
        run: usize,
        seq: u64,
    },
    Tick(u64),
    Cancel(usize, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Admit),
        4 => any::<usize>().prop_map(Op::Ready),
        2 => Just(Op::Attach),
        2 => any::<usize>().prop_map(Op::Gone),
        4 => (any::<usize>(), 0u64..12_000).prop_map(|(tab, ago)| Op::Seen(tab, ago)),
        6 => (0u8..4, any::<bool>(), any::<bool>()).prop_map(|(events, replay, exit)| Op::Report { events, replay, exit }),
        1 => (any::<usize>(), 0u64..6).prop_map(|(run, seq)| Op::Stray { run, seq }),
        4 => prop_oneof![0u64..2_000, 5_000u64..400_000].prop_map(Op::Tick),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(run, by_client)| Op::Cancel(run, by_client)),
    ]
}

/// What the test saw of the machine's outputs.
#[derive(Default)]
struct Seen {
    admitted: Vec<String>,
    finished: HashMap<String, usize>,
    /// Run -> the tabs it was sent to, in order.
    sends: HashMap<String, Vec<String>>,
    /// Runs the machine accepted an event for while they were on a tab (they started).
    acknowledged: HashSet<String>,
    /// The run currently on a tab, per the outputs.
    on_tab: Option<(String, String)>,
    next_seq: HashMap<String, u64>,
    first_sent: Vec<String>,
    /// When each tab was last heard from, as the machine was told.
    renewed: HashMap<String, u64>,
    /// When each run was admitted, and the longest any may take (`run_life_ms`).
    admitted_at: HashMap<String, u64>,
    life_ms: u64,
}

impl Seen {
    fn record(&mut self, out: &[Output]) -> Result<(), TestCaseError> {
        for o in out {
            match o {
                Output::Admitted { run, .. } => self.admitted.push(run.clone()),
                Output::Send { tab, command: Command::Capsule { run } } => {
                    prop_assert!(!self.acknowledged.contains(run), "{} was sent again after a tab had started it", run);
                    // One run on a tab at a time: the last one sent has ended or left its tab.
                    prop_assert!(self.on_tab.is_none(), "{} sent while {:?} was still on a tab", run, self.on_tab);
                    let tabs = self.sends.entry(run.clone()).or_default();
                    if tabs.is_empty() {
                        self.first_sent.push(run.clone());
                    }
                    tabs.push(tab.clone());
                    self.on_tab = Some((run.clone(), tab.clone()));
                    self.next_seq.insert(run.clone(), 0);
                }
                Output::DropTab { tab } if self.on_tab.as_ref().is_some_and(|(_, t)| t == tab) => {
                    self.on_tab = None;
                }
                Output::Finish { run, .. } => {
                    *self.finished.entry(run.clone()).or_default() += 1;
                    prop_assert_eq!(self.finished[run], 1, "{} finished twice", run);
                    if self.on_tab.as_ref().is_some_and(|(r, _)| r == run) {
                        self.on_tab = None;
                    }
                }
                Output::Refused { run, .. } => {
                    prop_assert!(!self.admitted.contains(run));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Feeds `input` to the machine at `now` and checks what it did.
    fn feed(&mut self, s: &mut RunMachine, now: u64, input: Input) -> Result<(), TestCaseError> {
        match &input {
            Input::TabAttached { tab } | Input::Heard { tab: Some(tab), .. } => {
                self.renewed.insert(tab.clone(), now);
            }
            Input::TabSeen { tab, at_ms } => {
                let last = self.renewed.entry(tab.clone()).or_default();
                *last = (*last).max((*at_ms).min(now));
            }
            _ => {}
        }
        let gone = if let Input::TabGone { tab } = &input { Some(tab.clone()) } else { None };
        let running = self.on_tab.clone();
        if gone.is_some() && running.as_ref().map(|(_, t)| t) == gone.as_ref() {
            self.on_tab = None;
        }
        let on_tab = self.on_tab.clone();
        let is_renewal = matches!(input, Input::TabSeen { .. });
        // The DO refuses a call on `queue_full` before building its capsule: it must say
        // exactly what admitting the run would.
        let predicted = matches!(input, Input::Admit { .. }).then(|| s.queue_full());
        let out = s.handle(now, input);
        prop_assert!(!is_renewal || out.is_empty(), "a renewal moved something: {:?}", out);
        if let Some(predicted) = predicted {
            let refused = out.iter().find_map(|o| match o {
                Output::Refused { max, .. } => Some(*max),
                _ => None,
            });
            prop_assert_eq!(predicted, refused, "queue_full() disagreed with admission: {:?}", out);
        }
        // A run is lost with its tab only when the tab is gone: a goodbye, a failed write, or a
        // lapsed lease. A live tab, however silent about its run, never loses it.
        for o in &out {
            let Output::Finish { run, outcome, .. } = o else { continue };
            let lost = outcome.exit.error.as_ref().is_some_and(|e| e.message.contains("went away"));
            let Some((_, tab)) = running.as_ref().filter(|(r, _)| lost && r == run) else { continue };
            let lapsed = now >= self.renewed.get(tab).copied().unwrap_or(0) + TAB_LEASE_MS;
            prop_assert!(gone.as_ref() == Some(tab) || lapsed, "{} was lost while {}'s lease held", run, tab);
        }
        // A run the machine took an event for, while on a tab, has started there.
        if let (Some((run, _)), Some(Output::Reply(reply))) =
            (on_tab, out.iter().find(|o| matches!(o, Output::Reply(_))))
        {
            if reply.applied > 0 {
                self.acknowledged.insert(run);
            }
        }
        self.record(&out)?;
        // No run outlives its life (requeues and late starts included), which its slot in the
        // tenant's runs in flight is leased for; a renewal moves nothing, the next input does.
        for o in &out {
            if let Output::Admitted { run } = o {
                self.admitted_at.insert(run.clone(), now);
            }
        }
        for (run, at) in self.admitted_at.iter().filter(|(run, _)| !self.finished.contains_key(*run)) {
            prop_assert!(is_renewal || now < at + self.life_ms, "{} admitted at {} is live at {}", run, at, now);
        }
        // One run on a tab at a time.
        let sent_now =
            out.iter().filter(|o| matches!(o, Output::Send { command: Command::Capsule { .. }, .. })).count();
        prop_assert!(sent_now <= 1);
        Ok(())
    }
}

/// Runs `ops`, then lets time pass until every run has ended (renewing every tab's lease
/// meanwhile if `renew_while_draining`: its runs then end by their deadlines, never as lost).
fn check(ops: Vec<Op>, max_queued: u32, renew_while_draining: bool) -> Result<(), TestCaseError> {
    let settings = QueueSettings { max_queued, max_wait_ms: 300_000, attach_wait_ms: 5_000 };
    let mut s = RunMachine::new(settings.clone());
    let mut seen = Seen { life_ms: run_life_ms(&settings, 1_000), ..Seen::default() };
    let mut now = 0u64;
    let mut runs = 0usize;
    let mut tabs = 0usize;
    for op in ops {
        let input = match op {
            Op::Admit => {
                runs += 1;
                Input::Admit { run: format!("r{runs}"), timeout_ms: 1_000, output_cap: 64, executor: Executor::Tab }
            }
            Op::Ready(n) if runs > 0 => Input::Ready { run: format!("r{}", n % runs + 1) },
            Op::Attach => {
                tabs += 1;
                Input::TabAttached { tab: format!("t{tabs}") }
            }
            Op::Gone(n) if !s.tabs().is_empty() => Input::TabGone { tab: s.tabs()[n % s.tabs().len()].clone() },
            Op::Seen(n, ago) if tabs > 0 => {
                Input::TabSeen { tab: format!("t{}", n % tabs + 1), at_ms: now.saturating_sub(ago) }
            }
            Op::Report { events, replay, exit } => {
                let Some((run, _)) = seen.on_tab.clone() else { continue };
                let next = seen.next_seq[&run];
                let start = if replay { next.saturating_sub(1) } else { next };
                let mut batch: Vec<TabEvent> =
                    (0..u64::from(events)).map(|i| ev(&run, start + i, stdout("0123456789"))).collect();
                if exit {
                    batch.push(ev(&run, start + u64::from(events), self::exit(0)));
                }
                if batch.is_empty() {
                    continue;
                }
                let last = batch.last().map_or(0, |e| e.seq);
                seen.next_seq.insert(run.clone(), next.max(last + 1));
                Input::Heard { tab: seen.on_tab.as_ref().map(|(_, tab)| tab.clone()), events: batch }
            }
            Op::Stray { run, seq } if runs > 0 => {
                Input::Heard { tab: None, events: vec![ev(&format!("r{}", run % runs + 1), seq, stdout("?"))] }
            }
            Op::Tick(ms) => {
                now += ms;
                Input::Tick
            }
            Op::Cancel(n, by_client) if runs > 0 => Input::Cancel {
                run: format!("r{}", n % runs + 1),
                why: if by_client { Cancel::ByClient } else { Cancel::ClientGone },
            },
            _ => continue,
        };
        seen.feed(&mut s, now, input)?;
    }
    // Drain: make every run ready and let time pass; everything admitted must end.
    for n in 1..=runs {
        seen.feed(&mut s, now, Input::Ready { run: format!("r{n}") })?;
    }
    for _ in 0..(runs + 2) * 64 {
        let Some(at) = s.next_wake() else { break };
        now = now.max(at);
        if renew_while_draining {
            for tab in s.tabs() {
                seen.feed(&mut s, now, Input::TabSeen { tab, at_ms: now })?;
            }
        }
        seen.feed(&mut s, now, Input::Tick)?;
    }
    prop_assert_eq!(s.next_wake(), None, "runs still pending after draining");
    for run in &seen.admitted {
        prop_assert_eq!(seen.finished.get(run).copied(), Some(1), "{} did not finish exactly once", run);
    }
    // First sends follow admission order.
    let expected: Vec<&String> = seen.admitted.iter().filter(|r| seen.first_sent.contains(r)).collect();
    prop_assert_eq!(seen.first_sent.iter().collect::<Vec<_>>(), expected);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_admitted_run_ends_exactly_once_and_never_runs_twice(
        ops in proptest::collection::vec(op(), 0..60),
        max_queued in 0u32..6,
        renew_while_draining in any::<bool>(),
    ) {
        check(ops, max_queued, renew_while_draining)?;
    }
}

#[test]
fn the_error_names_the_machine_uses_carry_their_exit_codes() {
    assert_eq!(ErrorName::Timeout.exit_code(), 124);
    assert_eq!(ErrorName::Cancelled.exit_code(), 130);
    assert_eq!(ErrorName::NoExecutorAttached.exit_code(), 1);
}

#[test]
fn a_long_run_whose_tab_says_nothing_still_gives_its_client_progress_every_couple_of_seconds() {
    // The tab's lease is renewed on its own socket and says nothing to the client; a client
    // that resets its request timeout on progress must hear of a long, quiet run regardless.
    let mut s = session();
    started(&mut s, 0, "a", "t1");
    let beats = |out: &[Output]| out.iter().filter(|o| is_beat(o)).count();
    assert_eq!(beats(&s.handle(PROGRESS_EVERY_MS - 1, Input::Tick)), 0, "no beat before one is due");
    let out = s.handle(PROGRESS_EVERY_MS, Input::Tick);
    let beat = EventBody::Progress { phase: "starting".into(), runtime_id: None, detail: Some("2 s".into()) };
    assert!(out.contains(&Output::Forward { run: "a".into(), body: beat }), "{out:?}");
    s.handle(2_500, Input::TabSeen { tab: "t1".into(), at_ms: 2_500 });
    s.handle(2_500, heard_from("t1", vec![ev("a", 0, progress("received")), ev("a", 1, progress("execute"))]));
    assert_eq!(beats(&s.handle(4_000, Input::Tick)), 0, "what the tab said counts: 2.5 s was the last news");
    let out = s.handle(4_500, Input::Tick);
    let beat = EventBody::Progress { phase: "running".into(), runtime_id: None, detail: Some("4 s".into()) };
    assert!(out.contains(&Output::Forward { run: "a".into(), body: beat }), "{out:?}");
    s.handle(5_000, heard_from("t1", vec![ev("a", 2, exit(0))]));
    assert_eq!(beats(&s.handle(9_000, Input::Tick)), 0, "an ended run has no beat");
}
