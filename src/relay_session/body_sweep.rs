//! The retention sweep of a relay session's workspace bodies, run when the cron asks
//! (`SessionRequest::SweepBodies`): the relay session alone writes its R2 prefix
//! (`keys::workspace_body`) and holds the index that names its bodies, so it alone can tell
//! which of them nothing names (`retention::body_expired` decides).
//!
//! Two orders keep every file's body whatever interleaves: a body's row is deleted in the same
//! synchronous step as the decision (a commit after it finds no row and refuses, asking for the
//! body again), and a store of a body whose deletion is under way waits for the deletion to end
//! before uploading it again ([`BodyGuard::wait`]), so an upload never lands before the delete.
//! A body whose upload is under way (sent, its row not yet written) is kept.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

use futures::channel::oneshot;
use futures::future::{FutureExt, Shared};
use serde::Deserialize;

use super::store::Store;
use super::{Platform, RelaySession, Sql, StorageError};
use crate::keys;
use crate::retention::{body_expired, BodyFacts, Sweep, BODY_GRACE_MS};
use crate::stores::Blobs;

type Result<T> = std::result::Result<T, StorageError>;
/// Resolves when a sweep's deletion from R2 is over (or the sweep was dropped).
type DeletionEnd = Shared<oneshot::Receiver<()>>;

/// What the relay session's stores of bodies and its sweep tell each other.
#[derive(Default)]
pub struct BodyGuard {
    /// Bodies whose upload is under way, with how many stores of each are: a sweep keeps them.
    uploading: RefCell<HashMap<String, usize>>,
    /// The bodies a sweep is deleting from R2, and the end of that deletion.
    deleting: RefCell<Option<(HashSet<String>, DeletionEnd)>>,
    /// A sweep is under way (one at a time: the cron's next one finds the rest).
    sweeping: Cell<bool>,
}

impl BodyGuard {
    /// Waits, if a sweep is deleting `sha256`, until the deletion is over.
    pub async fn wait(&self, sha256: &str) {
        let deletion =
            self.deleting.borrow().as_ref().filter(|(bodies, _)| bodies.contains(sha256)).map(|(_, end)| end.clone());
        if let Some(end) = deletion {
            let _ = end.await; // a sweep dropped half way ends it too
        }
    }

    /// Notes the upload of `sha256` under way until the returned guard is dropped.
    pub fn uploading<'a>(&'a self, sha256: &str) -> impl Drop + 'a {
        *self.uploading.borrow_mut().entry(sha256.to_owned()).or_default() += 1;
        Uploading { guard: self, sha256: sha256.to_owned() }
    }
}

struct Uploading<'a> {
    guard: &'a BodyGuard,
    sha256: String,
}

impl Drop for Uploading<'_> {
    fn drop(&mut self) {
        let mut uploading = self.guard.uploading.borrow_mut();
        // Another store of the same body may still be under way: it stays marked.
        if let Some(stores) = uploading.get_mut(&self.sha256) {
            *stores -= 1;
            if *stores == 0 {
                uploading.remove(&self.sha256);
            }
        }
    }
}

#[derive(Deserialize)]
struct Row {
    sha256: String,
    stored_ms: i64,
}

impl<S: Sql> Store<'_, S> {
    /// Every body a file of the index names.
    fn named_bodies(&self) -> Result<HashSet<String>> {
        #[derive(Deserialize)]
        struct Named {
            sha256: String,
        }
        let query = "SELECT DISTINCT sha256 FROM workspace_files WHERE sha256 IS NOT NULL";
        Ok(self.sql.rows::<Named>(query, &[])?.into_iter().map(|n| n.sha256).collect())
    }

    fn body_row(&self, sha256: &str) -> Result<Option<Row>> {
        self.first("SELECT sha256, stored_ms FROM workspace_bodies WHERE sha256 = ?", &[sha256.into()])
    }

    fn forget_body(&self, sha256: &str) -> Result<()> {
        self.sql.exec("DELETE FROM workspace_bodies WHERE sha256 = ?", &[sha256.into()])
    }

    /// The rows no R2 listing judges: inline bodies, bodies under the tenant's old prefix, rows
    /// whose object is gone. The ones [`body_expired`] at `as_of_ms` are forgotten.
    fn forget_unlisted_bodies(
        &self,
        listed: &HashSet<String>,
        as_of_ms: u64,
        sweep: &mut Sweep,
        tenant: &str,
    ) -> Result<()> {
        let named = self.named_bodies()?;
        let cutoff = as_of_ms.saturating_sub(BODY_GRACE_MS) as i64;
        let query = "SELECT sha256, stored_ms FROM workspace_bodies WHERE stored_ms <= ?";
        let rows = self.sql.rows::<Row>(query, &[cutoff.into()])?;
        for row in rows.into_iter().filter(|row| !listed.contains(&row.sha256)) {
            let facts = BodyFacts {
                named: named.contains(&row.sha256),
                uploading: false,
                uploaded_ms: None,
                row_stored_ms: Some(row.stored_ms.max(0) as u64),
            };
            if sweep.count(body_expired(facts, as_of_ms).then_some(tenant)) {
                self.forget_body(&row.sha256)?;
            }
        }
        Ok(())
    }
}

impl<P: Platform> RelaySession<P> {
    /// Deletes the workspace bodies of this relay session (`relay_session`: its object name,
    /// `<tenant>/<session>`) that nothing names, as of `as_of_ms`: R2's under its prefix, a
    /// page at a time, then the rows no listing judged. What it looked at and deleted.
    pub async fn sweep_bodies(&self, relay_session: &str, as_of_ms: u64) -> Result<Sweep> {
        if self.bodies.sweeping.replace(true) {
            return Err(StorageError(
                "a sweep of this relay session's bodies is under way; the next one sweeps".into(),
            ));
        }
        let swept = self.sweep_pages(relay_session, as_of_ms).await;
        self.bodies.sweeping.set(false);
        swept
    }

    async fn sweep_pages(&self, relay_session: &str, as_of_ms: u64) -> Result<Sweep> {
        let tenant = relay_session.split('/').next().unwrap_or_default();
        let prefix = keys::workspace_body(relay_session, "");
        let (mut sweep, mut listed) = (Sweep::default(), HashSet::new());
        let mut cursor = None;
        loop {
            let page = self.platform.blobs().list(&prefix, cursor.take()).await?;
            listed.extend(page.objects.iter().filter_map(|(key, _)| key.strip_prefix(&prefix).map(str::to_owned)));
            let doomed = self.judge_page(&prefix, &page.objects, as_of_ms, &mut sweep, tenant)?;
            self.delete_bodies(relay_session, doomed).await?;
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        self.store().forget_unlisted_bodies(&listed, as_of_ms, &mut sweep, tenant)?;
        Ok(sweep)
    }

    /// One page judged, in one synchronous step: the rows of the bodies to delete are deleted
    /// here; their sha256s are returned for R2.
    fn judge_page(
        &self,
        prefix: &str,
        objects: &[(String, u64)],
        as_of_ms: u64,
        sweep: &mut Sweep,
        tenant: &str,
    ) -> Result<Vec<String>> {
        let store = self.store();
        let named = store.named_bodies()?;
        let mut doomed = Vec::new();
        for (key, uploaded_ms) in objects {
            let Some(sha256) = key.strip_prefix(prefix).filter(|sha| crate::workspace::check_sha256(sha).is_ok())
            else {
                sweep.count(None); // not a body's key: not ours to judge
                continue;
            };
            let facts = BodyFacts {
                named: named.contains(sha256),
                uploading: self.bodies.uploading.borrow().contains_key(sha256),
                uploaded_ms: Some(*uploaded_ms),
                row_stored_ms: store.body_row(sha256)?.map(|row| row.stored_ms.max(0) as u64),
            };
            if sweep.count(body_expired(facts, as_of_ms).then_some(tenant)) {
                store.forget_body(sha256)?;
                doomed.push(sha256.to_owned());
            }
        }
        Ok(doomed)
    }

    /// Deletes `doomed` from R2; a store of one of them meanwhile waits for the end. (Nothing
    /// is credited to the tenant's `storedBytes`: the measurement after the sweep sees them gone.)
    async fn delete_bodies(&self, relay_session: &str, doomed: Vec<String>) -> Result<()> {
        if doomed.is_empty() {
            return Ok(());
        }
        let (_ended, end) = oneshot::channel::<()>();
        let keys = doomed.iter().map(|sha| keys::workspace_body(relay_session, sha)).collect();
        *self.bodies.deleting.borrow_mut() = Some((doomed.into_iter().collect(), end.shared()));
        let deleted = self.platform.blobs().delete(keys).await;
        *self.bodies.deleting.borrow_mut() = None;
        deleted // `_ended` dropped here: the waiting stores go on
    }
}
