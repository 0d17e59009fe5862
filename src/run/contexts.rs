//! A relay session's contexts: named interpreters that keep their state between the runs that
//! name them (`run_js` / `run_py` with `context`). The tab holds the interpreters; this book is
//! the relay session's account of them, and decides what an agent is told: which contexts are
//! live, when one is refused (the limit), when one ends (idle expiry, `reset`, a run that
//! ended with an error, its tab gone) and why, said in the result of the next run that names it.
//!
//! Rules, shared with the page (`public/lib/runner-host.js`): a context lives in one tab's
//! sandbox, one runner worker per (runtime, name); a run that ends with an error (a timeout,
//! a crash, a cancel, the output cap) kills its worker, and with it the context; any other end
//! (whatever the exit code) keeps it. A run's `exit` says how many runs its context had served
//! before it (`usage.contextRuns`): 0 means the tab started it afresh for this run; none, that
//! the run failed before its worker had it (its deps build, its capsule, the tab's workspace),
//! which leaves the context as it was.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// The longest context name.
pub const MAX_NAME_BYTES: usize = 64;
/// What [`check_name`] admits, quoted in refusals.
pub const NAME_RULE: &str = "1 to 64 characters of A-Z, a-z, 0-9, `_`, `-` and `.`, starting with a letter or a digit";
/// How many reasons for lost contexts are kept for the runs that will name them again.
const LOST_KEPT: usize = 64;
/// Bounds of the tenant's settings.
pub const MAX_CONTEXTS: u32 = 32;
pub const MIN_IDLE_MS: u64 = 1_000;
pub const MAX_IDLE_MS: u64 = 24 * 60 * 60 * 1000;

/// A tenant's contexts setting: how many each relay session may hold, and how long one may
/// sit unused before it ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContextSettings {
    pub max_per_session: u32,
    pub idle_ms: u64,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings { max_per_session: 4, idle_ms: 15 * 60 * 1000 }
    }
}

/// Whether `name` may name a context: see [`NAME_RULE`].
pub fn check_name(name: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let first_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if name.len() <= MAX_NAME_BYTES && first_ok && name.chars().all(ok_char) {
        return Ok(());
    }
    let shown: String = name.chars().take(80).collect();
    Err(format!("context: {shown:?} is not a context name: use {NAME_RULE}, e.g. \"analysis\""))
}

/// What a call asks of its context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub name: String,
    /// Start the context afresh (the old interpreter, if any, is thrown away first).
    pub reset: bool,
}

/// The `context` and `reset` arguments of a run, checked: `None` when the call names no context.
pub fn ask_of(arguments: &Map<String, Value>) -> Result<Option<Ask>, String> {
    let reset = match arguments.get("reset") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(reset)) => *reset,
        Some(other) => return Err(format!("reset: expected true or false, got {other}")),
    };
    let name = match arguments.get("context") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(other) => return Err(format!("context: expected a name (a string), got {other}")),
    };
    match name {
        Some(name) => check_name(&name).map(|()| Some(Ask { name, reset })),
        None if reset => Err("reset: only means something with `context` (the context to start afresh); a run without a context always starts fresh".into()),
        None => Ok(None),
    }
}

/// A context's key: its runtime id and its name (`a` in QuickJS and `a` in Pyodide are two).
pub type Key = (String, String);

/// A live context as the relay session knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Live {
    created_ms: u64,
    last_used_ms: u64,
    /// The tab its interpreter lives in, once a run of it reached one.
    tab: Option<String>,
    /// Runs of it that ended with the interpreter kept.
    runs: u64,
    /// Runs admitted that have not ended: an idle expiry waits for them.
    in_flight: u32,
    mem_peak_mb: u64,
}

impl Live {
    fn new(now_ms: u64, in_flight: u32) -> Self {
        Live { created_ms: now_ms, last_used_ms: now_ms, tab: None, runs: 0, in_flight, mem_peak_mb: 0 }
    }
}

/// What the admission of a run in a context decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub key: Key,
    /// The tab must start the context afresh (it is new, reset, or lost).
    pub fresh: bool,
    pub reset: bool,
    /// Why the context this run names was lost since its last run, if it was.
    pub lost: Option<String>,
    /// The tab the book had the context in when the run claimed it (none: it lived nowhere
    /// yet, or it is fresh).
    pub lived_in: Option<String>,
}

/// How a run in a context ended, as its tab and the run machine report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd<'a> {
    /// The tab it was sent to, if it reached one.
    pub tab: Option<&'a str>,
    /// The error it ended with (its name and message), if any: the interpreter is gone.
    pub error: Option<(&'a str, &'a str)>,
    /// How many runs the context had served before this one in the tab (0: started afresh);
    /// none if the run ended before the tab's interpreter took it up.
    pub runs_before: Option<u64>,
    /// The relay ended it (a deadline, a lost tab): the tab's exit never came.
    pub by_relay: bool,
    pub mem_peak_mb: u64,
}

/// What a run's result says of its context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub name: String,
    pub runtime: String,
    /// This run started the interpreter (it was new, reset or lost).
    pub fresh: bool,
    pub reset: bool,
    /// Why the context this run expected was lost.
    pub lost: Option<String>,
    /// The interpreter is kept for the next run.
    pub kept: bool,
}

impl Report {
    pub fn to_json(&self) -> Value {
        let mut value = json!({ "name": self.name, "runtime": self.runtime, "fresh": self.fresh, "kept": self.kept });
        if self.reset {
            value["reset"] = json!(true);
        }
        if let Some(lost) = &self.lost {
            value["lost"] = json!(lost);
        }
        value
    }

    /// A sentence for the result's text, when there is something to tell.
    pub fn note(&self) -> Option<String> {
        let name = &self.name;
        let lost =
            self.lost.as_ref().map(|why| format!("context {name:?} was lost ({why}); this run started it afresh"));
        let gone = (!self.kept)
            .then(|| format!("context {name:?} ended with this run's error; the next run in it starts afresh"));
        match (lost, gone) {
            (Some(lost), Some(gone)) => Some(format!("{lost}. {gone}")),
            (lost, gone) => lost.or(gone),
        }
    }
}

/// The book of a relay session's contexts. It outlives its relay session's instance (a DO
/// that sleeps between runs loses its memory): it is kept as JSON, each map as a list of
/// pairs (JSON objects take only string keys).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Contexts {
    #[serde(with = "pairs")]
    live: BTreeMap<Key, Live>,
    /// Why a context ended, for the next run that names it (at most [`LOST_KEPT`]).
    #[serde(with = "pairs")]
    lost: BTreeMap<Key, String>,
    /// The limit the latest claim was held to.
    limit: usize,
}

/// A map keyed by [`Key`] as a JSON list of `[key, value]` pairs.
mod pairs {
    use super::Key;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<V: Serialize, S: Serializer>(map: &BTreeMap<Key, V>, to: S) -> Result<S::Ok, S::Error> {
        to.collect_seq(map.iter())
    }

    pub fn deserialize<'de, V: Deserialize<'de>, D: Deserializer<'de>>(from: D) -> Result<BTreeMap<Key, V>, D::Error> {
        Ok(Vec::<(Key, V)>::deserialize(from)?.into_iter().collect())
    }
}

impl Contexts {
    /// Admits a run in context `ask` of `runtime` at `now_ms`, or refuses it: the relay session
    /// holds as many contexts as `settings` allows and this would be a new one.
    pub fn claim(
        &mut self,
        runtime: &str,
        ask: &Ask,
        settings: &ContextSettings,
        now_ms: u64,
    ) -> Result<Claim, String> {
        self.expire(settings.idle_ms, now_ms);
        self.limit = settings.max_per_session as usize;
        let key = (runtime.to_owned(), ask.name.clone());
        let was_live = self.live.contains_key(&key);
        if ask.reset || !was_live {
            let live = self.live.len() - usize::from(was_live);
            if live >= settings.max_per_session as usize {
                return Err(self.limit_message(runtime, ask, settings));
            }
        }
        // A reason is told only to a run that starts the context afresh because of it.
        let lost = self.lost.remove(&key).filter(|_| !ask.reset && !was_live);
        let lived_in = self.tab_of(&key).filter(|_| !ask.reset).map(str::to_owned);
        if ask.reset {
            self.live.remove(&key);
        }
        self.live.entry(key.clone()).or_insert_with(|| Live::new(now_ms, 0)).in_flight += 1;
        Ok(Claim { key, fresh: ask.reset || !was_live, reset: ask.reset, lost, lived_in })
    }

    fn limit_message(&self, runtime: &str, ask: &Ask, settings: &ContextSettings) -> String {
        let names: Vec<String> = self.live.keys().map(|(runtime, name)| format!("{name} ({runtime})")).collect();
        format!(
            "context {:?} of {runtime} would be this relay session's {}th, and it may hold {} (the tenant's contexts.maxPerSession): live now: {}. \
             Name one of those, start one afresh with `reset: true`, wait until one has been idle for {} s (contexts.idleMs), or run without `context`",
            ask.name,
            self.live.len() + 1,
            settings.max_per_session,
            names.join(", "),
            settings.idle_ms / 1000,
        )
    }

    /// Ends every context idle for `idle_ms` or more with no run in flight.
    pub fn expire(&mut self, idle_ms: u64, now_ms: u64) {
        let idle: Vec<Key> = self
            .live
            .iter()
            .filter(|(_, l)| l.in_flight == 0 && now_ms.saturating_sub(l.last_used_ms) >= idle_ms)
            .map(|(key, _)| key.clone())
            .collect();
        for key in idle {
            let live = self.live.remove(&key).expect("listed above");
            let why = format!(
                "it was idle for {} s, and contexts end after {} s unused (the tenant's contexts.idleMs)",
                now_ms.saturating_sub(live.last_used_ms) / 1000,
                idle_ms / 1000
            );
            self.note_lost(key, why);
        }
    }

    /// A run of `claim` ended at `now_ms` as `end` says: the book follows the tab, and the run's
    /// result gets the returned report.
    pub fn ended(&mut self, claim: &Claim, end: &RunEnd, now_ms: u64) -> Report {
        let (runtime, name) = claim.key.clone();
        let mut report =
            Report { name, runtime, fresh: claim.fresh, reset: claim.reset, lost: claim.lost.clone(), kept: true };
        let Some(tab) = end.tab else {
            // It never reached a tab (cancelled or timed out in line): the context is as it was.
            self.release(&claim.key);
            return report;
        };
        if end.error.is_some() && end.runs_before.is_none() && !end.by_relay {
            // It failed in the tab before the interpreter took it up (its deps build, its
            // capsule, the workspace): the interpreter is as it was, and the tab keeps it.
            self.release(&claim.key);
            return report;
        }
        // The tab started the interpreter for this run, though the book expected one.
        let started = end.runs_before.unwrap_or(0) == 0 && !end.by_relay;
        if started && !claim.fresh && report.lost.is_none() {
            // A context no run had ended in when this one claimed it (the run that named it
            // first failed before its interpreter had it) lived nowhere: starting it loses nothing.
            report.lost = self.lost.remove(&claim.key).or_else(|| {
                let old = self.tab_of(&claim.key).or(claim.lived_in.as_deref())?.to_owned();
                Some(if old != tab {
                    format!("it lived in tab {old}, and the calls now go to tab {tab}")
                } else {
                    "the tab no longer held it: the page was reloaded, or its sandbox was replaced".to_owned()
                })
            });
        }
        report.fresh = claim.fresh || started;
        if let Some((name, message)) = end.error {
            report.kept = false;
            self.live.remove(&claim.key);
            let message: String = message.chars().take(200).collect();
            self.note_lost(claim.key.clone(), format!("a run in it ended with {name}: {message}"));
            return report;
        }
        // The interpreter is in the tab now: whatever the book noted of a loss is past.
        self.lost.remove(&claim.key);
        if !self.live.contains_key(&claim.key) && self.live.len() >= self.limit {
            // Killed under this queued run, whose start took it up again, while others took
            // its place: it is not kept (the tab's interpreter is dropped when next named).
            report.kept = false;
            return report;
        }
        // A context killed meanwhile (by an earlier run of it) lives again: this run started it.
        let live = self.live.entry(claim.key.clone()).or_insert_with(|| Live::new(now_ms, 1));
        if started && !claim.fresh {
            live.created_ms = now_ms;
            live.runs = 0;
        }
        live.in_flight = live.in_flight.saturating_sub(1);
        live.last_used_ms = now_ms;
        // A run that went on in the interpreter the book has leaves it where the book has it:
        // that may be the page's new id (it attached anew), the run's end heard under the old.
        if started || live.tab.is_none() {
            live.tab = Some(tab.to_owned());
        }
        live.runs += 1;
        live.mem_peak_mb = end.mem_peak_mb;
        report
    }

    /// The page that was tab `from` is tab `to` now (it attached anew): its contexts move.
    pub fn moved(&mut self, from: &str, to: &str) {
        for live in self.live.values_mut().filter(|l| l.tab.as_deref() == Some(from)) {
            live.tab = Some(to.to_owned());
        }
    }

    /// Whether the book has context `key` in `tab`. A run of a context claimed not fresh that
    /// goes to a tab which does not hold it has the tab start it afresh: what that tab may hold
    /// under the name is an older interpreter, from before the context moved to another tab or
    /// was lost (its tab went, a run in it failed), and its state is not the context's.
    pub fn held_in(&self, key: &Key, tab: &str) -> bool {
        self.tab_of(key) == Some(tab)
    }

    /// The tab the book has context `key` in, if it lives in one.
    fn tab_of(&self, key: &Key) -> Option<&str> {
        self.live.get(key)?.tab.as_deref()
    }

    /// A run that never reached a tab: a context it alone made, which never ran, goes.
    fn release(&mut self, key: &Key) {
        let Some(live) = self.live.get_mut(key) else { return };
        live.in_flight = live.in_flight.saturating_sub(1);
        if live.in_flight == 0 && live.tab.is_none() {
            self.live.remove(key);
        }
    }

    /// The attached tabs are now `tabs`: a context whose tab is not among them is lost.
    pub fn tabs_now(&mut self, tabs: &[String]) {
        let gone: Vec<(Key, String)> = self
            .live
            .iter()
            .filter_map(|(key, l)| l.tab.as_ref().filter(|t| !tabs.contains(t)).map(|t| (key.clone(), t.clone())))
            .collect();
        for (key, tab) in gone {
            self.live.remove(&key);
            self.note_lost(
                key,
                format!("its tab {tab} went away (closed, reloaded or lost), and the interpreter with it"),
            );
        }
    }

    fn note_lost(&mut self, key: Key, why: String) {
        if self.lost.len() >= LOST_KEPT && !self.lost.contains_key(&key) {
            let oldest = self.lost.keys().next().cloned();
            oldest.map(|k| self.lost.remove(&k));
        }
        self.lost.insert(key, why);
    }

    /// How many contexts are live.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// `relay://contexts`: the live contexts at `now_ms` (after expiring the idle ones).
    pub fn view(&mut self, settings: &ContextSettings, now_ms: u64) -> Value {
        self.expire(settings.idle_ms, now_ms);
        let contexts: Vec<Value> = self
            .live
            .iter()
            .map(|((runtime, name), l)| {
                json!({
                    "name": name,
                    "runtime": runtime,
                    "tab": l.tab,
                    "ageMs": now_ms.saturating_sub(l.created_ms),
                    "idleMs": now_ms.saturating_sub(l.last_used_ms),
                    "runs": l.runs,
                    "running": l.in_flight,
                    "memPeakMb": l.mem_peak_mb,
                })
            })
            .collect();
        json!({
            "contexts": contexts,
            "maxPerSession": settings.max_per_session,
            "idleMs": settings.idle_ms,
        })
    }
}
