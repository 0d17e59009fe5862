//! The relay session in the Durable Object: the core's `RelaySession` over [`DoPlatform`]
//! (its SQLite, R2 and KV, the [`Roster`] of tabs, the runtime's clock, randomness and log,
//! and `fetch` for upstream servers), the DO's [`Alarm`], which wakes it for the run machine's
//! deadlines, and the [`ticker`] a call's open stream carries. The decisions are the core's
//! (`relay_core::relay_session`); this is their I/O.

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
use relay_core::metrics::Wake;
use relay_core::relay_session::{self, Platform, RelaySession, Tabs};
use relay_core::run::readiness::Readiness;
use relay_core::upstream::client::{Post, Received};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use worker::js_sys::{Array, Function, Object, Promise, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::spawn_local;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{Env, Result, State, WebSocket};

/// How often a call's open stream ticks the machine at the least (and writes its keep-alive).
/// A closed client is noticed when a write to it fails, so this bounds how long that takes.
const TICK_MS: u64 = 2_000;
/// How long the relay session must have had no run in hand before what it counted and what it
/// keeps are written (`flush_soon`).
const SAVE_AFTER_MS: u64 = 1_000;

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
    /// The DO's alarm, kept at the run machine's next deadline.
    pub alarm: Alarm,
    /// Whether a ticker keeps this instance awake (`schedule`).
    vigil: Cell<bool>,
    /// Whether the wake-ups counted in memory are about to be written (`flush_soon`).
    flushing: Cell<bool>,
    /// When the relay session last went idle (no run in hand): `flush_soon` writes a quiet
    /// `SAVE_AFTER_MS` later.
    idle_since: Cell<u64>,
    /// Whether its storage was erased (its tenant deleted): it serves nothing more, and a
    /// save due after the erasure writes nothing.
    pub erased: Cell<bool>,
}

impl DoPlatform {
    pub fn new(state: &State, env: Env, sql: DoSql, edge: EdgeRuns<DoPlatform>) -> Self {
        let (r2, kv) = (R2(env.clone()), Kv(env.clone()));
        let (roster, alarm) = (Roster::new(Leases::new(state)), Alarm::new(state));
        let (vigil, flushing, idle_since, erased) =
            (Cell::new(false), Cell::new(false), Cell::new(0), Cell::new(false));
        DoPlatform { env, sql, r2, kv, roster, edge, alarm, vigil, flushing, idle_since, erased }
    }
}

/// The DO's alarm: what wakes it for the run machine's deadlines (queue expiry, attach waits,
/// run timeouts, task expiry, the leases of tabs that hold runs), so that no open stream has to
/// stay awake to tick it.
pub struct Alarm {
    /// The DO's `ctx.storage`, raw: workers-rs's alarm options reach JS as `allow_unconfirmed`,
    /// which the runtime ignores.
    storage: JsValue,
    /// When this instance last set it for (None: not set, or fired).
    at: Cell<Option<u64>>,
}

impl Alarm {
    fn new(state: &State) -> Self {
        let storage = Reflect::get(state.as_raw(), &"storage".into()).unwrap_or_default();
        Alarm { storage, at: Cell::new(None) }
    }

    fn is_set(&self) -> bool {
        self.at.get().is_some()
    }

    /// Moves the alarm to `wake` (epoch ms; None deletes it) unless it is already there:
    /// whether it wrote it. The storage call is made before the first await, so calls take
    /// effect in the order their `wake`s were read: the last one set is the machine's latest
    /// answer.
    async fn follow(&self, wake: Option<u64>) -> bool {
        if self.at.replace(wake) == wake {
            return false;
        }
        // Unconfirmed: a storage write holds the DO's outgoing messages (a run's answer) until
        // it is committed; losing this one costs nothing, as the instance stays awake while
        // runs are in hand (`schedule`'s vigil) and the next tick sets it again. (An alarm
        // moved earlier still holds the commit it shares for the alarm scheduler: `schedule`
        // keeps that out of a short run's path.)
        let options = Object::new();
        let _ = Reflect::set(&options, &"allowUnconfirmed".into(), &true.into());
        let (method, args) = match wake {
            Some(ms) => ("setAlarm", Array::of2(&(ms as f64).into(), &options)),
            None => ("deleteAlarm", Array::of1(&options)),
        };
        if let Err(e) = storage_call(&self.storage, method, &args).await {
            // Forgotten, so the next call tries again; meanwhile an open stream's ticker or
            // the next request still ticks the machine.
            self.at.set(None);
            worker::console_error!("setting the relay session's alarm: {e:?}");
            return false;
        }
        true
    }

    /// The alarm fired: none is set until the next `follow`.
    pub fn fired(&self) {
        self.at.set(None);
    }
}

/// `storage[method](...args)`, awaited.
async fn storage_call(storage: &JsValue, method: &str, args: &Array) -> std::result::Result<JsValue, JsValue> {
    let call: Function = Reflect::get(storage, &method.into())?.dyn_into()?;
    JsFuture::from(Promise::resolve(&Reflect::apply(&call, storage, args)?)).await
}

/// Keeps the machine's deadlines after anything that may have moved them. While it has runs
/// in hand (it has a next deadline), a ticker keeps this instance awake: their state lives in
/// this instance's memory, which a DO that hibernates loses. With no run in hand nothing is
/// kept awake, and an idle tab costs nothing (the wake-ups counted are written then:
/// `flush_soon`).
pub fn schedule(shared: &Rc<Shared>) {
    schedule_from(shared, false);
}

/// `schedule`, from a tick (`ticked`) or not. The DO's alarm follows the next deadline from a
/// run's first tick on, and is let go when no run is in hand. Not sooner: an alarm moved
/// earlier (from none, at a run's admission) makes the storage commit it is in, and every
/// commit behind it, wait for the alarm scheduler before the DO's messages go out, so each run
/// sent its tab its command late (docs/BENCHMARKS.md, issue 32); a run answered within a tick
/// has the ticker's deadlines and writes no alarm. The alarm is written in a task of its own
/// (a response awaiting it waited ~30 ms more under `wrangler dev`); tasks start in the order
/// they were spawned, so the last `wake` read is the one set.
fn schedule_from(shared: &Rc<Shared>, ticked: bool) {
    let wake = shared.next_wake();
    if wake.is_some() && !shared.platform.vigil.replace(true) {
        // Its pending timer is what keeps an instance with runs in hand and no request open (a
        // task's run, a client gone) from eviction: compatibility dates from 2026-10-01 on
        // (`durable_object_io_tasks_prevent_eviction`).
        let vigil = ticker(shared.clone(), |s| s.next_wake().is_some(), None);
        let kept = shared.clone();
        spawn_local(async move {
            vigil.for_each(|_| future::ready(())).await;
            kept.platform.vigil.set(false);
            // An alarm still set: the last run ended outside any handler (a dropped stream's
            // cancel), so nothing let it go or saved; do both now, as a run's end does.
            if kept.platform.alarm.is_set() {
                schedule(&kept);
            }
        });
    }
    if wake.is_none() {
        flush_soon(shared);
    }
    // An erased relay session's storage stays empty (a vigil may still tick its last run).
    if (ticked || wake.is_none()) && !shared.platform.erased.get() {
        let kept = shared.clone();
        spawn_local(async move {
            if kept.platform.alarm.follow(wake).await {
                kept.alarm_written(wake.is_some());
            }
        });
    }
}

/// Writes the wake-ups counted in memory, and what must outlive this instance
/// (`relay_session::kept`), once the relay session has been idle (no run in hand) for
/// `SAVE_AFTER_MS`, one write for all: so calls back to back never wait for a write's commit
/// (a write holds the DO's next messages until committed), and the timer keeps the DO from
/// sleeping, and so from being evicted, until the save is done.
fn flush_soon(shared: &Rc<Shared>) {
    shared.platform.idle_since.set(now_ms());
    if shared.platform.flushing.replace(true) {
        return;
    }
    let kept = shared.clone();
    spawn_local(async move {
        loop {
            let (due, now) = (kept.platform.idle_since.get() + SAVE_AFTER_MS, now_ms());
            if now >= due {
                break;
            }
            let _ = sleep(due - now).await;
        }
        kept.platform.flushing.set(false);
        // A run in hand meanwhile: its end goes idle again and saves then. An erased relay
        // session's storage stays empty.
        if kept.next_wake().is_none() && !kept.platform.erased.get() {
            kept.flush_wakeups();
            kept.keep_memory();
        }
    });
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

/// The tabs attached to the relay session: their command sockets (to the Worker, which holds
/// each tab's SSE stream), what each last said of its runtimes, their results sockets and their
/// lease sockets.
pub struct Roster {
    streams: RefCell<HashMap<String, WebSocket>>,
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

    /// A tab attaching now: its note goes with its command socket, which outlives this
    /// instance (`tabs::reattach` reads it back).
    pub fn add_tab(&self, tab: &str, stream: WebSocket) {
        let note = TabNote { attached_ms: now_ms(), readiness: None };
        if let Err(e) = stream.serialize_attachment(&note) {
            worker::console_error!("keeping tab {tab}'s note with its socket: {e}");
        }
        self.streams.borrow_mut().insert(tab.to_owned(), stream);
    }

    /// A tab an earlier instance had, taken back with what its socket kept of it.
    pub fn add_tab_back(&self, tab: &str, stream: WebSocket, readiness: Option<Readiness>) {
        if let Some(readiness) = readiness {
            self.readiness.borrow_mut().insert(tab.to_owned(), readiness);
        }
        self.streams.borrow_mut().insert(tab.to_owned(), stream);
    }

    pub fn has_tab(&self, tab: &str) -> bool {
        self.streams.borrow().contains_key(tab)
    }

    /// Drops `tab` if `stream` is its command socket (which closed): whether it did.
    pub fn forget_stream(&self, tab: &str, stream: &WebSocket) -> bool {
        let current = self.streams.borrow().get(tab) == Some(stream);
        if current {
            self.drop_tab(tab);
        }
        current
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

    /// Keeps what an attached tab (the caller checked: `has_tab`) said of its runtimes, here
    /// and with its command socket (a few hundred bytes: `readiness::MAX_RUNTIMES` short ids,
    /// well within an attachment's 2 KiB).
    pub fn set_readiness(&self, tab: &str, readiness: Readiness) {
        if let Some(stream) = self.streams.borrow().get(tab) {
            let note = stream.deserialize_attachment::<TabNote>().ok().flatten();
            let note = TabNote {
                attached_ms: note.map_or_else(now_ms, |n| n.attached_ms),
                readiness: Some(readiness.clone()),
            };
            if let Err(e) = stream.serialize_attachment(&note) {
                worker::console_error!("keeping tab {tab}'s readiness with its socket: {e}");
            }
        }
        self.readiness.borrow_mut().insert(tab.to_owned(), readiness);
    }
}

/// What a tab's command socket keeps of it across instances (its attachment): when it
/// attached (the newest gets the next run, so the order must come back) and what it last said
/// of its runtimes.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TabNote {
    pub attached_ms: u64,
    pub readiness: Option<Readiness>,
}

/// Sends `frame` (text: an SSE event or comment) on `socket`: whether it went.
fn send(socket: &WebSocket, frame: &[u8]) -> bool {
    socket.send_with_str(String::from_utf8_lossy(frame)).is_ok()
}

impl Tabs for Roster {
    fn ids(&self) -> Vec<String> {
        self.streams.borrow().keys().cloned().collect()
    }

    fn write(&self, tab: &str, frame: Vec<u8>) -> bool {
        let mut streams = self.streams.borrow_mut();
        let written = streams.get(tab).is_some_and(|stream| send(stream, &frame));
        if !written {
            streams.remove(tab);
        }
        written
    }

    fn copy_to_socket(&self, tab: &str, frame: &[u8]) {
        let mut sockets = self.sockets.borrow_mut();
        let sent = sockets.get(tab).is_some_and(|socket| send(socket, frame));
        if !sent {
            sockets.remove(tab);
        }
    }

    /// Also closes its command socket (so the Worker ends its stream, and the page attaches
    /// again) and its lease socket (so its lease worker knows): it said it is going away, or
    /// the machine dropped it.
    fn drop_tab(&self, tab: &str) {
        if let Some(stream) = self.streams.borrow_mut().remove(tab) {
            let _ = stream.close(Some(4410), Some("this tab was dropped: attach again"));
        }
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
/// machine's next deadline if sooner, yielding `keepalive` after each tick if given. A call's
/// open stream (or a resumed one) carries one while its run is in hand, for its keep-alives
/// and to notice a closed client; the deadlines would be kept without it (the DO's alarm).
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
            shared.woke(Wake::Tick);
            shared.tick();
            schedule_from(&shared, true);
            Some((keepalive.map(|frame| Ok(frame.as_bytes().to_vec())), ()))
        }
    })
    .filter_map(future::ready)
}
