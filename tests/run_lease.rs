//! A tab's lease: its window, its boundaries, and renewals that come late or out of order.
use proptest::prelude::*;
use relay_core::run::lease::{TabLease, TAB_LEASE_MS};

#[test]
fn a_lease_lapses_exactly_one_window_after_the_last_renewal() {
    let mut lease = TabLease::new(1_000);
    assert_eq!(lease.expires_at_ms(), 1_000 + TAB_LEASE_MS);
    assert!(!lease.lapsed(1_000 + TAB_LEASE_MS - 1));
    assert!(lease.lapsed(1_000 + TAB_LEASE_MS));
    lease.renew(5_000);
    assert!(!lease.lapsed(1_000 + TAB_LEASE_MS));
    assert!(lease.lapsed(5_000 + TAB_LEASE_MS));
}

#[test]
fn a_lease_at_the_end_of_time_saturates() {
    let lease = TabLease::new(u64::MAX - 1);
    assert_eq!(lease.expires_at_ms(), u64::MAX);
    assert!(lease.lapsed(u64::MAX));
}

proptest! {
    /// Renewals read in any order leave the lease as the latest of them left it.
    #[test]
    fn renewals_in_any_order_count_as_the_latest(start in 0u64..1 << 40, renewals in proptest::collection::vec(0u64..1 << 40, 0..20)) {
        let mut lease = TabLease::new(start);
        for at in &renewals {
            lease.renew(*at);
        }
        let latest = renewals.iter().copied().fold(start, u64::max);
        prop_assert_eq!(lease, TabLease::new(latest));
        prop_assert!(!lease.lapsed(latest + TAB_LEASE_MS - 1));
        prop_assert!(lease.lapsed(latest + TAB_LEASE_MS));
    }
}
