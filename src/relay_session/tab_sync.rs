//! A run's workspace carried in its command (issue 28's speed): the relay session remembers, per
//! tab, the workspace version it last gave that tab (in a sync's answer or in a command), and
//! the command of a run sent to a tab with nothing else in hand carries the changes since that
//! version, so the tab skips its own round trip (`GET /session/<id>/workspace`) before the
//! run. The tab applies them only when its copy is exactly at `since`; otherwise, and whenever
//! the command carries none, it asks as before. Nothing here is kept: a new instance gives no
//! delta until a tab's sync tells it the tab's version again.

use std::collections::HashMap;

use serde::Serialize;

use super::workspace::Changes;
use crate::workspace::FileEntry;

/// The most entries (files changed and paths removed together) a run's command carries. The
/// command goes twice (the tab's stream and its results socket) and is parsed before the run
/// starts, and a tab behind by more than a few changes fetches their bodies anyway, next to
/// which the round trip saved (~10 ms) is small: 64 entries (about 150 bytes each, at most
/// ~2.2 KiB: a path of 1,024 bytes whose JSON escapes double it; no entry holds a body) keep the
/// command within ~10 KiB, at most ~140 KiB, far below a socket message's cap (1 MiB), and cover
/// what runs back to back write between them.
pub const INLINE_DELTA_MAX_ENTRIES: usize = 64;

/// The workspace as a run's command carries it: the index's answer to a sync since `since`
/// (`GET /session/<id>/workspace?since=`), with `since` said so the tab can check it holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceDelta {
    pub since: u64,
    pub version: u64,
    pub root: String,
    /// Always false: a whole index never goes in a command (the tab's sync decides what a
    /// whole one drops).
    pub full: bool,
    pub files: Vec<FileEntry>,
    pub removed: Vec<String>,
    pub max_bytes: u64,
}

/// Per tab, the workspace version this relay session last gave it.
#[derive(Debug, Default)]
pub struct TabVersions(HashMap<String, u64>);

impl TabVersions {
    /// `tab` was given the workspace at `version` (a sync's answer, or a run's command).
    pub fn gave(&mut self, tab: &str, version: u64) {
        self.0.insert(tab.to_owned(), version);
    }

    /// The version a run's command to `tab` may carry the changes since: the one `tab` was
    /// last given, unless `tab` has another run in hand (`busy`: that run may still write, and
    /// the new one starts after it, on a workspace no one knows yet) or the run was sent
    /// before (`resent`: the tab may hold the first command and skip this one).
    pub fn since(&self, tab: &str, busy: bool, resent: bool) -> Option<u64> {
        (!busy && !resent).then(|| self.0.get(tab).copied()).flatten()
    }

    /// Forgets the tabs that are no longer attached.
    pub fn keep_only(&mut self, tabs: &[String]) {
        self.0.retain(|tab, _| tabs.contains(tab));
    }
}

/// The delta a run's command carries: the changes since `since`, unless they are the whole
/// index (`since` is older than the removals kept) or more than [`INLINE_DELTA_MAX_ENTRIES`].
pub fn inline_delta(since: u64, changes: Changes, max_bytes: u64) -> Option<WorkspaceDelta> {
    let entries = changes.files.len() + changes.removed.len();
    if changes.full || entries > INLINE_DELTA_MAX_ENTRIES {
        return None;
    }
    let Changes { version, root, files, removed, .. } = changes;
    Some(WorkspaceDelta { since, version, root, full: false, files, removed, max_bytes })
}
