//! No message the server sends reaches 1 MiB, whatever a run printed: a run's result keeps its
//! output once per place up to `OUTPUT_BUDGET` serialized bytes (JSON escaping measured as
//! serde_json writes it) and says what it cut; streamed output is split into several
//! `notifications/message` events.

#[path = "mcp_common.rs"]
mod common;

use common::*;
use proptest::prelude::*;
use relay_core::error::ErrorName;
use relay_core::mcp::{log_notifications, tool_error, tool_result, Era, LogLevel, ToolResult, OUTPUT_BUDGET};
use serde_json::{json, Value};

const MIB: usize = 1 << 20;
/// What one SSE event may hold in the official Python SDK by default, with room to spare.
const EVENT_MAX: usize = 1_000_000;

fn output(stdout: String, stderr: String) -> ToolResult {
    ToolResult { exit_code: 0, stdout, stderr, wall_ms: 5, mem_peak_mb: 1, ..ToolResult::default() }
}

/// The result of a run in both eras, checked against the size limit.
fn answer_to(result: ToolResult) -> Value {
    let legacy = tool_result(&a_call(Era::Legacy, true, None), result.clone());
    assert!(size(&legacy) < EVENT_MAX, "legacy result is {} bytes", size(&legacy));
    let modern = tool_result(&a_call(Era::Modern, true, None), result);
    assert!(size(&modern) < EVENT_MAX, "result is {} bytes", size(&modern));
    modern
}

fn size(message: &Value) -> usize {
    serde_json::to_vec(message).unwrap().len()
}

/// The bytes serde_json writes for a string, without its quotes.
fn json_len(text: &str) -> usize {
    serde_json::to_string(text).unwrap().len() - 2
}

fn structured(answer: &Value) -> &Value {
    &answer["result"]["structuredContent"]
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"].as_str().unwrap()
}

fn kept<'a>(answer: &'a Value, stream: &str) -> &'a str {
    structured(answer)[stream].as_str().unwrap()
}

/// `kept` is the longest prefix of `whole` within `budget` serialized bytes.
fn assert_longest_prefix(kept: &str, whole: &str, budget: usize) {
    assert!(whole.starts_with(kept), "a prefix, cut on a char boundary");
    assert!(json_len(kept) <= budget, "{} > {budget}", json_len(kept));
    if let Some(next) = whole[kept.len()..].chars().next() {
        assert!(json_len(&format!("{kept}{next}")) > budget, "one more char would still fit");
    }
}

#[test]
fn small_output_is_kept_whole_with_no_truncation_mark() {
    let result = output("hello\n".into(), "warn \"quoted\"\n".into());
    let answer = answer_to(result);
    assert_eq!(kept(&answer, "stdout"), "hello\n");
    assert_eq!(kept(&answer, "stderr"), "warn \"quoted\"\n");
    assert!(structured(&answer).get("truncated").is_none());
    assert!(!text(&answer).contains("not shown"), "{}", text(&answer));
}

#[test]
fn a_mebibyte_of_plain_text_is_cut_at_the_budget_and_marked() {
    let stdout = "a".repeat(MIB);
    let answer = answer_to(output(stdout.clone(), String::new()));
    assert_eq!(kept(&answer, "stdout"), &stdout[..OUTPUT_BUDGET]);
    assert_eq!(structured(&answer)["truncated"], json!({"stdout": MIB}));
    let text = text(&answer);
    let dropped = format!("{} of its {MIB} bytes are not shown", MIB - OUTPUT_BUDGET);
    assert!(text.contains(&dropped), "the text says how much was dropped");
    assert!(text.contains("notifications/message"), "and where the whole output went");
    assert!(text.contains(&stdout[..OUTPUT_BUDGET]));
}

#[test]
fn a_mebibyte_of_control_characters_is_measured_escaped() {
    // Each U+0001 is one byte of output and six of JSON (\u0001): 6 MiB if kept whole.
    let stdout = "\u{1}".repeat(MIB);
    let answer = answer_to(output(stdout.clone(), String::new()));
    assert_eq!(kept(&answer, "stdout").len(), OUTPUT_BUDGET / 6);
    assert_longest_prefix(kept(&answer, "stdout"), &stdout, OUTPUT_BUDGET);
    assert_eq!(structured(&answer)["truncated"], json!({"stdout": MIB}));
    // Two-byte escapes (\n, \", \\) and six-byte ones mixed.
    let mixed = "\n\"\\\u{0}x\t".repeat(MIB / 6);
    let answer = answer_to(output(String::new(), mixed.clone()));
    assert_longest_prefix(kept(&answer, "stderr"), &mixed, OUTPUT_BUDGET);
    assert_eq!(structured(&answer)["truncated"], json!({"stderr": mixed.len()}));
}

#[test]
fn multi_byte_characters_at_the_cut_stay_whole() {
    for wide in ["é", "€", "😀"] {
        for offset in 0..4 {
            let stdout = format!("{}{}", "a".repeat(offset), wide.repeat(MIB / wide.len()));
            let answer = answer_to(output(stdout.clone(), String::new()));
            let kept = kept(&answer, "stdout");
            assert_longest_prefix(kept, &stdout, OUTPUT_BUDGET);
            assert!(text(&answer).contains(kept));
        }
    }
}

#[test]
fn two_large_streams_share_the_budget() {
    let (stdout, stderr) = ("o".repeat(MIB), "e".repeat(MIB));
    let answer = answer_to(output(stdout.clone(), stderr.clone()));
    assert_eq!(kept(&answer, "stdout"), &stdout[..OUTPUT_BUDGET / 2]);
    assert_eq!(kept(&answer, "stderr"), &stderr[..OUTPUT_BUDGET / 2]);
    assert_eq!(structured(&answer)["truncated"], json!({"stdout": MIB, "stderr": MIB}));
    for stream in ["stdout", "stderr"] {
        assert!(text(&answer).contains(&format!("[{stream} cut here: ")), "{stream}");
    }
}

#[test]
fn a_small_stream_is_kept_whole_and_leaves_the_rest_to_the_other() {
    let (small, large) = ("s".repeat(1000), "L".repeat(MIB));
    let answer = answer_to(output(small.clone(), large.clone()));
    assert_eq!(kept(&answer, "stdout"), small);
    assert_eq!(kept(&answer, "stderr"), &large[..OUTPUT_BUDGET - 1000]);
    assert_eq!(structured(&answer)["truncated"], json!({"stderr": MIB}));
    let answer = answer_to(output(large.clone(), small.clone()));
    assert_eq!(kept(&answer, "stdout"), &large[..OUTPUT_BUDGET - 1000]);
    assert_eq!(kept(&answer, "stderr"), small);
    assert_eq!(structured(&answer)["truncated"], json!({"stdout": MIB}));
}

#[test]
fn everything_hostile_at_once_still_fits_one_event() {
    let mut result = output("\u{0}".repeat(MIB), "\"".repeat(MIB));
    result.exit_code = 1;
    result.error = Some((ErrorName::Internal, "\u{1f}".repeat(MIB)));
    let answer = answer_to(result);
    let message = structured(&answer)["error"]["message"].as_str().unwrap();
    assert!(message.ends_with("bytes are not shown]"), "a cut error message says so");
    assert!(text(&answer).starts_with("Internal: \u{1f}"));
    assert_eq!(structured(&answer)["truncated"], json!({"stdout": MIB, "stderr": MIB}));
}

#[test]
fn an_error_with_a_huge_message_fits_one_event() {
    let message = "\u{0}".repeat(MIB);
    let answer = tool_error(&a_call(Era::Modern, false, None), ErrorName::ValidationError, &message);
    assert!(size(&answer) < EVENT_MAX, "{}", size(&answer));
    let kept = answer["result"]["structuredContent"]["error"]["message"].as_str().unwrap();
    assert!(kept.contains(&format!("of its {MIB} bytes are not shown")), "{}", &kept[kept.len() - 80..]);
}

#[test]
fn the_run_tools_output_schema_admits_the_truncation_mark() {
    let schema = relay_core::mcp::Tool::RunJs.output_schema();
    let truncated = &schema["properties"]["truncated"];
    assert_eq!(truncated["type"], "object");
    assert_eq!(truncated["properties"]["stdout"]["type"], "integer");
    assert_eq!(truncated["properties"]["stderr"]["type"], "integer");
    assert!(!schema["anyOf"][0]["required"].as_array().unwrap().contains(&json!("truncated")), "optional");
}

/// The data of the log notifications for `data`, checking each event's size.
fn streamed(data: &str) -> Vec<String> {
    let notes = log_notifications(&a_call(Era::Legacy, true, None), LogLevel::Info, "stdout", data);
    notes
        .iter()
        .map(|note| {
            assert!(size(note) < EVENT_MAX, "an event of {} bytes", size(note));
            let piece = note["params"]["data"].as_str().unwrap().to_owned();
            assert!(json_len(&piece) <= OUTPUT_BUDGET);
            piece
        })
        .collect()
}

#[test]
fn streamed_output_is_split_into_events_under_the_budget() {
    assert_eq!(streamed(""), Vec::<String>::new());
    assert_eq!(streamed("line\n"), ["line\n"]);
    for data in ["a".repeat(MIB), "\u{1}".repeat(MIB), format!("a{}", "😀".repeat(MIB / 4)), "\"\n".repeat(MIB / 2)] {
        let pieces = streamed(&data);
        assert!(pieces.len() > 1);
        assert_eq!(pieces.concat(), data, "in order, nothing lost");
        let mut rest = data.as_str();
        for piece in &pieces {
            assert_longest_prefix(piece, rest, OUTPUT_BUDGET);
            rest = &rest[piece.len()..];
        }
    }
    assert_eq!(streamed(&"\u{1}".repeat(MIB)).len(), MIB.div_ceil(OUTPUT_BUDGET / 6));
}

/// Output drawn from every class the measure treats differently.
fn hostile_text(max_chars: usize) -> impl Strategy<Value = String> {
    let class = prop_oneof![
        Just('a'),
        Just('"'),
        Just('\\'),
        Just('\n'),
        Just('\u{0}'),
        Just('\u{7f}'),
        Just('é'),
        Just('€'),
        Just('😀')
    ];
    prop::collection::vec((class, 1..20_000usize), 0..max_chars)
        .prop_map(|runs| runs.into_iter().map(|(c, n)| c.to_string().repeat(n)).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn any_output_keeps_the_longest_prefix_and_fits(stdout in hostile_text(120), stderr in hostile_text(120)) {
        let answer = answer_to(output(stdout.clone(), stderr.clone()));
        let (out, err) = (kept(&answer, "stdout"), kept(&answer, "stderr"));
        prop_assert!(json_len(out) + json_len(err) <= OUTPUT_BUDGET);
        prop_assert!(stdout.starts_with(out) && stderr.starts_with(err));
        let cut = out.len() < stdout.len() || err.len() < stderr.len();
        prop_assert_eq!(structured(&answer).get("truncated").is_some(), cut);
        if out.len() < stdout.len() && err.len() < stderr.len() {
            // Both cut: each had at least half the budget, less a char that did not fit.
            prop_assert!(json_len(out) + 6 > OUTPUT_BUDGET / 2 && json_len(err) + 6 > OUTPUT_BUDGET / 2);
        }
        prop_assert_eq!(streamed(&stdout).concat(), stdout);
    }
}
