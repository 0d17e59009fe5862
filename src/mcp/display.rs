//! What a run's `display()` calls become in its result (IPython's conventions, as the runtimes
//! read them; the tab reports each as a MIME type with its text, base64 bytes, or the `/out`
//! path it was written to when too large to ride along): PNG, JPEG, GIF, WebP and SVG as image
//! content; HTML and Markdown as embedded resources of their MIME type; JSON as text and in
//! `structuredContent.displays`, and a list of records or a dict of columns as a table (a
//! Markdown table in text, the rows as JSON); plain text as text. Inline data stays within a
//! budget the result gives; past it a display is named, with its file's URL when it has one.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Map, Value};

use crate::run::backchannel::Display;

/// Rows a Markdown table shows; all of them are in `structuredContent`.
pub const TABLE_ROWS_SHOWN: usize = 50;
/// Characters of one table cell shown.
const CELL_CHARS: usize = 200;

/// The content blocks and the `structuredContent.displays` entries of run `run`'s displays, with
/// at most `budget` bytes of inline data; `files` is the result's list of `/out` files (their
/// URLs). Returns the budget left.
pub fn display_content(
    run: &str,
    displays: &[Display],
    files: &[Value],
    budget: usize,
) -> (Vec<Value>, Vec<Value>, usize) {
    let mut content = Vec::new();
    let mut structured = Vec::new();
    let mut left = budget;
    for (i, display) in displays.iter().enumerate() {
        let mime = display.mime_type.as_str();
        let mut entry = json!({ "mimeType": mime });
        let block = match (&display.path, &display.text, &display.data) {
            (Some(path), _, _) => {
                let url = files.iter().find(|f| f["path"] == path.as_str()).and_then(|f| f["url"].as_str());
                entry["path"] = json!(path);
                if let Some(url) = url {
                    entry["url"] = json!(url);
                }
                let shown = url.map_or_else(|| path.clone(), |url| format!("{path}, {url}"));
                Some(text(&format!("[display {i}: {mime}, too large to show inline, is in /out: {shown}]")))
            }
            (None, text_value, data) => {
                let (block, cost) = inline(run, i, mime, text_value.as_deref(), data.as_deref(), &mut entry);
                match block {
                    Some(block) if cost <= left => {
                        left -= cost;
                        Some(block)
                    }
                    Some(_) => {
                        // What is left out is left out of structuredContent too: only the
                        // budget bounds a result's size.
                        if let Some(kept) = entry.as_object_mut() {
                            kept.remove("value");
                            kept.remove("table");
                        }
                        entry["leftOut"] = json!(true);
                        Some(text(&format!(
                            "[display {i}: {mime} left out: the displays of one result carry at most {budget} bytes; write it to /out instead]"
                        )))
                    }
                    None => Some(text(&format!("[display {i}: {mime} is not a type relay shows]"))),
                }
            }
        };
        content.extend(block);
        structured.push(entry);
    }
    (content, structured, left)
}

/// One display as a content block, its cost against the budget, and what
/// `structuredContent.displays` keeps of it (`entry`).
fn inline(
    run: &str,
    i: usize,
    mime: &str,
    text_value: Option<&str>,
    data: Option<&str>,
    entry: &mut Value,
) -> (Option<Value>, usize) {
    match (mime, text_value, data) {
        ("image/png" | "image/jpeg" | "image/gif" | "image/webp", _, Some(data)) => {
            (Some(json!({ "type": "image", "data": data, "mimeType": mime })), data.len())
        }
        ("image/svg+xml", Some(svg), _) => {
            let data = STANDARD.encode(svg);
            let cost = data.len();
            (Some(json!({ "type": "image", "data": data, "mimeType": mime })), cost)
        }
        ("text/html" | "text/markdown", Some(body), _) => {
            let uri = format!("relay://runs/{run}/displays/{i}");
            (
                Some(json!({ "type": "resource", "resource": { "uri": uri, "mimeType": mime, "text": body } })),
                body.len(),
            )
        }
        ("application/json", Some(body), _) => {
            let Ok(value) = serde_json::from_str::<Value>(body) else { return (None, 0) };
            let shown = match table_of(&value) {
                Some((columns, rows)) => {
                    let markdown = markdown_table(&columns, &rows);
                    entry["table"] = json!({ "columns": columns, "rows": rows });
                    markdown
                }
                None => {
                    entry["value"] = value;
                    body.to_owned()
                }
            };
            // Shown twice: as text and in structuredContent.
            let cost = shown.len() + body.len();
            (Some(text(&shown)), cost)
        }
        ("text/plain", Some(body), _) => (Some(text(body)), body.len()),
        _ => (None, 0),
    }
}

fn text(body: &str) -> Value {
    json!({ "type": "text", "text": body })
}

/// A table: its columns and its rows.
pub type Table = (Vec<String>, Vec<Map<String, Value>>);

/// A table, if `value` is one: a non-empty list of records (objects), or a dict of columns
/// (an object of arrays all of one non-zero length). Columns in the order of their names (the
/// JSON was parsed into sorted maps), each record's own first.
pub fn table_of(value: &Value) -> Option<Table> {
    match value {
        Value::Array(records) if !records.is_empty() && records.iter().all(Value::is_object) => {
            let rows: Vec<Map<String, Value>> = records.iter().filter_map(|r| r.as_object().cloned()).collect();
            let mut columns: Vec<String> = Vec::new();
            for key in rows.iter().flat_map(|r| r.keys()) {
                if !columns.contains(key) {
                    columns.push(key.clone());
                }
            }
            (!columns.is_empty()).then_some((columns, rows))
        }
        Value::Object(by_column) if !by_column.is_empty() => {
            let lengths: Vec<usize> = by_column.values().map(|c| c.as_array().map_or(0, Vec::len)).collect();
            let n = lengths[0];
            if n == 0 || lengths.iter().any(|&l| l != n) {
                return None;
            }
            let columns: Vec<String> = by_column.keys().cloned().collect();
            let rows = (0..n)
                .map(|i| by_column.iter().map(|(name, column)| (name.clone(), column[i].clone())).collect())
                .collect();
            Some((columns, rows))
        }
        _ => None,
    }
}

/// A Markdown table of `rows` (at most [`TABLE_ROWS_SHOWN`]; the rest counted).
pub fn markdown_table(columns: &[String], rows: &[Map<String, Value>]) -> String {
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut out = line(columns.iter().map(|c| cell(&Value::String(c.clone()))).collect());
    out.push_str(&line(columns.iter().map(|_| "---".to_owned()).collect()));
    for row in rows.iter().take(TABLE_ROWS_SHOWN) {
        out.push_str(&line(columns.iter().map(|c| row.get(c).map_or_else(String::new, cell)).collect()));
    }
    if rows.len() > TABLE_ROWS_SHOWN {
        out.push_str(&format!(
            "\n[{} more rows: all {} are in structuredContent.displays]\n",
            rows.len() - TABLE_ROWS_SHOWN,
            rows.len()
        ));
    }
    out
}

/// A value as one Markdown table cell: strings as they are, the rest as compact JSON; pipes
/// escaped, line breaks made spaces, long ones cut.
fn cell(value: &Value) -> String {
    let raw = match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let mut shown: String = raw.chars().take(CELL_CHARS).collect();
    if raw.chars().count() > CELL_CHARS {
        shown.push('…');
    }
    shown.replace('\\', "\\\\").replace('|', "\\|").replace(['\r', '\n'], " ")
}
