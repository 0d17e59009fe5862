//! The hash-chained audit (src/audit.rs): sealing, verification of edits, deletions, moves and
//! retention, and what redaction keeps of a call's arguments.

use proptest::prelude::*;
use relay_core::audit::{
    parse_export, record_json, redact_args, seal, verify, AuditRecord, ChainHead, Kind, GENESIS, MASK, MAX_ARGS_BYTES,
};
use relay_core::capsule::canonical::sha256_hex;
use serde_json::{json, Value};

fn fields(i: u64) -> AuditRecord {
    AuditRecord {
        // Set by `seal`.
        seq: 0,
        prev: String::new(),
        chain: String::new(),
        ts_ms: 1_700_000_000_000 + i,
        tenant: "t_acme".into(),
        relay_session: "default".into(),
        run_id: format!("r_{i:016x}"),
        kind: Kind::ToolCall,
        tool: if i.is_multiple_of(2) { "run_js".into() } else { "run_py".into() },
        error_name: i.is_multiple_of(3).then(|| "NoExecutorAttached".into()),
        exit_code: Some((i % 2) as i32),
        duration_ms: 10 * i,
        stdout_bytes: i,
        stdout_sha256: sha256_hex(b"out"),
        stderr_bytes: 0,
        stderr_sha256: sha256_hex(b""),
        args: redact_args(&json!({ "code": format!("print({i})"), "args": ["a", "b"] })),
        workspace_before: None,
        workspace_after: None,
        executor: None,
    }
}

fn chain(n: u64) -> Vec<AuditRecord> {
    let mut records: Vec<AuditRecord> = Vec::new();
    for i in 0..n {
        let head = records.last().map(|r| ChainHead { seq: r.seq, chain: r.chain.clone() });
        records.push(seal(fields(i), head.as_ref()));
    }
    records
}

fn broken_at(records: &[AuditRecord]) -> u64 {
    verify(records, None).expect_err("verification should fail").seq
}

#[test]
fn seal_then_verify_round_trips() {
    let records = chain(5);
    assert_eq!(records[0].prev, GENESIS);
    assert_eq!(records[0].seq, 0);
    for pair in records.windows(2) {
        assert_eq!(pair[1].prev, pair[0].chain);
        assert_eq!(pair[1].seq, pair[0].seq + 1);
    }
    let head = verify(&records, None).unwrap();
    assert_eq!(head, ChainHead { seq: 4, chain: records[4].chain.clone() });
    // An export round-trips as an array and as NDJSON.
    let array = format!("[{}]", records.iter().map(record_json).collect::<Vec<_>>().join(","));
    assert_eq!(parse_export(&array).unwrap(), records);
    let ndjson = records.iter().map(record_json).collect::<Vec<_>>().join("\n");
    assert_eq!(parse_export(&ndjson).unwrap(), records);
}

#[test]
fn an_edited_field_breaks_at_that_record() {
    let mut records = chain(5);
    records[2].error_name = Some("Timeout".into());
    let broken = verify(&records, None).unwrap_err();
    assert_eq!(broken.seq, 2);
    assert!(broken.why.contains("edited"), "{}", broken.why);
    let mut records = chain(5);
    records[3].args = json!({});
    assert_eq!(broken_at(&records), 3);
}

#[test]
fn a_deleted_record_is_named() {
    let mut records = chain(5);
    records.remove(2);
    let broken = verify(&records, None).unwrap_err();
    assert_eq!(broken.seq, 2);
    assert!(broken.why.contains("deleted"), "{}", broken.why);
    // Deleting the last record cannot be seen from the records alone: the head says where
    // they end, which is why relay://audit shows it.
    let mut records = chain(5);
    records.pop();
    assert_eq!(verify(&records, None).unwrap().seq, 3);
}

#[test]
fn a_reordered_pair_is_named() {
    let mut records = chain(5);
    records.swap(1, 2);
    assert_eq!(broken_at(&records), 1);
}

#[test]
fn a_swapped_prev_is_named_even_when_resealed_chain_is_kept() {
    // Re-link record 3 to record 1 and recompute its chain: its own hash is right, its link not.
    let mut records = chain(5);
    records[3].prev = records[1].chain.clone();
    records[3].chain = relay_core::audit::chain_of(&records[3]);
    let broken = verify(&records, None).unwrap_err();
    assert_eq!(broken.seq, 3);
    assert!(broken.why.contains("prev"), "{}", broken.why);
}

#[test]
fn a_forged_first_record_is_refused() {
    let mut records = chain(3);
    records[0].prev = records[2].chain.clone();
    records[0].chain = relay_core::audit::chain_of(&records[0]);
    assert_eq!(broken_at(&records), 0);
}

#[test]
fn verification_after_retention_starts_from_the_oldest_kept_prev() {
    let records = chain(8);
    let kept = &records[3..];
    assert_eq!(verify(kept, None).unwrap().seq, 7);
    assert_eq!(verify(kept, Some(&records[2].chain)).unwrap().seq, 7);
    let wrong = verify(kept, Some(&records[1].chain)).unwrap_err();
    assert_eq!(wrong.seq, 3);
    assert!(verify(&[], None).is_err());
}

#[test]
fn env_values_are_masked() {
    let args = redact_args(&json!({ "code": "x", "env": { "API": "hunter2", "MODE": "debug" } }));
    assert_eq!(args["env"], json!({ "API": MASK, "MODE": MASK }));
}

#[test]
fn values_under_secret_looking_keys_are_masked() {
    let args = redact_args(&json!({
        "stdin": "plain",
        "args": ["--x"],
        "policy": { "network": { "allowedDomains": ["example.com"] } },
        "headers": { "Authorization": "abc", "X-Api-Key": "k", "cookie": "c", "myPassword": "p", "nested_Token": ["t1", "t2"] },
    }));
    assert_eq!(args["stdin"], "plain");
    assert_eq!(args["policy"]["network"]["allowedDomains"][0], "example.com");
    let headers = &args["headers"];
    for key in ["Authorization", "X-Api-Key", "cookie", "myPassword"] {
        assert_eq!(headers[key], MASK, "{key}");
    }
    assert_eq!(headers["nested_Token"], json!([MASK, MASK]));
}

#[test]
fn values_that_look_like_secrets_are_masked() {
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    for secret in [
        "rk_live_9f8a7b6c5d4e3f2a1b0c",
        "Bearer abc.def",
        jwt,
        "token=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbA",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ] {
        assert_eq!(redact_args(&json!({ "stdin": secret }))["stdin"], MASK, "{secret}");
    }
    for plain in
        ["/tmp/reports/2024/quarterly_summary_final_v3.csv", "hello world", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1"]
    {
        assert_eq!(redact_args(&json!({ "stdin": plain }))["stdin"], plain, "{plain}");
    }
}

#[test]
fn code_and_content_are_replaced_by_their_hash() {
    let code = "console.log('secret plan')";
    let args = redact_args(&json!({ "code": code, "path": "/out/a.txt", "content": "body" }));
    assert_eq!(args["code"], json!({ "bytes": code.len(), "sha256": sha256_hex(code.as_bytes()) }));
    assert_eq!(args["content"], json!({ "bytes": 4, "sha256": sha256_hex(b"body") }));
    assert_eq!(args["path"], "/out/a.txt");
}

#[test]
fn long_strings_are_cut_and_the_whole_is_bounded() {
    let long = "word ".repeat(100);
    let args = redact_args(&json!({ "stdin": long }));
    let kept = args["stdin"].as_str().unwrap();
    assert_eq!(kept.chars().count(), 200);
    assert!(kept.ends_with('…'));
    let many: Vec<String> = (0..100).map(|i| format!("argument number {i} ").repeat(5)).collect();
    let args = redact_args(&json!({ "args": many }));
    let text = serde_json::to_string(&args).unwrap();
    assert!(text.len() <= MAX_ARGS_BYTES, "{} bytes", text.len());
    assert!(args["cut"].as_str().unwrap().starts_with("{\"args\":[\"argument number 0"));
    assert!(args["bytes"].as_u64().unwrap() > MAX_ARGS_BYTES as u64);
}

#[test]
fn unsafe_numbers_still_seal() {
    let mut f = fields(0);
    f.args = redact_args(&json!({ "n": 1.5, "big": u64::MAX }));
    assert_eq!(f.args, json!({ "n": "1.5", "big": u64::MAX.to_string() }));
    let record = seal(f, None);
    assert!(verify(&[record], None).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    /// Any one-byte change to any record's canonical form that still parses as a record breaks
    /// verification at that record.
    #[test]
    fn any_single_byte_change_breaks_at_that_record(at in 0usize..6, pos in any::<prop::sample::Index>(), byte in prop::sample::select(b"0123456789abcdefxz_-".to_vec())) {
        let records = chain(6);
        let mut bytes = record_json(&records[at]).into_bytes();
        let i = pos.index(bytes.len());
        prop_assume!(bytes[i] != byte);
        bytes[i] = byte;
        let Ok(edited) = serde_json::from_slice::<AuditRecord>(&bytes) else { return Ok(()) };
        let mut tampered = records.clone();
        tampered[at] = edited;
        let broken = verify(&tampered, None);
        prop_assert!(broken.is_err(), "change at byte {} of seq {} went unseen", i, at);
        prop_assert_eq!(broken.unwrap_err().seq, at as u64);
    }
}

#[test]
fn a_record_json_is_canonical() {
    let record = &chain(1)[0];
    let value: Value = serde_json::from_str(&record_json(record)).unwrap();
    assert_eq!(value["kind"], "tool_call");
    assert_eq!(value["relaySession"], "default");
    assert!(value["errorName"].is_string());
}
