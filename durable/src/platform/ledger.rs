//! The hop to a tenant's ledger (`crate::ledger::LedgerDO`, one per tenant): a charge against
//! its quotas, its usage, its erasure. The Worker and the relay session's DO both call it.

use super::bindings::LEDGERS;
use super::http::{error, with_header};
use relay_core::auth::Tenant;
use relay_core::error::{ErrorName, HttpError};
use relay_core::quota::{Charge, LedgerAnswer, LedgerRequest, Quotas};
use worker::{Env, Method, Request, RequestInit, Response, Result, Stub};

fn stub(env: &Env, tenant_id: &str) -> Result<Stub> {
    env.durable_object(LEDGERS)?.id_from_name(tenant_id)?.get_stub()
}

/// Charges `charge` to `tenant`'s ledger against its quotas; a ledger that did not answer is
/// the 503 to send (a call is never admitted uncounted).
pub async fn charge(
    env: &Env,
    tenant: &Tenant,
    charge: Charge,
) -> Result<std::result::Result<LedgerAnswer, HttpError>> {
    send(env, &tenant.id, tenant.defaults.quotas, charge).await
}

/// Run `run` of tenant `tenant_id` ended after `edge_ms` at the edge: its slot comes back and
/// its edge time counts to the tenant's day. Never refused; a failure only leaves the slot to
/// its lease (and the edge time uncounted).
pub async fn run_ended(env: &Env, tenant_id: &str, run: &str, edge_ms: u64) {
    // The quotas play no part in an end.
    let ended = Charge::RunEnded { run: run.to_owned(), edge_ms };
    if !matches!(send(env, tenant_id, Quotas::default(), ended).await, Ok(Ok(_))) {
        worker::console_error!(
            "the ledger of tenant {tenant_id} did not hear that run {run} ended: its lease frees it"
        );
    }
}

/// The response to send instead of going on, if the ledger refused a charge (429
/// `QuotaExceeded` with `Retry-After`) or did not answer (503).
pub fn refusal(answer: std::result::Result<LedgerAnswer, HttpError>) -> Option<Response> {
    match answer {
        Ok(LedgerAnswer::Refused { refusal }) => {
            let refused = error(HttpError::new(ErrorName::QuotaExceeded, refusal.message()));
            Some(with_header(refused, "retry-after", &refusal.retry_after_s.to_string()))
        }
        Ok(_) => None,
        Err(unavailable) => Some(error(unavailable)),
    }
}

async fn send(
    env: &Env,
    tenant_id: &str,
    quotas: Quotas,
    charge: Charge,
) -> Result<std::result::Result<LedgerAnswer, HttpError>> {
    let body = serde_json::to_string(&LedgerRequest { quotas, charge })?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(body.into()));
    let request = Request::new_with_init("https://ledger/", &init)?;
    // A Durable Object that cannot be reached (being reset, overloaded) passes, like a store.
    let why = match stub(env, tenant_id)?.fetch_with_request(request).await {
        Ok(mut response) if response.status_code() == 200 => return Ok(Ok(response.json().await?)),
        Ok(response) => format!("it answered {}", response.status_code()),
        Err(e) => e.to_string(),
    };
    worker::console_error!("the ledger of tenant {tenant_id}: {why}");
    Ok(Err(HttpError::storage_unavailable("the tenant's ledger")))
}

/// Erases tenant `tenant_id`'s ledger (its tenant is being deleted): whether it had one, or
/// the status it answered instead.
pub async fn erase(env: &Env, tenant_id: &str) -> Result<std::result::Result<bool, u16>> {
    let mut init = RequestInit::new();
    init.with_method(Method::Delete);
    let request = Request::new_with_init("https://ledger/", &init)?;
    let mut response = stub(env, tenant_id)?.fetch_with_request(request).await?;
    if response.status_code() != 200 {
        return Ok(Err(response.status_code()));
    }
    let answer: serde_json::Value = response.json().await?;
    Ok(Ok(answer["erased"] == true))
}
