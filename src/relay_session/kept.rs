//! What a relay session keeps in memory that must outlive its instance: its Durable Object
//! sleeps between runs, and one that sleeps may be evicted, and a new instance starts with
//! nothing. Kept here (one JSON document in its SQLite) is what no one would tell it again:
//! the contexts book (which tab holds which interpreter), the edge runs a page attaching is
//! shown, the answers of legacy calls a client may resume, the MCP clients seen, the edge runs
//! started this minute (the tenant's `runsPerMinute` is counted per relay session), and the
//! tenant's queue settings (so a new instance can take its tabs back before any request).
//! What each tab says of itself is kept with its socket (`durable/src/relay_session/tabs.rs`).
//!
//! It is saved when the relay session has gone idle (the DO saves once no run has been in hand
//! for a second; a run in hand keeps it awake, so it sleeps only after), never in a run's path,
//! and only when it changed.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::desk::Settings;
use super::{Platform, RelaySession};
use crate::run::contexts::Contexts;
use crate::run::executor::EdgeMeter;

/// The relay session's memory, as saved.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Kept {
    pub settings: Option<Settings>,
    pub contexts: Contexts,
    /// `ran` frames, oldest first.
    pub edge_runs: VecDeque<String>,
    /// Run -> the answer of a legacy call, oldest first.
    pub answers: VecDeque<(String, Value)>,
    /// `{name, version, lastSeenMs}`, newest first.
    pub clients: VecDeque<Value>,
    /// Edge runs started this minute and ms spent today (`runsPerMinute` is counted here).
    pub edge_meter: EdgeMeter,
}

impl<P: Platform> RelaySession<P> {
    /// Saves the memory that must outlive this instance, if it changed since it was last saved
    /// or restored. A failed write is counted (`persisted`) and tried again at the next idle.
    pub fn keep_memory(&self) {
        let desk = &self.desk;
        let kept = Kept {
            settings: desk.settings.borrow().clone(),
            contexts: desk.contexts.borrow().clone(),
            edge_runs: desk.edge_runs.borrow().clone(),
            answers: desk.kept_answers.borrow().clone(),
            clients: self.caches.seen_clients(),
            edge_meter: self.edge_meter(),
        };
        let doc = serde_json::to_string(&kept).expect("the kept memory serializes");
        if *self.kept_doc.borrow() == doc {
            return;
        }
        if self.persisted("kept", self.store().save_kept(&doc)).is_some() {
            *self.kept_doc.borrow_mut() = doc;
        }
    }

    /// Takes back what an earlier instance kept (`open`): the run machine is configured again
    /// if it was, so the tabs can be taken back at once. A document that does not parse is
    /// left (the next save replaces it).
    pub(super) fn restore_memory(&self) {
        let Some(kept) = self.persisted("kept", self.store().kept::<Kept>()).flatten() else { return };
        *self.kept_doc.borrow_mut() = serde_json::to_string(&kept).expect("the kept memory serializes");
        let desk = &self.desk;
        if let Some((settings, edge_budget)) = &kept.settings {
            self.configure(settings, *edge_budget);
        }
        if let Some(machine) = desk.machine.borrow_mut().as_mut() {
            machine.restore_edge_meter(kept.edge_meter);
        }
        *desk.contexts.borrow_mut() = kept.contexts;
        *desk.edge_runs.borrow_mut() = kept.edge_runs;
        *desk.kept_answers.borrow_mut() = kept.answers;
        self.caches.set_clients(kept.clients);
    }

    /// What this relay session spent of its edge budget (none spent before it is configured).
    pub fn edge_meter(&self) -> EdgeMeter {
        self.desk.machine.borrow().as_ref().map(|m| m.edge_meter().clone()).unwrap_or_default()
    }

    /// Whether the run machine is configured (by a request, or by what an earlier instance
    /// kept): only then can it take tabs back.
    pub fn configured(&self) -> bool {
        self.desk.settings.borrow().is_some()
    }
}
