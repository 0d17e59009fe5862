//! What a run's `display()` calls become in its result (`mcp::display`): the content type of
//! each kind, tables from records and columns (with hostile cells), the budget, and displays
//! that went to `/out`.

use proptest::prelude::*;
use relay_core::mcp::display::{display_content, markdown_table, table_of, TABLE_ROWS_SHOWN};
use relay_core::run::backchannel::Display;
use serde_json::{json, Value};

fn shown(mime: &str, text: Option<&str>, data: Option<&str>) -> Display {
    Display { mime_type: mime.into(), text: text.map(Into::into), data: data.map(Into::into), path: None }
}

#[test]
fn each_kind_becomes_its_content_type() {
    let displays = [
        shown("image/png", None, Some("iVBORw0KGgo=")),
        shown("text/html", Some("<b>hi</b>"), None),
        shown("text/markdown", Some("# hi"), None),
        shown("image/svg+xml", Some("<svg/>"), None),
        shown("application/json", Some(r#"{"a": [1, 2]}"#), None),
        shown("text/plain", Some("plain"), None),
    ];
    let (content, structured, _) = display_content("r_1", &displays, &[], 128 * 1024);
    assert_eq!(content[0], json!({ "type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png" }));
    assert_eq!(
        content[1],
        json!({ "type": "resource", "resource": { "uri": "relay://runs/r_1/displays/1", "mimeType": "text/html", "text": "<b>hi</b>" } })
    );
    assert_eq!(content[2]["resource"]["mimeType"], "text/markdown");
    assert_eq!(content[3], json!({ "type": "image", "data": "PHN2Zy8+", "mimeType": "image/svg+xml" }));
    // {"a": [1, 2]} is a dict of one column: a table.
    assert_eq!(content[4]["text"], "| a |\n| --- |\n| 1 |\n| 2 |\n");
    assert_eq!(structured[4]["table"], json!({ "columns": ["a"], "rows": [{ "a": 1 }, { "a": 2 }] }));
    assert_eq!(content[5], json!({ "type": "text", "text": "plain" }));
    assert_eq!(structured.len(), 6);
    assert!(structured.iter().all(|s| s["mimeType"].is_string()));
}

#[test]
fn records_become_a_table_and_other_json_a_value() {
    let records = json!([{ "name": "a|b", "n": 1 }, { "name": "line\nbreak", "extra": { "x": true } }]);
    let (columns, rows) = table_of(&records).expect("a table");
    assert_eq!(columns, ["n", "name", "extra"]);
    assert_eq!(
        markdown_table(&columns, &rows),
        "| n | name | extra |\n| --- | --- | --- |\n| 1 | a\\|b |  |\n|  | line break | {\"x\":true} |\n"
    );
    for not_a_table in [
        json!([]),
        json!([1, 2]),
        json!({}),
        json!({ "a": [1], "b": [1, 2] }),
        json!({ "a": [] }),
        json!("x"),
        json!(3),
    ] {
        assert_eq!(table_of(&not_a_table), None, "{not_a_table}");
    }
    let (content, structured, _) = display_content("r", &[shown("application/json", Some("[1, 2]"), None)], &[], 1000);
    assert_eq!(content[0]["text"], "[1, 2]");
    assert_eq!(structured[0]["value"], json!([1, 2]));
}

#[test]
fn a_long_table_shows_its_first_rows_and_keeps_them_all() {
    let rows: Vec<Value> = (0..120).map(|i| json!({ "i": i })).collect();
    let body = Value::Array(rows).to_string();
    let (content, structured, _) = display_content("r", &[shown("application/json", Some(&body), None)], &[], 1 << 20);
    let text = content[0]["text"].as_str().unwrap();
    assert_eq!(text.lines().filter(|l| l.starts_with("| ") && !l.contains("---")).count(), TABLE_ROWS_SHOWN + 1);
    assert!(text.contains("[70 more rows: all 120 are in structuredContent.displays]"));
    assert_eq!(structured[0]["table"]["rows"].as_array().unwrap().len(), 120);
}

#[test]
fn past_the_budget_a_display_is_named_not_carried() {
    let big = "x".repeat(600);
    let displays = [
        shown("text/html", Some(&big), None),
        shown("text/html", Some(&big), None),
        shown("text/plain", Some("small"), None),
    ];
    let (content, structured, left) = display_content("r", &displays, &[], 1000);
    assert_eq!(content[0]["type"], "resource");
    assert!(content[1]["text"].as_str().unwrap().contains("display 1: text/html left out"));
    assert_eq!(structured[1]["leftOut"], true);
    assert_eq!(content[2]["text"], "small");
    assert_eq!(left, 1000 - 600 - 5);
}

#[test]
fn json_past_the_budget_is_carried_neither_as_text_nor_in_structured_content() {
    let value = json!({ "blob": "y".repeat(600) }).to_string();
    let records = json!([{ "a": "z".repeat(600) }]).to_string();
    let displays = [shown("application/json", Some(&value), None), shown("application/json", Some(&records), None)];
    let (content, structured, _) = display_content("r", &displays, &[], 500);
    for (i, entry) in structured.iter().enumerate() {
        assert!(content[i]["text"].as_str().unwrap().contains("left out"), "{}", content[i]);
        assert_eq!(entry["leftOut"], true);
        assert!(entry.get("value").is_none() && entry.get("table").is_none(), "display {i} still carried: {entry}");
        assert!(entry.to_string().len() < 100, "{entry}");
    }
}

#[test]
fn a_display_written_to_out_is_named_with_its_url() {
    let moved =
        Display { mime_type: "image/png".into(), text: None, data: None, path: Some("/out/display-r-0.png".into()) };
    let files = [json!({ "path": "/out/display-r-0.png", "size": 200000, "url": "https://relay.example/files/x" })];
    let (content, structured, left) = display_content("r", &[moved], &files, 10);
    assert!(content[0]["text"].as_str().unwrap().contains("/out/display-r-0.png, https://relay.example/files/x"));
    assert_eq!(
        structured[0],
        json!({ "mimeType": "image/png", "path": "/out/display-r-0.png", "url": "https://relay.example/files/x" })
    );
    assert_eq!(left, 10);
    // An unknown type or broken JSON is named, never passed on.
    let odd = [shown("application/x-odd", Some("?"), None), shown("application/json", Some("{"), None)];
    let (content, _, _) = display_content("r", &odd, &[], 1000);
    assert!(content.iter().all(|c| c["text"].as_str().unwrap().contains("is not a type relay shows")));
}

proptest! {
    /// Any cell text stays in its cell: a row of the table has exactly its columns' separators.
    #[test]
    fn cells_never_break_the_table(cells in proptest::collection::vec(".{0,40}", 1..6)) {
        let row: serde_json::Map<String, Value> = cells.iter().enumerate().map(|(i, c)| (format!("c{i}"), json!(c))).collect();
        let (columns, rows) = table_of(&json!([row])).unwrap();
        let table = markdown_table(&columns, &rows);
        let lines: Vec<&str> = table.lines().collect();
        prop_assert_eq!(lines.len(), 3);
        let unescaped = |line: &str| line.replace("\\\\", "").replace("\\|", "").matches('|').count();
        prop_assert_eq!(unescaped(lines[2]), columns.len() + 1, "{}", lines[2]);
    }
}
