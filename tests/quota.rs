//! The tenant's quotas (`relay_core::quota`): their bounds, and the ledger's windows, leases,
//! UTC days and Retry-After, with random sequences of charges.

use proptest::prelude::*;
use relay_core::auth::admin::from_admin_json;
use relay_core::quota::{
    answer, run_lease, Admitted, Charge, LedgerAnswer, LedgerRequest, MemoryLedger, Quotas, ADMITTED_FRESH_MS,
    SESSION_IDLE_MS,
};
use serde_json::json;

const DAY_MS: u64 = 86_400_000;
/// 2026-11-26 00:00:00 UTC.
const T0: u64 = 1_795_651_200_000;

fn quotas(calls: u64, sessions: u64, runs: u64) -> Quotas {
    Quotas { calls_per_minute: calls, relay_sessions: sessions, runs_in_flight: runs, ..Quotas::default() }
}

fn call(session: &str) -> Charge {
    Charge::Call { session: session.into() }
}

/// Run `id`'s slot, charged at `at` for a run that takes no time.
fn run(id: &str, at: u64) -> Charge {
    Charge::Run { lease: run_lease(id, at, 0), stored_bytes: 0, call: None }
}

fn ask(store: &MemoryLedger, quotas: Quotas, charge: Charge, now_ms: u64) -> LedgerAnswer {
    answer(store, &LedgerRequest { quotas, charge }, now_ms).unwrap()
}

/// The refusal's quota, limit, used and retry-after, or None when charged.
fn refused(answer: LedgerAnswer) -> Option<(String, u64, u64, u64)> {
    match answer {
        LedgerAnswer::Refused { refusal } => Some((refusal.quota, refusal.limit, refusal.used, refusal.retry_after_s)),
        LedgerAnswer::Charged { .. } => None,
        LedgerAnswer::Usage { .. } => panic!("a charge answered usage"),
    }
}

fn usage(store: &MemoryLedger, quotas: Quotas, now_ms: u64) -> serde_json::Value {
    match ask(store, quotas, Charge::Usage { edge_cpu_ms_per_day: Some(5_000) }, now_ms) {
        LedgerAnswer::Usage { usage } => usage,
        other => panic!("usage answered {other:?}"),
    }
}

#[test]
fn calls_per_minute_refuse_until_the_next_utc_minute() {
    let store = MemoryLedger::default();
    let q = quotas(3, 10, 10);
    let at = T0 + 20_500; // 20.5 s into a minute
    for _ in 0..3 {
        assert_eq!(refused(ask(&store, q, call("default"), at)), None);
    }
    assert_eq!(refused(ask(&store, q, call("default"), at)), Some(("callsPerMinute".into(), 3, 3, 40)));
    assert_eq!(refused(ask(&store, q, call("default"), T0 + 59_999)).map(|r| r.3), Some(1));
    assert_eq!(refused(ask(&store, q, call("default"), T0 + 60_000)), None);
    assert_eq!(usage(&store, q, T0 + 60_001)["callsPerMinute"], json!({"limit": 3, "used": 1, "resetsInS": 60}));
}

#[test]
fn a_relay_session_is_live_until_it_idles() {
    let store = MemoryLedger::default();
    let q = quotas(100, 2, 10);
    assert_eq!(refused(ask(&store, q, call("a"), T0)), None);
    assert_eq!(refused(ask(&store, q, call("b"), T0 + 1_000)), None);
    // A live one is always admitted; a third is not, until the oldest idles.
    assert_eq!(refused(ask(&store, q, call("a"), T0 + 2_000)), None);
    let third = refused(ask(&store, q, call("c"), T0 + 3_000));
    assert_eq!(third, Some(("relaySessions".into(), 2, 2, (SESSION_IDLE_MS - 2_000) / 1000)));
    assert_eq!(usage(&store, q, T0 + 3_000)["relaySessions"]["live"], json!(["a", "b"]));
    // A tab's attach (or another MCP request) to a relay session admits it as a call does,
    // but is no call.
    let admit = |session: &str| Charge::Admit { session: session.into() };
    assert_eq!(refused(ask(&store, q, admit("d"), T0 + 3_000)).map(|r| r.0), Some("relaySessions".into()));
    assert_eq!(refused(ask(&store, q, admit("b"), T0 + 3_000)), None);
    assert_eq!(usage(&store, q, T0 + 3_000)["callsPerMinute"]["used"], 3);
    assert_eq!(refused(ask(&store, q, call("c"), T0 + 2_000 + SESSION_IDLE_MS)), None);
    assert_eq!(
        refused(ask(&store, q, admit("d"), T0 + 2_000 + SESSION_IDLE_MS)).map(|r| r.0),
        Some("relaySessions".into())
    );
}

#[test]
fn a_read_or_an_end_that_changes_no_count_writes_nothing() {
    let (store, q) = (MemoryLedger::default(), Quotas::default());
    // A ledger that never counted anything (or was erased) is not made again by them.
    ask(&store, q, Charge::RunEnded { run: "r9".into(), edge_ms: 0 }, T0);
    usage(&store, q, T0);
    assert_eq!(*store.0.borrow(), None);
    // Nor is a ledger's row written again when only its windows moved.
    ask(&store, q, call("a"), T0);
    let row = store.0.borrow().clone();
    assert!(row.is_some());
    usage(&store, q, T0 + 61_000);
    ask(&store, q, Charge::RunEnded { run: "r9".into(), edge_ms: 0 }, T0 + 61_000);
    assert_eq!(*store.0.borrow(), row);
    // and what it shows then is what the windows say.
    assert_eq!(usage(&store, q, T0 + 61_000)["callsPerMinute"]["used"], 0);
}

#[test]
fn a_run_holds_its_slot_until_it_ends_or_its_lease_lapses() {
    let store = MemoryLedger::default();
    let q = quotas(100, 10, 2);
    assert_eq!(refused(ask(&store, q, run("r1", T0), T0)), None);
    assert_eq!(refused(ask(&store, q, run("r2", T0), T0)), None);
    // A call takes no slot; a third run waits; a run charged again renews its lease.
    assert_eq!(refused(ask(&store, q, call("a"), T0)), None);
    let third = refused(ask(&store, q, run("r3", T0), T0 + 10));
    assert_eq!(third, Some(("runsInFlight".into(), 2, 2, 5)));
    assert_eq!(refused(ask(&store, q, run("r1", T0 + 10), T0 + 10)), None);
    assert_eq!(usage(&store, q, T0 + 10)["runsInFlight"], json!({"limit": 2, "used": 2}));
    ask(&store, q, Charge::RunEnded { run: "r1".into(), edge_ms: 0 }, T0 + 20);
    assert_eq!(refused(ask(&store, q, run("r3", T0 + 20), T0 + 20)), None);
    // A lost end: r2's lease (a run that takes no time: the margin) lapses.
    let lapse = run_lease("r2", T0, 0).until_ms;
    assert_eq!(refused(ask(&store, q, run("r4", lapse), lapse - 1)).map(|r| r.0), Some("runsInFlight".into()));
    assert_eq!(refused(ask(&store, q, run("r4", lapse), lapse)), None);
}

#[test]
fn egress_counts_requests_and_bytes_per_utc_day() {
    let store = MemoryLedger::default();
    let q = Quotas { egress_requests_per_day: 2, egress_bytes_per_day: 1_000, ..Quotas::default() };
    let egress = |requests, bytes| Charge::Egress { requests, bytes };
    let late = T0 + DAY_MS - 90_000; // 23:58:30 UTC
    assert_eq!(refused(ask(&store, q, egress(1, 100), late)), None);
    assert_eq!(refused(ask(&store, q, egress(0, 950), late)), None); // a response's bytes: never refused
    assert_eq!(refused(ask(&store, q, egress(1, 0), late)), Some(("egressBytesPerDay".into(), 1_000, 1_050, 90)));
    assert_eq!(refused(ask(&store, q, egress(1, 0), T0 + DAY_MS)), None);
    assert_eq!(refused(ask(&store, q, egress(1, 0), T0 + DAY_MS)), None);
    assert_eq!(
        refused(ask(&store, q, egress(1, 0), T0 + DAY_MS + 1)),
        Some(("egressRequestsPerDay".into(), 2, 2, DAY_MS / 1000))
    );
}

#[test]
fn a_fetch_reserves_its_response_cap_and_gets_back_what_it_did_not_use() {
    let store = MemoryLedger::default();
    let q = Quotas { egress_bytes_per_day: 1_000, ..Quotas::default() };
    let fetch = Charge::Egress { requests: 1, bytes: 10 + 600 }; // its request, its response's cap
    let unused = |bytes, charged_ms| Charge::EgressUnused { bytes, charged_ms };
    // Fetches in flight at once see each other's caps: the bytes pass their quota by one at most.
    assert_eq!(refused(ask(&store, q, fetch.clone(), T0)), None);
    assert_eq!(refused(ask(&store, q, fetch.clone(), T0)), None);
    assert_eq!(
        refused(ask(&store, q, fetch.clone(), T0)).map(|r| (r.0, r.2)),
        Some(("egressBytesPerDay".into(), 1_220))
    );
    ask(&store, q, unused(550, T0), T0 + 5);
    ask(&store, q, unused(600, T0), T0 + 5);
    assert_eq!(usage(&store, q, T0 + 5)["egressBytesPerDay"]["used"], 70);
    // What was reserved yesterday does not come back from today's count.
    let tomorrow = T0 + DAY_MS;
    ask(&store, q, fetch.clone(), T0 + DAY_MS - 1);
    assert_eq!(refused(ask(&store, q, fetch, tomorrow)), None);
    ask(&store, q, unused(600, T0 + DAY_MS - 1), tomorrow);
    assert_eq!(usage(&store, q, tomorrow)["egressBytesPerDay"]["used"], 610);
}

#[test]
fn edge_time_adds_up_across_relay_sessions_per_utc_day_and_comes_back_with_every_charge() {
    let store = MemoryLedger::default();
    let q = Quotas::default();
    let late = T0 + DAY_MS - 1_000;
    ask(&store, q, run("r1", late), late);
    ask(&store, q, run("r2", late), late);
    ask(&store, q, Charge::RunEnded { run: "r1".into(), edge_ms: 300 }, late);
    ask(&store, q, Charge::RunEnded { run: "r2".into(), edge_ms: 200 }, late);
    assert_eq!(ask(&store, q, call("c"), late), LedgerAnswer::Charged { edge_spent_ms: 500 });
    assert_eq!(usage(&store, q, late)["edgeCpuMsPerDay"], json!({"limit": 5_000, "used": 500, "resetsInS": 1}));
    // A new UTC day starts from nothing.
    assert_eq!(ask(&store, q, call("c"), T0 + DAY_MS), LedgerAnswer::Charged { edge_spent_ms: 0 });
}

#[test]
fn a_refusal_names_the_quota_its_value_and_who_raises_it() {
    let store = MemoryLedger::default();
    let q = quotas(1, 10, 10);
    ask(&store, q, call("a"), T0);
    let LedgerAnswer::Refused { refusal } = ask(&store, q, call("a"), T0) else { panic!("charged") };
    let message = refusal.message();
    for part in ["defaults.quotas.callsPerMinute", "1 of 1", "retry in 60 s", "PATCH /admin/tenants/<id>"] {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
    assert_eq!(refusal.data()["name"], "QuotaExceeded");
    assert_eq!(refusal.data()["quota"], "defaults.quotas.callsPerMinute");
}

#[test]
fn quotas_are_validated_in_the_tenant_record() {
    let tenant =
        |quotas: serde_json::Value| from_admin_json(json!({"id": "t", "name": "t", "defaults": {"quotas": quotas}}));
    assert_eq!(tenant(json!({})).unwrap().defaults.quotas, Quotas::default());
    assert_eq!(tenant(json!({"runsInFlight": 3})).unwrap().defaults.quotas.runs_in_flight, 3);
    for (bad, field) in [
        (json!({"callsPerMinute": 0}), "defaults.quotas.callsPerMinute"),
        (json!({"relaySessions": 1_001}), "defaults.quotas.relaySessions"),
        (json!({"runsInFlight": 1_001}), "defaults.quotas.runsInFlight"),
        (json!({"callsPerMinute": 60_001}), "defaults.quotas.callsPerMinute"),
        (json!({"runsInFlight": 0}), "defaults.quotas.runsInFlight"),
        (json!({"egressRequestsPerDay": 0}), "defaults.quotas.egressRequestsPerDay"),
        (json!({"egressBytesPerDay": 0}), "defaults.quotas.egressBytesPerDay"),
        (json!({"callsPerMinuteX": 1}), "defaults.quotas.callsPerMinuteX"),
        (json!({"runsInFlight": -1}), "defaults.quotas.runsInFlight is -1; it must be a whole number"),
        (json!({"runsInFlight": "3"}), "defaults.quotas.runsInFlight is \"3\""),
        (json!({"runsInFlight": 2.5}), "defaults.quotas.runsInFlight is 2.5"),
        (json!([1]), "defaults.quotas must be an object"),
    ] {
        let why = tenant(bad.clone()).unwrap_err();
        assert!(why.contains(field), "{bad}: {why}");
    }
}

proptest! {
    /// Whatever the sequence, no UTC minute charges more calls than its quota, no more relay
    /// sessions are live than theirs, no more runs are in flight than theirs, and every
    /// refusal asks for a wait of 1 s to a day.
    #[test]
    fn no_sequence_passes_a_quota(
        steps in proptest::collection::vec((0u64..5_000, 0usize..4, 0u8..5), 1..200),
        calls in 1u64..6, sessions in 1u64..3, runs in 1u64..3,
    ) {
        let q = quotas(calls, sessions, runs);
        let store = MemoryLedger::default();
        let mut now = T0;
        let mut charged_in_minute = std::collections::BTreeMap::<u64, u64>::new();
        for (i, (dt, session, kind)) in steps.into_iter().enumerate() {
            now += dt * 50;
            let run_id = format!("r{i}");
            let charge = match kind {
                0 => call(&format!("s{session}")),
                1 => run(&run_id, now),
                2 => Charge::RunEnded { run: format!("r{}", i.saturating_sub(session + 1)), edge_ms: dt },
                3 => Charge::Admit { session: format!("s{session}") },
                _ => Charge::Egress { requests: 1, bytes: 10 },
            };
            match ask(&store, q, charge.clone(), now) {
                LedgerAnswer::Refused { refusal } => {
                    prop_assert!((1..=DAY_MS / 1000).contains(&refusal.retry_after_s), "{refusal:?}");
                    prop_assert!(refusal.used >= refusal.limit, "{refusal:?}");
                }
                LedgerAnswer::Charged { .. } if matches!(charge, Charge::Call { .. }) => {
                    *charged_in_minute.entry(now / 60_000).or_default() += 1;
                }
                _ => {}
            }
            let usage = usage(&store, q, now);
            prop_assert!(usage["relaySessions"]["used"].as_u64().unwrap() <= sessions);
            prop_assert!(usage["runsInFlight"]["used"].as_u64().unwrap() <= runs);
        }
        prop_assert!(charged_in_minute.values().all(|&n| n <= calls), "{charged_in_minute:?}");
    }
}

/// A run with its call (`Charge::Run`'s `call`: the Worker left the call to the relay session),
/// or the same two charges in two hops, the call first.
fn run_with_call(id: &str, at: u64, bytes: u64, session: &str, one_hop: bool) -> Vec<Charge> {
    let run = Charge::Run { lease: run_lease(id, at, 0), stored_bytes: bytes, call: None };
    match one_hop {
        true => vec![Charge::Run { lease: run_lease(id, at, 0), stored_bytes: bytes, call: Some(session.into()) }],
        false => vec![call(session), run],
    }
}

/// The answer of charges in turn, as one hop's: the first refusal, else the last answer; the
/// charges after a refused call are not sent (the Worker answered the refusal).
fn in_turn(store: &MemoryLedger, q: Quotas, charges: Vec<Charge>, now_ms: u64) -> LedgerAnswer {
    let mut answered = None;
    for charge in charges {
        let answer = ask(store, q, charge, now_ms);
        if matches!(answer, LedgerAnswer::Refused { .. }) {
            return answer;
        }
        answered = Some(answer);
    }
    answered.expect("at least one charge")
}

#[test]
fn a_run_with_its_call_counts_the_call_even_when_the_run_is_refused() {
    let (store, q) = (MemoryLedger::default(), quotas(2, 5, 1));
    assert_eq!(refused(in_turn(&store, q, run_with_call("r1", T0, 0, "a", true), T0)), None);
    let second = refused(in_turn(&store, q, run_with_call("r2", T0, 0, "a", true), T0));
    assert_eq!(second, Some(("runsInFlight".into(), 1, 1, 5)), "one run in flight at most");
    assert_eq!(usage(&store, q, T0)["callsPerMinute"]["used"], 2, "the refused run's call still counts");
    let third = refused(in_turn(&store, q, run_with_call("r3", T0, 0, "a", true), T0));
    assert_eq!(third.map(|r| r.0), Some("callsPerMinute".into()), "the call is checked first");
    assert_eq!(usage(&store, q, T0)["callsPerMinute"]["used"], 2, "a refused call counts nothing");
    assert_eq!(usage(&store, q, T0)["runsInFlight"]["used"], 1, "nor takes a slot");
}

proptest! {
    /// One hop charging a run with its call leaves the ledger as the two hops it replaces (the
    /// Worker's call, then the relay session's run) would, and answers what they would have
    /// answered, whatever came before: calls, runs, ends, admissions and puts across minutes.
    #[test]
    fn a_run_charged_with_its_call_is_the_two_hops_it_replaces(
        steps in proptest::collection::vec((0u64..3_000, 0usize..3, 0u8..5, 0u64..(3 * MIB)), 1..120),
        calls in 1u64..6, sessions in 1u64..3, runs in 1u64..3,
    ) {
        let q = Quotas { stored_bytes: 4 * MIB, ..quotas(calls, sessions, runs) };
        let (one, two) = (MemoryLedger::default(), MemoryLedger::default());
        let mut now = T0;
        for (i, (dt, session, kind, bytes)) in steps.into_iter().enumerate() {
            now += dt * 50;
            let (session, run_id) = (format!("s{session}"), format!("r{i}"));
            let (a, b) = match kind {
                0 => (run_with_call(&run_id, now, bytes, &session, true), run_with_call(&run_id, now, bytes, &session, false)),
                1 => (vec![call(&session)], vec![call(&session)]),
                2 => (vec![run(&run_id, now)], vec![run(&run_id, now)]),
                3 => {
                    let ended = Charge::RunEnded { run: format!("r{}", i.saturating_sub(2)), edge_ms: dt };
                    (vec![ended.clone()], vec![ended])
                }
                _ => (vec![Charge::Admit { session: session.clone() }], vec![Charge::Admit { session }]),
            };
            prop_assert_eq!(in_turn(&one, q, a, now), in_turn(&two, q, b, now));
            prop_assert_eq!(one.0.borrow().clone(), two.0.borrow().clone());
        }
    }
}

#[test]
fn an_isolate_trusts_an_admission_for_a_minute_per_tenant_and_relay_session() {
    let mut admitted = Admitted::default();
    assert!(!admitted.fresh("t_1", "a", 1_000), "nothing admitted yet");
    admitted.remember("t_1", "a", 1_000);
    assert!(admitted.fresh("t_1", "a", 1_000 + ADMITTED_FRESH_MS - 1));
    assert!(!admitted.fresh("t_1", "a", 1_000 + ADMITTED_FRESH_MS), "a minute on, the ledger is asked again");
    assert!(!admitted.fresh("t_1", "b", 1_000), "another relay session");
    assert!(!admitted.fresh("t_2", "a", 1_000), "another tenant's relay session of the same name");
    admitted.remember("t_2", "a", 1_000);
    admitted.refused("t_1", "a", 1_000, 30_000);
    assert!(!admitted.fresh("t_1", "a", 1_001), "refused by its relay session: the Worker charges again");
    admitted.remember("t_1", "a", 1_002);
    assert!(!admitted.fresh("t_1", "a", 1_003), "admitted again by another request, its calls still the Worker's");
    assert!(admitted.fresh("t_1", "a", 31_000), "after the retry-after, left to the relay session again");
    assert!(admitted.fresh("t_2", "a", 1_001), "only that one was refused");
    admitted.refused("t_2", "a", 1_000, 3_600_000);
    admitted.remember("t_2", "a", 1_000 + ADMITTED_FRESH_MS);
    assert!(admitted.fresh("t_2", "a", 1_000 + ADMITTED_FRESH_MS), "a minute at most");
}

#[test]
fn an_isolate_remembers_a_bounded_number_of_admissions() {
    let mut admitted = Admitted::default();
    for i in 0..5_000u64 {
        admitted.remember("t_1", &format!("s{i}"), i);
    }
    assert!(admitted.fresh("t_1", "s4999", 5_000), "the latest is remembered");
    assert!(!admitted.fresh("t_1", "s0", 5_000), "the oldest were forgotten past the bound");
}

const MIB: u64 = 1 << 20;

fn stored_quota(bytes: u64) -> Quotas {
    Quotas { stored_bytes: bytes, ..Quotas::default() }
}

fn put(bytes: u64) -> Charge {
    Charge::Store { bytes }
}

fn measured(bytes: u64, at_ms: u64) -> Charge {
    Charge::StoredMeasured { bytes, at_ms }
}

#[test]
fn a_tenant_never_measured_is_charged_its_puts_and_refused_past_its_stored_bytes() {
    let (store, q) = (MemoryLedger::default(), stored_quota(MIB));
    assert_eq!(refused(ask(&store, q, put(MIB - 10), T0)), None);
    // A put that would take it past the quota is refused whole, one that fits still passes.
    let (quota, limit, used, retry) = refused(ask(&store, q, put(11), T0 + 1)).unwrap();
    assert_eq!((quota.as_str(), limit, used, retry), ("storedBytes", MIB, MIB - 10, 3600));
    assert_eq!(refused(ask(&store, q, put(10), T0 + 2)), None);
    let seen = usage(&store, q, T0 + 3);
    assert_eq!(seen["storedBytes"], json!({"limit": MIB, "used": MIB, "measured": null, "measuredAtMs": null}));
}

#[test]
fn a_measurement_replaces_the_charges_its_listing_saw_and_keeps_those_it_may_not_have() {
    let (store, q) = (MemoryLedger::default(), stored_quota(10 * MIB));
    let hour = 3_600_000;
    ask(&store, q, put(4 * MIB), T0); // uploaded long before the listing: in the measurement
    ask(&store, q, put(2 * MIB), T0 + hour - 30_000); // half a minute before it: maybe not
    ask(&store, q, put(MIB), T0 + hour + 5_000); // during the listing: maybe not
                                                 // The listing started at T0 + 1 h and found 5 MiB (files were deleted meanwhile).
    ask(&store, q, measured(5 * MIB, T0 + hour), T0 + hour + 60_000);
    let seen = usage(&store, q, T0 + hour + 61_000);
    assert_eq!(seen["storedBytes"]["used"], 8 * MIB, "{seen}");
    assert_eq!(seen["storedBytes"]["measured"], 5 * MIB);
    assert_eq!(seen["storedBytes"]["measuredAtMs"], T0 + hour);
    // The refusal waits for the next measurement, an hour after this one's start.
    let (_, _, used, retry) = refused(ask(&store, q, put(3 * MIB), T0 + hour + 600_000)).unwrap();
    assert_eq!((used, retry), (8 * MIB, 3000));
    // The next measurement sees them all: the charges before it are dropped.
    ask(&store, q, measured(3 * MIB, T0 + 2 * hour), T0 + 2 * hour + 1);
    assert_eq!(usage(&store, q, T0 + 2 * hour + 2)["storedBytes"]["used"], 3 * MIB);
    // A measurement older than the latest (two sweeps crossing) changes nothing.
    ask(&store, q, measured(9 * MIB, T0 + hour), T0 + 2 * hour + 3);
    assert_eq!(usage(&store, q, T0 + 2 * hour + 4)["storedBytes"]["used"], 3 * MIB);
}

#[test]
fn stored_bytes_has_a_default_and_bounds() {
    let tenant =
        |quotas: serde_json::Value| from_admin_json(json!({"id": "t", "name": "t", "defaults": {"quotas": quotas}}));
    assert_eq!(tenant(json!({})).unwrap().defaults.quotas.stored_bytes, 10 << 30);
    assert_eq!(tenant(json!({"storedBytes": MIB})).unwrap().defaults.quotas.stored_bytes, MIB);
    assert_eq!(tenant(json!({"storedBytes": 1u64 << 40})).unwrap().defaults.quotas.stored_bytes, 1 << 40);
    for bad in [MIB - 1, (1 << 40) + 1, 0] {
        let why = tenant(json!({"storedBytes": bad})).unwrap_err();
        assert!(why.contains("quotas.storedBytes"), "{bad}: {why}");
    }
}

#[test]
fn a_ledger_row_from_before_stored_bytes_reads_as_never_measured() {
    let store = MemoryLedger(std::cell::RefCell::new(Some(
        r#"{"minute":0,"calls":0,"sessions":{},"runs":{},"day":0,"egressRequests":0,"egressBytes":0,"edgeMs":0}"#
            .into(),
    )));
    let seen = usage(&store, stored_quota(MIB), T0);
    assert_eq!(seen["storedBytes"]["measured"], serde_json::Value::Null);
    assert_eq!(seen["storedBytes"]["used"], 0);
}

proptest! {
    /// Whatever puts, failed puts, measurements and times, the ledger never charges a put that
    /// takes what it counts past the quota, what it counts is never below the latest
    /// measurement plus the puts (not failed) charged in the minute before its listing and
    /// after, and its row stays bounded.
    #[test]
    fn stored_bytes_never_pass_their_quota_nor_forget_a_recent_put(
        steps in proptest::collection::vec((0u64..600_000, 0u64..(3 * MIB), 0u8..3), 1..300),
    ) {
        let (store, q) = (MemoryLedger::default(), stored_quota(4 * MIB));
        let mut now = T0;
        let mut charged: Vec<(u64, u64)> = Vec::new();
        let mut latest: Option<(u64, u64)> = None;
        let mut merged = false;
        for (dt, bytes, kind) in steps {
            now += dt;
            if kind == 2 {
                // One of the puts charged failed (its charge's time from the caller's clock).
                if !charged.is_empty() {
                    let (at, failed) = charged.remove(bytes as usize % charged.len());
                    ask(&store, q, Charge::StoreFailed { bytes: failed, charged_ms: at }, now);
                }
            } else if kind == 1 {
                let at = now.saturating_sub(dt / 2);
                ask(&store, q, measured(bytes, at), now);
                if latest.is_none_or(|(_, l)| l <= at) { latest = Some((bytes, at)); }
            } else {
                let before = usage(&store, q, now)["storedBytes"]["used"].as_u64().unwrap();
                if refused(ask(&store, q, put(bytes), now)).is_none() {
                    prop_assert!(before + bytes <= 4 * MIB, "charged {bytes} over {before}");
                    charged.push((now, bytes));
                }
            }
            let used = usage(&store, q, now)["storedBytes"]["used"].as_u64().unwrap();
            let (base, at) = latest.unwrap_or((0, 0));
            let kept: Vec<&(u64, u64)> = charged.iter().filter(|(t, _)| t / 60_000 + 1 >= at / 60_000).collect();
            let unseen: u64 = kept.iter().map(|(_, b)| b).sum();
            // Exactly: until more minutes than the row keeps were charged (they merge into the
            // oldest kept, which a measurement then keeps longer: counted more, never less).
            let minutes: std::collections::BTreeSet<u64> = kept.iter().map(|(t, _)| t / 60_000).collect();
            merged |= minutes.len() > 120;
            prop_assert!(used >= base + unseen, "used {used} < {base} + {unseen}");
            prop_assert!(merged || used == base + unseen, "used {used} != {base} + {unseen}");
            let charged_since: u64 = charged.iter().filter(|(t, _)| *t >= at).map(|(_, b)| b).sum();
            prop_assert!(base + charged_since <= used || latest.is_none(), "charges after the measurement lost");
        }
        prop_assert!(store.0.borrow().as_ref().map_or(0, String::len) < 10_000);
    }
}

#[test]
fn charges_over_many_minutes_without_a_measurement_stay_counted_in_a_bounded_row() {
    let (store, q) = (MemoryLedger::default(), stored_quota(1 << 30));
    for minute in 0..1_000 {
        assert_eq!(refused(ask(&store, q, put(1_000), T0 + minute * 60_000)), None);
    }
    assert_eq!(usage(&store, q, T0 + 1_000 * 60_000)["storedBytes"]["used"], 1_000_000);
    let row = store.0.borrow().as_ref().map_or(0, String::len);
    assert!(row < 4_000, "the row holds {row} bytes");
    // The merged minutes count as the oldest kept: a measurement after them drops them.
    ask(&store, q, measured(7, T0 + 2_000 * 60_000), T0 + 2_000 * 60_000);
    assert_eq!(usage(&store, q, T0 + 2_000 * 60_000)["storedBytes"]["used"], 7);
}

#[test]
fn a_run_and_its_capsules_bytes_are_charged_in_one_step_all_or_nothing() {
    let (store, q) = (MemoryLedger::default(), Quotas { runs_in_flight: 1, ..stored_quota(MIB) });
    let run_with =
        |id: &str, bytes: u64| Charge::Run { lease: run_lease(id, T0, 60_000), stored_bytes: bytes, call: None };
    // Its capsule would pass the quota: refused as storedBytes, and no slot is taken.
    let (quota, _, _, retry) = refused(ask(&store, q, run_with("r_1", MIB + 1), T0)).unwrap();
    assert_eq!((quota.as_str(), retry), ("storedBytes", 3600));
    assert_eq!(refused(ask(&store, q, run_with("r_1", 1_000), T0)), None, "the slot was free");
    // No slot: refused as runsInFlight, and its bytes are not charged.
    assert_eq!(refused(ask(&store, q, run_with("r_2", 500), T0)).unwrap().0, "runsInFlight");
    assert_eq!(usage(&store, q, T0)["storedBytes"]["used"], 1_000);
}

#[test]
fn a_failed_put_gives_its_bytes_back_unless_a_measurement_replaced_its_charge() {
    let (store, q) = (MemoryLedger::default(), stored_quota(MIB));
    let failed = |bytes: u64, charged_ms: u64| Charge::StoreFailed { bytes, charged_ms };
    ask(&store, q, put(600_000), T0);
    ask(&store, q, put(300_000), T0 + 30_000);
    ask(&store, q, failed(600_000, T0), T0 + 40_000);
    assert_eq!(usage(&store, q, T0 + 40_000)["storedBytes"]["used"], 300_000);
    // Charged, then measured (the listing did not find it): giving it back would count less
    // than is stored.
    let hour = 3_600_000;
    ask(&store, q, put(200_000), T0 + hour);
    ask(&store, q, measured(300_000, T0 + hour + 180_000), T0 + hour + 200_000);
    ask(&store, q, put(100_000), T0 + hour + 205_000);
    ask(&store, q, failed(200_000, T0 + hour), T0 + hour + 210_000);
    assert_eq!(usage(&store, q, T0 + hour + 210_000)["storedBytes"]["used"], 400_000, "the later put stays counted");
    // Never below the measurement, whatever it is told.
    ask(&store, q, failed(u64::MAX, T0 + hour + 205_000), T0 + hour + 300_000);
    assert_eq!(usage(&store, q, T0 + hour + 300_000)["storedBytes"]["used"], 300_000);
}

#[test]
fn a_failed_put_charged_in_the_minute_a_measurement_keeps_is_given_back_from_its_own_minute() {
    let (store, q) = (MemoryLedger::default(), stored_quota(4 * MIB));
    let failed = |bytes: u64, charged_ms: u64| Charge::StoreFailed { bytes, charged_ms };
    // Charged in the minute before the listing's: the measurement keeps that charge (the put
    // may have been under way), so its failure gives it back.
    ask(&store, q, put(600_000), T0 + 30_000);
    ask(&store, q, measured(0, T0 + 70_000), T0 + 75_000);
    ask(&store, q, failed(600_000, T0 + 30_000), T0 + 80_000);
    assert_eq!(usage(&store, q, T0 + 80_000)["storedBytes"]["used"], 0);
    // A put that succeeded in the minute before a failed one's: the failed one's own charge is
    // given back, so a measurement that finds the first (and drops its minute) leaves no phantom.
    let hour = 3_600_000;
    ask(&store, q, put(100_000), T0 + hour + 50_000);
    ask(&store, q, put(200_000), T0 + hour + 70_000);
    ask(&store, q, failed(200_000, T0 + hour + 70_000), T0 + hour + 80_000);
    ask(&store, q, measured(100_000, T0 + hour + 130_000), T0 + hour + 140_000);
    assert_eq!(usage(&store, q, T0 + hour + 140_000)["storedBytes"]["used"], 100_000);
}

/// What the Worker charges before routing an `/mcp` request (`mcp::admission`): a run's call to a
/// relay session it admitted lately is left to the relay session (charged with the run's slot in
/// one hop); any other call is charged here, and anything else only admits the relay session,
/// which a recent admission makes needless.
#[test]
fn the_worker_leaves_a_runs_call_to_a_relay_session_admitted_lately() {
    use relay_core::mcp::{admission, Admission, HttpRequest};
    let request = |method: &str, body: serde_json::Value| HttpRequest {
        method: method.into(),
        headers: vec![],
        body: body.to_string().into_bytes(),
    };
    let tool = |name: &str| json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {}}});
    let charged = |session: &str| Admission::Charge(call(session));
    for name in ["run_js", "run_py"] {
        assert_eq!(admission(&request("POST", tool(name)), "a", true), (Admission::ToSession, json!(7)));
        assert_eq!(admission(&request("POST", tool(name)), "a", false).0, charged("a"), "not admitted lately");
    }
    for name in ["read", "write", "search", "run_jsx", ""] {
        assert_eq!(admission(&request("POST", tool(name)), "a", true).0, charged("a"), "{name:?} runs nothing");
    }
    let nameless = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": ["run_js"]}});
    assert_eq!(admission(&request("POST", nameless), "a", true).0, charged("a"));
    let listed = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"name": "run_js"}});
    assert_eq!(admission(&request("POST", listed.clone()), "a", true).0, Admission::Admitted);
    let admit = Admission::Charge(Charge::Admit { session: "a".into() });
    assert_eq!(admission(&request("POST", listed), "a", false).0, admit);
    assert_eq!(admission(&request("GET", tool("run_js")), "a", true).0, Admission::Admitted, "a GET carries no call");
    assert_eq!(admission(&request("POST", json!("not an object")), "a", false), (admit, json!(null)));
}
