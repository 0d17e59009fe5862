//! HTTP `Range` requests over a blob of known size (RFC 9110 section 14): one range only,
//! which is all an executor resuming a layer download needs.

/// What to send for a `Range` header against a blob of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAnswer {
    /// No usable Range header: send the whole blob with 200.
    Whole,
    /// 206 with `bytes start-end/size`.
    Partial { start: u64, len: u64 },
    /// 416 with `bytes */size`.
    Unsatisfiable,
}

/// Interprets a `Range` header. Syntax it does not understand (other units, several ranges)
/// is ignored, as the RFC allows, and the whole blob is sent.
pub fn answer(header: Option<&str>, size: u64) -> RangeAnswer {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return RangeAnswer::Whole;
    };
    if spec.contains(',') {
        return RangeAnswer::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeAnswer::Whole;
    };
    match (first.trim(), last.trim()) {
        ("", suffix) => match suffix.parse::<u64>() {
            Ok(0) => RangeAnswer::Unsatisfiable,
            Ok(n) if size > 0 => RangeAnswer::Partial { start: size.saturating_sub(n), len: n.min(size) },
            Ok(_) => RangeAnswer::Unsatisfiable,
            Err(_) => RangeAnswer::Whole,
        },
        (start, end) => bounded(start, end, size),
    }
}

fn bounded(start: &str, end: &str, size: u64) -> RangeAnswer {
    let Ok(start) = start.parse::<u64>() else { return RangeAnswer::Whole };
    let end = match end {
        "" => size.saturating_sub(1),
        e => match e.parse::<u64>() {
            Ok(e) if e >= start => e.min(size.saturating_sub(1)),
            _ => return RangeAnswer::Whole,
        },
    };
    if start >= size {
        return RangeAnswer::Unsatisfiable;
    }
    RangeAnswer::Partial { start, len: end - start + 1 }
}
