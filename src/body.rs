//! How long a request's body may take to arrive. Every route that reads a body (the Worker's
//! `read_capped`) stops waiting at [`deadline_ms`] and answers 408, so a client that trickles
//! its body (a byte every few seconds) cannot hold a request open for minutes. The deadline
//! grows with the body the request announces, so a large upload on a slow link still arrives.

/// What every body gets, however small.
pub const BASE_MS: u64 = 10_000;
/// The slowest average rate a body may arrive at (512 kbit/s): every this many bytes the
/// request announces add a second to its deadline.
pub const MIN_BYTES_PER_S: u64 = 64 * 1024;

/// The deadline, in ms from the start of reading, for a body that declares `declared` bytes
/// (its Content-Length), or, declaring none, may be up to the route's `limit`.
pub fn deadline_ms(declared: Option<u64>, limit: u64) -> u64 {
    let expected = declared.unwrap_or(limit).min(limit);
    BASE_MS.saturating_add(expected.saturating_mul(1000) / MIN_BYTES_PER_S)
}

/// The message of the 408 for a body that missed `deadline_ms`: the deadline and its rule.
pub fn too_slow_message(deadline_ms: u64) -> String {
    format!(
        "the request body did not arrive within {:.1} s, its deadline ({} s, plus 1 s per {} KiB of body); send the body without pauses, or a smaller one",
        deadline_ms as f64 / 1000.0,
        BASE_MS / 1000,
        MIN_BYTES_PER_S / 1024
    )
}

/// The most a body's buffer holds before its bytes arrive: a request that sends its headers
/// and then nothing (or trickles to its deadline) reserves no more than this.
pub const UP_FRONT_BYTES: usize = 1024 * 1024;

/// The capacity to give a body's buffer holding `len` bytes with `capacity` when `incoming`
/// more arrive, on a route whose limit is `limit`: at least what they need, doubled as a `Vec`
/// grows (so copies stay linear), but never reserved past the limit, so a body of exactly the
/// limit (a granted upload) ends in a buffer of its own size. A doubling past half the limit
/// goes to the limit at once: the copy holds the old buffer and the new, 1.5 times the limit
/// at most when chunks are small beside the buffer (a 20 MiB grant: 8 + 20 MiB, not 16 + 20);
/// a chunk larger than the buffer grows it to what it needs, so the old one may be larger.
pub fn grown_capacity(len: usize, capacity: usize, incoming: usize, limit: usize) -> usize {
    let needed = len.saturating_add(incoming);
    if needed <= capacity {
        return capacity;
    }
    let doubled = capacity.saturating_mul(2);
    let grown = if doubled > limit / 2 { limit } else { doubled };
    grown.max(needed)
}
