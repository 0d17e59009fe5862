//! A relay session's platform for native tests: SQLite in memory (`Sqlite`, or `Failing` to
//! fail the statements a test names), R2 and KV in memory, tabs that record what they were
//! sent, a clock the test moves, a log it reads, and upstream MCP servers it scripts. The
//! relay session's decisions run over it exactly as the Durable Object runs them over the
//! runtime (`durable/src/relay_session/shared.rs`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::Shared;

use relay_core::auth::{QueueSettings, Tenant, TenantDefaults};
use relay_core::capsule::canonical::sha256_hex;
use relay_core::capsule::jws::Signer;
use relay_core::error::{ErrorName, HttpError};
use relay_core::mcp::{Era, Tool, ToolCall};
use relay_core::protocol::Caller;
use relay_core::quota::{answer, Charge, LedgerAnswer, LedgerRequest, MemoryLedger};
use relay_core::relay_session::edge::Refusal;
use relay_core::relay_session::runs::{prepare, Answer, Call, Work};
use relay_core::relay_session::{Frames, Platform, RelaySession, Sql, StorageError, Tabs};
use relay_core::run::machine::Input;
use relay_core::run::readiness::Readiness;
use relay_core::stores::{Blobs, Head, Listing, Meta, Records};
use relay_core::upstream::client::{Post, Received};
use relay_core::upstream::seal::SealingKey;
use serde_json::{json, Value};

use super::support::Sqlite;

/// Runs a future of the relay session to its end: the in-memory backends never wait.
pub fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    futures::executor::block_on(future)
}

/// R2 in memory; `failing` makes every call fail, as a store that is unavailable.
#[derive(Default)]
pub struct MemoryBlobs {
    pub objects: RefCell<BTreeMap<String, Vec<u8>>>,
    pub puts: Cell<usize>,
    pub failing: Cell<bool>,
    /// Objects whose `get` fails (an unreadable object; the rest of R2 answers).
    pub unreadable: RefCell<HashSet<String>>,
    /// When each object was last put, by the clock below (R2's `uploaded`).
    pub uploaded: RefCell<HashMap<String, u64>>,
    /// The layers each object names (R2 custom metadata `retention::LAYERS_META`).
    pub layers: RefCell<HashMap<String, String>>,
    /// The tenant that uploaded each deps layer (`retention::UPLOADER_META`).
    pub uploaders: RefCell<HashMap<String, String>>,
    /// R2's clock: what a put records as `uploaded` (tests move it beside the relay session's).
    pub clock_ms: Cell<u64>,
    /// Every delete, its keys.
    pub deletes: RefCell<Vec<Vec<String>>>,
    /// While set, a put (its object already there) and a delete (its objects still there)
    /// wait for it before they return: what R2's latency lets interleave.
    pub hold: RefCell<Option<Shared<oneshot::Receiver<()>>>>,
}

impl MemoryBlobs {
    async fn held(&self) {
        let hold = self.hold.borrow().clone();
        if let Some(hold) = hold {
            let _ = hold.await;
        }
    }

    fn check(&self) -> Result<(), StorageError> {
        if self.failing.get() {
            return Err(StorageError("R2 is unavailable (a test said so)".into()));
        }
        Ok(())
    }
}

impl Blobs for MemoryBlobs {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.check()?;
        if self.unreadable.borrow().contains(key) {
            return Err(StorageError(format!("{key} is unreadable (a test said so)")));
        }
        Ok(self.objects.borrow().get(key).cloned())
    }

    async fn head(&self, key: &str) -> Result<Option<Head>, StorageError> {
        self.check()?;
        let uploaded_ms = self.uploaded.borrow().get(key).copied().unwrap_or(0);
        Ok(self.objects.borrow().get(key).map(|bytes| Head { size: bytes.len() as u64, uploaded_ms }))
    }

    async fn put(&self, key: &str, bytes: Vec<u8>, sha256: Option<&str>, meta: Meta<'_>) -> Result<(), StorageError> {
        self.check()?;
        if sha256.is_some_and(|digest| digest != sha256_hex(&bytes)) {
            return Err(StorageError(format!("{key}: the body does not have the sha256 given")));
        }
        self.puts.set(self.puts.get() + 1);
        self.objects.borrow_mut().insert(key.to_owned(), bytes);
        self.uploaded.borrow_mut().insert(key.to_owned(), self.clock_ms.get());
        self.layers.borrow_mut().insert(key.to_owned(), meta.layers.join(","));
        match meta.uploader {
            Some(uploader) => self.uploaders.borrow_mut().insert(key.to_owned(), uploader.to_owned()),
            None => self.uploaders.borrow_mut().remove(key),
        };
        self.held().await;
        Ok(())
    }

    /// Pages of [`LIST_PAGE`] objects, as R2's of 1,000, so that a test crosses pages.
    async fn list(&self, prefix: &str, cursor: Option<String>) -> Result<Listing, StorageError> {
        self.check()?;
        let objects = self.objects.borrow();
        let after = cursor.unwrap_or_default();
        let mut keys = objects.keys().filter(|k| k.starts_with(prefix) && **k > after);
        let page: Vec<(String, u64)> = keys
            .by_ref()
            .take(LIST_PAGE)
            .map(|k| (k.clone(), self.uploaded.borrow().get(k).copied().unwrap_or(0)))
            .collect();
        let next = keys.next().and(page.last().map(|(k, _)| k.clone()));
        // As R2: an object put naming no layers has no such metadata.
        let named = self.layers.borrow();
        let layers = page
            .iter()
            .filter_map(|(k, _)| named.get(k).filter(|meta| !meta.is_empty()).map(|meta| (k.clone(), meta.clone())))
            .collect();
        let uploaders = self.uploaders.borrow();
        let uploaders = page.iter().filter_map(|(k, _)| uploaders.get(k).map(|u| (k.clone(), u.clone()))).collect();
        let sizes = page.iter().map(|(k, _)| (k.clone(), objects[k].len() as u64)).collect();
        Ok(Listing { objects: page, layers, uploaders, sizes, next })
    }

    async fn delete(&self, keys: Vec<String>) -> Result<(), StorageError> {
        self.check()?;
        self.held().await;
        self.deletes.borrow_mut().push(keys.clone());
        for key in keys {
            self.objects.borrow_mut().remove(&key);
        }
        Ok(())
    }
}

/// How many objects a page of [`MemoryBlobs::list`] holds.
pub const LIST_PAGE: usize = 3;

/// KV in memory.
#[derive(Default)]
pub struct MemoryRecords {
    pub values: RefCell<HashMap<String, Vec<u8>>>,
    pub failing: Cell<bool>,
}

impl Records for MemoryRecords {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        if self.failing.get() {
            return Err(StorageError("KV is unavailable (a test said so)".into()));
        }
        Ok(self.values.borrow().get(key).cloned())
    }
}

/// A response stream a test reads: the frames written to it, until the test closes it (as a
/// client that goes away).
#[derive(Clone, Default)]
pub struct Stream {
    pub frames: Rc<RefCell<Vec<String>>>,
    pub closed: Rc<Cell<bool>>,
}

impl Stream {
    /// The JSON of every `data:` line written, in order.
    pub fn messages(&self) -> Vec<serde_json::Value> {
        let frames = self.frames.borrow();
        let data = frames.iter().flat_map(|frame| frame.lines().filter_map(|line| line.strip_prefix("data: ")));
        data.filter_map(|data| serde_json::from_str(data).ok()).collect()
    }
}

impl Frames for Stream {
    fn send(&self, frame: Vec<u8>) -> bool {
        if self.closed.get() {
            return false;
        }
        self.frames.borrow_mut().push(String::from_utf8(frame).expect("frames are text"));
        true
    }
}

/// Tabs that record what they were sent. A tab in `gone` fails every write, as a closed tab's
/// stream does.
#[derive(Default)]
pub struct TestTabs {
    pub streams: RefCell<BTreeMap<String, Vec<String>>>,
    pub socket_copies: RefCell<Vec<(String, String)>>,
    pub gone: RefCell<Vec<String>>,
    pub dropped: RefCell<Vec<String>>,
    pub leases: RefCell<Vec<(String, u64)>>,
    pub readiness: RefCell<HashMap<String, Readiness>>,
}

impl TestTabs {
    pub fn attach(&self, tab: &str) {
        self.streams.borrow_mut().insert(tab.to_owned(), Vec::new());
    }

    /// The command names written to `tab` (`event:` lines), in order.
    pub fn commands(&self, tab: &str) -> Vec<String> {
        let streams = self.streams.borrow();
        let frames = streams.get(tab).map(Vec::as_slice).unwrap_or_default();
        frames.iter().filter_map(|f| f.lines().find_map(|l| l.strip_prefix("event: ")).map(str::to_owned)).collect()
    }
}

impl Tabs for TestTabs {
    fn ids(&self) -> Vec<String> {
        self.streams.borrow().keys().cloned().collect()
    }

    fn write(&self, tab: &str, frame: Vec<u8>) -> bool {
        let mut streams = self.streams.borrow_mut();
        if self.gone.borrow().iter().any(|gone| gone == tab) {
            streams.remove(tab);
            return false;
        }
        let Some(stream) = streams.get_mut(tab) else { return false };
        stream.push(String::from_utf8(frame).expect("frames are text"));
        true
    }

    fn copy_to_socket(&self, tab: &str, frame: &[u8]) {
        self.socket_copies.borrow_mut().push((tab.to_owned(), String::from_utf8_lossy(frame).into_owned()));
    }

    fn drop_tab(&self, tab: &str) {
        self.streams.borrow_mut().remove(tab);
        self.dropped.borrow_mut().push(tab.to_owned());
    }

    fn seen(&self) -> Vec<(String, u64)> {
        self.leases.borrow().clone()
    }

    fn readiness(&self, tab: &str) -> Option<Readiness> {
        self.readiness.borrow().get(tab).cloned()
    }
}

/// An upstream MCP server as a test scripts it: each POST to its URL (the tenant's headers,
/// the exchange's post), answered.
pub type ScriptedUpstream = Box<dyn Fn(&[(String, String)], &Post) -> Result<Received, String>>;

/// The platform: every backend in memory, over SQL `S`.
pub struct TestPlatform<S: Sql> {
    pub sql: S,
    pub blobs: MemoryBlobs,
    pub records: MemoryRecords,
    pub tabs: TestTabs,
    pub clock: Cell<u64>,
    random: Cell<u8>,
    pub log: RefCell<Vec<String>>,
    pub errors: RefCell<Vec<String>>,
    pub upstreams: RefCell<HashMap<String, ScriptedUpstream>>,
    /// `(url, body)` of every POST made to an upstream.
    pub posts: RefCell<Vec<(String, String)>>,
    /// The edge executor as the relay session drove it: `start <run>` and `cancel <run>`.
    pub edge: RefCell<Vec<String>>,
    /// `(tenant, run, edge_ms)` of every run whose end was told to the tenant's ledger.
    pub ended: RefCell<Vec<(String, String, u64)>>,
    /// The tenant's ledger (the core's rules, kept in memory), which stored bytes are charged to.
    pub ledger: MemoryLedger,
    /// How many times a put's bytes were charged to the ledger (`charge_stored`: one hop each).
    pub store_hops: Cell<usize>,
    /// While set, a charge of stored bytes waits for it before it is made: what the ledger's
    /// hop lets interleave.
    pub charge_hold: RefCell<Option<Shared<oneshot::Receiver<()>>>>,
}

impl<S: Sql> TestPlatform<S> {
    pub fn over(sql: S) -> Self {
        let start = 1_800_000_000_000;
        TestPlatform {
            sql,
            blobs: MemoryBlobs { clock_ms: Cell::new(start), ..MemoryBlobs::default() },
            records: MemoryRecords::default(),
            tabs: TestTabs::default(),
            clock: Cell::new(start),
            random: Cell::new(0),
            log: RefCell::default(),
            errors: RefCell::default(),
            upstreams: RefCell::default(),
            edge: RefCell::default(),
            ended: RefCell::default(),
            ledger: MemoryLedger::default(),
            store_hops: Cell::new(0),
            charge_hold: RefCell::default(),
            posts: RefCell::default(),
        }
    }

    /// The bytes the tenant's ledger counts stored (`storedBytes`' `used`).
    pub fn stored_used(&self) -> u64 {
        let request = LedgerRequest { quotas: Default::default(), charge: Charge::Usage { edge_cpu_ms_per_day: None } };
        match answer(&self.ledger, &request, self.clock.get()) {
            Ok(LedgerAnswer::Usage { usage }) => usage["storedBytes"]["used"].as_u64().expect("a count"),
            other => panic!("usage answered {other:?}"),
        }
    }

    /// Moves the clock, R2's with it.
    pub fn advance(&self, ms: u64) {
        self.clock.set(self.clock.get() + ms);
        self.blobs.clock_ms.set(self.clock.get());
    }
}

/// The relay session of most tests.
pub type Session = Rc<RelaySession<TestPlatform<Sqlite>>>;

/// A relay session over a migrated SQLite in memory, its instance opened.
pub fn session() -> Session {
    let session = Rc::new(RelaySession::new(TestPlatform::over(Sqlite::new())));
    session.open().expect("the migrations apply");
    session
}

/// [`session`] with the default queue settings and `tabs` attached (the last gets the next run).
pub fn with_tabs(tabs: &[&str]) -> Session {
    let session = session();
    session.configure(&QueueSettings::default(), None);
    for tab in tabs {
        session.platform.tabs.attach(tab);
        session.feed(Input::TabAttached { tab: (*tab).into() });
    }
    session
}

/// The `capsule` commands `tab` was sent, their data, in order.
pub fn capsule_commands(session: &Session, tab: &str) -> Vec<Value> {
    let streams = session.platform.tabs.streams.borrow();
    let frames = streams.get(tab).map(Vec::as_slice).unwrap_or_default();
    frames
        .iter()
        .filter(|f| f.starts_with("event: capsule\n"))
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).expect("JSON data"))
        .collect()
}

/// The last `capsule` command `tab` was sent, its data.
pub fn last_command(session: &Session, tab: &str) -> Value {
    capsule_commands(session, tab).pop().expect("a capsule command")
}

/// Who calls in every test: tenant `t_1` ("acme") with its defaults, relay session `default`.
pub fn caller() -> Caller {
    let tenant = Tenant { id: "t_1".into(), name: "acme".into(), defaults: TenantDefaults::default() };
    Caller { tenant, session: "default".into(), origin: "https://relay.example".into() }
}

/// The Worker's signing key in every test.
pub fn signer() -> Signer {
    Signer::from_seed(&[7; 32])
}

/// Run `run_id`'s job for the edge executor (the upstream servers' key from [`signer`]).
pub fn edge_job<P: Platform>(session: &RelaySession<P>, run_id: &str) -> Result<Value, Refusal> {
    run(session.edge_job(run_id, &SealingKey::of(&signer())))
}

/// A streamed `tools/call` of `tool` (JSON-RPC id 7, progress token `p1`).
pub fn tool_call(tool: Tool, arguments: Value, era: Era, mcp_session: Option<&str>) -> ToolCall {
    ToolCall {
        id: json!(7),
        tool,
        arguments,
        progress_token: Some(json!("p1")),
        stream: true,
        era,
        log_level: None,
        session_id: mcp_session.map(str::to_owned),
        task: false,
    }
}

/// The work of `tool_call`, made as the DO makes it.
pub fn work_of<P: Platform>(session: &RelaySession<P>, tool_call: &ToolCall) -> Work {
    Work::of(session, &caller(), tool_call, || Ok::<_, ()>(signer())).unwrap().expect("a valid call")
}

/// `tool_call` (`run_js` or `run_py`) as run `run`, its job made as the DO makes it.
pub fn call_of<P: Platform>(session: &RelaySession<P>, run: &str, tool_call: ToolCall) -> Call {
    let Work::Run(job) = work_of(session, &tool_call) else { panic!("a run's call") };
    Call { tool_call, caller: caller(), run: run.into(), job: Rc::new(job) }
}

/// Admits `call`, its answer streamed to a new stream, and prepares it; the stream.
pub fn start<S: Sql + 'static>(session: &Rc<RelaySession<TestPlatform<S>>>, call: &Call) -> Stream {
    let stream = Stream::default();
    session.admit_call(call, Box::new(Answer::streamed(call.clone(), stream.clone()))).expect("admitted");
    run(prepare(session, &call.caller, &call.run, &call.job));
    stream
}

impl<S: Sql> Platform for TestPlatform<S> {
    type Sql = S;
    type Blobs = MemoryBlobs;
    type Records = MemoryRecords;
    type Tabs = TestTabs;
    type Frames = Stream;

    fn sql(&self) -> &S {
        &self.sql
    }

    fn blobs(&self) -> &MemoryBlobs {
        &self.blobs
    }

    fn records(&self) -> &MemoryRecords {
        &self.records
    }

    fn tabs(&self) -> &TestTabs {
        &self.tabs
    }

    fn now_ms(&self) -> u64 {
        self.clock.get()
    }

    /// Distinct, predictable bytes: ids differ from one call to the next.
    fn random(&self, bytes: &mut [u8]) {
        for byte in bytes {
            self.random.set(self.random.get().wrapping_add(1));
            *byte = self.random.get();
        }
    }

    fn log(&self, line: &str) {
        self.log.borrow_mut().push(line.to_owned());
    }

    fn start_edge(&self, run: &str) {
        self.edge.borrow_mut().push(format!("start {run}"));
    }

    fn cancel_edge(&self, run: &str) {
        self.edge.borrow_mut().push(format!("cancel {run}"));
    }

    fn run_ended(&self, tenant: &str, run: &str, edge_ms: u64) {
        self.ended.borrow_mut().push((tenant.to_owned(), run.to_owned(), edge_ms));
    }

    fn log_error(&self, line: &str) {
        self.errors.borrow_mut().push(line.to_owned());
    }

    async fn charge_stored(&self, tenant: &Tenant, bytes: u64) -> Result<(), HttpError> {
        self.store_hops.set(self.store_hops.get() + 1);
        let hold = self.charge_hold.borrow().clone();
        if let Some(hold) = hold {
            let _ = hold.await;
        }
        let request = LedgerRequest { quotas: tenant.defaults.quotas, charge: Charge::Store { bytes } };
        match answer(&self.ledger, &request, self.clock.get()) {
            Ok(LedgerAnswer::Refused { refusal }) => Err(refusal.error()),
            Ok(_) => Ok(()),
            Err(e) => Err(HttpError::new(ErrorName::StorageUnavailable, e.to_string())),
        }
    }

    /// One tenant's ledger here, whichever `_tenant`.
    fn store_failed(&self, _tenant: &str, bytes: u64, charged_ms: u64) {
        let request = LedgerRequest { quotas: Default::default(), charge: Charge::StoreFailed { bytes, charged_ms } };
        answer(&self.ledger, &request, self.clock.get()).expect("the ledger in memory answers");
    }

    async fn post(
        &self,
        url: &str,
        headers: &[(String, String)],
        post: &Post,
        _timeout_ms: u64,
        _body_max: u64,
    ) -> Result<Received, String> {
        self.posts.borrow_mut().push((url.to_owned(), String::from_utf8_lossy(&post.body).into_owned()));
        match self.upstreams.borrow().get(url) {
            Some(upstream) => upstream(headers, post),
            None => Err(format!("no answer: {url} is not listening")),
        }
    }
}
