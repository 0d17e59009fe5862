//! The relay session's SQLite: migrations from `migrations/`, legacy MCP sessions, the run
//! audit (output hashes and sizes, never output bodies) and its hash chain (`audit`), tasks,
//! metrics, and the count of each run's published `/out` files. Every function takes the
//! current time as an argument and returns what failed.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

use super::sql::{Sql, SqlValue};
use crate::audit::{self, AuditRecord, ChainHead, Kind, Scope};
use crate::capsule::canonical::sha256_hex;
use crate::files::{self, Slot};
use crate::mcp::tasks::{TaskRecord, TASK_TTL_MS};
use crate::mcp::{SessionStatus, SessionStore};
use crate::metrics::{RunEnd, Snapshot};
use crate::run::machine::Outcome;
use crate::stores::StorageError;

/// The migrations, in order. Each runs once; `schema_version` remembers how far we got.
pub const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_run_resume.sql"),
    include_str!("../../migrations/0003_audit_chain.sql"),
    include_str!("../../migrations/0004_tasks.sql"),
    include_str!("../../migrations/0005_metrics.sql"),
    include_str!("../../migrations/0006_out_files.sql"),
    include_str!("../../migrations/0007_workspace.sql"),
    include_str!("../../migrations/0008_run_executor.sql"),
    include_str!("../../migrations/0009_body_retention.sql"),
    include_str!("../../migrations/0010_wakeups.sql"),
    include_str!("../../migrations/0011_kept.sql"),
];
/// How long a run's published paths are counted: longer than any run token lives.
const OUT_FILES_KEPT_MS: u64 = 24 * 60 * 60 * 1000;
/// Longest error message the audit keeps.
const MAX_ERROR_MESSAGE: usize = 500;

type Result<T> = std::result::Result<T, StorageError>;

/// A relay session's store over its SQLite.
pub struct Store<'a, S: Sql> {
    pub sql: &'a S,
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

/// How a run of a legacy MCP session ended, for a client resuming its stream.
#[derive(Debug, Deserialize)]
pub struct Ended {
    pub request_id: String,
    pub exit_code: Option<i32>,
    pub error_name: Option<String>,
    pub error_message: Option<String>,
}

impl<'a, S: Sql> Store<'a, S> {
    pub fn new(sql: &'a S) -> Self {
        Store { sql }
    }

    /// Brings the schema up to date, or says which migration failed (the relay session must
    /// then not serve: its schema is half-way).
    pub fn migrate(&self) -> Result<()> {
        self.sql.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", &[])?;
        for (i, migration) in MIGRATIONS.iter().enumerate().skip(self.schema_version()? as usize) {
            let version = i as i64 + 1;
            self.sql.script(migration).map_err(|e| StorageError(format!("migration {version}: {e}")))?;
            self.sql.exec("INSERT INTO schema_version (version) VALUES (?)", &[version.into()])?;
        }
        Ok(())
    }

    /// The schema version the migrations have reached.
    pub fn schema_version(&self) -> Result<i64> {
        #[derive(Deserialize)]
        struct Version {
            v: Option<i64>,
        }
        Ok(self.first::<Version>("SELECT MAX(version) AS v FROM schema_version", &[])?.and_then(|v| v.v).unwrap_or(0))
    }

    pub(super) fn first<T: DeserializeOwned>(&self, query: &str, params: &[SqlValue]) -> Result<Option<T>> {
        Ok(self.sql.rows::<T>(query, params)?.into_iter().next())
    }

    /// Reserves the slot of `path` among run `run`'s published files (`files::slot`): the
    /// count, the decision and the reservation in one synchronous step. Forgets reservations
    /// older than [`OUT_FILES_KEPT_MS`] first.
    pub fn reserve_out_file(&self, run: &str, path: &str, now_ms: u64) -> Result<Slot> {
        self.sql
            .exec("DELETE FROM out_files WHERE reserved_ms < ?", &[now_ms.saturating_sub(OUT_FILES_KEPT_MS).into()])?;
        #[derive(Deserialize)]
        struct Published {
            total: i64,
            this_path: i64,
        }
        let query = "SELECT COUNT(*) AS total, COALESCE(SUM(path = ?), 0) AS this_path FROM out_files WHERE run = ?";
        let published = self.first::<Published>(query, &[path.into(), run.into()])?;
        let (this_path, total) = published.map_or((0, 0), |p| (p.this_path, p.total));
        let slot = files::slot(this_path > 0, total as usize);
        if slot == Slot::Take {
            let args = [run.into(), path.into(), now_ms.into()];
            self.sql.exec("INSERT INTO out_files (run, path, reserved_ms) VALUES (?, ?, ?)", &args)?;
        }
        Ok(slot)
    }

    /// Gives back the slot of a path whose file could not be stored.
    pub fn release_out_file(&self, run: &str, path: &str) -> Result<()> {
        self.sql.exec("DELETE FROM out_files WHERE run = ? AND path = ?", &[run.into(), path.into()])
    }

    /// Names the capsule of a run queued before its capsule existed (its deps were being built).
    pub fn audit_capsule(&self, run_id: &str, capsule_hash: &str) -> Result<()> {
        self.sql.exec("UPDATE runs SET capsule_hash = ? WHERE run_id = ?", &[capsule_hash.into(), run_id.into()])
    }

    /// Records a run when it is queued.
    pub fn audit_queued(&self, run: &Queued, now_ms: u64) -> Result<()> {
        let args = [
            run.run_id.into(),
            run.tool.into(),
            run.capsule_hash.into(),
            now_ms.into(),
            run.mcp_session.unwrap_or_default().into(),
            run.request_id.to_string().into(),
            run.tenant.into(),
            run.relay_session.into(),
            run.args.to_string().into(),
        ];
        self.sql.exec(
            "INSERT INTO runs (run_id, tool, capsule_hash, queued_ms, mcp_session, request_id, tenant, relay_session, args) VALUES (?, ?, ?, ?, NULLIF(?, ''), ?, ?, ?, ?)",
            &args,
        )
    }

    /// Records the workspace root when run `run_id` started (`before`) or ended (`after`), for
    /// its audit record.
    pub fn audit_workspace(&self, run_id: &str, before: Option<&str>, after: Option<&str>) -> Result<()> {
        let text = |root: Option<&str>| root.map_or(SqlValue::Null, SqlValue::from);
        self.sql.exec(
            "UPDATE runs SET workspace_before = COALESCE(?, workspace_before), workspace_after = COALESCE(?, workspace_after) WHERE run_id = ?",
            &[text(before), text(after), run_id.into()],
        )
    }

    /// Records the workspace root as run `run_id` ends, if its tab synced to a root before it
    /// ran (a run that never ran on a workspace has neither).
    pub fn audit_workspace_after(&self, run_id: &str) -> Result<()> {
        #[derive(Deserialize)]
        struct Before {
            workspace_before: Option<String>,
        }
        let before = self.first::<Before>("SELECT workspace_before FROM runs WHERE run_id = ?", &[run_id.into()])?;
        if before.and_then(|b| b.workspace_before).is_none() {
            return Ok(());
        }
        let (_, root) = self.workspace_root()?;
        self.audit_workspace(run_id, None, Some(&root))
    }

    /// Removes the row of a run the queue refused: it never was admitted.
    pub fn forget_run(&self, run_id: &str) -> Result<()> {
        self.sql.exec("DELETE FROM runs WHERE run_id = ?", &[run_id.into()])
    }

    /// The ended run `run_id` of MCP session `mcp_session`, if there is one.
    pub fn ended_run(&self, run_id: &str, mcp_session: &str) -> Result<Option<Ended>> {
        self.first(
            "SELECT request_id, exit_code, error_name, error_message FROM runs WHERE run_id = ? AND mcp_session = ? AND finished_ms IS NOT NULL",
            &[run_id.into(), mcp_session.into()],
        )
    }

    /// Records how a run ended, with hashes of its output, and seals its record onto the chain
    /// (returned, for the run's log line).
    pub fn audit_finished(&self, run_id: &str, outcome: &Outcome, now_ms: u64) -> Result<Option<AuditRecord>> {
        let Outcome { exit, stdout, stderr, by_relay, executor, .. } = outcome;
        // Only the relay's own words: a message the tab reported may quote the run's output.
        let message = exit.error.as_ref().filter(|_| *by_relay).map(|e| e.message.chars().take(MAX_ERROR_MESSAGE));
        let message: Option<String> = message.map(Iterator::collect);
        let args = [
            now_ms.into(),
            Some(exit.exit_code).into(),
            exit.error.as_ref().map(|e| e.name.clone()).unwrap_or_default().into(),
            message.unwrap_or_default().into(),
            exit.usage.wall_ms.into(),
            (stdout.len() as u64).into(),
            sha256_hex(stdout.as_bytes()).into(),
            (stderr.len() as u64).into(),
            sha256_hex(stderr.as_bytes()).into(),
            executor.unwrap_or_default().into(),
            run_id.into(),
        ];
        self.sql.exec(
            "UPDATE runs SET finished_ms = ?, exit_code = ?, error_name = NULLIF(?, ''), error_message = NULLIF(?, ''), wall_ms = ?, stdout_bytes = ?, stdout_sha256 = ?, stderr_bytes = ?, stderr_sha256 = ?, executor = NULLIF(?, '') WHERE run_id = ?",
            &args,
        )?;
        self.append_audit(run_id)
    }

    /// Closes the audit rows of runs that were in flight when this relay session's DO stopped
    /// (a deploy, a restart): their state died with it, and their clients' requests with it.
    pub fn close_unfinished(&self, now_ms: u64) -> Result<Vec<AuditRecord>> {
        let message = "the relay restarted while the run was queued or running; its client's request ended with the connection. Run the tool again.";
        #[derive(Deserialize)]
        struct Open {
            run_id: String,
        }
        let open =
            self.sql.rows::<Open>("SELECT run_id FROM runs WHERE finished_ms IS NULL ORDER BY queued_ms", &[])?;
        self.sql.exec(
            "UPDATE runs SET finished_ms = ?, exit_code = 1, error_name = 'Internal', error_message = ? WHERE finished_ms IS NULL",
            &[now_ms.into(), message.into()],
        )?;
        let mut sealed = Vec::new();
        for run in open {
            sealed.extend(self.append_audit(&run.run_id)?);
        }
        Ok(sealed)
    }

    /// Seals the finished run `run_id` onto the chain and counts it in the metrics.
    fn append_audit(&self, run_id: &str) -> Result<Option<AuditRecord>> {
        let Some(run) = self.first::<FinishedRun>(
            "SELECT tool, queued_ms, finished_ms, exit_code, error_name, wall_ms, stdout_bytes, stdout_sha256, stderr_bytes, stderr_sha256, tenant, relay_session, args, workspace_before, workspace_after, executor FROM runs WHERE run_id = ?",
            &[run_id.into()],
        )?
        else {
            return Ok(None);
        };
        // Admission to end, less the run's own time: waiting in line, transfer and runtime load.
        let waited = run.finished_ms.unwrap_or(0) - run.queued_ms.unwrap_or(0) - run.wall_ms.unwrap_or(0);
        let queue_wait_ms = waited.max(0) as u64;
        let record = run.record(run_id);
        self.update_metrics(|m| {
            m.observe_run(&RunEnd {
                tool: &record.tool,
                exit_code: record.exit_code.unwrap_or(1),
                error_name: record.error_name.as_deref(),
                queue_wait_ms,
                run_ms: record.duration_ms,
                output_bytes: record.stdout_bytes + record.stderr_bytes,
                executor: record.executor.as_deref(),
            })
        })?;
        self.append_record(record).map(Some)
    }

    /// Applies `change` to the relay session's metrics.
    pub fn update_metrics(&self, change: impl FnOnce(&mut Snapshot)) -> Result<()> {
        let mut snapshot = self.metrics()?;
        change(&mut snapshot);
        let json = serde_json::to_string(&snapshot).expect("metrics serialize");
        self.sql.exec("INSERT OR REPLACE INTO metrics (id, snapshot) VALUES (1, ?)", &[json.into()])
    }

    /// The relay session's metrics so far.
    /// `n` more wake-ups of the DO of kind `kind` (`metrics::Wake`).
    pub fn count_wakeups(&self, kind: &str, n: u64) -> Result<()> {
        let query = "INSERT INTO wakeups (kind, n) VALUES (?, ?) ON CONFLICT (kind) DO UPDATE SET n = n + excluded.n";
        self.sql.exec(query, &[kind.into(), n.into()])
    }

    /// The wake-ups counted so far, by kind.
    pub fn wakeups(&self) -> Result<BTreeMap<String, u64>> {
        #[derive(Deserialize)]
        struct Row {
            kind: String,
            n: u64,
        }
        Ok(self.sql.rows::<Row>("SELECT kind, n FROM wakeups", &[])?.into_iter().map(|r| (r.kind, r.n)).collect())
    }

    /// Replaces the relay session's kept memory (`kept::Kept`, as JSON).
    pub fn save_kept(&self, doc: &str) -> Result<()> {
        self.sql.exec("INSERT OR REPLACE INTO kept (id, doc) VALUES (1, ?)", &[doc.into()])
    }

    /// The kept memory as last saved, if any (a document that does not parse is none).
    pub fn kept<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        Ok(self.documents("SELECT doc FROM kept WHERE id = 1", &[])?.into_iter().next())
    }

    pub fn metrics(&self) -> Result<Snapshot> {
        Ok(self
            .documents("SELECT snapshot AS doc FROM metrics WHERE id = 1", &[])?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    /// The JSON documents a query selects as its one TEXT column `doc`, in row order (audit
    /// records, tasks and metrics are kept this way). A row that does not parse is skipped.
    fn documents<T: DeserializeOwned>(&self, query: &str, args: &[SqlValue]) -> Result<Vec<T>> {
        #[derive(Deserialize)]
        struct Row {
            doc: String,
        }
        let rows = self.sql.rows::<Row>(query, args)?;
        Ok(rows.iter().filter_map(|row| serde_json::from_str(&row.doc).ok()).collect())
    }

    /// Seals a policy denial guest code met in run `run_id` (`[what, target, reason]`, as the
    /// tab reported it) onto the chain, in the run's tenant and relay session.
    pub fn audit_denial(
        &self,
        run_id: &str,
        [what, target, reason]: [&str; 3],
        now_ms: u64,
    ) -> Result<Option<AuditRecord>> {
        #[derive(Deserialize)]
        struct Owner {
            tenant: Option<String>,
            relay_session: Option<String>,
        }
        let owner = self.first::<Owner>("SELECT tenant, relay_session FROM runs WHERE run_id = ?", &[run_id.into()])?;
        let Some(Owner { tenant, relay_session }) = owner else { return Ok(None) };
        let scope = Scope {
            ts_ms: now_ms,
            tenant: tenant.unwrap_or_default(),
            relay_session: relay_session.unwrap_or_default(),
            run_id: run_id.to_owned(),
        };
        self.update_metrics(|m| m.observe_denial(what))?;
        self.append_record(scope.policy_denial(what, target, "PolicyDenied", reason)).map(Some)
    }

    /// Seals `record` onto the chain, then drops what is beyond retention; returns it sealed.
    pub fn append_record(&self, record: AuditRecord) -> Result<AuditRecord> {
        let head = self.first::<ChainHead>("SELECT seq, chain FROM audit ORDER BY seq DESC LIMIT 1", &[])?;
        let record = audit::seal(record, head.as_ref());
        let seq = record.seq as i64;
        let args = [seq.into(), audit::record_json(&record).into(), record.chain.clone().into()];
        self.sql.exec("INSERT INTO audit (seq, record, chain) VALUES (?, ?, ?)", &args)?;
        let oldest_kept = seq - audit::RETENTION as i64 + 1;
        self.sql.exec("DELETE FROM audit WHERE seq < ?", &[oldest_kept.into()])?;
        Ok(record)
    }

    /// The latest `n` audit records, oldest first, for `relay://audit`.
    pub fn audit_records(&self, n: usize) -> Result<Vec<AuditRecord>> {
        let query = "SELECT record AS doc FROM audit ORDER BY seq DESC LIMIT ?";
        let mut records: Vec<AuditRecord> = self.documents(query, &[(n as u64).into()])?;
        records.reverse();
        Ok(records)
    }

    /// Stores a task as it is now (created, or ended), and drops the tasks past their TTL.
    pub fn save_task(&self, task: &TaskRecord) -> Result<()> {
        let record = serde_json::to_string(task).expect("a task serializes");
        let args = [task.task_id.clone().into(), task.created_ms.into(), record.into()];
        self.sql.exec("INSERT OR REPLACE INTO tasks (task_id, created_ms, record) VALUES (?, ?, ?)", &args)?;
        let expired = task.updated_ms.saturating_sub(TASK_TTL_MS);
        self.sql.exec("DELETE FROM tasks WHERE created_ms < ?", &[expired.into()])
    }

    /// The task `task_id`, unless there is none or it is past its TTL at `now_ms`.
    pub fn task(&self, task_id: &str, now_ms: u64) -> Result<Option<TaskRecord>> {
        let query = "SELECT record AS doc FROM tasks WHERE task_id = ?";
        let task = self.documents::<TaskRecord>(query, &[task_id.into()])?.into_iter().next();
        Ok(task.filter(|task| now_ms.saturating_sub(task.created_ms) < TASK_TTL_MS))
    }

    /// The latest runs, newest first, for `relay://session` (the error, if reading failed). Runs
    /// admitted in the same millisecond are in admission order too (rowid: the order of inserts).
    pub fn recent_runs(&self, limit: u64) -> Value {
        let rows = self.sql.rows::<Value>(
            "SELECT run_id AS runId, tool, capsule_hash AS capsuleHash, queued_ms AS queuedMs, finished_ms AS finishedMs, exit_code AS exitCode, error_name AS errorName, error_message AS errorMessage, wall_ms AS wallMs, stdout_bytes AS stdoutBytes, stdout_sha256 AS stdoutSha256 FROM runs ORDER BY queued_ms DESC, rowid DESC LIMIT ?",
            &[limit.into()],
        );
        rows.map(Value::from).unwrap_or_else(|e| json!({ "error": e.to_string() }))
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
    workspace_before: Option<String>,
    workspace_after: Option<String>,
    executor: Option<String>,
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
            workspace_before: self.workspace_before,
            workspace_after: self.workspace_after,
            executor: self.executor,
        }
    }
}

/// Legacy MCP sessions over SQLite, for the MCP core's [`SessionStore`] (whose methods return
/// nothing): the first write that fails is kept in `failed`, for the caller to report.
pub struct McpSessions<'a, S: Sql> {
    pub sql: &'a S,
    pub now_ms: u64,
    pub failed: Option<StorageError>,
}

impl<S: Sql> McpSessions<'_, S> {
    fn keep(&mut self, result: Result<()>) {
        if let Err(e) = result {
            self.failed.get_or_insert(e);
        }
    }
}

impl<S: Sql> SessionStore for McpSessions<'_, S> {
    fn create(&mut self, id: &str, protocol_version: &str, now_ms: u64) {
        let args = [id.into(), protocol_version.into(), now_ms.into()];
        let query = "INSERT OR REPLACE INTO mcp_sessions (id, protocol_version, created_ms) VALUES (?, ?, ?)";
        let result = self.sql.exec(query, &args);
        self.keep(result);
    }

    fn status(&self, id: &str) -> SessionStatus {
        #[derive(Deserialize)]
        struct SessionRow {
            ended_ms: Option<i64>,
        }
        let rows = self.sql.rows::<SessionRow>("SELECT ended_ms FROM mcp_sessions WHERE id = ?", &[id.into()]);
        match rows.ok().and_then(|r| r.into_iter().next()) {
            None => SessionStatus::Unknown,
            Some(SessionRow { ended_ms: Some(_) }) => SessionStatus::Ended,
            Some(SessionRow { ended_ms: None }) => SessionStatus::Active,
        }
    }

    fn end(&mut self, id: &str) {
        let args = [self.now_ms.into(), id.into()];
        let result = self.sql.exec("UPDATE mcp_sessions SET ended_ms = ? WHERE id = ? AND ended_ms IS NULL", &args);
        self.keep(result);
    }
}
