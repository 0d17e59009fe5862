//! A request body's deadline (`relay_core::body`): long enough for the body the request
//! announces at the slowest rate allowed, never shorter than the base, never overflowing, and
//! named in the 408's message.

use proptest::prelude::*;
use relay_core::body::{deadline_ms, too_slow_message, BASE_MS, MIN_BYTES_PER_S};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

#[test]
fn a_small_body_gets_the_base_and_a_large_one_a_second_per_64_kib() {
    assert_eq!((BASE_MS, MIN_BYTES_PER_S), (10_000, 64 * KIB));
    assert_eq!(deadline_ms(Some(0), MIB), 10_000);
    assert_eq!(deadline_ms(Some(100), MIB), 10_001);
    assert_eq!(deadline_ms(Some(64 * KIB), MIB), 11_000);
    // No Content-Length: the route's limit is what may come (/mcp: 1 MiB).
    assert_eq!(deadline_ms(None, MIB), 26_000);
    // The largest upload, a 20 MiB deps layer.
    assert_eq!(deadline_ms(Some(20 * MIB), 20 * MIB), 330_000);
}

#[test]
fn a_declared_length_over_the_limit_earns_no_more_than_the_limit() {
    assert_eq!(deadline_ms(Some(u64::MAX), MIB), deadline_ms(None, MIB));
    assert_eq!(deadline_ms(None, u64::MAX), u64::MAX / MIN_BYTES_PER_S + BASE_MS);
}

#[test]
fn the_message_names_the_deadline_its_rule_and_what_to_do() {
    assert_eq!(
        too_slow_message(10_001),
        "the request body did not arrive within 10.0 s, its deadline (10 s, plus 1 s per 64 KiB of body); send the body without pauses, or a smaller one"
    );
    assert!(too_slow_message(26_000).contains("within 26.0 s"));
    assert!(too_slow_message(330_000).contains("within 330.0 s"));
}

proptest! {
    /// Any sizes: at least the base, and more for a larger declared body (never less).
    #[test]
    fn the_deadline_never_shrinks_as_the_body_grows(
        declared in proptest::option::of(any::<u64>()),
        limit in any::<u64>(),
        more in any::<u64>(),
    ) {
        let deadline = deadline_ms(declared, limit);
        prop_assert!(deadline >= BASE_MS);
        prop_assert!(deadline_ms(declared.map(|d| d.saturating_add(more)), limit) >= deadline);
        prop_assert!(deadline_ms(declared, limit.saturating_add(more)) >= deadline);
    }

    /// Bodies up to a TiB: one arriving at the slowest rate allowed arrives in time.
    #[test]
    fn a_body_at_the_slowest_rate_allowed_arrives_in_time(
        declared in proptest::option::of(0..1u64 << 40),
        limit in 0..1u64 << 40,
    ) {
        let expected = declared.unwrap_or(limit).min(limit);
        let needed_ms = expected * 1000 / MIN_BYTES_PER_S;
        prop_assert!(deadline_ms(declared, limit) >= BASE_MS + needed_ms);
    }
}

#[test]
fn a_buffer_reserves_at_most_1_mib_up_front_and_grows_to_the_limit_never_past_it() {
    use relay_core::body::{grown_capacity, UP_FRONT_BYTES};
    const GRANT: usize = 20 * 1024 * 1024; // the largest granted upload, a deps layer
    assert_eq!(UP_FRONT_BYTES, 1024 * 1024);
    let (mut len, mut capacity, mut grown, mut held) = (0, GRANT.min(UP_FRONT_BYTES), 0, 0);
    while len < GRANT {
        let next = grown_capacity(len, capacity, 64 * 1024, GRANT);
        if next != capacity {
            grown += 1;
            held = held.max(capacity + next); // the copy holds both buffers
        }
        (len, capacity) = (len + 64 * 1024, next);
    }
    assert_eq!(capacity, GRANT, "a body of the grant's size ends in a buffer of that size");
    assert_eq!(grown, 4, "1 MiB doubled to 8, then the grant's 20: {grown} regrowths");
    assert_eq!(held, 28 * 1024 * 1024, "the last growth holds 8 + 20 MiB, not 16 + 20: {held}");
}

proptest! {
    /// Whatever arrives, the buffer holds it, grows at least geometrically, and never reserves
    /// past the limit more than the bytes that arrived.
    #[test]
    fn a_grown_buffer_holds_what_arrived_and_stays_within_the_limit(len in 0usize..1 << 30, extra in 0usize..1 << 30, incoming in 0usize..1 << 24, limit in 0usize..1 << 31) {
        use relay_core::body::grown_capacity;
        let capacity = len.saturating_add(extra);
        let next = grown_capacity(len, capacity, incoming, limit);
        prop_assert!(next >= len + incoming && next >= capacity);
        if next > capacity {
            prop_assert!(next <= limit.max(len + incoming));
            prop_assert!(next >= (2 * capacity).min(limit));
            // Past half the limit a growth goes to the limit (or what arrived), not halfway.
            prop_assert!(next <= limit / 2 || next == limit || next == len + incoming);
        }
    }
}
