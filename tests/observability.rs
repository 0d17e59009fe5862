//! Structured logs (`relay_core::log`) and metrics (`relay_core::metrics`): a log line holds
//! only its fields and routes name patterns, never ids; counters and histograms merge and render
//! as valid Prometheus text, hostile label values included.

use relay_core::audit::{AuditRecord, Kind};
use relay_core::log::{route, Level, LogLine};
use relay_core::metrics::{escape, RunEnd, Snapshot, Wake, BYTE_BUCKETS, MS_BUCKETS};
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn record(kind: Kind, tool: &str) -> AuditRecord {
    AuditRecord {
        seq: 3,
        ts_ms: 1_795_478_401_000,
        tenant: "t_1".into(),
        relay_session: "default".into(),
        run_id: "r_abc".into(),
        kind,
        tool: tool.into(),
        error_name: Some("Timeout".into()),
        exit_code: Some(124),
        duration_ms: 60_000,
        stdout_bytes: 10,
        stdout_sha256: "a".repeat(64),
        stderr_bytes: 5,
        stderr_sha256: "b".repeat(64),
        args: json!({ "code": { "bytes": 3, "sha256": "c" }, "env": { "TOKEN": "***" } }),
        workspace_before: None,
        workspace_after: None,
        executor: None,
        prev: "0".repeat(64),
        chain: "d".repeat(64),
    }
}

#[test]
fn a_run_line_has_its_fields_and_nothing_of_the_call_s_arguments_or_hashes() {
    let line: Value =
        serde_json::from_str(&LogLine::run(&record(Kind::ToolCall, "run_py")).unwrap().to_json()).unwrap();
    assert_eq!(
        line,
        json!({
            "ts": "2026-11-24T00:00:01.000Z", "level": "warn", "kind": "run", "durationMs": 60000,
            "tenant": "t_1", "session": "default", "runId": "r_abc", "tool": "run_py", "language": "py",
            "exitCode": 124, "bytesOut": 15, "error": "Timeout",
        })
    );
    assert!(LogLine::run(&record(Kind::UpstreamCall, "s/t")).is_none(), "one line per run: tool calls only");
}

#[test]
fn a_request_line_names_its_route_status_and_who() {
    let line = LogLine::request(0, "/mcp", 429, 12, Some(("t_1".into(), "default".into())));
    let json: Value = serde_json::from_str(&line.to_json()).unwrap();
    assert_eq!(
        json,
        json!({ "ts": "1970-01-01T00:00:00.000Z", "level": "warn", "kind": "request", "route": "/mcp", "status": 429, "durationMs": 12, "tenant": "t_1", "session": "default" })
    );
    assert_eq!(LogLine::request(0, "/mcp", 500, 1, None).level, Level::Error);
    assert_eq!(LogLine::request(0, "/mcp", 200, 1, None).level, Level::Info);
}

/// A deployment's `LOG_LEVEL` keeps its level and above; unset keeps every line, and a value
/// that is no level is refused with what to set (the Worker then writes every line).
#[test]
fn a_log_level_keeps_its_level_and_above() {
    let line = |status| LogLine::request(0, "/mcp", status, 1, None);
    for (setting, kept) in [
        (None, [true, true, true]),
        (Some("info"), [true, true, true]),
        (Some(" warn "), [false, true, true]),
        (Some("error"), [false, false, true]),
    ] {
        let threshold = Level::threshold(setting).unwrap();
        assert_eq!([200, 404, 503].map(|status| line(status).kept(threshold)), kept, "{setting:?}");
    }
    let why = Level::threshold(Some("debug")).unwrap_err();
    assert!(why.contains("\"debug\"") && why.contains("info, warn or error") && why.contains("wrangler.toml"), "{why}");
    let mut run = record(Kind::ToolCall, "run_js");
    run.error_name = None;
    assert!(!LogLine::run(&run).unwrap().kept(Level::Warn), "a run that went as asked is info");
}

#[test]
fn routes_are_patterns_with_no_id_token_or_query_in_them() {
    let cases = [
        ("PUT", "/files/r_123/out/secret-name.txt", "PUT /files/:run/out/*"),
        ("GET", "/files/t_9/r_123/out/a.png", "GET /files/:tenant/:run/out/*"),
        ("GET", "/session/my-session/events", "GET /session/:id/events"),
        ("POST", "/session/x/detach", "POST /session/:id/detach"),
        ("GET", "/session/my-session/results", "GET /session/:id/results"),
        ("GET", "/session/my-session/lease", "GET /session/:id/lease"),
        ("POST", "/session/my-session/lease", "POST /session/:id/lease"),
        ("POST", "/session/my-session/ready", "POST /session/:id/ready"),
        ("GET", "/capsules/abcdef/fs.0.zip", "GET /capsules/:hash/:file"),
        ("PUT", "/admin/tenants/t_1/upstreams/search", "/admin/tenants/:id/upstreams"),
        ("GET", "/admin/tenants", "/admin/tenants"),
        ("POST", "/admin/tenants/t_1/keys", "/admin/tenants/:id/keys"),
        ("DELETE", "/admin/tenants/t_1/keys/k_0123456789abcdef", "DELETE /admin/tenants/:id/keys/:key"),
        ("GET", "/admin/tenants/t_1/audit", "GET /admin/tenants/:id/audit"),
        ("GET", "/admin/tenants/t_1/usage", "GET /admin/tenants/:id/usage"),
        ("POST", "/mcp", "/mcp"),
        ("GET", "/session/my-session/workspace", "GET /session/:id/workspace"),
        ("GET", "/session/my-session/workspace/bodies/abcdef", "GET /session/:id/workspace/bodies/:sha256"),
        ("PUT", "/workspace/bodies/abcdef", "PUT /workspace/bodies/:sha256"),
        ("POST", "/workspace/commit", "POST /workspace/commit"),
        ("GET", "/oauth/consent", "GET /oauth/consent"),
        ("GET", "/nowhere/rk_live_key", "static or unknown"),
    ];
    for (method, path, expected) in cases {
        let pattern = route(method, path);
        assert_eq!(pattern, expected, "{method} {path}");
        for secret in ["r_123", "t_9", "t_1", "my-session", "abcdef", "rk_live_key", "search", "secret-name"] {
            assert!(!pattern.contains(secret), "{pattern} holds {secret}");
        }
    }
}

fn run(tool: &'static str, exit_code: i32, error_name: Option<&'static str>, ms: u64, bytes: u64) -> RunEnd<'static> {
    RunEnd { tool, exit_code, error_name, queue_wait_ms: 3, run_ms: ms, output_bytes: bytes, executor: None }
}

#[test]
fn runs_are_counted_by_language_and_outcome_and_timed() {
    let mut m = Snapshot::default();
    m.observe_run(&run("run_js", 0, None, 4, 0));
    m.observe_run(&run("run_js", 2, None, 40, 120));
    m.observe_run(&run("run_py", 124, Some("Timeout"), 60_000, 2_000_000));
    m.observe_run(&run("read", 0, None, 1, 10));
    assert_eq!(m.runs["js|ok"], 1);
    assert_eq!(m.runs["js|exit_nonzero"], 1);
    assert_eq!(m.runs["py|Timeout"], 1);
    assert_eq!(m.runs["read|ok"], 1, "a file tool counts under its own name");
    assert_eq!((m.run_ms.count, m.run_ms.sum), (4, 60_045));
    assert_eq!(m.run_ms.buckets.len(), MS_BUCKETS.len());
    assert_eq!(m.output_bytes.buckets.len(), BYTE_BUCKETS.len());
    assert_eq!(m.output_bytes.buckets[0], 1, "0 bytes falls in le=0");
}

#[test]
fn snapshots_merge_into_the_sum_of_both() {
    let mut a = Snapshot::default();
    a.observe_run(&run("run_js", 0, None, 4, 0));
    a.observe_denial("fetch");
    a.observe_upstream_call("search", "ok");
    let mut b = a.clone();
    b.observe_denial("write");
    b.observe_build(7);
    a.merge(&b);
    assert_eq!(a.runs["js|ok"], 2);
    assert_eq!((a.denials["fetch"], a.denials["write"]), (2, 1));
    assert_eq!(a.upstream_calls["search|ok"], 2);
    assert_eq!((a.build_ms.count, a.run_ms.count), (1, 2));
}

#[test]
fn wasm_memory_merges_as_the_largest_and_is_never_stored() {
    let mut a = Snapshot { wasm_memory_bytes: 3 << 20, ..Snapshot::default() };
    a.merge(&Snapshot { wasm_memory_bytes: 5 << 20, ..Snapshot::default() });
    a.merge(&Snapshot { wasm_memory_bytes: 4 << 20, ..Snapshot::default() });
    assert_eq!(a.wasm_memory_bytes, 5 << 20);
    assert!(a
        .prometheus("t_1")
        .contains("# TYPE relay_wasm_memory_bytes gauge\nrelay_wasm_memory_bytes{tenant=\"t_1\"} 5242880\n"));
    let stored = serde_json::to_value(Snapshot::default()).unwrap();
    assert!(stored.get("wasmMemoryBytes").is_none(), "a stored snapshot keeps its shape: {stored}");
}

#[test]
fn the_prometheus_text_is_well_formed_with_cumulative_buckets() {
    let mut m = Snapshot::default();
    m.observe_run(&run("run_js", 0, None, 4, 0));
    m.observe_run(&run("run_js", 0, None, 300, 50));
    m.observe_run(&run("run_py", 0, None, 90_000, 50));
    m.observe_denial("fetch");
    m.observe_upstream_call("srv", "UpstreamFailed");
    let text = m.prometheus("t_1");
    let sample = is_sample();
    for line in text.lines() {
        assert!(
            line.starts_with("# HELP ") || line.starts_with("# TYPE ") || sample(line),
            "not a sample line: {line}"
        );
    }
    assert!(text.contains("relay_runs_total{tenant=\"t_1\",language=\"js\",outcome=\"ok\"} 2\n"));
    assert!(text.contains("relay_policy_denials_total{tenant=\"t_1\",kind=\"fetch\"} 1\n"));
    assert!(text.contains("relay_upstream_calls_total{tenant=\"t_1\",server=\"srv\",outcome=\"UpstreamFailed\"} 1\n"));
    assert!(text.contains("relay_run_ms_bucket{tenant=\"t_1\",le=\"5\"} 1\n"));
    assert!(text.contains("relay_run_ms_bucket{tenant=\"t_1\",le=\"500\"} 2\n"), "cumulative");
    assert!(text.contains("relay_run_ms_bucket{tenant=\"t_1\",le=\"60000\"} 2\n"), "90 s is past the last bound");
    assert!(text.contains("relay_run_ms_bucket{tenant=\"t_1\",le=\"+Inf\"} 3\n"));
    assert!(text.contains("relay_run_ms_count{tenant=\"t_1\"} 3\n"));
    assert!(text.contains("# TYPE relay_build_ms histogram\n"));
}

#[test]
fn wakeups_merge_and_render_by_kind() {
    let one: BTreeMap<String, u64> = Wake::ALL.iter().map(|w| (w.as_str().to_owned(), 0)).collect();
    let mut a = Snapshot { wakeups: one.clone(), ..Snapshot::default() };
    a.wakeups.insert(Wake::Alarm.as_str().into(), 2);
    a.merge(&Snapshot {
        wakeups: BTreeMap::from([("alarm".to_owned(), 2), ("request".to_owned(), 1)]),
        ..Snapshot::default()
    });
    assert_eq!((a.wakeups["alarm"], a.wakeups["request"], a.wakeups["tick"]), (4, 1, 0));
    let text = a.prometheus("t_1");
    assert!(text.contains("# TYPE relay_do_wakeups_total counter\n"));
    assert!(text.contains("relay_do_wakeups_total{tenant=\"t_1\",kind=\"alarm\"} 4\n"), "{text}");
    assert!(text.contains("relay_do_wakeups_total{tenant=\"t_1\",kind=\"tick\"} 0\n"), "a flat counter shows as 0");
    assert!(text.lines().filter(|l| !l.starts_with('#')).all(is_sample()), "{text}");
    let stored = serde_json::to_value(Snapshot::default()).unwrap();
    assert!(stored.get("wakeups").is_none(), "a stored snapshot keeps its shape: {stored}");
}

#[test]
fn alarm_writes_merge_and_render_by_op() {
    let mut a = Snapshot {
        alarm_writes: BTreeMap::from([("set".to_owned(), 1), ("delete".to_owned(), 0)]),
        ..Snapshot::default()
    };
    a.merge(&Snapshot {
        alarm_writes: BTreeMap::from([("set".to_owned(), 2), ("delete".to_owned(), 3)]),
        ..Snapshot::default()
    });
    assert_eq!((a.alarm_writes["set"], a.alarm_writes["delete"]), (3, 3));
    let text = a.prometheus("t_1");
    assert!(text.contains("# TYPE relay_do_alarm_writes_total counter\n"));
    assert!(text.contains("relay_do_alarm_writes_total{tenant=\"t_1\",op=\"set\"} 3\n"), "{text}");
    assert!(text.lines().filter(|l| !l.starts_with('#')).all(is_sample()), "{text}");
    let stored = serde_json::to_value(Snapshot::default()).unwrap();
    assert!(stored.get("alarmWrites").is_none(), "a stored snapshot keeps its shape: {stored}");
}

/// Whether a line is `name{labels} value` with properly quoted label values.
fn is_sample() -> impl Fn(&str) -> bool {
    let re = regex::Regex::new(r#"^[a-z_]+\{([a-zA-Z_]+="(\\.|[^"\\])*",?)*\} \d+$"#).unwrap();
    move |line| re.is_match(line)
}

#[test]
fn hostile_label_values_cannot_break_out_of_their_quotes() {
    assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    let mut m = Snapshot::default();
    m.observe_upstream_call("evil\"} 999\nrelay_runs_total{x=\"", "ok");
    let text = m.prometheus("t\"\n");
    let sample = is_sample();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(sample(line), "{line}");
    }
    assert_eq!(text.lines().filter(|l| l.contains("999")).count(), 1, "the value stays inside its label");
}

#[test]
fn the_tenants_quotas_are_gauges_in_its_metrics() {
    let usage = serde_json::json!({
        "callsPerMinute": { "limit": 1200, "used": 3, "resetsInS": 20 },
        "edgeCpuMsPerDay": { "limit": null, "used": 0, "resetsInS": 100 },
        "storedBytes": { "limit": 1048576, "used": 601417, "measured": null, "measuredAtMs": null },
    });
    let text = relay_core::metrics::quota_gauges("t_\"1", &usage);
    assert!(text.contains("# TYPE relay_quota_limit gauge\n"), "{text}");
    assert!(text.contains("relay_quota_limit{tenant=\"t_\\\"1\",quota=\"callsPerMinute\"} 1200\n"), "{text}");
    assert!(text.contains("relay_quota_used{tenant=\"t_\\\"1\",quota=\"storedBytes\"} 601417\n"), "{text}");
    assert!(text.contains("relay_quota_used{tenant=\"t_\\\"1\",quota=\"edgeCpuMsPerDay\"} 0\n"), "{text}");
    assert!(
        !text.contains("relay_quota_limit{tenant=\"t_\\\"1\",quota=\"edgeCpuMsPerDay\"}"),
        "no budget, no limit line: {text}"
    );
}
