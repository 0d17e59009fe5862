//! Range header answers for capsule downloads.
use relay_core::range::{answer, RangeAnswer::*};

#[test]
fn ranges_against_a_100_byte_blob() {
    let cases = [
        (None, Whole),
        (Some("bytes=0-9"), Partial { start: 0, len: 10 }),
        (Some("bytes=90-"), Partial { start: 90, len: 10 }),
        (Some("bytes=90-500"), Partial { start: 90, len: 10 }),
        (Some("bytes=-20"), Partial { start: 80, len: 20 }),
        (Some("bytes=-500"), Partial { start: 0, len: 100 }),
        (Some("bytes=100-"), Unsatisfiable),
        (Some("bytes=-0"), Unsatisfiable),
        (Some("bytes=5-1"), Whole),
        (Some("bytes=0-1,5-6"), Whole),
        (Some("items=0-1"), Whole),
        (Some("bytes=x-y"), Whole),
        (Some("bytes="), Whole),
    ];
    for (header, want) in cases {
        assert_eq!(answer(header, 100), want, "{header:?}");
    }
}

#[test]
fn an_empty_blob_has_no_satisfiable_range() {
    assert_eq!(answer(Some("bytes=0-"), 0), Unsatisfiable);
    assert_eq!(answer(Some("bytes=-5"), 0), Unsatisfiable);
}
