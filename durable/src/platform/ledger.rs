//! The hop to a tenant's ledger (`crate::ledger::LedgerDO`, one per tenant): a charge against
//! its quotas, its usage, its erasure. The Worker and the relay session's DO both call it.

use super::bindings::LEDGERS;
use super::http::{error, with_header};
use super::sleep;
use relay_core::auth::Tenant;
use relay_core::error::{ErrorName, HttpError};
use relay_core::quota::{Charge, LedgerAnswer, LedgerRequest, Quotas};
use serde_json::Value;
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

/// `tenant`'s quotas and what it used of each (`relay://usage`'s shape), as its ledger answers
/// a usage read; a ledger that did not answer is the 503 to send.
pub async fn usage(env: &Env, tenant: &Tenant) -> Result<std::result::Result<Value, HttpError>> {
    let edge_cpu_ms_per_day = tenant.defaults.edge.map(|edge| edge.cpu_ms_per_day);
    Ok(match charge(env, tenant, Charge::Usage { edge_cpu_ms_per_day }).await? {
        Ok(LedgerAnswer::Usage { usage }) => Ok(usage),
        Ok(other) => return Err(worker::Error::RustError(format!("the ledger answered a usage with {other:?}"))),
        Err(unavailable) => Err(unavailable),
    })
}

/// How long `run_ended` waits before each retry of an end the ledger did not hear.
const RUN_ENDED_RETRIES_MS: [u64; 3] = [1_000, 2_000, 4_000];

/// Run `run` of tenant `tenant_id` ended after `edge_ms` at the edge: its slot comes back and
/// its edge time counts to the tenant's day. Never refused; a ledger that did not answer is
/// asked again a few times, and past them the slot is left to its lease (and the edge time
/// uncounted). An erased ledger (404) is not asked again.
pub async fn run_ended(env: &Env, tenant_id: &str, run: &str, edge_ms: u64) {
    let ended = || Charge::RunEnded { run: run.to_owned(), edge_ms };
    // The quotas play no part in an end.
    let mut heard = send(env, tenant_id, Quotas::default(), ended()).await;
    for wait_ms in RUN_ENDED_RETRIES_MS {
        match &heard {
            Ok(Ok(_)) => return,
            Ok(Err(refused)) if refused.name == ErrorName::NotFound => return,
            _ => {}
        }
        let _ = sleep(wait_ms).await;
        heard = send(env, tenant_id, Quotas::default(), ended()).await;
    }
    if !matches!(heard, Ok(Ok(_))) {
        worker::console_error!(
            "the ledger of tenant {tenant_id} did not hear that run {run} ended: its lease frees it"
        );
    }
}

/// Charges `bytes` that `tenant` is about to store to its `storedBytes`: the refusal (429
/// `QuotaExceeded`, or 503 when the ledger did not answer), if not.
pub async fn charge_stored(env: &Env, tenant: &Tenant, bytes: u64) -> std::result::Result<(), HttpError> {
    match charge(env, tenant, Charge::Store { bytes }).await {
        Ok(Ok(LedgerAnswer::Refused { refusal })) => Err(refusal.error()),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(refused)) => Err(refused),
        Err(e) => {
            worker::console_error!("the ledger of tenant {}: {e}", tenant.id);
            Err(HttpError::storage_unavailable("the tenant's ledger"))
        }
    }
}

/// Tells tenant `tenant_id`'s ledger that a put of `bytes` charged at `charged_ms` failed
/// (`Charge::StoreFailed`); one it did not hear is logged (the next measurement corrects it).
pub async fn store_failed(env: &Env, tenant_id: &str, bytes: u64, charged_ms: u64) {
    // The quotas play no part in giving bytes back.
    let sent = send(env, tenant_id, Quotas::default(), Charge::StoreFailed { bytes, charged_ms }).await;
    if !matches!(sent, Ok(Ok(_))) {
        worker::console_error!("the ledger of tenant {tenant_id} did not hear that a put of {bytes} bytes failed");
    }
}

/// `put`, of `bytes` that `tenant` is about to store, made only once they are charged to its
/// `storedBytes`; a put that fails gives the charge back. The refusal (429 `QuotaExceeded`
/// with `Retry-After`, or 503) or the put's own answer.
pub async fn charged_put<T>(
    env: &Env,
    tenant: &Tenant,
    bytes: u64,
    put: impl std::future::Future<Output = std::result::Result<T, Response>>,
) -> std::result::Result<T, Response> {
    let charged_ms = super::now_ms();
    charge_stored(env, tenant, bytes).await.map_err(error)?;
    let put = put.await;
    if put.is_err() {
        store_failed(env, &tenant.id, bytes, charged_ms).await;
    }
    put
}

/// Tells tenant `tenant_id`'s ledger it stores `bytes`, as listed from `at_ms` on (the
/// retention sweep's measurement); why not, if it did not take it.
pub async fn measured(env: &Env, tenant_id: &str, bytes: u64, at_ms: u64) -> Result<(), String> {
    // The quotas play no part in a measurement.
    match send(env, tenant_id, Quotas::default(), Charge::StoredMeasured { bytes, at_ms }).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(refused)) => Err(refused.message),
        Err(e) => Err(e.to_string()),
    }
}

/// The response to send instead of going on, if the ledger refused a charge (429
/// `QuotaExceeded` with `Retry-After`) or did not answer (503).
pub fn refusal(answer: std::result::Result<LedgerAnswer, HttpError>) -> Option<Response> {
    match answer {
        Ok(LedgerAnswer::Refused { refusal }) => {
            let refused = error(refusal.error());
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
        Ok(response) if response.status_code() == 404 => {
            return Ok(Err(HttpError::new(ErrorName::NotFound, "this tenant was deleted; its key no longer works")));
        }
        Ok(response) => format!("it answered {}", response.status_code()),
        Err(e) => e.to_string(),
    };
    worker::console_error!("the ledger of tenant {tenant_id}: {why}");
    Ok(Err(HttpError::storage_unavailable("the tenant's ledger")))
}

/// Lifts the erasure of tenant `tenant_id`'s ledger: a tenant was made again under the id of
/// one deleted (`LedgerDO` refuses an erased ledger's charges until then).
pub async fn revive(env: &Env, tenant_id: &str) -> Result<()> {
    let mut init = RequestInit::new();
    init.with_method(Method::Put);
    let request = Request::new_with_init("https://ledger/", &init)?;
    match stub(env, tenant_id)?.fetch_with_request(request).await?.status_code() {
        200 => Ok(()),
        status => Err(worker::Error::RustError(format!("the ledger of tenant {tenant_id} answered {status}"))),
    }
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
