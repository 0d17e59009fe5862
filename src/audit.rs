//! The hash-chained audit: one sealed record per finished run, each carrying the chain of the
//! one before it, so an operator holding an export can tell whether any record was edited,
//! deleted or moved (`relay-capsule audit-verify`).
//!
//! `chain = sha256_hex(prev || canonical_json(record without chain))`, with `prev` the previous
//! record's chain (64 zeros before seq 0). Records keep hashes and sizes of a run's output, never
//! the output, and arguments only after [`redact_args`].

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::capsule::canonical::{canonical_json, sha256_hex, MAX_SAFE_INTEGER};

/// The `prev` of the first record of a chain.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// How many records a relay session keeps; older ones are deleted, and verification of what is
/// kept starts from the oldest kept record's own `prev`.
pub const RETENTION: u64 = 10_000;
/// Longest string an audited argument keeps, in characters.
pub const MAX_ARG_CHARS: usize = 200;
/// Largest serialized arguments object a record keeps, in bytes.
pub const MAX_ARGS_BYTES: usize = 2048;
/// What replaces a secret.
pub const MASK: &str = "***";

/// What an audit record is about: an MCP tool call, a call guest code made to an upstream
/// MCP server, or something the policy refused a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    ToolCall,
    PolicyDenial,
    UpstreamCall,
}

/// One sealed audit record, as exported (camelCase JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditRecord {
    pub seq: u64,
    pub ts_ms: u64,
    pub tenant: String,
    pub relay_session: String,
    pub run_id: String,
    pub kind: Kind,
    pub tool: String,
    pub error_name: Option<String>,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub stdout_bytes: u64,
    pub stdout_sha256: String,
    pub stderr_bytes: u64,
    pub stderr_sha256: String,
    /// The call's arguments after [`redact_args`].
    pub args: Value,
    /// The relay session's workspace root (`workspace::root`) when the run started and when it
    /// ended, for runs that had one; absent from records made before workspaces had roots, so
    /// those verify as they were sealed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_after: Option<String>,
    /// Where the run executed (`tab` or `edge`); absent for runs never sent anywhere and in
    /// records made before the edge executor, so those verify as they were sealed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<String>,
    pub prev: String,
    pub chain: String,
}

/// The last record of a chain: where the next one attaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHead {
    pub seq: u64,
    pub chain: String,
}

/// The first record that fails verification, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub seq: u64,
    pub why: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "broken at seq {}: {}", self.seq, self.why)
    }
}

/// Where a record happened: when, and in which tenant, relay session and run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub ts_ms: u64,
    pub tenant: String,
    pub relay_session: String,
    pub run_id: String,
}

impl Scope {
    /// An unsealed record of `kind` about `tool`, with nothing measured yet.
    fn record(&self, kind: Kind, tool: &str, args: Value) -> AuditRecord {
        AuditRecord {
            seq: 0,
            ts_ms: self.ts_ms,
            tenant: self.tenant.clone(),
            relay_session: self.relay_session.clone(),
            run_id: self.run_id.clone(),
            kind,
            tool: tool.to_owned(),
            error_name: None,
            exit_code: None,
            duration_ms: 0,
            stdout_bytes: 0,
            stdout_sha256: String::new(),
            stderr_bytes: 0,
            stderr_sha256: String::new(),
            args: redact_args(&args),
            workspace_before: None,
            workspace_after: None,
            executor: None,
            prev: String::new(),
            chain: String::new(),
        }
    }

    /// A call of `target` (`server/tool`) with `params` that took `duration_ms`: the result's
    /// size and hash in the stdout fields (never the result), or the error's name.
    pub fn upstream_call(
        &self,
        target: &str,
        params: &Value,
        duration_ms: u64,
        result: Result<&[u8], &str>,
    ) -> AuditRecord {
        let mut record = self.record(Kind::UpstreamCall, target, params.clone());
        record.duration_ms = duration_ms;
        match result {
            Ok(bytes) => {
                record.stdout_bytes = bytes.len() as u64;
                record.stdout_sha256 = sha256_hex(bytes);
            }
            Err(name) => record.error_name = Some(name.to_owned()),
        }
        record
    }

    /// The policy refused `what` (`fetch`, `mcps-rpc`, ...) of `target` (a URL, a path,
    /// `server/tool`), with the error's name and the reason.
    pub fn policy_denial(&self, what: &str, target: &str, error_name: &str, reason: &str) -> AuditRecord {
        let mut record = self.record(Kind::PolicyDenial, what, json!({ "target": target, "reason": reason }));
        record.error_name = Some(error_name.to_owned());
        record
    }
}

/// Seals `record` as the record after `head` (`None`: the first record of the chain): its
/// `seq`, `prev` and `chain` are set here, whatever they held.
pub fn seal(record: AuditRecord, head: Option<&ChainHead>) -> AuditRecord {
    let (seq, prev) = match head {
        Some(head) => (head.seq + 1, head.chain.clone()),
        None => (0, GENESIS.to_owned()),
    };
    let mut record = AuditRecord { seq, prev, args: canonical_safe(record.args), chain: String::new(), ..record };
    record.chain = chain_of(&record);
    record
}

/// The chain a record should carry: `sha256_hex(prev || canonical_json(record without chain))`.
/// A record whose fields have no canonical form (an oversized number) gets a chain no record
/// matches, so it fails verification rather than passing unchecked.
pub fn chain_of(record: &AuditRecord) -> String {
    let mut value = serde_json::to_value(record).expect("an audit record serializes");
    if let Value::Object(map) = &mut value {
        map.remove("chain");
    }
    match canonical_json(&value) {
        Ok(body) => sha256_hex(&[record.prev.as_bytes(), &body].concat()),
        Err(e) => format!("no canonical form: {e}"),
    }
}

/// The canonical JSON of a whole record (what the Durable Object stores and exports).
pub fn record_json(record: &AuditRecord) -> String {
    let bytes = canonical_json(record).unwrap_or_else(|_| serde_json::to_vec(record).expect("serializes"));
    String::from_utf8(bytes).expect("JSON is UTF-8")
}

/// Verifies records in order. `start_prev` is the chain the first record must follow: `None`
/// accepts the first record's own `prev` (retention deleted what came before), but a first
/// record at seq 0 must follow [`GENESIS`]. Returns the last record as the head.
pub fn verify(records: &[AuditRecord], start_prev: Option<&str>) -> Result<ChainHead, Broken> {
    let first = records.first().ok_or_else(|| Broken { seq: 0, why: "no records to verify".into() })?;
    check_start(first, start_prev)?;
    let mut head = ChainHead { seq: first.seq, chain: check_chain(first, first.seq)? };
    for record in &records[1..] {
        let expected = head.seq + 1;
        if record.seq != expected {
            let why = format!(
                "expected seq {expected} after seq {}, found seq {}: a record was deleted or moved",
                head.seq, record.seq
            );
            return Err(Broken { seq: expected, why });
        }
        if record.prev != head.chain {
            let why = format!("its prev is not the chain of seq {}: the chain was cut or re-linked", head.seq);
            return Err(Broken { seq: expected, why });
        }
        head = ChainHead { seq: expected, chain: check_chain(record, expected)? };
    }
    Ok(head)
}

fn check_start(first: &AuditRecord, start_prev: Option<&str>) -> Result<(), Broken> {
    let why = match start_prev {
        Some(prev) if first.prev != prev => "its prev is not the expected starting chain",
        None if first.seq == 0 && first.prev != GENESIS => "seq 0 must follow 64 zeros",
        None if first.seq != 0 && first.prev == GENESIS => "only seq 0 follows 64 zeros: it claims to be first",
        _ => return Ok(()),
    };
    let seq = if first.prev == GENESIS { 0 } else { first.seq };
    Err(Broken { seq, why: why.into() })
}

/// The record's chain if it matches its contents; `seq` names it in the error.
fn check_chain(record: &AuditRecord, seq: u64) -> Result<String, Broken> {
    if chain_of(record) != record.chain {
        return Err(Broken { seq, why: "its chain does not match its contents: the record was edited".into() });
    }
    Ok(record.chain.clone())
}

/// Parses an export: a JSON array of records, or one record per line (NDJSON).
pub fn parse_export(text: &str) -> Result<Vec<AuditRecord>, String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        return serde_json::from_str(trimmed).map_err(|e| format!("the export is not an array of audit records: {e}"));
    }
    let lines = text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty());
    lines
        .map(|(i, line)| serde_json::from_str(line).map_err(|e| format!("line {} is not an audit record: {e}", i + 1)))
        .collect()
}

/// An `relay://audit` body: the head and the records, oldest first.
pub fn audit_json(records: &[AuditRecord]) -> Value {
    let head = records.last().map(|r| json!({ "seq": r.seq, "chain": r.chain }));
    json!({ "head": head, "records": records })
}

/// Arguments as the audit keeps them: secrets masked, code and file contents replaced by their
/// size and hash, strings cut to [`MAX_ARG_CHARS`], the whole bounded to [`MAX_ARGS_BYTES`].
pub fn redact_args(arguments: &Value) -> Value {
    let redacted = match arguments {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), redact_entry(k, v, false))).collect()),
        other => redact_value(other, false),
    };
    bound(redacted)
}

fn redact_entry(key: &str, value: &Value, masked: bool) -> Value {
    match (key, value) {
        // Environment values are where callers put credentials: none is kept.
        ("env", Value::Object(map)) => Value::Object(map.keys().map(|k| (k.clone(), json!(MASK))).collect()),
        ("env", _) => json!(MASK),
        ("code" | "content", Value::String(text)) => {
            json!({ "bytes": text.len(), "sha256": sha256_hex(text.as_bytes()) })
        }
        _ => redact_value(value, masked || key_looks_secret(key)),
    }
}

fn redact_value(value: &Value, masked: bool) -> Value {
    match value {
        Value::String(_) if masked => json!(MASK),
        Value::String(text) if looks_secret(text) => json!(MASK),
        Value::String(text) => json!(cut(text, MAX_ARG_CHARS)),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact_value(v, masked)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), redact_entry(k, v, masked))).collect()),
        Value::Number(n) if !is_safe_integer(n) => json!(n.to_string()),
        other => other.clone(),
    }
}

const SECRET_KEYS: &[&str] = &["token", "key", "secret", "password", "authorization", "cookie", "credential"];

fn key_looks_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_KEYS.iter().any(|word| key.contains(word))
}

/// An API key (`rk_…`, `sk_…`), a credential with its scheme (`Bearer …`, `Basic …`), or a long
/// high-entropy run of base64 or hex (a token, a JWT).
pub fn looks_secret(text: &str) -> bool {
    let lower = text.trim_start().to_ascii_lowercase();
    if lower.starts_with("bearer ") || lower.starts_with("basic ") || lower.contains("authorization:") {
        return true;
    }
    text.split(|c: char| !(c.is_ascii_alphanumeric() || "+=_-".contains(c))).any(token_looks_secret)
}

fn token_looks_secret(token: &str) -> bool {
    let prefixed = ["rk_", "sk_", "pk_", "ghp_", "xoxb-", "AKIA"].iter().any(|p| token.starts_with(p));
    if prefixed && token.len() >= 16 {
        return true;
    }
    token.len() > 32
        && token.chars().any(|c| c.is_ascii_digit())
        && token.chars().any(|c| c.is_ascii_alphabetic())
        && entropy_bits(token) >= 3.5
}

/// Shannon entropy per character: a token spreads over many symbols, a word or path does not.
fn entropy_bits(text: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in text.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let n = text.chars().count() as f64;
    counts.values().map(|&k| k as f64 / n).map(|p| -p * p.log2()).sum()
}

fn cut(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max_chars - 1).collect();
    kept.push('…');
    kept
}

fn is_safe_integer(n: &serde_json::Number) -> bool {
    n.as_i64().is_some_and(|i| i.unsigned_abs() <= MAX_SAFE_INTEGER)
        || n.as_u64().is_some_and(|u| u <= MAX_SAFE_INTEGER)
}

/// Arguments whose JSON is over [`MAX_ARGS_BYTES`] become `{cut, bytes, sha256}`: the start of
/// their JSON, its full size and its hash.
fn bound(args: Value) -> Value {
    let text = serde_json::to_string(&args).expect("JSON serializes");
    if text.len() <= MAX_ARGS_BYTES {
        return args;
    }
    let (bytes, sha256) = (text.len(), sha256_hex(text.as_bytes()));
    let mut keep = MAX_ARGS_BYTES;
    loop {
        let head: String = text.chars().take(keep).collect();
        let marked = json!({ "cut": format!("{head}…"), "bytes": bytes, "sha256": sha256 });
        if serde_json::to_string(&marked).map_or(0, |s| s.len()) <= MAX_ARGS_BYTES {
            return marked;
        }
        keep -= keep.div_ceil(8).max(1);
    }
}

/// Arguments not from [`redact_args`] may hold numbers canonical JSON refuses: those become
/// strings, so every record has a canonical form.
fn canonical_safe(args: Value) -> Value {
    match args {
        Value::Number(n) if !is_safe_integer(&n) => json!(n.to_string()),
        Value::Array(items) => Value::Array(items.into_iter().map(canonical_safe).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, canonical_safe(v))).collect::<Map<_, _>>())
        }
        other => other,
    }
}
