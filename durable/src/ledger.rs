//! The tenant's ledger: one Durable Object per tenant (named by its id, class `LedgerDO`, binding
//! `LEDGERS`) that keeps what the tenant used of its quotas (`relay_core::quota`) in its SQLite,
//! one row of JSON. It is a thin layer: `POST` a `LedgerRequest`, get the core's
//! `LedgerAnswer`; `DELETE` erases it with its tenant (`{erased}`: whether it had counted
//! anything), after which it answers every charge 404, as an erased relay session does (a run
//! ending late, an isolate that still holds the tenant's record): it keeps only that it was
//! erased, until `PUT` (a tenant made again under the same id) lifts that. A Durable Object handles one request at a time up to an `await`, and this one awaits
//! nothing between reading and writing the ledger, so no two charges interleave.

use crate::platform::http::{json, refuse, storage_unavailable};
use crate::platform::now_ms;
use crate::platform::sql::DoSql;
use relay_core::error::ErrorName;
use relay_core::quota::{answer, Ledger, LedgerRequest, LedgerStore};
use relay_core::relay_session::{Sql, SqlValue, StorageError};
use serde::Deserialize;
use worker::{durable_object, DurableObject, Env, Method, Request, Response, Result, State};

#[durable_object]
pub struct LedgerDO {
    state: State,
}

impl DurableObject for LedgerDO {
    fn new(state: State, _env: Env) -> Self {
        LedgerDO { state }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        if req.method() == Method::Delete {
            let had = !self.erased() && self.store().load().ok().flatten().is_some();
            self.state.storage().delete_all().await?;
            let mark = self.store().0.script("CREATE TABLE IF NOT EXISTS erased (id INTEGER PRIMARY KEY)");
            mark.map_err(|e| worker::Error::RustError(format!("marking the ledger erased: {e}")))?;
            return Ok(json(200, &serde_json::json!({ "erased": had })));
        }
        if req.method() == Method::Put {
            // A tenant made again under the id of one deleted: it counts from nothing.
            let revived = self.store().0.script("DROP TABLE IF EXISTS erased");
            revived.map_err(|e| worker::Error::RustError(format!("reviving the ledger: {e}")))?;
            return Ok(json(200, &serde_json::json!({ "revived": true })));
        }
        if self.erased() {
            return Ok(refuse(ErrorName::NotFound, "this tenant was deleted, and its ledger with it"));
        }
        let request: LedgerRequest = match serde_json::from_slice(&req.bytes().await?) {
            Ok(request) => request,
            Err(e) => return Ok(refuse(ErrorName::ValidationError, format!("ledger request: {e}"))),
        };
        match answer(&self.store(), &request, now_ms()) {
            Ok(answered) => Ok(json(200, &serde_json::to_value(answered)?)),
            Err(e) => Ok(storage_unavailable("the tenant's ledger", &e)),
        }
    }
}

impl LedgerDO {
    fn store(&self) -> SqlLedger {
        SqlLedger(DoSql(self.state.storage().sql()))
    }

    /// Whether this ledger was erased with its tenant (its mark outlives the erasure).
    fn erased(&self) -> bool {
        let marks: std::result::Result<Vec<Row>, _> =
            self.store().0.rows("SELECT name AS json FROM sqlite_master WHERE type = 'table' AND name = 'erased'", &[]);
        marks.is_ok_and(|marks| !marks.is_empty())
    }
}

/// The ledger as one row of this Durable Object's SQLite.
struct SqlLedger(DoSql);

#[derive(Deserialize)]
struct Row {
    json: String,
}

impl LedgerStore for SqlLedger {
    fn load(&self) -> std::result::Result<Option<Ledger>, StorageError> {
        // Made here rather than at start: an erasure drops the table with everything else.
        self.0
            .script("CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY CHECK (id = 1), json TEXT NOT NULL)")?;
        let rows: Vec<Row> = self.0.rows("SELECT json FROM ledger WHERE id = 1", &[])?;
        Ok(rows.first().and_then(|row| {
            Ledger::from_row(&row.json).inspect_err(|why| worker::console_error!("the tenant's ledger: {why}")).ok()
        }))
    }

    fn save(&self, ledger: &Ledger) -> std::result::Result<(), StorageError> {
        let text = serde_json::to_string(ledger).expect("a ledger serializes");
        self.0.exec("INSERT OR REPLACE INTO ledger (id, json) VALUES (1, ?)", &[SqlValue::Text(text)])
    }
}
