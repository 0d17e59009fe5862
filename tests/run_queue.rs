//! The run queue of one relay session: FIFO, one run at a time, at most `max_queued` waiting,
//! runs that waited longer than `max_wait_ms` expired and never started.

use std::collections::{HashSet, VecDeque};

use proptest::prelude::*;
use relay_core::run::queue::{Admission, Removed, RunQueue, Step};

const MAX_WAIT: u64 = 300_000;

fn queue() -> RunQueue {
    RunQueue::new(100, MAX_WAIT)
}

fn started(id: &str) -> Step {
    Step { started: Some(id.into()), expired: vec![] }
}

/// Queues a run that is ready at once: `reserve`, then `mark_ready`, as the run machine does
/// once a run's capsule is stored.
fn admit(q: &mut RunQueue, id: &str, now_ms: u64) -> Admission {
    let admission = q.reserve(id, now_ms);
    q.mark_ready(id);
    admission
}

#[test]
fn runs_start_in_admission_order_one_at_a_time() {
    let mut q = queue();
    for id in ["a", "b", "c"] {
        admit(&mut q, id, 0);
    }
    assert_eq!(q.step(1, true), started("a"));
    assert_eq!(q.running(), Some("a"));
    assert_eq!(q.depth(), 2);
    // While `a` runs, nothing else starts, however often the queue is stepped.
    for _ in 0..3 {
        assert_eq!(q.step(2, true), Step::default());
    }
    assert_eq!(q.running(), Some("a"));
    assert_eq!(q.remove("a"), Removed::Running);
    assert_eq!(q.step(3, true), started("b"));
    assert_eq!(q.remove("b"), Removed::Running);
    assert_eq!(q.step(4, true), started("c"));
    assert_eq!(q.remove("c"), Removed::Running);
    assert_eq!(q.step(5, true), Step::default());
    assert_eq!(q.running(), None);
    assert_eq!(q.depth(), 0);
}

#[test]
fn nothing_starts_until_the_executor_is_ready() {
    let mut q = queue();
    admit(&mut q, "a", 0);
    assert_eq!(q.step(1, false), Step::default());
    assert_eq!(q.running(), None);
    assert_eq!(q.depth(), 1);
    assert_eq!(q.step(2, true), started("a"));
}

#[test]
fn admit_refuses_at_exactly_max_queued_waiting() {
    let mut q = RunQueue::new(100, MAX_WAIT);
    for i in 0..100 {
        assert_eq!(admit(&mut q, &format!("r{i}"), 0), Admission::Queued, "run {i}");
    }
    assert_eq!(q.depth(), 100);
    assert_eq!(admit(&mut q, "r100", 0), Admission::Full { max: 100 });
    assert_eq!(q.depth(), 100, "a refused run is not queued");
    // The running run does not count against the waiting limit.
    q.step(0, true);
    assert_eq!(q.depth(), 99);
    assert_eq!(admit(&mut q, "r100", 0), Admission::Queued);
    assert_eq!(admit(&mut q, "r101", 0), Admission::Full { max: 100 });
}

#[test]
fn a_queue_of_zero_admits_nothing() {
    let mut q = RunQueue::new(0, MAX_WAIT);
    assert_eq!(admit(&mut q, "a", 0), Admission::Full { max: 0 });
    assert_eq!(q.step(0, true), Step::default());
}

#[test]
fn a_run_is_expired_only_after_waiting_longer_than_max_wait() {
    let mut q = queue();
    admit(&mut q, "a", 1_000);
    // Exactly max_wait_ms of waiting is still allowed.
    assert_eq!(q.step(1_000 + MAX_WAIT, false), Step::default());
    assert_eq!(q.depth(), 1);
    let step = q.step(1_000 + MAX_WAIT + 1, true);
    assert_eq!(step, Step { started: None, expired: vec!["a".into()] }, "an expired run never starts");
    assert_eq!(q.depth(), 0);
    assert_eq!(q.running(), None);
    assert_eq!(q.remove("a"), Removed::Absent);
}

#[test]
fn expiry_happens_before_starting_so_the_next_fresh_run_starts() {
    let mut q = queue();
    admit(&mut q, "old", 0);
    admit(&mut q, "older-too", 5);
    admit(&mut q, "fresh", 10);
    let step = q.step(MAX_WAIT + 6, true);
    assert_eq!(step.expired, vec!["old".to_string(), "older-too".to_string()]);
    assert_eq!(step.started.as_deref(), Some("fresh"));
}

#[test]
fn the_running_run_never_expires() {
    let mut q = queue();
    admit(&mut q, "a", 0);
    q.step(0, true);
    let step = q.step(10 * MAX_WAIT, true);
    assert_eq!(step, Step::default());
    assert_eq!(q.running(), Some("a"));
}

#[test]
fn a_clock_going_backwards_expires_nothing() {
    let mut q = queue();
    admit(&mut q, "a", 10_000);
    assert_eq!(q.step(0, false), Step::default());
    assert_eq!(q.depth(), 1);
}

#[test]
fn remove_finds_a_run_wherever_it_is() {
    let mut q = queue();
    admit(&mut q, "a", 0);
    admit(&mut q, "b", 0);
    admit(&mut q, "c", 0);
    q.step(0, true);
    assert_eq!(q.remove("b"), Removed::Waiting);
    assert_eq!(q.remove("b"), Removed::Absent);
    assert_eq!(q.remove("nope"), Removed::Absent);
    assert_eq!(q.remove(""), Removed::Absent);
    assert_eq!(q.running(), Some("a"), "removing a waiting run leaves the running one");
    assert_eq!(q.remove("a"), Removed::Running);
    assert_eq!(q.remove("a"), Removed::Absent);
    assert_eq!(q.step(0, true), started("c"), "b was removed: c is next");
}

#[test]
fn requeue_front_gives_the_running_run_back_first_in_line() {
    let mut q = queue();
    admit(&mut q, "a", 0);
    admit(&mut q, "b", 0);
    q.step(0, true);
    q.requeue_front("a", 50);
    assert_eq!(q.running(), None);
    assert_eq!(q.depth(), 2);
    assert_eq!(q.step(60, true), started("a"), "the requeued run goes before b");
}

#[test]
fn requeue_front_ignores_runs_that_are_not_running() {
    let mut q = queue();
    admit(&mut q, "a", 0);
    admit(&mut q, "b", 0);
    q.step(0, true);
    q.requeue_front("b", 10); // waiting, not running
    q.requeue_front("zzz", 10); // absent
    assert_eq!(q.running(), Some("a"));
    assert_eq!(q.depth(), 1);
    q.remove("a");
    assert_eq!(q.step(20, true), started("b"));
    assert_eq!(q.step(20, true), Step::default(), "b was not duplicated");
}

#[test]
fn the_oldest_run_expires_one_past_its_wait() {
    let mut q = queue();
    admit(&mut q, "a", 100);
    admit(&mut q, "b", 200);
    // At the limit the oldest run is still waiting; a millisecond later it is expired.
    assert!(q.step(100 + MAX_WAIT, false).expired.is_empty());
    assert_eq!(q.step(100 + MAX_WAIT + 1, false).expired, vec!["a".to_string()]);
    assert_eq!(q.step(200 + MAX_WAIT + 1, false).expired, vec!["b".to_string()]);
}

#[test]
fn a_requeued_run_waits_anew_while_older_runs_behind_it_still_expire() {
    // `b` has waited since 0; `a` is given back at 1_000 with a fresh wait, ahead of `b`.
    let mut q = queue();
    admit(&mut q, "a", 0);
    q.step(0, true);
    admit(&mut q, "b", 0);
    q.requeue_front("a", 1_000);
    assert_eq!(q.step(MAX_WAIT + 1, false).expired, vec!["b".to_string()]);
    assert_eq!(q.step(1_000 + MAX_WAIT + 1, false).expired, vec!["a".to_string()]);
}

#[test]
fn a_huge_max_wait_never_overflows() {
    let mut q = RunQueue::new(10, u64::MAX);
    admit(&mut q, "a", 5);
    assert!(q.step(u64::MAX, false).expired.is_empty());
}

/// One operation of the property below.
#[derive(Debug, Clone)]
enum Op {
    Admit,
    Step {
        advance_ms: u64,
        ready: bool,
    },
    /// Removes the n-th run ever admitted (modulo their number); may be absent already.
    Remove(usize),
    RemoveRunning,
    /// The running run's executor went away before it started: back to the front.
    RequeueRunning,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Admit),
        4 => (0u64..40, any::<bool>()).prop_map(|(advance_ms, ready)| Op::Step { advance_ms, ready }),
        1 => any::<usize>().prop_map(Op::Remove),
        2 => Just(Op::RemoveRunning),
        1 => Just(Op::RequeueRunning),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Against a plain model: one run at a time, nothing both waiting and running, expired and
    /// removed runs never start, and the start order is the admission order of the others.
    #[test]
    fn the_queue_matches_a_fifo_model(ops in proptest::collection::vec(op(), 0..200), max_queued in 0u32..8) {
        let max_wait = 50;
        let mut q = RunQueue::new(max_queued, max_wait);
        let mut model: VecDeque<(String, u64)> = VecDeque::new();
        let mut running: Option<String> = None;
        let mut admitted: Vec<String> = Vec::new();
        let mut gone: HashSet<String> = HashSet::new();
        let mut start_order: Vec<String> = Vec::new();
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Admit => {
                    let id = format!("r{}", admitted.len());
                    let got = admit(&mut q, &id, now);
                    if model.len() >= max_queued as usize {
                        prop_assert_eq!(got, Admission::Full { max: max_queued });
                    } else {
                        prop_assert_eq!(got, Admission::Queued);
                        model.push_back((id.clone(), now));
                        admitted.push(id);
                    }
                }
                Op::Step { advance_ms, ready } => {
                    now += advance_ms;
                    let step = q.step(now, ready);
                    let expired: Vec<String> =
                        model.iter().filter(|(_, since)| now - since > max_wait).map(|(id, _)| id.clone()).collect();
                    model.retain(|(_, since)| now - since <= max_wait);
                    prop_assert_eq!(&step.expired, &expired);
                    gone.extend(expired);
                    let expect_start =
                        if running.is_none() && ready { model.pop_front().map(|(id, _)| id) } else { None };
                    prop_assert_eq!(&step.started, &expect_start);
                    if let Some(id) = expect_start {
                        prop_assert!(!gone.contains(&id), "{} started after it was removed or expired", id);
                        if !start_order.contains(&id) {
                            start_order.push(id.clone());
                        }
                        running = Some(id);
                    }
                }
                Op::Remove(n) => {
                    if admitted.is_empty() {
                        continue;
                    }
                    let id = admitted[n % admitted.len()].clone();
                    let expect = if running.as_deref() == Some(id.as_str()) {
                        running = None;
                        Removed::Running
                    } else if let Some(i) = model.iter().position(|(w, _)| *w == id) {
                        model.remove(i);
                        gone.insert(id.clone());
                        Removed::Waiting
                    } else {
                        Removed::Absent
                    };
                    prop_assert_eq!(q.remove(&id), expect);
                }
                Op::RemoveRunning => {
                    if let Some(id) = running.take() {
                        prop_assert_eq!(q.remove(&id), Removed::Running);
                    }
                }
                Op::RequeueRunning => {
                    if let Some(id) = running.take() {
                        q.requeue_front(&id, now);
                        model.push_front((id, now));
                    }
                }
            }
            prop_assert_eq!(q.running(), running.as_deref());
            prop_assert_eq!(q.depth(), model.len());
            // A requeued run was admitted already: it may take the queue one past its limit.
            prop_assert!(q.depth() <= max_queued as usize + 1);
            if let Some(r) = &running {
                prop_assert!(!model.iter().any(|(w, _)| w == r), "{} is both waiting and running", r);
            }
        }
        // Start order (first starts) is admission order, restricted to runs that started.
        let expected: Vec<&String> = admitted.iter().filter(|id| start_order.contains(id)).collect();
        let got: Vec<&String> = start_order.iter().collect();
        prop_assert_eq!(got, expected);
    }
}

#[test]
fn a_reserved_run_keeps_its_place_and_holds_up_the_line_until_ready() {
    let mut q = queue();
    assert_eq!(q.reserve("a", 0), Admission::Queued);
    assert_eq!(admit(&mut q, "b", 1), Admission::Queued);
    assert_eq!(q.step(2, true), Step::default(), "b is ready but a is first");
    q.mark_ready("a");
    assert_eq!(q.step(3, true), started("a"));
    q.remove("a");
    assert_eq!(q.step(4, true), started("b"));
}

#[test]
fn a_reserved_run_that_is_removed_lets_the_next_one_start() {
    let mut q = queue();
    q.reserve("a", 0);
    admit(&mut q, "b", 0);
    assert_eq!(q.remove("a"), Removed::Waiting);
    assert_eq!(q.step(1, true), started("b"));
    q.mark_ready("a"); // too late: nothing to mark
    assert_eq!(q.depth(), 0);
}
