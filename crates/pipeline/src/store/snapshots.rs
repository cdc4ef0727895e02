//! The store itself: the current snapshot and its version, published whole for each
//! batch of changes under one writer lock; rule ids handed out under that lock.

use super::apply::apply_changes;
use super::change::{Applied, Change};
use super::work::Work;
use crate::pipeline::Pipeline;
use crate::rule::{RuleError, RuleId, RuleSpec};
use crate::table::Backend;
use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The owner of the rule set: applies changes and publishes versioned snapshots.
#[derive(Debug)]
pub struct RuleStore {
    pub(super) current: ArcSwap<Pipeline>,
    version: AtomicU64,
    next_id: AtomicU64,
    pub(super) writer: Mutex<()>,
}

impl RuleStore {
    pub fn new(backend: Backend) -> RuleStore {
        // A per-process random seed keeps crafted keys from aiming at one hash bucket.
        let seed = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x5eed);
            h.finish()
        };
        RuleStore {
            current: ArcSwap::from_pointee(Pipeline::empty(backend, seed)),
            version: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            writer: Mutex::new(()),
        }
    }

    /// The version of the newest snapshot: one atomic load, cheap enough to check per batch.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The newest snapshot.
    pub fn snapshot(&self) -> Arc<Pipeline> {
        self.current.load_full()
    }

    /// Apply `changes` atomically, in order: either all are valid and one new snapshot is
    /// published, or nothing changes. Each change costs O(1) per rule it adds or names
    /// (selectors scan their tables), and each touched table is rebuilt once, so a batch
    /// of 100,000 adds is linear.
    pub fn apply(&self, changes: Vec<Change>) -> Result<Applied, RuleError> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.current.load_full();
        let mut work = Work::new(&old);
        let mut done = Applied::default();
        let any = !changes.is_empty();
        // Ids are handed out under the writer lock; a refused batch gives its ids back.
        let first_id = self.next_id.load(Ordering::Relaxed);
        if let Err(e) = apply_changes(&mut work, &mut done, changes, || self.new_id()) {
            self.next_id.store(first_id, Ordering::Relaxed);
            return Err(e);
        }
        if !any {
            done.version = old.version;
            return Ok(done);
        }
        let groups = work.group_table();
        let new_tables = work.finish(&old);
        let version = old.version + 1;
        self.current.store(Arc::new(Pipeline {
            tables: new_tables,
            version,
            backend: old.backend,
            seed: old.seed,
            groups,
        }));
        self.version.store(version, Ordering::Release);
        done.version = version;
        // The old snapshot and the batch's temporaries go when the caller is done with
        // them; the housekeeping thread's next `memory::give_back` trims after them.
        crate::memory::note_churn(done.added.len() + done.modified + done.removed);
        Ok(done)
    }

    fn new_id(&self) -> RuleId {
        RuleId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Convenience: add rules in one atomic change.
    pub fn add(&self, specs: impl IntoIterator<Item = RuleSpec>) -> Result<Vec<RuleId>, RuleError> {
        Ok(self
            .apply(specs.into_iter().map(Change::Add).collect())?
            .added)
    }
}
