//! Where a run executes (issue 27): the tenant's `executor` narrowed by a call, the edge budget
//! (runs a minute, ms a day), and the run machine's routing between tabs and the edge: `tab`
//! as before, `tab-or-edge` waiting for a tab only while one may be coming back, `edge` even
//! with tabs attached; a budget spent is `EdgeBudgetExceeded`; the edge's events are a tab's.

use proptest::prelude::*;
use relay_core::auth::QueueSettings;
use relay_core::error::ErrorName;
use relay_core::run::backchannel::{EventBody, TabEvent, Usage};
use relay_core::run::executor::{EdgeBudget, EdgeMeter, Executor, EDGE, EDGE_LOAD_MS};
use relay_core::run::lease::TAB_LEASE_MS;
use relay_core::run::machine::{Cancel, Command, Input, Output, RunMachine, TIMEOUT_GRACE_MS};

const ATTACH_WAIT: u64 = 5_000;
const SETTINGS: QueueSettings = QueueSettings { max_queued: 100, max_wait_ms: 300_000, attach_wait_ms: ATTACH_WAIT };
const BUDGET: EdgeBudget = EdgeBudget { cpu_ms_per_day: 10_000, runs_per_minute: 3 };
const DAY: u64 = 86_400_000;

fn machine() -> RunMachine {
    let mut machine = RunMachine::new(SETTINGS);
    machine.set_edge_budget(Some(BUDGET));
    machine
}

fn admit(run: &str, executor: Executor) -> Input {
    Input::Admit { run: run.into(), timeout_ms: 60_000, output_cap: 1_000, executor }
}

/// Admits `run` and makes it ready at `now`: the outputs of its readiness.
fn queue(m: &mut RunMachine, now: u64, run: &str, executor: Executor) -> Vec<Output> {
    m.handle(now, admit(run, executor));
    m.handle(now, Input::Ready { run: run.into() })
}

/// Where the outputs sent a run, if anywhere.
fn sent_to(out: &[Output]) -> Option<String> {
    out.iter().find_map(|o| match o {
        Output::Send { tab, command: Command::Capsule { .. } } => Some(tab.clone()),
        _ => None,
    })
}

fn finished(out: &[Output]) -> Option<(String, i32, Option<&'static str>, String)> {
    out.iter().find_map(|o| match o {
        Output::Finish { outcome, .. } => Some((
            outcome.exit.error.as_ref().map(|e| e.name.clone()).unwrap_or_default(),
            outcome.exit.exit_code,
            outcome.executor,
            outcome.exit.error.as_ref().map(|e| e.message.clone()).unwrap_or_default(),
        )),
        _ => None,
    })
}

/// The edge's exit event for `run`, reporting `ms` of running.
fn edge_exit(run: &str, seq: u64, ms: u64) -> Input {
    exit_from(EDGE, run, seq, ms)
}

/// `tab`'s exit event for `run`, reporting `ms` of running.
fn exit_from(tab: &str, run: &str, seq: u64, ms: u64) -> Input {
    let exit = EventBody::Exit {
        exit_code: 0,
        usage: Usage { wall_ms: ms, ..Usage::default() },
        error: None,
        files: vec![],
        displays: vec![],
    };
    Input::Heard { tab: Some(tab.into()), events: vec![TabEvent { run_id: run.into(), seq, body: exit }] }
}

/// Three edge runs at the start of the day: `BUDGET`'s runs a minute are spent.
fn spend_the_minute(m: &mut RunMachine) {
    for (i, run) in ["r1", "r2", "r3"].iter().enumerate() {
        assert_eq!(sent_to(&queue(m, i as u64, run, Executor::Edge)), Some(EDGE.into()));
        m.handle(i as u64, edge_exit(run, 0, 1));
    }
}

/// Takes a start from `budget` at `now`, as the run machine does: checked, then recorded.
fn start(meter: &mut EdgeMeter, budget: &EdgeBudget, now: u64) -> Result<(), String> {
    meter.check(budget, now)?;
    meter.record_start(now);
    Ok(())
}

#[test]
fn a_call_may_narrow_the_tenants_executor_never_widen_it() {
    use Executor::*;
    let cases = [
        // (tenant, has budget, asked, got)
        (Tab, true, None, Ok(Tab)),
        (TabOrEdge, true, None, Ok(TabOrEdge)),
        (TabOrEdge, true, Some(Tab), Ok(Tab)),
        (TabOrEdge, true, Some(Edge), Ok(Edge)),
        (Edge, true, Some(Edge), Ok(Edge)),
        (Edge, true, None, Ok(Edge)),
        (Tab, true, Some(Edge), Err("wider")),
        (Tab, true, Some(TabOrEdge), Err("wider")),
        (Edge, true, Some(Tab), Err("wider")),
        (Edge, true, Some(TabOrEdge), Err("wider")),
        // No budget: the tenant is on tabs, whatever it says.
        (TabOrEdge, false, None, Ok(Tab)),
        (Edge, false, None, Ok(Tab)),
        (Edge, false, Some(Edge), Err("no edge budget")),
    ];
    for (tenant, budget, asked, want) in cases {
        let got = tenant.for_call(budget, asked);
        match (want, &got) {
            (Ok(want), Ok(got)) => assert_eq!(*got, want, "{tenant:?} {budget} {asked:?}"),
            (Err(why), Err(message)) => {
                assert!(message.contains(why), "{message}");
                assert!(message.contains("defaults.executor") || message.contains("defaults.edge"), "{message}");
            }
            _ => panic!("{tenant:?} {budget} {asked:?}: got {got:?}"),
        }
    }
}

#[test]
fn the_budget_counts_runs_a_minute_and_ms_a_day_and_says_who_can_raise_it() {
    let mut meter = EdgeMeter::default();
    let t0 = 10 * DAY + 1_000;
    for i in 0..3 {
        start(&mut meter, &BUDGET, t0 + i).expect("within 3 a minute");
    }
    let refused = start(&mut meter, &BUDGET, t0 + 10).unwrap_err();
    assert!(refused.contains("3 runs a minute") && refused.contains("runsPerMinute"), "{refused}");
    assert!(refused.contains("PATCH /admin/tenants") && refused.contains("retry in 60 s"), "{refused}");
    start(&mut meter, &BUDGET, t0 + 60_000).expect("the first start left the window");
    meter.charge(10_000);
    let spent = start(&mut meter, &BUDGET, t0 + 120_000).unwrap_err();
    assert!(spent.contains("10000 of 10000 ms") && spent.contains("cpuMsPerDay"), "{spent}");
    assert!(spent.contains("00:00 UTC"), "{spent}");
    start(&mut meter, &BUDGET, 11 * DAY).expect("a new UTC day has a new budget");
    assert_eq!(meter.spent_ms(), 0);
}

#[test]
fn budgets_out_of_bounds_are_refused() {
    for bad in [
        EdgeBudget { cpu_ms_per_day: 0, runs_per_minute: 1 },
        EdgeBudget { cpu_ms_per_day: DAY + 1, runs_per_minute: 1 },
        EdgeBudget { cpu_ms_per_day: 1, runs_per_minute: 0 },
        EdgeBudget { cpu_ms_per_day: 1, runs_per_minute: 6_001 },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
    assert!(BUDGET.validate().is_ok());
}

proptest! {
    /// Whatever the starts, no 60 s window holds more of them than the budget allows.
    #[test]
    fn no_minute_holds_more_starts_than_the_budget(gaps in proptest::collection::vec(0u64..30_000, 1..200), per_minute in 1u32..20) {
        let budget = EdgeBudget { cpu_ms_per_day: DAY, runs_per_minute: per_minute };
        let (mut meter, mut now, mut taken) = (EdgeMeter::default(), DAY, Vec::new());
        for gap in gaps {
            now += gap;
            if start(&mut meter, &budget, now).is_ok() {
                taken.push(now);
            }
        }
        for (i, &at) in taken.iter().enumerate() {
            let within = taken[i..].iter().take_while(|&&t| t < at + 60_000).count();
            prop_assert!(within <= per_minute as usize);
        }
    }
}

#[test]
fn tab_or_edge_with_no_tab_ever_goes_to_the_edge_at_once() {
    let mut m = machine();
    assert_eq!(sent_to(&queue(&mut m, 1_000, "r1", Executor::TabOrEdge)), Some(EDGE.into()));
    let end = m.handle(1_050, edge_exit("r1", 0, 40));
    assert_eq!(finished(&end), Some((String::new(), 0, Some("edge"), String::new())));
    assert_eq!(m.edge_spent_ms(), 50, "the run's ms from sending to its end are charged to the budget");
}

#[test]
fn tab_or_edge_waits_for_a_tab_that_may_come_back_then_goes_to_the_edge() {
    let mut m = machine();
    m.handle(0, Input::TabAttached { tab: "t1".into() });
    m.handle(1_000, Input::TabGone { tab: "t1".into() });
    assert_eq!(sent_to(&queue(&mut m, 1_000, "r1", Executor::TabOrEdge)), None, "a tab left just now: wait");
    assert!(m.next_wake().is_some_and(|wake| wake <= 1_000 + ATTACH_WAIT));
    assert_eq!(sent_to(&m.handle(1_000 + ATTACH_WAIT - 1, Input::Tick)), None);
    assert_eq!(sent_to(&m.handle(1_000 + ATTACH_WAIT, Input::Tick)), Some(EDGE.into()), "the attach wait is over");
}

#[test]
fn a_tab_coming_back_within_the_wait_takes_the_run() {
    let mut m = machine();
    m.handle(0, Input::TabAttached { tab: "t1".into() });
    m.handle(1_000, Input::TabGone { tab: "t1".into() });
    queue(&mut m, 1_000, "r1", Executor::TabOrEdge);
    assert_eq!(sent_to(&m.handle(2_000, Input::TabAttached { tab: "t2".into() })), Some("t2".into()));
}

#[test]
fn tab_or_edge_goes_to_the_edge_once_no_tab_may_come_back() {
    let mut settings = SETTINGS;
    settings.attach_wait_ms = 60_000; // longer than a lease: the lease decides
    let mut m = RunMachine::new(settings);
    m.set_edge_budget(Some(BUDGET));
    m.handle(0, Input::TabAttached { tab: "t1".into() });
    m.handle(1_000, Input::TabGone { tab: "t1".into() });
    assert_eq!(sent_to(&queue(&mut m, 1_000, "r1", Executor::TabOrEdge)), None);
    assert!(m.next_wake().is_some_and(|wake| wake <= 1_000 + TAB_LEASE_MS), "woken when the lease runs out");
    assert_eq!(sent_to(&m.handle(1_000 + TAB_LEASE_MS, Input::Tick)), Some(EDGE.into()));
    // Long after the tab left, a new run goes to the edge at once.
    m.handle(1_000 + TAB_LEASE_MS + 10, edge_exit("r1", 0, 10));
    assert_eq!(sent_to(&queue(&mut m, 100_000, "r2", Executor::TabOrEdge)), Some(EDGE.into()));
}

#[test]
fn a_tab_attached_takes_tab_or_edge_runs_and_edge_runs_stay_at_the_edge() {
    let mut m = machine();
    m.handle(0, Input::TabAttached { tab: "t1".into() });
    assert_eq!(sent_to(&queue(&mut m, 10, "r1", Executor::TabOrEdge)), Some("t1".into()));
    m.handle(
        20,
        Input::Heard {
            tab: Some("t1".into()),
            events: vec![TabEvent {
                run_id: "r1".into(),
                seq: 0,
                body: EventBody::Exit {
                    exit_code: 0,
                    usage: Usage::default(),
                    error: None,
                    files: vec![],
                    displays: vec![],
                },
            }],
        },
    );
    assert_eq!(sent_to(&queue(&mut m, 30, "r2", Executor::Edge)), Some(EDGE.into()), "edge only, tab or not");
}

#[test]
fn a_tenant_on_tab_still_gets_no_executor_attached() {
    let mut m = machine();
    assert_eq!(sent_to(&queue(&mut m, 0, "r1", Executor::Tab)), None);
    let end = m.handle(ATTACH_WAIT, Input::Tick);
    let (name, _, executor, _) = finished(&end).expect("ended");
    assert_eq!((name.as_str(), executor), ("NoExecutorAttached", None));
}

#[test]
fn a_spent_budget_refuses_the_run_with_edge_budget_exceeded() {
    let mut m = machine();
    spend_the_minute(&mut m);
    let out = queue(&mut m, 10, "r4", Executor::Edge);
    assert_eq!(sent_to(&out), None);
    let (name, code, executor, message) = finished(&out).expect("refused at once");
    assert_eq!((name.as_str(), code, executor), (ErrorName::EdgeBudgetExceeded.as_str(), 1, None));
    assert!(message.contains("runsPerMinute"), "{message}");
    assert_eq!(ErrorName::EdgeBudgetExceeded.http_status(), 429);
}

/// CPU ms a day are the tenant's: what its other relay sessions spent (its ledger's total, told
/// with each call) counts here, and each run's edge time goes out with its end.
#[test]
fn the_tenants_edge_day_counts_across_its_relay_sessions() {
    let mut m = machine();
    let t0 = 10 * DAY;
    assert_eq!(sent_to(&queue(&mut m, t0, "r1", Executor::Edge)), Some(EDGE.into()));
    let end = m.handle(t0 + 250, edge_exit("r1", 0, 1));
    let edge_ms =
        end.iter().find_map(|o| if let Output::Finish { outcome, .. } = o { Some(outcome.edge_ms) } else { None });
    assert_eq!(edge_ms, Some(250), "charged on the relay's clock, not the isolate's");
    // Another relay session of the tenant spent the rest of the day.
    m.edge_spent_by_tenant(t0 + 300, BUDGET.cpu_ms_per_day);
    let (name, _, _, message) = finished(&queue(&mut m, t0 + 301, "r2", Executor::Edge)).expect("refused");
    assert_eq!(name, "EdgeBudgetExceeded");
    assert!(message.contains("10000 of 10000 ms"), "{message}");
    // A total below this relay session's own never lowers it; a new UTC day has a new budget.
    m.edge_spent_by_tenant(t0 + 302, 0);
    assert_eq!(m.edge_spent_ms(), BUDGET.cpu_ms_per_day);
    m.edge_spent_by_tenant(t0 + DAY, 0);
    assert_eq!(sent_to(&queue(&mut m, t0 + DAY, "r3", Executor::Edge)), Some(EDGE.into()));
}

#[test]
fn relay_sessions_running_at_the_edge_at_once_pass_the_day_s_budget_by_one_run_at_most() {
    // Two relay sessions of a tenant, each told by the ledger, when its run was charged, that
    // 1 s of the day's budget is left; each run would go on for its 60 s timeout.
    let t0 = 10 * DAY;
    let left = 1_000;
    let mut spent = BUDGET.cpu_ms_per_day - left;
    let mut sessions = [machine(), machine()];
    for (n, m) in sessions.iter_mut().enumerate() {
        m.edge_spent_by_tenant(t0, BUDGET.cpu_ms_per_day - left);
        assert_eq!(sent_to(&queue(m, t0, &format!("r{n}"), Executor::Edge)), Some(EDGE.into()));
        m.handle(
            t0 + 10,
            Input::Heard {
                tab: Some(EDGE.into()),
                events: vec![TabEvent {
                    run_id: format!("r{n}"),
                    seq: 0,
                    body: EventBody::Progress { phase: "execute".into(), runtime_id: None, detail: None },
                }],
            },
        );
    }
    for (n, m) in sessions.iter_mut().enumerate() {
        assert!(finished(&m.handle(t0 + left - 1, Input::Tick)).is_none());
        let out = m.handle(t0 + left, Input::Tick);
        assert!(out.contains(&Output::Send { tab: EDGE.into(), command: Command::Cancel { run: format!("r{n}") } }));
        let (name, _, _, message) = finished(&out).expect("stopped at the budget");
        assert_eq!(name, "EdgeBudgetExceeded");
        assert!(message.contains("ran out while the run was going, so it was stopped after 1000 ms"), "{message}");
        spent += out
            .iter()
            .find_map(|o| if let Output::Finish { outcome, .. } = o { Some(outcome.edge_ms) } else { None })
            .unwrap();
    }
    println!("the day's edge ms: {spent} of {} (one run's worth over at most: {left})", BUDGET.cpu_ms_per_day);
    assert!(spent <= BUDGET.cpu_ms_per_day + left, "{spent}");
}

#[test]
fn with_no_budget_nothing_goes_to_the_edge() {
    let mut m = RunMachine::new(SETTINGS);
    m.set_edge_budget(None);
    // The relay session gets `tab` for such a tenant (for_call); runs admitted for the edge
    // before an admin removed the budget never go there unmetered: they end, saying why.
    assert_eq!(Executor::Edge.for_call(false, None), Ok(Executor::Tab));
    assert_eq!(sent_to(&queue(&mut m, 0, "r1", Executor::Tab)), None);
    m.handle(ATTACH_WAIT, Input::Tick); // r1 ends NoExecutorAttached
    for (run, executor) in [("r2", Executor::Edge), ("r3", Executor::TabOrEdge)] {
        let out = queue(&mut m, ATTACH_WAIT + 1, run, executor);
        assert_eq!(sent_to(&out), None, "{executor:?}");
        let (name, _, where_, message) = finished(&out).expect("ended at once");
        assert_eq!((name.as_str(), where_), ("EdgeBudgetExceeded", None), "{executor:?}");
        assert!(message.contains("no edge budget") && message.contains("defaults.edge"), "{message}");
    }
    assert_eq!(m.edge_spent_ms(), 0);
}

#[test]
fn an_edge_run_is_charged_the_relays_time_from_sending_to_its_end_however_it_ends() {
    // The isolate's clock stands still while it computes: it may report 0 ms for a CPU-bound
    // run. The relay's own clock counts, for every way an edge run ends.
    let mut m = RunMachine::new(SETTINGS);
    m.set_edge_budget(Some(EdgeBudget { cpu_ms_per_day: DAY, runs_per_minute: 100 }));
    queue(&mut m, 1_000, "r1", Executor::Edge);
    m.handle(6_000, edge_exit("r1", 0, 0));
    assert_eq!(m.edge_spent_ms(), 5_000, "its exit, reporting 0 ms");
    queue(&mut m, 10_000, "r2", Executor::Edge);
    m.handle(12_000, Input::Cancel { run: "r2".into(), why: Cancel::ByClient });
    assert_eq!(m.edge_spent_ms(), 7_000, "a client's cancel");
    queue(&mut m, 20_000, "r3", Executor::Edge);
    let deadline = m.next_wake().expect("its deadline");
    let end = m.handle(deadline, Input::Tick);
    assert_eq!(finished(&end).expect("timed out").0, "Timeout");
    assert_eq!(m.edge_spent_ms(), 7_000 + deadline - 20_000, "the relay's timeout");
    queue(&mut m, deadline, "r4", Executor::Edge);
    let failed = Cancel::Failed(ErrorName::Internal, "the isolate was killed".into());
    m.handle(deadline + 300, Input::Cancel { run: "r4".into(), why: failed });
    assert_eq!(m.edge_spent_ms(), 7_300 + deadline - 20_000, "an isolate that died");
    queue(&mut m, deadline + 400, "r5", Executor::TabOrEdge);
    m.handle(deadline + 400, Input::TabAttached { tab: "t1".into() });
    m.handle(deadline + 900, Input::Cancel { run: "r5".into(), why: Cancel::ClientGone });
    assert_eq!(m.edge_spent_ms(), 7_800 + deadline - 20_000, "a run at the edge while a tab came");
}

#[test]
fn runs_the_edge_refuses_before_any_isolate_has_them_cost_no_budget() {
    // BUDGET: 3 runs a minute. Five runs whose job could not be made (another build holds the
    // relay session's one build at the edge, say) spend none of it.
    let mut m = machine();
    for (i, run) in ["u1", "u2", "u3", "u4", "u5"].iter().enumerate() {
        let now = 1_000 * i as u64;
        assert_eq!(sent_to(&queue(&mut m, now, run, Executor::Edge)), Some(EDGE.into()), "{run}");
        let refused = Cancel::Unstarted(ErrorName::DepsResolutionFailed, "one build at a time".into());
        let end = m.handle(now + 400, Input::Cancel { run: run.to_string(), why: refused });
        assert_eq!(finished(&end).expect("ended").0, "DepsResolutionFailed");
    }
    assert_eq!(m.edge_spent_ms(), 0);
    spend_the_minute(&mut m); // still all three of the minute's runs
    let out = queue(&mut m, 10_000, "r4", Executor::Edge);
    assert_eq!(finished(&out).expect("refused").0, "EdgeBudgetExceeded", "and no more");
}

#[test]
fn an_edge_run_that_never_starts_times_out_by_the_edge_s_load_time_and_says_so_not_a_tab_s() {
    let mut m = RunMachine::new(SETTINGS);
    m.set_edge_budget(Some(EdgeBudget { cpu_ms_per_day: DAY, runs_per_minute: 100 }));
    queue(&mut m, 0, "r1", Executor::Edge);
    let deadline = m.next_wake().expect("its deadline");
    assert_eq!(deadline, EDGE_LOAD_MS + 60_000 + TIMEOUT_GRACE_MS);
    let (name, _, executor, message) = finished(&m.handle(deadline, Input::Tick)).expect("timed out");
    assert_eq!((name.as_str(), executor), ("Timeout", Some(EDGE)));
    assert!(message.contains(&format!("the edge executor did not start the run within {deadline} ms")), "{message}");
    assert!(message.contains("run it on a browser tab") && !message.contains("reload the tab"), "{message}");
}

#[test]
fn after_a_budget_refusal_the_runs_behind_start_at_once() {
    let mut m = machine();
    spend_the_minute(&mut m);
    // Two more edge runs and a tab run, ready in one input: the edge runs are refused and
    // the tab run starts, all at once (not at the next input, or the queue's expiry).
    m.handle(10, Input::TabAttached { tab: "t1".into() });
    for run in ["r4", "r5"] {
        m.handle(10, admit(run, Executor::Edge));
    }
    m.handle(10, admit("r6", Executor::TabOrEdge));
    m.handle(10, Input::Ready { run: "r6".into() });
    m.handle(10, Input::Ready { run: "r5".into() });
    let out = m.handle(10, Input::Ready { run: "r4".into() });
    let refused: Vec<&str> = out
        .iter()
        .filter_map(|o| match o {
            Output::Finish { run, outcome, .. } => {
                assert_eq!(outcome.exit.error.as_ref().unwrap().name, "EdgeBudgetExceeded");
                Some(run.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(refused, ["r4", "r5"]);
    assert_eq!(sent_to(&out), Some("t1".into()), "the run behind went to the tab in the same input");
}

#[test]
fn a_head_that_expires_does_not_hand_its_executor_to_the_run_behind() {
    // r1 (edge only) waits behind a tab's run until it expires; the tab run r2 behind it must
    // go to the tab, not to the edge r1 would have gone to.
    let max_wait = SETTINGS.max_wait_ms;
    let mut m = machine();
    m.handle(0, Input::TabAttached { tab: "t1".into() });
    assert_eq!(sent_to(&queue(&mut m, 0, "r0", Executor::Tab)), Some("t1".into()));
    queue(&mut m, 1_000, "r1", Executor::Edge);
    m.handle(max_wait, Input::TabSeen { tab: "t1".into(), at_ms: max_wait }); // t1 keeps its lease
    queue(&mut m, max_wait, "r2", Executor::Tab);
    let out = m.handle(1_000 + max_wait + 1, exit_from("t1", "r0", 0, 0));
    let ends: Vec<(&str, String)> = out
        .iter()
        .filter_map(|o| match o {
            Output::Finish { run, outcome, .. } => {
                Some((run.as_str(), outcome.exit.error.as_ref().map(|e| e.name.clone()).unwrap_or_default()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(ends, [("r0", String::new()), ("r1", "Cancelled".into())]);
    assert_eq!(sent_to(&out), Some("t1".into()), "r2 runs only on tabs");
}

#[test]
fn an_edge_run_has_no_lease_its_deadline_wakes_the_machine_and_a_cancel_reaches_the_edge() {
    let mut m = machine();
    // A day's budget larger than the run's time, so the run's own deadline is its end.
    m.set_edge_budget(Some(EdgeBudget { cpu_ms_per_day: DAY, ..BUDGET }));
    queue(&mut m, 1_000, "r1", Executor::Edge);
    let wake = m.next_wake().expect("a deadline");
    assert!(wake > 1_000 + 60_000, "no lease to lapse: its deadline ({wake})");
    let out = m.handle(2_000, Input::Cancel { run: "r1".into(), why: Cancel::ByClient });
    assert!(out.contains(&Output::Send { tab: EDGE.into(), command: Command::Cancel { run: "r1".into() } }));
}

#[test]
fn an_edge_failure_ends_the_run_with_its_name() {
    let mut m = machine();
    queue(&mut m, 0, "r1", Executor::Edge);
    let why = Cancel::Failed(ErrorName::DepsResolutionFailed, "a tab must build it once".into());
    let out = m.handle(5, Input::Cancel { run: "r1".into(), why });
    let (name, _, executor, message) = finished(&out).expect("ended");
    assert_eq!(
        (name.as_str(), executor, message.as_str()),
        ("DepsResolutionFailed", Some("edge"), "a tab must build it once")
    );
}
