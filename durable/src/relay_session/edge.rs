//! The edge executor's I/O (issue 27): a run the run machine sent to the edge goes to the
//! Worker's `EdgeExecutor` entrypoint (`durable/js/entry.mjs`, reached through this DO's
//! `ctx.exports`), which runs it in a fresh dynamic Worker and answers with its NDJSON events;
//! each batch of complete lines is fed to the machine as a tab's batch is
//! (`RelaySession::edge_events`). A run whose deps layer was never built first gets its build
//! there (`EdgeExecutor.build`: a fresh dynamic Worker of its own, finalized as a tab's build),
//! then runs the capsule that build made. What the run starts with, and every decision, is the
//! core's (`relay_core::relay_session::edge`, `relay_core::packages::edge_build`).

use crate::platform::bindings::{self, RELAY_TEST_LOSE_STANDBY};
use crate::platform::{self, signer::key_set, signer::sealing_key};
use futures::channel::oneshot;
use futures::future::{self, Either};
use futures::StreamExt;
use relay_core::error::ErrorName;
use relay_core::packages::edge_build::{build_outcome, build_unstarted};
use relay_core::relay_session::edge::Refusal;
use relay_core::relay_session::{Platform, RelaySession};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use worker::js_sys::{Array, Function, Promise, Reflect, Symbol};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::{future_to_promise, spawn_local, JsFuture};
use worker::{web_sys, Env, Response};

/// How long after an edge run's events end its relay session asks for the next run's standby:
/// the run's answer goes out first. Under `wrangler dev` every isolate shares one thread, and a
/// standby asked for at once (its isolate loaded, its QuickJS made: ~45 ms of CPU) held the
/// answer back: from the exit applied to the client's answer, 69 ms p50 for runs 1 s apart, 29
/// ms with this wait (docs/BENCHMARKS.md). A run that comes meanwhile cuts the wait short and
/// waits for that standby rather than load another.
const STANDBY_DEFER_MS: u64 = 50;

/// How long a relay session holds a standby no run has taken, then lets go of it. While its stub
/// is held the DO is not evicted (under `wrangler dev` it stayed through idle.test.mjs's 40 s
/// idle), so it is billed duration then (docs/COST.md): runs an agent makes one after another
/// find it, and a relay session left alone can sleep this long after its last edge run.
const STANDBY_HOLD_MS: u64 = 15_000;

/// A platform whose relay session runs at the edge: it holds that session's [`EdgeRuns`] and
/// the Worker's env (for the signing keys). The DO's platform (`shared.rs`) is the one; the
/// trait keeps this file from naming it.
pub trait EdgePlatform: Platform + Sized + 'static {
    fn edge_runs(&self) -> &EdgeRuns<Self>;
    fn env(&self) -> &Env;
}

/// The runs at the edge of one relay session.
pub struct EdgeRuns<P: Platform> {
    /// The relay session they feed, set once the DO holds it (this lives inside it).
    home: RefCell<Weak<RelaySession<P>>>,
    /// This DO's `ctx.exports`: the Worker's own entrypoints, `EdgeExecutor` among them.
    exports: JsValue,
    /// Each run at the edge: dropping its sender stops reading its events, which stops it.
    running: RefCell<HashMap<String, oneshot::Sender<()>>>,
    /// The next run's standby, as it comes: a promise of `EdgeExecutor.standby()`'s RPC stub
    /// (a runner loaded and prepared ahead) or null, and the sender that cuts its wait short.
    /// One run takes it, waiting for it if it is still coming; the next is asked for once that
    /// run's events end.
    standby: RefCell<Option<(Promise, oneshot::Sender<()>, u64)>>,
    /// How many standbys were asked for: each one's number, so the one let go unused after
    /// [`STANDBY_HOLD_MS`] is the one that was asked for then.
    asked: Cell<u64>,
    /// Whether the last edge run was a `run_js`: only then is a standby asked for (a standby is
    /// QuickJS's; a relay session running Python would hold it unused, and take it from another).
    last_ran_js: Cell<bool>,
}

impl<P: EdgePlatform> EdgeRuns<P> {
    pub fn new(exports: JsValue) -> Self {
        EdgeRuns {
            home: RefCell::new(Weak::new()),
            exports,
            running: RefCell::default(),
            standby: RefCell::default(),
            asked: Cell::new(0),
            last_ran_js: Cell::new(false),
        }
    }

    pub fn set_home(&self, shared: &Rc<RelaySession<P>>) {
        *self.home.borrow_mut() = Rc::downgrade(shared);
    }

    /// Starts run `run` at the edge; its events come back as it runs.
    pub fn start(&self, run: &str) {
        let Some(shared) = self.home.borrow().upgrade() else { return };
        let (stop, stopped) = oneshot::channel();
        self.running.borrow_mut().insert(run.to_owned(), stop);
        let run = run.to_owned();
        spawn_local(async move {
            if let Err(refusal) = execute(&shared, &run, stopped).await {
                shared.edge_failed(&run, refusal);
            }
            let edge_runs = shared.platform.edge_runs();
            edge_runs.running.borrow_mut().remove(&run);
            edge_runs.ask_standby();
        });
    }

    /// Asks the Worker for the next run's standby after a `run_js`, unless one is held or
    /// coming, after [`STANDBY_DEFER_MS`]. The Worker isolate holds one at most: this relay
    /// session's takes the place of another's.
    fn ask_standby(&self) {
        if !self.last_ran_js.get() || self.standby.borrow().is_some() {
            return;
        }
        let exports = self.exports.clone();
        let (hurry, hurried) = oneshot::channel::<()>();
        let asked = future_to_promise(async move {
            future::select(platform::sleep(STANDBY_DEFER_MS), hurried).await;
            let standby = match call_rpc(&exports, Some("EdgeExecutor"), "standby", None) {
                Ok(asked) => JsFuture::from(asked).await.unwrap_or(JsValue::NULL),
                Err(_) => JsValue::NULL,
            };
            Ok(standby)
        });
        let number = self.asked.get() + 1;
        self.asked.set(number);
        *self.standby.borrow_mut() = Some((asked, hurry, number));
        let home = self.home.borrow().clone();
        spawn_local(async move {
            let _ = platform::sleep(STANDBY_DEFER_MS + STANDBY_HOLD_MS).await;
            let Some(shared) = home.upgrade() else { return };
            let unused = shared.platform.edge_runs().unused_standby(number);
            if let Some(unused) = unused {
                drop(Disposing(&JsFuture::from(unused).await.unwrap_or(JsValue::NULL)));
            }
        });
    }

    /// Standby number `number`, taken out if it is still held (no run took it).
    fn unused_standby(&self, number: u64) -> Option<Promise> {
        let mut held = self.standby.borrow_mut();
        if held.as_ref().map(|(_, _, n)| *n) != Some(number) {
            return None;
        }
        held.take().map(|(coming, _, _)| coming)
    }

    /// The standby the next run takes, if one is held or coming (waited for, its deferral cut
    /// short: a run waits for no timer).
    async fn take_standby(&self) -> Option<JsValue> {
        let (coming, hurry, _) = self.standby.borrow_mut().take()?;
        drop(hurry);
        JsFuture::from(coming).await.ok().filter(|standby| !standby.is_null() && !standby.is_undefined())
    }

    /// Stops run `run` at the edge, if it is there.
    pub fn cancel(&self, run: &str) {
        self.running.borrow_mut().remove(run);
    }
}

/// Runs `run` at the edge until its stream ends or it is stopped; why not, if it failed.
async fn execute<P: EdgePlatform>(
    shared: &Rc<RelaySession<P>>,
    run: &str,
    stopped: oneshot::Receiver<()>,
) -> Result<(), Refusal> {
    let mut stopped = stopped;
    let key = sealing_key(shared.platform.env()).map_err(internal)?;
    let mut job = match shared.edge_job(run, &key).await {
        Ok(job) => job,
        Err(refusal) => {
            shared.edge_unstarted(run, refusal); // no isolate had it: the budget is not charged
            return Ok(());
        }
    };
    // Stopped while its job was made (R2's reads, the /mcps listing): no isolate for it.
    let was_stopped = |stopped: &mut oneshot::Receiver<()>| !matches!(stopped.try_recv(), Ok(None));
    if job.get("build").is_some() {
        if was_stopped(&mut stopped) {
            shared.edge_build_over(run); // the build its job claimed
            return Ok(());
        }
        if !build(shared, run, &job, &mut stopped).await? {
            return Ok(()); // stopped: the build's isolate ends at its caps, then frees the slot
        }
        job = shared.edge_job(run, &key).await?; // now the capsule the build finalized
    }
    if was_stopped(&mut stopped) {
        return Ok(());
    }
    job["keys"] = key_set(shared.platform.env()).map_err(internal)?.to_jwks();
    let js = runs_js(&job);
    shared.platform.edge_runs().last_ran_js.set(js);
    // The standby's run if it claimed itself for it, else a fresh runner's; the standby is the
    // run's, let go once it ends. A Python run leaves it to the next JavaScript run.
    let standby = match js {
        true => match future::select(Box::pin(shared.platform.edge_runs().take_standby()), &mut stopped).await {
            Either::Left((standby, _)) => standby,
            Either::Right(_) => return Ok(()), // stopped while its standby was being made
        },
        false => None,
    };
    let _let_go = standby.as_ref().map(Disposing);
    let claimed = match &standby {
        Some(standby) => claim(standby, lose_standby(shared.platform.env())).await,
        None => false,
    };
    let job = job.to_string();
    let response = match (&standby, claimed) {
        (Some(standby), true) => call_rpc(standby, None, "run", Some(&job)),
        _ => call_rpc(&shared.platform.edge_runs().exports, Some("EdgeExecutor"), "run", Some(&job)),
    };
    let response: web_sys::Response =
        JsFuture::from(response.map_err(js_internal)?).await.map_err(js_internal)?.unchecked_into();
    let mut events = Response::from(response).stream().map_err(internal)?;
    let mut pending = Vec::new();
    loop {
        let chunk = match future::select(events.next(), &mut stopped).await {
            Either::Left((chunk, _)) => chunk,
            Either::Right(_) => return Ok(()), // stopped: dropping the stream cancels it
        };
        let Some(chunk) = chunk else { break };
        pending.extend(chunk.map_err(internal)?);
        if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
            let lines: Vec<u8> = pending.drain(..=end).collect();
            if let Err(why) = shared.edge_events(&lines) {
                worker::console_error!("relay session: events of edge run {run} refused: {why}");
            }
        }
    }
    // A run whose events ended before its exit (its isolate died) ends here; one that exited
    // is not touched (a run ends once).
    Err((ErrorName::Internal, "the edge executor stopped before the run ended; run the tool again".to_owned()))
}

/// Builds run `run`'s deps layer at the edge (`job`: its build job) and finalizes it, unless
/// it is stopped first (false); why not, if the build failed or stopped at a cap. The relay
/// session's one build at the edge is released when the build settles, not when its run stops:
/// a stopped build's isolate works on until its caps end it, and the next build waits for it.
async fn build<P: EdgePlatform>(
    shared: &Rc<RelaySession<P>>,
    run: &str,
    job: &Value,
    stopped: &mut oneshot::Receiver<()>,
) -> Result<bool, Refusal> {
    let exports = &shared.platform.edge_runs().exports;
    let built = match call_rpc(exports, Some("EdgeExecutor"), "build", Some(&job.to_string())) {
        Ok(built) => JsFuture::from(built),
        Err(e) => {
            shared.edge_build_over(run);
            return Err(build_unstarted(&js_message(e)));
        }
    };
    let answer = match future::select(built, stopped).await {
        Either::Left((answer, _)) => answer,
        Either::Right((_, built)) => {
            let (shared, run) = (Rc::clone(shared), run.to_owned());
            spawn_local(async move {
                let _settled = built.await;
                shared.edge_build_over(&run);
            });
            return Ok(false);
        }
    };
    shared.edge_build_over(run);
    let answer = answer.map_err(|e| build_unstarted(&js_message(e)))?;
    build_outcome(&serde_json::from_str(&answer.as_string().unwrap_or_default()).unwrap_or_default())?;
    Ok(true)
}

/// `target[entry][method](arg)` (`ctx.exports.EdgeExecutor.run(job)`, a standby's `run(job)`):
/// an RPC method is called with `Reflect::apply` (its stub's `call` would name a remote method
/// `call`).
fn call_rpc(target: &JsValue, entry: Option<&str>, method: &str, arg: Option<&str>) -> Result<Promise, JsValue> {
    let stub = match entry {
        Some(entry) => Reflect::get(target, &entry.into())?,
        None => target.clone(),
    };
    let method: Function = Reflect::get(&stub, &method.into())?.unchecked_into();
    let args = arg.map_or_else(Array::new, |arg| Array::of1(&arg.into()));
    Ok(Reflect::apply(&method, &stub, &args)?.unchecked_into())
}

/// Whether an edge job runs JavaScript (its manifest's language is not Python's).
fn runs_js(job: &Value) -> bool {
    let manifest = job["announced"]["inline"]["manifest"].as_str().and_then(|m| serde_json::from_str::<Value>(m).ok());
    manifest.is_some_and(|m| m["language"] != "py")
}

/// Whether `standby` claimed itself for the run to come (its `take()`), before the run's job is
/// sent: false when it is stale or taken, and when it cannot be reached (its stub disposed or
/// broken, its isolate or its call's context gone), which the log says. A standby that did not
/// answer `take()` was sent no job, so its run goes on a fresh runner and runs once.
/// `lose`: a test's fault (see [`lose_standby`]), the stub disposed first.
async fn claim(standby: &JsValue, lose: bool) -> bool {
    if lose {
        drop(Disposing(standby));
    }
    let answer = match call_rpc(standby, None, "take", None) {
        Ok(taken) => JsFuture::from(taken).await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(taken) => taken.as_bool() == Some(true),
        Err(e) => {
            let (_, why) = js_internal(e);
            worker::console_warn!("edge: a standby was lost before its run ({why}); the run goes on a fresh runner");
            false
        }
    }
}

/// The Worker var `RELAY_TEST_LOSE_STANDBY` = "1" (a test's, never set in wrangler.toml): each
/// relay session's standby is disposed before its run is offered to it, as the platform disposes
/// the stub of a call whose context ended, so a test sees such a run go on a fresh runner.
fn lose_standby(env: &Env) -> bool {
    bindings::var(env, RELAY_TEST_LOSE_STANDBY).is_some_and(|v| v == "1")
}

/// An RPC stub disposed when this is dropped (`Symbol.dispose`), so the far side lets go of
/// what it holds for it (a standby's runner) as soon as the run is over, not when it is
/// garbage-collected.
struct Disposing<'a>(&'a JsValue);

impl Drop for Disposing<'_> {
    fn drop(&mut self) {
        if let Ok(dispose) = Reflect::get(self.0, &Symbol::dispose()) {
            if let Some(dispose) = dispose.dyn_ref::<Function>() {
                let _ = dispose.call0(self.0);
            }
        }
    }
}

fn internal(e: impl std::fmt::Display) -> Refusal {
    (ErrorName::Internal, format!("the edge executor failed: {e}; run the tool again"))
}

fn js_internal(e: JsValue) -> Refusal {
    internal(js_message(e))
}

/// A JavaScript error's message (or the thrown string).
fn js_message(e: JsValue) -> String {
    e.as_string().or_else(|| Reflect::get(&e, &"message".into()).ok()?.as_string()).unwrap_or_default()
}
