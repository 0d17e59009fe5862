//! The tenant's ledger: one Durable Object per tenant (named by its id, class `LedgerDO`, binding
//! `LEDGERS`) that keeps what the tenant used of its quotas (`relay_core::quota`) in its SQLite,
//! one row of JSON. It is a thin layer: `POST` a `LedgerRequest`, get the core's
//! `LedgerAnswer`; `DELETE` erases it with its tenant (`{erased}`: whether it had counted anything). A Durable Object handles one request at
//! a time up to an `await`, and this one awaits nothing between reading and writing the
//! ledger, so no two charges interleave.

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
            let had = self.store().load().ok().flatten().is_some();
            self.state.storage().delete_all().await?;
            return Ok(json(200, &serde_json::json!({ "erased": had })));
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
        rows.first().map(|row| serde_json::from_str(&row.json).map_err(|e| StorageError(e.to_string()))).transpose()
    }

    fn save(&self, ledger: &Ledger) -> std::result::Result<(), StorageError> {
        let text = serde_json::to_string(ledger).expect("a ledger serializes");
        self.0.exec("INSERT OR REPLACE INTO ledger (id, json) VALUES (1, ?)", &[SqlValue::Text(text)])
    }
}
