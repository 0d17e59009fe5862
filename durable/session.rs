//! The Session DO itself: its shared state and the dispatch of the requests the Worker
//! forwards (`/mcp`, `/events`, `/result`). The Worker has already authenticated the caller
//! and passes who it is in `x-relay-*` headers, which only the Worker can set: a DO has no
//! public address.

use super::store;
use crate::auth::Tenant;
use crate::edge::http::error;
use crate::run::backchannel::RunLog;
use crate::run::lease::Lease;
use crate::run::queue::RunQueue;
use futures::channel::mpsc::UnboundedSender;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;
use worker::{durable_object, DurableObject, Env, Request, Response, Result, State, Storage};

/// What the Worker tells the DO about a forwarded request.
pub struct Caller {
    pub tenant: Tenant,
    /// The relay session's name.
    pub session: String,
    /// The Worker's own origin, for URLs in messages (the executor page).
    pub origin: String,
}

impl Caller {
    fn from_headers(req: &Request) -> Result<Caller> {
        let header = |name: &str| -> Result<String> {
            req.headers().get(name)?.ok_or_else(|| worker::Error::RustError(format!("missing {name}")))
        };
        Ok(Caller {
            tenant: serde_json::from_str(&header("x-relay-tenant")?)?,
            session: header("x-relay-session")?,
            origin: header("x-relay-origin")?,
        })
    }

    /// The executor page for this relay session.
    pub fn page_url(&self) -> String {
        match self.session.as_str() {
            "default" => format!("{}/", self.origin),
            name => format!("{}/#session={name}", self.origin),
        }
    }
}

/// A tab attached as executor: the sender of its SSE stream.
pub struct Tab {
    pub id: String,
    pub tx: UnboundedSender<Result<Vec<u8>>>,
}

/// What a waiting run's driver is told.
pub enum Signal {
    /// The run holds the executor: its capsule went to this tab.
    Started,
    /// New output or progress is in the run's log: forward it.
    Event(crate::run::backchannel::EventBody),
    /// The run waited past the queue's limit.
    Expired,
    /// The tab running it went away.
    TabGone,
    /// A tab attached (a run waiting for one can stop counting).
    TabAttached,
    /// The run was ended from elsewhere (cancelled): stop waiting.
    Ended,
}

/// A run the DO knows: waiting, running or recently finished.
pub struct RunSlot {
    pub log: RunLog,
    pub signals: UnboundedSender<Signal>,
    /// The capsule's event for the tab, sent when the run starts.
    pub capsule_event: Vec<u8>,
    pub tab_id: Option<String>,
    /// Set when the run is handed to a tab: the tab's proof of life for this run.
    pub lease: Option<Lease>,
    /// The client sent `notifications/cancelled` for it: its request gets no answer.
    pub cancelled_by_client: bool,
    /// Identifies the MCP request for `notifications/cancelled`: session id + request id.
    pub request_key: String,
}

#[derive(Default)]
pub struct Inner {
    pub tabs: Vec<Tab>,
    pub queue: Option<RunQueue>,
    pub runs: HashMap<String, RunSlot>,
    /// Finished run ids, oldest first, so their slots can be dropped after a while.
    pub finished: VecDeque<String>,
    /// Capsules this instance has stored in R2 (content-addressed: stored once is stored).
    pub stored: HashSet<String>,
}

/// State shared by the DO and the streams it returns (which outlive a `&self`).
pub struct Shared {
    pub env: Env,
    pub storage: Storage,
    pub inner: RefCell<Inner>,
}

#[durable_object]
pub struct SessionDO {
    shared: Rc<Shared>,
}

impl DurableObject for SessionDO {
    fn new(state: State, env: Env) -> Self {
        let storage = state.storage();
        if let Err(e) = store::migrate(&storage.sql()) {
            worker::console_error!("migration failed: {e}");
        }
        SessionDO { shared: Rc::new(Shared { env, storage, inner: RefCell::new(Inner::default()) }) }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let caller = Caller::from_headers(&req)?;
        let shared = self.shared.clone();
        match req.path().as_str() {
            "/mcp" => super::mcp::handle(shared, req, caller).await,
            "/events" => super::executor::attach(shared, &caller),
            "/result" => super::executor::result(shared, req).await,
            path => Ok(error(404, "NotFound", format!("session object has no route {path}"))),
        }
    }
}
