//! The Worker's handlers (wasm32 only): each turns a `worker::Request` into a call of the pure
//! core and its answer back into a `worker::Response`. They stand on `platform`; a relay
//! session's state lives in its DO (`relay_session`), reached with `platform::stub`.

pub mod capsules;
pub mod egress;
pub mod files;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod oauth;
pub mod packages;
pub mod retention;
pub mod runtime_snapshot;
pub mod session;
pub mod tenant_life;
pub mod tenants;
pub mod upstreams;
pub mod workspace;

use std::cell::RefCell;

/// Who a request turned out to come from, as its handler learned it from a credential (the
/// tenant's id and the relay session): the request's log line names them.
#[derive(Default)]
pub struct Who(RefCell<Option<(String, String)>>);

impl Who {
    pub fn is(&self, tenant: &str, session: &str) {
        *self.0.borrow_mut() = Some((tenant.to_owned(), session.to_owned()));
    }

    pub fn take(&self) -> Option<(String, String)> {
        self.0.borrow_mut().take()
    }
}
