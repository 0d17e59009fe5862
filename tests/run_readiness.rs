//! What a tab says of its runtimes while it warms up (`run::readiness`): the reports accepted,
//! the ones refused with a reason, and what a run sent to a warming tab is told.

use relay_core::run::readiness::{Readiness, RuntimeState, MAX_RUNTIMES};

#[test]
fn a_report_of_each_state_is_read() {
    let report = Readiness::parse(br#"{"runtimes": {"quickjs@0.32": "ready", "pyodide@314": "loading"}}"#).unwrap();
    assert_eq!(report.runtimes["quickjs@0.32"], RuntimeState::Ready);
    assert_eq!(report.runtimes["pyodide@314"], RuntimeState::Loading);
    assert!(report.warming_up());
    let failed = Readiness::parse(br#"{"runtimes": {"pyodide@314": "failed"}}"#).unwrap();
    assert!(!failed.warming_up(), "a failed load is not warming up: the next run loads it again");
    assert!(!Readiness::parse(br#"{"runtimes": {}}"#).unwrap().warming_up());
}

#[test]
fn a_run_waits_with_a_note_only_for_a_runtime_still_loading() {
    let report = Readiness::parse(br#"{"runtimes": {"quickjs@0.32": "ready", "pyodide@314": "loading"}}"#).unwrap();
    let note = report.wait_note("pyodide@314").unwrap();
    assert!(note.contains("pyodide@314") && note.contains("still loading"), "{note}");
    assert_eq!(report.wait_note("quickjs@0.32"), None);
    assert_eq!(report.wait_note("pyodide@999"), None, "a runtime the tab did not name: nothing is known");
}

#[test]
fn malformed_reports_are_refused_with_what_to_send() {
    let too_many = format!(
        r#"{{"runtimes": {{{}}}}}"#,
        (0..=MAX_RUNTIMES).map(|i| format!(r#""r{i}@1": "ready""#)).collect::<Vec<_>>().join(",")
    );
    let cases: [(&[u8], &str); 9] = [
        (b"", "expected"),
        (b"[]", "expected"),
        (br#"{"runtimes": {"quickjs@0.32": "warm"}}"#, "expected"),
        (br#"{"runtimes": {}, "extra": 1}"#, "expected"),
        (br#"{"runtimes": {"quickjs": "ready"}}"#, "<family>@<version>"),
        (br#"{"runtimes": {"@1": "ready"}}"#, "<family>@<version>"),
        (br#"{"runtimes": {"Quick<b>@1": "ready"}}"#, "<family>@<version>"),
        (br#"{"runtimes": {"quickjs@0.32\n": "ready"}}"#, "<family>@<version>"),
        (too_many.as_bytes(), "at most"),
    ];
    for (body, why) in cases {
        let error = Readiness::parse(body).unwrap_err();
        assert!(error.contains(why), "{:?}: {error}", String::from_utf8_lossy(body));
    }
    let long = format!(r#"{{"runtimes": {{"q@{}": "ready"}}}}"#, "1".repeat(64));
    assert!(Readiness::parse(long.as_bytes()).is_err());
}
