//! The relay session in the Durable Object: the core's `RelaySession` over [`DoPlatform`]
//! (its SQLite, R2 and KV, the [`Roster`] of tabs, the runtime's clock, randomness and log,
//! and `fetch` for upstream servers), and the [`ticker`] every open stream carries. The
//! decisions are the core's (`relay_core::relay_session`); this is their I/O.

use super::edge::{EdgePlatform, EdgeRuns};
use super::leases::Leases;
use crate::platform::kv::Kv;
use crate::platform::ledger;
use crate::platform::r2::R2;
use crate::platform::sql::DoSql;
use crate::platform::upstream;
use crate::platform::{fill_random, now_ms, sleep};
use futures::channel::mpsc::UnboundedSender;
use futures::{future, Stream, StreamExt};
use relay_core::auth::Tenant;
use relay_core::error::HttpError;
use relay_core::relay_session::{self, Platform, RelaySession, Tabs};
use relay_core::run::readiness::Readiness;
use relay_core::upstream::client::{Post, Received};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{Env, Result, WebSocket};

/// How often an open stream ticks the machine (and heartbeats the tabs) at the least. A closed
/// tab or client is noticed when a write to it fails, so this bounds how long that takes.
const TICK_MS: u64 = 2_000;

/// The relay session, shared by the DO and the streams it returns (which outlive a `&self`).
pub type Shared = RelaySession<DoPlatform>;

/// An SSE response body being written.
#[derive(Clone)]
pub struct Sse(pub UnboundedSender<Result<Vec<u8>>>);

impl relay_session::Frames for Sse {
    fn send(&self, frame: Vec<u8>) -> bool {
        self.0.unbounded_send(Ok(frame)).is_ok()
    }
}

/// What the relay session stands on in a Durable Object.
pub struct DoPlatform {
    pub env: Env,
    sql: DoSql,
    r2: R2,
    kv: Kv,
    pub roster: Roster,
    /// The runs at the edge executor.
    pub edge: EdgeRuns<DoPlatform>,
}

impl DoPlatform {
    pub fn new(env: Env, sql: DoSql, leases: Leases, edge: EdgeRuns<DoPlatform>) -> Self {
        let (r2, kv) = (R2(env.clone()), Kv(env.clone()));
        DoPlatform { env, sql, r2, kv, roster: Roster::new(leases), edge }
    }
}

impl EdgePlatform for DoPlatform {
    fn edge_runs(&self) -> &EdgeRuns<Self> {
        &self.edge
    }

    fn env(&self) -> &Env {
        &self.env
    }
}

impl Platform for DoPlatform {
    type Sql = DoSql;
    type Blobs = R2;
    type Records = Kv;
    type Tabs = Roster;
    type Frames = Sse;

    fn sql(&self) -> &DoSql {
        &self.sql
    }

    fn blobs(&self) -> &R2 {
        &self.r2
    }

    fn records(&self) -> &Kv {
        &self.kv
    }

    fn tabs(&self) -> &Roster {
        &self.roster
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn random(&self, bytes: &mut [u8]) {
        fill_random(bytes);
    }

    fn log(&self, line: &str) {
        worker::console_log!("{line}");
    }

    fn log_error(&self, line: &str) {
        worker::console_error!("{line}");
    }

    async fn post(
        &self,
        url: &str,
        headers: &[(String, String)],
        post: &Post,
        timeout_ms: u64,
        body_max: u64,
    ) -> std::result::Result<Received, String> {
        upstream::post(url, headers, post, timeout_ms, body_max).await
    }

    fn start_edge(&self, run: &str) {
        self.edge.start(run);
    }

    fn cancel_edge(&self, run: &str) {
        self.edge.cancel(run);
    }

    fn run_ended(&self, tenant: &str, run: &str, edge_ms: u64) {
        let (env, tenant, run) = (self.env.clone(), tenant.to_owned(), run.to_owned());
        spawn_local(async move { ledger::run_ended(&env, &tenant, &run, edge_ms).await });
    }

    async fn charge_stored(&self, tenant: &Tenant, bytes: u64) -> std::result::Result<(), HttpError> {
        ledger::charge_stored(&self.env, tenant, bytes).await
    }

    fn store_failed(&self, tenant: &str, bytes: u64, charged_ms: u64) {
        let (env, tenant) = (self.env.clone(), tenant.to_owned());
        spawn_local(async move { ledger::store_failed(&env, &tenant, bytes, charged_ms).await });
    }
}

/// The tabs attached to the relay session: their command streams, what each last said of its
/// runtimes, their results sockets and their lease sockets.
pub struct Roster {
    streams: RefCell<HashMap<String, UnboundedSender<Result<Vec<u8>>>>>,
    readiness: RefCell<HashMap<String, Readiness>>,
    /// Each tab's results socket, if it opened one: a run's command goes on it too.
    sockets: RefCell<HashMap<String, WebSocket>>,
    /// The tabs' lease sockets, which say when each tab last renewed its lease.
    leases: Leases,
}

impl Roster {
    fn new(leases: Leases) -> Self {
        Roster { streams: RefCell::default(), readiness: RefCell::default(), sockets: RefCell::default(), leases }
    }

    pub fn add_tab(&self, tab: &str, stream: UnboundedSender<Result<Vec<u8>>>) {
        self.streams.borrow_mut().insert(tab.to_owned(), stream);
    }

    pub fn has_tab(&self, tab: &str) -> bool {
        self.streams.borrow().contains_key(tab)
    }

    /// `tab`'s results socket, in place of any earlier one.
    pub fn set_socket(&self, tab: &str, socket: WebSocket) {
        self.sockets.borrow_mut().insert(tab.to_owned(), socket);
    }

    /// Forgets a results socket that closed, unless its tab has a newer one.
    pub fn forget_socket(&self, socket: &WebSocket) {
        self.sockets.borrow_mut().retain(|_, kept| kept != socket);
    }

    /// Drops every tab, closing its command stream and its sockets: the relay session was
    /// erased with its tenant, and a tab left attached would hold its stream open on nothing.
    pub fn drop_all(&self) {
        let sockets: Vec<WebSocket> = self.sockets.borrow_mut().drain().map(|(_, socket)| socket).collect();
        for socket in sockets {
            let _ = socket.close(Some(4410), Some("this relay session's tenant was deleted"));
        }
        for tab in self.ids() {
            self.drop_tab(&tab);
        }
    }

    /// Keeps what an attached tab (the caller checked: `has_tab`) said of its runtimes.
    pub fn set_readiness(&self, tab: &str, readiness: Readiness) {
        self.readiness.borrow_mut().insert(tab.to_owned(), readiness);
    }
}

impl Tabs for Roster {
    fn ids(&self) -> Vec<String> {
        self.streams.borrow().keys().cloned().collect()
    }

    fn write(&self, tab: &str, frame: Vec<u8>) -> bool {
        let mut streams = self.streams.borrow_mut();
        let written = streams.get(tab).is_some_and(|stream| stream.unbounded_send(Ok(frame)).is_ok());
        if !written {
            streams.remove(tab);
        }
        written
    }

    fn copy_to_socket(&self, tab: &str, frame: &[u8]) {
        let mut sockets = self.sockets.borrow_mut();
        let sent = sockets.get(tab).is_some_and(|socket| socket.send_with_str(String::from_utf8_lossy(frame)).is_ok());
        if !sent {
            sockets.remove(tab);
        }
    }

    /// Also closes its lease socket (it said it is going away, or the machine dropped it), so
    /// its lease worker knows.
    fn drop_tab(&self, tab: &str) {
        self.streams.borrow_mut().remove(tab);
        self.readiness.borrow_mut().remove(tab);
        self.sockets.borrow_mut().remove(tab);
        self.leases.close(tab);
    }

    fn seen(&self) -> Vec<(String, u64)> {
        self.leases.seen()
    }

    fn readiness(&self, tab: &str) -> Option<Readiness> {
        self.readiness.borrow().get(tab).cloned()
    }
}

/// Ticks the machine (and heartbeats the tabs) while `alive`, every `TICK_MS` or at the
/// machine's next deadline if sooner, yielding `keepalive` after each tick if given. Every
/// open response stream (a call's, a resumed one, a tab's) carries one, so deadlines keep
/// running as long as anyone is connected; none is needed when no one is.
pub fn ticker(
    shared: Rc<Shared>,
    alive: impl Fn(&Shared) -> bool + 'static,
    keepalive: Option<&'static str>,
) -> impl Stream<Item = Result<Vec<u8>>> {
    let alive = Rc::new(alive);
    futures::stream::unfold((), move |()| {
        let (shared, alive) = (shared.clone(), alive.clone());
        async move {
            let now = now_ms();
            let wake = shared.next_wake().unwrap_or(u64::MAX).min(now + TICK_MS);
            let _ = sleep(wake.saturating_sub(now).max(1)).await;
            if !alive(&shared) {
                return None;
            }
            shared.tick();
            Some((keepalive.map(|frame| Ok(frame.as_bytes().to_vec())), ()))
        }
    })
    .filter_map(future::ready)
}
