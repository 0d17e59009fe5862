//! The executor's backchannel: NDJSON batches parsed all-or-nothing, and their events applied
//! to a run's log exactly once and in order, with stdout and stderr sharing one output cap.

use proptest::prelude::*;
use relay_core::run::backchannel::{
    exit_fields, parse_batch, parse_socket_batch, socket_reply, Applied, EventBody, Exit, RunError, RunLog, TabEvent,
    Usage, MAX_BATCH_EVENTS,
};
use serde_json::json;

fn event(seq: u64, body: EventBody) -> TabEvent {
    TabEvent { run_id: "r_1".into(), seq, body }
}

fn stdout(seq: u64, data: &str) -> TabEvent {
    event(seq, EventBody::Stdout { data: data.into() })
}

fn stderr(seq: u64, data: &str) -> TabEvent {
    event(seq, EventBody::Stderr { data: data.into() })
}

fn exit(seq: u64, exit_code: i32) -> TabEvent {
    event(seq, EventBody::Exit { exit_code, usage: Usage::default(), error: None, files: vec![], displays: vec![] })
}

fn progress() -> EventBody {
    EventBody::Progress { phase: "execute".into(), runtime_id: None, detail: None }
}

fn run_error(name: &str, message: &str) -> RunError {
    RunError { name: name.into(), message: message.into() }
}

fn line(value: serde_json::Value) -> String {
    value.to_string() + "\n"
}

// ---- parse_batch ----

#[test]
fn a_batch_of_every_event_type_parses() {
    let body = [
        json!({"runId": "r_1", "seq": 0, "type": "stdout", "data": "hi\n"}),
        json!({"runId": "r_1", "seq": 1, "type": "stderr", "data": "oops"}),
        json!({"runId": "r_1", "seq": 2, "type": "progress", "phase": "load-runtime", "runtimeId": "pyodide@314"}),
        json!({"runId": "r_1", "seq": 3, "type": "progress", "phase": "execute"}),
        json!({"runId": "r_1", "seq": 4, "type": "error", "name": "PolicyDenied", "message": "no"}),
        json!({"runId": "r_1", "seq": 5, "type": "exit", "exitCode": 2, "usage": {"wallMs": 7, "memPeakMb": 9},
               "error": {"name": "Timeout", "message": "slow"}}),
        json!({"runId": "r_1", "seq": 6, "type": "exit", "exitCode": 0}),
    ]
    .map(line)
    .concat();
    let events = parse_batch(body.as_bytes()).unwrap();
    assert_eq!(
        events,
        vec![
            stdout(0, "hi\n"),
            stderr(1, "oops"),
            event(
                2,
                EventBody::Progress {
                    phase: "load-runtime".into(),
                    runtime_id: Some("pyodide@314".into()),
                    detail: None
                }
            ),
            event(3, progress()),
            event(4, EventBody::Error(run_error("PolicyDenied", "no"))),
            event(
                5,
                EventBody::Exit {
                    exit_code: 2,
                    usage: Usage { wall_ms: 7, mem_peak_mb: 9, ..Usage::default() },
                    error: Some(run_error("Timeout", "slow")),
                    files: vec![],
                    displays: vec![],
                }
            ),
            exit(6, 0),
        ]
    );
}

#[test]
fn blank_lines_and_crlf_are_fine_and_an_empty_batch_is_empty() {
    let body = "\n  \n{\"runId\":\"r_1\",\"seq\":0,\"type\":\"stdout\",\"data\":\"a\"}\r\n\t\n\r\n";
    assert_eq!(parse_batch(body.as_bytes()).unwrap(), vec![stdout(0, "a")]);
    assert_eq!(parse_batch(b"").unwrap(), vec![]);
    assert_eq!(parse_batch(b"\n\n   \n").unwrap(), vec![]);
}

#[test]
fn one_bad_line_refuses_the_whole_batch_naming_its_line() {
    let good = line(json!({"runId": "r_1", "seq": 0, "type": "stdout", "data": "a"}));
    // Line numbers count blank lines too: they are the lines of the body as sent.
    let body = format!("{good}\n{good}{{not json\n{good}");
    let err = parse_batch(body.as_bytes()).unwrap_err();
    assert!(err.starts_with("line 4:"), "{err}");
}

#[test]
fn malformed_events_are_refused() {
    let cases = [
        ("missing runId", json!({"seq": 0, "type": "stdout", "data": "a"})),
        ("missing seq", json!({"runId": "r_1", "type": "stdout", "data": "a"})),
        ("negative seq", json!({"runId": "r_1", "seq": -1, "type": "stdout", "data": "a"})),
        ("fractional seq", json!({"runId": "r_1", "seq": 1.5, "type": "stdout", "data": "a"})),
        ("missing type", json!({"runId": "r_1", "seq": 0, "data": "a"})),
        ("unknown type", json!({"runId": "r_1", "seq": 0, "type": "stdin", "data": "a"})),
        ("missing data", json!({"runId": "r_1", "seq": 0, "type": "stdout"})),
        ("data not a string", json!({"runId": "r_1", "seq": 0, "type": "stdout", "data": 5})),
        ("exit without code", json!({"runId": "r_1", "seq": 0, "type": "exit"})),
        ("exit code too big", json!({"runId": "r_1", "seq": 0, "type": "exit", "exitCode": 1_u64 << 40})),
        ("error without message", json!({"runId": "r_1", "seq": 0, "type": "error", "name": "Timeout"})),
        ("not an object", json!([1, 2])),
        ("a bare string", json!("stdout")),
    ];
    for (what, value) in cases {
        let body = line(json!({"runId": "r_1", "seq": 0, "type": "stdout", "data": "ok"})) + &line(value);
        let err = parse_batch(body.as_bytes()).expect_err(what);
        assert!(err.starts_with("line 2:"), "{what}: {err}");
    }
}

#[test]
fn unknown_fields_are_refused() {
    let cases = [
        ("top level", json!({"runId": "r_1", "seq": 0, "type": "stdout", "data": "a", "extra": 1})),
        ("misspelt runId", json!({"run_id": "r_1", "runId": "r_1", "seq": 0, "type": "stdout", "data": "a"})),
        ("in an exit", json!({"runId": "r_1", "seq": 0, "type": "exit", "exitCode": 0, "exit_code": 0})),
        ("in usage", json!({"runId": "r_1", "seq": 0, "type": "exit", "exitCode": 0, "usage": {"cpuMs": 1}})),
        ("in an error", json!({"runId": "r_1", "seq": 0, "type": "error", "name": "X", "message": "m", "stack": ""})),
    ];
    for (what, value) in cases {
        let err = parse_batch(line(value).as_bytes()).expect_err(what);
        assert!(err.starts_with("line 1:") && err.contains("unknown field"), "{what}: {err}");
    }
}

/// An exit whose usage, error, one file and one display carry every field `exit_fields` lists (the page's
/// exit events are built from that list), each with a value of its type.
fn exit_with_every_listed_field(extra: Option<(&str, &str)>) -> serde_json::Value {
    let fields = exit_fields();
    let sample = |name: &str| match name {
        "uploaded" => json!(true),
        "image" => json!({"mimeType": "image/png", "data": "AA=="}),
        "error" => json!({"name": "x", "message": "x"}),
        "path" | "sha256" | "name" | "message" | "mimeType" | "text" | "data" => json!("x"),
        _ => json!(1),
    };
    let mut groups = serde_json::Map::new();
    for group in ["usage", "error", "file", "display"] {
        let mut value: serde_json::Map<_, _> = fields[group]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .map(|n| (n.to_owned(), sample(n)))
            .collect();
        if let Some((_, field)) = extra.filter(|(g, _)| *g == group) {
            value.insert(field.to_owned(), json!(0));
        }
        groups.insert(group.to_owned(), value.into());
    }
    json!({"runId": "r_1", "seq": 0, "type": "exit", "exitCode": 1,
           "usage": groups["usage"], "error": groups["error"], "files": [groups["file"]], "displays": [groups["display"]]})
}

#[test]
fn exit_fields_lists_exactly_what_an_exit_may_carry() {
    let events = parse_batch(line(exit_with_every_listed_field(None)).as_bytes()).unwrap();
    let EventBody::Exit { usage, error, files, displays, .. } = &events[0].body else { panic!("not an exit") };
    assert_eq!(
        *usage,
        Usage { wall_ms: 1, mem_peak_mb: 1, fetches: 1, denied: 1, file_errors: 1, context_runs: Some(1) }
    );
    assert_eq!((displays[0].mime_type.as_str(), displays[0].text.as_deref()), ("x", Some("x")));
    assert_eq!(error.as_ref().map(|e| e.name.as_str()), Some("x"));
    assert!(files[0].uploaded && files[0].image.is_some());
    // What the page's own outcomes hold besides (a file's url) is refused: sent, it would cost
    // the whole batch.
    for (group, field) in [("usage", "cpuMs"), ("file", "url"), ("error", "stack"), ("display", "url")] {
        let err = parse_batch(line(exit_with_every_listed_field(Some((group, field)))).as_bytes()).expect_err(field);
        assert!(err.contains(&format!("unknown field `{field}`")), "{group}.{field}: {err}");
    }
}

#[test]
fn a_batch_may_carry_max_events_and_no_more() {
    let one = line(json!({"runId": "r_1", "seq": 0, "type": "progress", "phase": "execute"}));
    assert_eq!(parse_batch(one.repeat(MAX_BATCH_EVENTS).as_bytes()).unwrap().len(), MAX_BATCH_EVENTS);
    let err = parse_batch(one.repeat(MAX_BATCH_EVENTS + 1).as_bytes()).unwrap_err();
    assert!(err.contains(&(MAX_BATCH_EVENTS + 1).to_string()) && err.contains(&MAX_BATCH_EVENTS.to_string()), "{err}");
    // Blank lines are not events.
    let padded = format!("{}\n\n\n", one.repeat(MAX_BATCH_EVENTS));
    assert!(parse_batch(padded.as_bytes()).is_ok());
}

#[test]
fn a_batch_that_is_not_utf8_is_refused() {
    let mut body = line(json!({"runId": "r_1", "seq": 0, "type": "stdout", "data": "a"})).into_bytes();
    body.extend_from_slice(&[0xff, 0xfe, b'\n']);
    assert_eq!(parse_batch(&body).unwrap_err(), "batch is not UTF-8");
    // A multi-byte character split in half is not UTF-8 either.
    let euro = "€".as_bytes();
    assert!(parse_batch(&euro[..2]).is_err());
}

#[test]
fn unicode_output_round_trips() {
    let body = line(json!({"runId": "r_1", "seq": 0, "type": "stdout", "data": "héllo 🌍\u{0}\n"}));
    assert_eq!(parse_batch(body.as_bytes()).unwrap(), vec![stdout(0, "héllo 🌍\u{0}\n")]);
}

// ---- RunLog::apply ----

#[test]
fn in_order_events_are_new_and_build_the_log() {
    let mut log = RunLog::new(1024);
    assert_eq!(log.apply(&stdout(0, "a")), Applied::New);
    assert_eq!(log.apply(&stderr(1, "e")), Applied::New);
    assert_eq!(log.apply(&event(2, progress())), Applied::New);
    assert_eq!(log.apply(&stdout(3, "b")), Applied::New);
    assert_eq!(log.exit, None);
    let usage = Usage { wall_ms: 12, mem_peak_mb: 3, ..Usage::default() };
    assert_eq!(
        log.apply(&event(4, EventBody::Exit { exit_code: 0, usage, error: None, files: vec![], displays: vec![] })),
        Applied::New
    );
    assert_eq!((log.stdout.as_str(), log.stderr.as_str()), ("ab", "e"));
    assert_eq!(log.exit, Some(Exit { exit_code: 0, usage, error: None, files: vec![], displays: vec![] }));
    assert_eq!(log.dropped_bytes, 0);
}

#[test]
fn a_retried_batch_is_all_duplicates_even_after_the_run_ended() {
    let batch = [stdout(0, "a"), stdout(1, "b"), exit(2, 0)];
    let mut log = RunLog::new(1024);
    for e in &batch {
        assert_eq!(log.apply(e), Applied::New);
    }
    let before = log.clone();
    for e in &batch {
        assert_eq!(log.apply(e), Applied::Duplicate, "seq {}", e.seq);
    }
    assert_eq!(log, before, "a duplicate changes nothing");
    assert_eq!(log.stdout, "ab");
}

#[test]
fn a_duplicate_is_recognised_by_seq_alone() {
    // The tab numbers events; a resent seq is the same event whatever it now carries.
    let mut log = RunLog::new(1024);
    log.apply(&stdout(0, "a"));
    assert_eq!(log.apply(&stdout(0, "something else")), Applied::Duplicate);
    assert_eq!(log.stdout, "a");
}

#[test]
fn a_gap_is_refused_with_the_expected_seq_and_changes_nothing() {
    let mut log = RunLog::new(1024);
    assert_eq!(log.apply(&stdout(1, "b")), Applied::Gap { expected: 0 });
    assert_eq!(log.apply(&stdout(u64::MAX, "z")), Applied::Gap { expected: 0 });
    assert_eq!(log, RunLog::new(1024));
    log.apply(&stdout(0, "a"));
    assert_eq!(log.apply(&exit(5, 0)), Applied::Gap { expected: 1 });
    assert_eq!(log.exit, None, "an exit past a gap does not end the run");
    assert_eq!(log.apply(&stdout(1, "b")), Applied::New);
    assert_eq!(log.stdout, "ab");
}

#[test]
fn events_after_the_exit_are_finished() {
    let mut log = RunLog::new(1024);
    log.apply(&stdout(0, "a"));
    log.apply(&exit(1, 0));
    assert_eq!(log.apply(&stdout(2, "late")), Applied::Finished);
    assert_eq!(log.apply(&exit(2, 9)), Applied::Finished);
    assert_eq!(log.apply(&stdout(100, "later")), Applied::Finished);
    assert_eq!(log.stdout, "a");
    assert_eq!(log.exit.as_ref().unwrap().exit_code, 0);
}

#[test]
fn an_error_event_is_carried_into_the_exit() {
    let mut log = RunLog::new(1024);
    log.apply(&event(0, EventBody::Error(run_error("PolicyDenied", "fetch of evil.com refused"))));
    assert_eq!(log.exit, None, "an error event alone does not end the run");
    log.apply(&exit(1, 0));
    let exit = log.exit.unwrap();
    assert_eq!(exit.error, Some(run_error("PolicyDenied", "fetch of evil.com refused")));
    assert_eq!(exit.exit_code, 1, "an errored run never exits 0");
}

#[test]
fn an_exit_keeps_its_own_error_and_non_zero_code() {
    let mut log = RunLog::new(1024);
    log.apply(&event(0, EventBody::Error(run_error("PolicyDenied", "earlier"))));
    let body = EventBody::Exit {
        exit_code: 137,
        usage: Usage::default(),
        error: Some(run_error("Timeout", "slow")),
        files: vec![],
        displays: vec![],
    };
    log.apply(&event(1, body));
    assert_eq!(
        log.exit,
        Some(Exit {
            exit_code: 137,
            usage: Usage::default(),
            error: Some(run_error("Timeout", "slow")),
            files: vec![],
            displays: vec![],
        })
    );
}

#[test]
fn an_exit_error_with_code_zero_becomes_one() {
    let mut log = RunLog::new(1024);
    log.apply(&event(
        0,
        EventBody::Exit {
            exit_code: 0,
            usage: Usage::default(),
            error: Some(run_error("X", "y")),
            files: vec![],
            displays: vec![],
        },
    ));
    assert_eq!(log.exit.unwrap().exit_code, 1);
}

#[test]
fn stdout_and_stderr_share_the_output_cap() {
    let mut log = RunLog::new(10);
    log.apply(&stdout(0, "123456"));
    log.apply(&stderr(1, "abcdef"));
    assert_eq!((log.stdout.as_str(), log.stderr.as_str()), ("123456", "abcd"));
    assert_eq!(log.dropped_bytes, 2);
    log.apply(&stdout(2, "more"));
    assert_eq!(log.stdout, "123456");
    assert_eq!(log.dropped_bytes, 6);
    log.apply(&exit(3, 0));
    let exit = log.exit.unwrap();
    assert_eq!(exit.exit_code, 1, "a run whose output was cut does not exit 0");
    let error = exit.error.expect("OutputLimitExceeded attached");
    assert_eq!(error.name, "OutputLimitExceeded");
    assert!(error.message.contains("10 bytes") && error.message.contains("6 more bytes"), "{}", error.message);
    assert!(error.message.contains("stdoutBytes"), "says how to fix it: {}", error.message);
}

#[test]
fn output_exactly_at_the_cap_is_not_an_error() {
    let mut log = RunLog::new(4);
    log.apply(&stdout(0, "ab"));
    log.apply(&stderr(1, "cd"));
    log.apply(&stdout(2, ""));
    log.apply(&exit(3, 0));
    assert_eq!(log.dropped_bytes, 0);
    assert_eq!(
        log.exit.unwrap(),
        Exit { exit_code: 0, usage: Usage::default(), error: None, files: vec![], displays: vec![] }
    );
}

#[test]
fn the_cap_cuts_at_a_char_boundary() {
    // "€" is 3 bytes: with 5 bytes of room, "a€€" keeps "a€" (4 bytes) and drops 3.
    let mut log = RunLog::new(5);
    log.apply(&stdout(0, "a€€"));
    assert_eq!(log.stdout, "a€");
    assert_eq!(log.dropped_bytes, 3);
    // 4-byte characters, no room for even one.
    let mut log = RunLog::new(3);
    log.apply(&stdout(0, "🌍🌍"));
    assert_eq!(log.stdout, "");
    assert_eq!(log.dropped_bytes, 8);
}

#[test]
fn once_output_was_cut_nothing_later_is_kept() {
    // After "€" was dropped for want of room, a later 1-byte write would still fit; keeping it
    // would show "abcdx", output that never happened in that order.
    let mut log = RunLog::new(5);
    log.apply(&stdout(0, "abcd€"));
    log.apply(&stdout(1, "x"));
    log.apply(&stderr(2, "y"));
    assert_eq!((log.stdout.as_str(), log.stderr.as_str()), ("abcd", ""));
    assert_eq!(log.dropped_bytes, 5);
    log.apply(&exit(3, 2));
    let exit = log.exit.unwrap();
    assert_eq!(exit.exit_code, 2, "a non-zero exit code is kept");
    assert_eq!(exit.error.unwrap().name, "OutputLimitExceeded");
}

#[test]
fn a_zero_cap_keeps_nothing() {
    let mut log = RunLog::new(0);
    log.apply(&stdout(0, "x"));
    log.apply(&exit(1, 0));
    assert_eq!(log.stdout, "");
    assert_eq!(log.exit.unwrap().error.unwrap().name, "OutputLimitExceeded");
}

#[test]
fn a_huge_cap_is_no_cap() {
    let mut log = RunLog::new(u64::MAX);
    let big = "x".repeat(1 << 16);
    log.apply(&stdout(0, &big));
    log.apply(&stderr(1, &big));
    assert_eq!(log.stdout.len() + log.stderr.len(), 2 << 16);
    assert_eq!(log.dropped_bytes, 0);
}

#[test]
fn fail_ends_a_running_run_only() {
    let mut log = RunLog::new(1024);
    log.apply(&stdout(0, "a"));
    log.fail("Timeout", "run exceeded 60000 ms".into(), 124);
    let failed = Exit {
        exit_code: 124,
        usage: Usage::default(),
        error: Some(run_error("Timeout", "run exceeded 60000 ms")),
        files: vec![],
        displays: vec![],
    };
    assert_eq!(log.exit, Some(failed.clone()));
    // The tab's own exit arriving afterwards is too late; a retry of what was seen is a duplicate.
    assert_eq!(log.apply(&exit(1, 0)), Applied::Finished);
    assert_eq!(log.apply(&stdout(0, "a")), Applied::Duplicate);
    log.fail("NoExecutorAttached", "tab gone".into(), 1);
    assert_eq!(log.exit, Some(failed), "a second fail does not overwrite the first end");

    let mut ended = RunLog::new(1024);
    ended.apply(&exit(0, 0));
    ended.fail("Timeout", "late".into(), 124);
    assert_eq!(
        ended.exit,
        Some(Exit { exit_code: 0, usage: Usage::default(), error: None, files: vec![], displays: vec![] })
    );
}

// ---- property: exactly once, in order, whatever the tab's retries ----

#[derive(Debug, Clone)]
enum Out {
    Stdout(String),
    Stderr(String),
    Progress,
}

fn out() -> impl Strategy<Value = Out> {
    // Mostly short strings with 1- to 4-byte characters, so caps fall inside characters.
    let text = "[a-z€é🌍\n]{0,6}";
    prop_oneof![
        3 => text.prop_map(Out::Stdout),
        2 => text.prop_map(Out::Stderr),
        1 => Just(Out::Progress),
    ]
}

fn events_of(outputs: &[Out], exit_code: i32) -> Vec<TabEvent> {
    let mut events: Vec<TabEvent> = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| match o {
            Out::Stdout(s) => stdout(i as u64, s),
            Out::Stderr(s) => stderr(i as u64, s),
            Out::Progress => event(i as u64, progress()),
        })
        .collect();
    events.push(exit(outputs.len() as u64, exit_code));
    events
}

/// What the log should hold: the longest prefix of the output, character by character in
/// event order, that fits the cap; everything after the first character that does not fit is
/// dropped.
fn expected(outputs: &[Out], cap: usize) -> (String, String, u64) {
    let (mut out, mut err, mut used, mut dropped) = (String::new(), String::new(), 0usize, 0u64);
    for o in outputs {
        let (target, text) = match o {
            Out::Stdout(s) => (&mut out, s),
            Out::Stderr(s) => (&mut err, s),
            Out::Progress => continue,
        };
        for c in text.chars() {
            if dropped > 0 || used + c.len_utf8() > cap {
                dropped += c.len_utf8() as u64;
            } else {
                used += c.len_utf8();
                target.push(c);
            }
        }
    }
    (out, err, dropped)
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_retried_or_shuffled_delivery_applies_each_event_once_in_order(
        outputs in proptest::collection::vec(out(), 0..12),
        exit_code in -2i32..3,
        cap in 0usize..40,
        deliveries in proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..8), 0..12),
    ) {
        let events = events_of(&outputs, exit_code);
        let mut log = RunLog::new(cap as u64);
        let mut applied: Vec<u64> = Vec::new();
        let mut deliver = |batch: &[&TabEvent], log: &mut RunLog| -> Result<(), TestCaseError> {
            for e in batch {
                match log.apply(e) {
                    Applied::New => {
                        prop_assert_eq!(e.seq, applied.len() as u64, "applied out of order");
                        prop_assert!(!applied.contains(&e.seq), "seq {} applied twice", e.seq);
                        applied.push(e.seq);
                    }
                    Applied::Duplicate => prop_assert!(e.seq < applied.len() as u64),
                    Applied::Gap { expected } => {
                        prop_assert_eq!(expected, applied.len() as u64);
                        prop_assert!(e.seq > expected);
                        break; // the server refuses the rest of the batch
                    }
                    Applied::Finished => {
                        prop_assert!(log.exit.is_some());
                        prop_assert!(e.seq >= applied.len() as u64);
                    }
                }
            }
            Ok(())
        };
        // Batches of arbitrary events: shuffled, repeated, partly already seen.
        for picks in &deliveries {
            let batch: Vec<&TabEvent> = picks.iter().map(|i| &events[i.index(events.len())]).collect();
            deliver(&batch, &mut log)?;
        }
        // The tab finally resends everything from the start, in order.
        let all: Vec<&TabEvent> = events.iter().collect();
        deliver(&all, &mut log)?;
        deliver(&all, &mut log)?;

        prop_assert_eq!(applied.len(), events.len());
        let (out, err, dropped) = expected(&outputs, cap);
        prop_assert_eq!(&log.stdout, &out);
        prop_assert_eq!(&log.stderr, &err);
        prop_assert_eq!(log.dropped_bytes, dropped);
        let exit = log.exit.clone().expect("the exit was applied");
        if dropped > 0 {
            prop_assert_eq!(exit.error.map(|e| e.name), Some("OutputLimitExceeded".to_string()));
            prop_assert_eq!(exit.exit_code, if exit_code == 0 { 1 } else { exit_code });
        } else {
            prop_assert_eq!(exit, Exit { exit_code, usage: Usage::default(), error: None, files: vec![], displays: vec![] });
        }
    }
}

// ---- the results socket's framing ----

#[test]
fn a_socket_batch_is_its_id_a_newline_and_the_batch() {
    let line = r#"{"runId":"r_1","seq":0,"type":"stdout","data":"hi"}"#;
    let message = format!("7\n{line}\n");
    let (id, batch) = parse_socket_batch(&message).unwrap();
    assert_eq!(id, 7);
    assert_eq!(parse_batch(batch.as_bytes()).unwrap(), vec![stdout(0, "hi")]);
    assert_eq!(parse_socket_batch("12").unwrap(), (12, ""), "an id alone is an empty batch");
}

#[test]
fn a_socket_message_without_a_numeric_id_is_refused_naming_what_it_needs() {
    for message in ["", "\n{}", "x\n{}", "-1\n", r#"{"runId":"r_1"}"#] {
        let why = parse_socket_batch(message).unwrap_err();
        assert!(why.contains("batch id and a newline"), "{message:?}: {why}");
    }
}

#[test]
fn a_socket_reply_carries_the_id_status_and_the_body_a_post_would_have_had() {
    let body = json!({ "refused": [{ "runId": "r_1", "seq": 3, "code": "ended" }] });
    let reply: serde_json::Value = serde_json::from_str(&socket_reply(7, 409, &body)).unwrap();
    assert_eq!(reply, json!({ "id": 7, "status": 409, "body": body }));
}
