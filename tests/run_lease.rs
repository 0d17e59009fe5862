//! The executor lease: acknowledgement window, silence window, and their boundaries.
use relay_core::run::lease::{Lease, Verdict, ACK_WITHIN_MS, SILENCE_MS};

#[test]
fn a_tab_must_acknowledge_within_the_window() {
    let lease = Lease::new(1_000);
    assert_eq!(lease.check_at_ms(), 1_000 + ACK_WITHIN_MS);
    assert_eq!(lease.verdict(1_000), Verdict::Alive);
    assert_eq!(lease.verdict(1_000 + ACK_WITHIN_MS - 1), Verdict::Alive);
    assert_eq!(lease.verdict(1_000 + ACK_WITHIN_MS), Verdict::NeverAcknowledged);
}

#[test]
fn once_heard_only_silence_ends_it() {
    let mut lease = Lease::new(0);
    lease.heard(4_000);
    assert_eq!(lease.check_at_ms(), 4_000 + SILENCE_MS);
    assert_eq!(lease.verdict(ACK_WITHIN_MS + 1), Verdict::Alive);
    assert_eq!(lease.verdict(4_000 + SILENCE_MS - 1), Verdict::Alive);
    assert_eq!(lease.verdict(4_000 + SILENCE_MS), Verdict::Silent);
    lease.heard(4_000 + SILENCE_MS - 1);
    assert_eq!(lease.verdict(4_000 + SILENCE_MS), Verdict::Alive);
}

#[test]
fn an_out_of_order_report_never_moves_the_clock_back() {
    let mut lease = Lease::new(0);
    lease.heard(9_000);
    lease.heard(2_000);
    assert_eq!(lease.check_at_ms(), 9_000 + SILENCE_MS);
    assert_eq!(lease.verdict(9_000), Verdict::Alive);
}
