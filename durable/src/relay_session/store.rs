//! The DO's SQLite: migrations from `migrations/`, legacy MCP sessions, the run audit (output
//! hashes and sizes, never output bodies) and its hash chain (`audit`, see src/audit.rs).

use relay_core::audit::{self, AuditRecord, ChainHead, Kind, Scope};
use relay_core::capsule::canonical::sha256_hex;
use relay_core::files::{self, Slot};
use relay_core::log::LogLine;
use relay_core::mcp::tasks::{TaskRecord, TASK_TTL_MS};
use relay_core::mcp::{SessionStatus, SessionStore};
use relay_core::metrics::{RunEnd, Snapshot};
use relay_core::run::session::Outcome;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use worker::{SqlStorage, SqlStorageValue};

/// The migrations, in order. Each runs once; `schema_version` remembers how far we got.
const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/0001_init.sql"),
    include_str!("../../../migrations/0002_run_resume.sql"),
    include_str!("../../../migrations/0003_audit_chain.sql"),
    include_str!("../../../migrations/0004_tasks.sql"),
    include_str!("../../../migrations/0005_metrics.sql"),
    include_str!("../../../migrations/0006_out_files.sql"),
];
/// How long a run's published paths are counted: longer than any run token lives.
const OUT_FILES_KEPT_MS: u64 = 24 * 60 * 60 * 1000;
/// Longest error message the audit keeps.
const MAX_ERROR_MESSAGE: usize = 500;

/// Brings the schema up to date.
pub fn migrate(sql: &SqlStorage) -> worker::Result<()> {
    sql.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", None)?;
    #[derive(Deserialize)]
    struct Version {
        v: Option<i64>,
    }
    let done = sql.exec("SELECT MAX(version) AS v FROM schema_version", None)?.one::<Version>()?.v.unwrap_or(0);
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(done as usize) {
        sql.exec(migration, None)?;
        sql.exec("INSERT INTO schema_version (version) VALUES (?)", vec![((i + 1) as i64).into()])?;
    }
    Ok(())
}

/// Reserves the slot of `path` among run `run`'s published files (`files::slot`): the count, the
/// decision and the reservation in one synchronous step. Forgets reservations older than
/// [`OUT_FILES_KEPT_MS`] first.
pub fn reserve_out_file(sql: &SqlStorage, run: &str, path: &str, now_ms: u64) -> worker::Result<Slot> {
    let stale = now_ms.saturating_sub(OUT_FILES_KEPT_MS) as i64;
    sql.exec("DELETE FROM out_files WHERE reserved_ms < ?", vec![stale.into()])?;
    #[derive(Deserialize)]
    struct Published {
        total: i64,
        this_path: i64,
    }
    let query = "SELECT COUNT(*) AS total, COALESCE(SUM(path = ?), 0) AS this_path FROM out_files WHERE run = ?";
    let published = sql.exec(query, vec![path.into(), run.into()])?.one::<Published>()?;
    let slot = files::slot(published.this_path > 0, published.total as usize);
    if slot == Slot::Take {
        let args: Vec<SqlStorageValue> = vec![run.into(), path.into(), (now_ms as i64).into()];
        sql.exec("INSERT INTO out_files (run, path, reserved_ms) VALUES (?, ?, ?)", args)?;
    }
    Ok(slot)
}

/// Gives back the slot of a path whose file could not be stored.
pub fn release_out_file(sql: &SqlStorage, run: &str, path: &str) -> worker::Result<()> {
    sql.exec("DELETE FROM out_files WHERE run = ? AND path = ?", vec![run.into(), path.into()])?;
    Ok(())
}

/// Legacy MCP sessions over SQLite.
pub struct McpSessions<'a>(pub &'a SqlStorage);

#[derive(Deserialize)]
struct SessionRow {
    ended_ms: Option<i64>,
}

impl SessionStore for McpSessions<'_> {
    fn create(&mut self, id: &str, protocol_version: &str, now_ms: u64) {
        let args: Vec<SqlStorageValue> = vec![id.into(), protocol_version.into(), (now_ms as i64).into()];
        log_err(
            self.0
                .exec("INSERT OR REPLACE INTO mcp_sessions (id, protocol_version, created_ms) VALUES (?, ?, ?)", args),
        );
    }

    fn status(&self, id: &str) -> SessionStatus {
        let rows = self
            .0
            .exec("SELECT ended_ms FROM mcp_sessions WHERE id = ?", vec![id.into()])
            .and_then(|c| c.to_array::<SessionRow>());
        match rows.ok().and_then(|r| r.into_iter().next()) {
            None => SessionStatus::Unknown,
            Some(SessionRow { ended_ms: Some(_) }) => SessionStatus::Ended,
            Some(SessionRow { ended_ms: None }) => SessionStatus::Active,
        }
    }

    fn end(&mut self, id: &str) {
        let now = crate::edge::now_ms() as i64;
        let args: Vec<SqlStorageValue> = vec![now.into(), id.into()];
        log_err(self.0.exec("UPDATE mcp_sessions SET ended_ms = ? WHERE id = ? AND ended_ms IS NULL", args));
    }
}

fn log_err<T>(result: worker::Result<T>) {
    if let Err(e) = result {
        worker::console_error!("session store: {e}");
    }
}

/// A queued run: what it runs, and the request it answers (for a client resuming its stream).
pub struct Queued<'a> {
    pub run_id: &'a str,
    pub tool: &'a str,
    pub capsule_hash: &'a str,
    pub mcp_session: Option<&'a str>,
    pub request_id: &'a Value,
    /// Who ran it, for the chained audit record: the tenant's id and the relay session.
    pub tenant: &'a str,
    pub relay_session: &'a str,
    /// The call's arguments, already redacted ([`audit::redact_args`]).
    pub args: &'a Value,
}

/// Names the capsule of a run queued before its capsule existed (its deps were being built).
pub fn audit_capsule(sql: &SqlStorage, run_id: &str, capsule_hash: &str) {
    log_err(sql.exec("UPDATE runs SET capsule_hash = ? WHERE run_id = ?", vec![capsule_hash.into(), run_id.into()]));
}

/// Records a run when it is queued.
pub fn audit_queued(sql: &SqlStorage, run: &Queued, now_ms: u64) {
    let args: Vec<SqlStorageValue> = vec![
        run.run_id.into(),
        run.tool.into(),
        run.capsule_hash.into(),
        (now_ms as i64).into(),
        run.mcp_session.unwrap_or_default().into(),
        run.request_id.to_string().into(),
        run.tenant.into(),
        run.relay_session.into(),
        run.args.to_string().into(),
    ];
    log_err(sql.exec(
        "INSERT INTO runs (run_id, tool, capsule_hash, queued_ms, mcp_session, request_id, tenant, relay_session, args) VALUES (?, ?, ?, ?, NULLIF(?, ''), ?, ?, ?, ?)",
        args,
    ));
}

/// Removes the row of a run the queue refused: it never was admitted.
pub fn forget_run(sql: &SqlStorage, run_id: &str) {
    log_err(sql.exec("DELETE FROM runs WHERE run_id = ?", vec![run_id.into()]));
}

/// How a run of a legacy MCP session ended, for a client resuming its stream.
#[derive(Deserialize)]
pub struct Ended {
    pub request_id: String,
    pub exit_code: Option<i32>,
    pub error_name: Option<String>,
    pub error_message: Option<String>,
}

/// The ended run `run_id` of MCP session `mcp_session`, if there is one.
pub fn ended_run(sql: &SqlStorage, run_id: &str, mcp_session: &str) -> Option<Ended> {
    let rows = sql
        .exec(
            "SELECT request_id, exit_code, error_name, error_message FROM runs WHERE run_id = ? AND mcp_session = ? AND finished_ms IS NOT NULL",
            vec![run_id.into(), mcp_session.into()],
        )
        .and_then(|c| c.to_array::<Ended>());
    rows.ok().and_then(|rows| rows.into_iter().next())
}

/// Records how a run ended, with hashes of its output.
pub fn audit_finished(sql: &SqlStorage, run_id: &str, outcome: &Outcome, now_ms: u64) {
    let Outcome { exit, stdout, stderr, by_relay } = outcome;
    // Only the relay's own words: a message the tab reported may quote the run's output.
    let message = exit.error.as_ref().filter(|_| *by_relay).map(|e| e.message.chars().take(MAX_ERROR_MESSAGE));
    let message: Option<String> = message.map(Iterator::collect);
    let args: Vec<SqlStorageValue> = vec![
        (now_ms as i64).into(),
        exit.exit_code.into(),
        exit.error.as_ref().map(|e| e.name.clone()).unwrap_or_default().into(),
        message.unwrap_or_default().into(),
        (exit.usage.wall_ms as i64).into(),
        (stdout.len() as i64).into(),
        sha256_hex(stdout.as_bytes()).into(),
        (stderr.len() as i64).into(),
        sha256_hex(stderr.as_bytes()).into(),
        run_id.into(),
    ];
    log_err(sql.exec(
        "UPDATE runs SET finished_ms = ?, exit_code = ?, error_name = NULLIF(?, ''), error_message = NULLIF(?, ''), wall_ms = ?, stdout_bytes = ?, stdout_sha256 = ?, stderr_bytes = ?, stderr_sha256 = ? WHERE run_id = ?",
        args,
    ));
    append_audit(sql, run_id);
}

/// Closes the audit rows of runs that were in flight when this relay session's DO stopped
/// (a deploy, a restart): their state died with it, and their clients' requests with it.
pub fn close_unfinished(sql: &SqlStorage, now_ms: u64) {
    let message = "the relay restarted while the run was queued or running; its client's request ended with the connection. Run the tool again.";
    #[derive(Deserialize)]
    struct Open {
        run_id: String,
    }
    let open = sql.exec("SELECT run_id FROM runs WHERE finished_ms IS NULL ORDER BY queued_ms", None);
    let open = open.and_then(|c| c.to_array::<Open>()).unwrap_or_default();
    let args: Vec<SqlStorageValue> = vec![(now_ms as i64).into(), message.into()];
    log_err(sql.exec(
        "UPDATE runs SET finished_ms = ?, exit_code = 1, error_name = 'Internal', error_message = ? WHERE finished_ms IS NULL",
        args,
    ));
    for run in open {
        append_audit(sql, &run.run_id);
    }
}

/// A finished run as its audit record and the metrics need it (rows of runs queued before
/// migration 0003 have no tenant, relay session or arguments: those are recorded empty).
#[derive(Deserialize)]
struct FinishedRun {
    tool: String,
    queued_ms: Option<i64>,
    finished_ms: Option<i64>,
    exit_code: Option<i32>,
    error_name: Option<String>,
    wall_ms: Option<i64>,
    stdout_bytes: Option<i64>,
    stdout_sha256: Option<String>,
    stderr_bytes: Option<i64>,
    stderr_sha256: Option<String>,
    tenant: Option<String>,
    relay_session: Option<String>,
    args: Option<String>,
}

impl FinishedRun {
    /// The run's record, unsealed (`seq`, `prev` and `chain` are `audit::seal`'s to set).
    fn record(self, run_id: &str) -> AuditRecord {
        let count = |n: Option<i64>| n.unwrap_or(0).max(0) as u64;
        AuditRecord {
            seq: 0,
            prev: String::new(),
            chain: String::new(),
            ts_ms: count(self.finished_ms),
            tenant: self.tenant.unwrap_or_default(),
            relay_session: self.relay_session.unwrap_or_default(),
            run_id: run_id.to_owned(),
            kind: Kind::ToolCall,
            tool: self.tool,
            error_name: self.error_name,
            exit_code: self.exit_code,
            duration_ms: count(self.wall_ms),
            stdout_bytes: count(self.stdout_bytes),
            stdout_sha256: self.stdout_sha256.unwrap_or_default(),
            stderr_bytes: count(self.stderr_bytes),
            stderr_sha256: self.stderr_sha256.unwrap_or_default(),
            args: self.args.and_then(|a| serde_json::from_str(&a).ok()).unwrap_or(Value::Null),
        }
    }
}

/// Seals the finished run `run_id` onto the chain and counts it in the metrics.
fn append_audit(sql: &SqlStorage, run_id: &str) {
    let row = sql
        .exec(
            "SELECT tool, queued_ms, finished_ms, exit_code, error_name, wall_ms, stdout_bytes, stdout_sha256, stderr_bytes, stderr_sha256, tenant, relay_session, args FROM runs WHERE run_id = ?",
            vec![run_id.into()],
        )
        .and_then(|c| c.to_array::<FinishedRun>());
    let Some(run) = row.ok().and_then(|rows| rows.into_iter().next()) else { return };
    // Admission to end, less the run's own time: waiting in line, transfer and runtime load.
    let waited = run.finished_ms.unwrap_or(0) - run.queued_ms.unwrap_or(0) - run.wall_ms.unwrap_or(0);
    let queue_wait_ms = waited.max(0) as u64;
    let record = run.record(run_id);
    update_metrics(sql, |m| {
        m.observe_run(&RunEnd {
            tool: &record.tool,
            exit_code: record.exit_code.unwrap_or(1),
            error_name: record.error_name.as_deref(),
            queue_wait_ms,
            run_ms: record.duration_ms,
            output_bytes: record.stdout_bytes + record.stderr_bytes,
        })
    });
    append_record(sql, record);
}

/// Applies `change` to the relay session's metrics.
pub fn update_metrics(sql: &SqlStorage, change: impl FnOnce(&mut Snapshot)) {
    let mut snapshot = metrics(sql);
    change(&mut snapshot);
    let json = serde_json::to_string(&snapshot).expect("metrics serialize");
    log_err(sql.exec("INSERT OR REPLACE INTO metrics (id, snapshot) VALUES (1, ?)", vec![json.into()]));
}

/// The relay session's metrics so far.
pub fn metrics(sql: &SqlStorage) -> Snapshot {
    documents(sql, "SELECT snapshot AS doc FROM metrics WHERE id = 1", vec![]).into_iter().next().unwrap_or_default()
}

/// The JSON documents a query selects as its one TEXT column `doc`, in row order (audit
/// records, tasks and metrics are kept this way). A row that does not parse is skipped; a
/// failed query is logged and gives none.
fn documents<T: DeserializeOwned>(sql: &SqlStorage, query: &str, args: Vec<SqlStorageValue>) -> Vec<T> {
    #[derive(Deserialize)]
    struct Row {
        doc: String,
    }
    match sql.exec(query, args).and_then(|c| c.to_array::<Row>()) {
        Ok(rows) => rows.iter().filter_map(|row| serde_json::from_str(&row.doc).ok()).collect(),
        Err(e) => {
            worker::console_error!("{query}: {e}");
            Vec::new()
        }
    }
}

/// Seals a policy denial guest code met in run `run_id` (`[what, target, reason]`, as the tab
/// reported it) onto the chain, in the run's tenant and relay session.
pub fn audit_denial(sql: &SqlStorage, run_id: &str, [what, target, reason]: [&String; 3], now_ms: u64) {
    #[derive(Deserialize)]
    struct Owner {
        tenant: Option<String>,
        relay_session: Option<String>,
    }
    let owner = sql
        .exec("SELECT tenant, relay_session FROM runs WHERE run_id = ?", vec![run_id.into()])
        .and_then(|c| c.to_array::<Owner>())
        .ok()
        .and_then(|rows| rows.into_iter().next());
    let Some(Owner { tenant, relay_session }) = owner else { return };
    let scope = Scope {
        ts_ms: now_ms,
        tenant: tenant.unwrap_or_default(),
        relay_session: relay_session.unwrap_or_default(),
        run_id: run_id.to_owned(),
    };
    update_metrics(sql, |m| m.observe_denial(what));
    append_record(sql, scope.policy_denial(what, target, "PolicyDenied", reason));
}

/// Seals `record` onto the chain, then drops what is beyond retention.
pub fn append_record(sql: &SqlStorage, record: AuditRecord) {
    let head = sql
        .exec("SELECT seq, chain FROM audit ORDER BY seq DESC LIMIT 1", None)
        .and_then(|c| c.to_array::<ChainHead>())
        .ok()
        .and_then(|rows| rows.into_iter().next());
    let record = audit::seal(record, head.as_ref());
    if let Some(line) = LogLine::run(&record) {
        worker::console_log!("{}", line.to_json());
    }
    let seq = record.seq as i64;
    let args: Vec<SqlStorageValue> = vec![seq.into(), audit::record_json(&record).into(), record.chain.clone().into()];
    log_err(sql.exec("INSERT INTO audit (seq, record, chain) VALUES (?, ?, ?)", args));
    let oldest_kept = seq - audit::RETENTION as i64 + 1;
    log_err(sql.exec("DELETE FROM audit WHERE seq < ?", vec![oldest_kept.into()]));
}

/// The latest `n` audit records, oldest first, for `relay://audit`.
pub fn audit_records(sql: &SqlStorage, n: usize) -> Vec<AuditRecord> {
    let query = "SELECT record AS doc FROM audit ORDER BY seq DESC LIMIT ?";
    let mut records: Vec<AuditRecord> = documents(sql, query, vec![(n as i64).into()]);
    records.reverse();
    records
}

/// Stores a task as it is now (created, or ended), and drops the tasks past their TTL.
pub fn save_task(sql: &SqlStorage, task: &TaskRecord) {
    let record = serde_json::to_string(task).expect("a task serializes");
    let args: Vec<SqlStorageValue> = vec![task.task_id.clone().into(), (task.created_ms as i64).into(), record.into()];
    log_err(sql.exec("INSERT OR REPLACE INTO tasks (task_id, created_ms, record) VALUES (?, ?, ?)", args));
    let expired = task.updated_ms.saturating_sub(TASK_TTL_MS) as i64;
    log_err(sql.exec("DELETE FROM tasks WHERE created_ms < ?", vec![expired.into()]));
}

/// The task `task_id`, unless there is none or it is past its TTL at `now_ms`.
pub fn task(sql: &SqlStorage, task_id: &str, now_ms: u64) -> Option<TaskRecord> {
    let query = "SELECT record AS doc FROM tasks WHERE task_id = ?";
    let task: TaskRecord = documents(sql, query, vec![task_id.into()]).into_iter().next()?;
    (now_ms.saturating_sub(task.created_ms) < TASK_TTL_MS).then_some(task)
}

/// The latest runs, newest first, for `relay://session`.
pub fn recent_runs(sql: &SqlStorage, limit: i64) -> Value {
    let rows = sql
        .exec(
            "SELECT run_id AS runId, tool, capsule_hash AS capsuleHash, queued_ms AS queuedMs, finished_ms AS finishedMs, exit_code AS exitCode, error_name AS errorName, error_message AS errorMessage, wall_ms AS wallMs, stdout_bytes AS stdoutBytes, stdout_sha256 AS stdoutSha256 FROM runs ORDER BY queued_ms DESC LIMIT ?",
            vec![limit.into()],
        )
        .and_then(|c| c.to_array::<Value>());
    rows.map(Value::from).unwrap_or_else(|e| json!({ "error": e.to_string() }))
}
