//! [`StatsSync`]: how the control side asks every datapath worker, between two of its
//! batches, to credit its megaflow counters to the rules (for `dump`, flow statistics and
//! idle timeouts) or to copy out its megaflows (for `megaflows`), and waits until they
//! have. A worker holds a [`StatsTicket`] and polls it with one atomic load per batch.

use flowpath_datapath::Datapath;
use flowpath_inspect::megaflows::CompiledFilter;
use flowpath_inspect::{RawMegaflow, WorkerMegaflows};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lets the control side ask every worker to credit its megaflow counters to the rules
/// now (for `dump` and idle timeouts), and wait until they have.
#[derive(Default)]
pub struct StatsSync {
    requested: AtomicU64,
    workers: Mutex<Vec<Arc<AtomicU64>>>,
    /// The number of the last megaflow dump asked for (0: none yet), its filter (while it
    /// runs), and the workers' answers.
    dump_gen: AtomicU64,
    dump_filter: Mutex<Option<Arc<CompiledFilter>>>,
    dumps: Mutex<Vec<MegaflowDump>>,
    /// One dump at a time.
    dumping: Mutex<()>,
}

/// One worker's answer to a dump request: its counts, and the megaflows the filter chose,
/// copied out but not yet formatted (the control thread formats them).
pub struct MegaflowDump {
    pub summary: WorkerMegaflows,
    pub raw: Vec<RawMegaflow>,
}

/// A worker's side of [`StatsSync`].
pub struct StatsTicket {
    sync: Arc<StatsSync>,
    done: Arc<AtomicU64>,
    seen: u64,
    dump_seen: u64,
}

impl StatsSync {
    pub fn register(self: &Arc<Self>) -> StatsTicket {
        let now = self.requested.load(Ordering::Acquire);
        let done = Arc::new(AtomicU64::new(now));
        self.workers.lock().unwrap().push(done.clone());
        StatsTicket {
            sync: self.clone(),
            done,
            seen: now,
            dump_seen: self.dump_gen.load(Ordering::Acquire),
        }
    }

    /// Ask every worker for its megaflows (as `filter` selects them) with a push, and wait
    /// (at most `timeout`) for their answers; `None` if some live worker did not answer.
    pub fn request_dump(
        &self,
        filter: Arc<CompiledFilter>,
        timeout: Duration,
    ) -> Option<Vec<MegaflowDump>> {
        let _one = self.dumping.lock().unwrap_or_else(|e| e.into_inner());
        self.dumps.lock().unwrap_or_else(|e| e.into_inner()).clear();
        *self.dump_filter.lock().unwrap_or_else(|e| e.into_inner()) = Some(filter);
        // Set before the push is asked for: a worker doing that push sees it.
        self.dump_gen.fetch_add(1, Ordering::AcqRel);
        let all = self.request_and_wait(timeout);
        *self.dump_filter.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let dumps = std::mem::take(&mut *self.dumps.lock().unwrap_or_else(|e| e.into_inner()));
        all.then_some(dumps)
    }

    /// Ask for a push and wait (at most `timeout`) until every live worker has done it.
    pub fn request_and_wait(&self, timeout: Duration) -> bool {
        let want = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + timeout;
        loop {
            let all = {
                let mut w = self.workers.lock().unwrap();
                // A worker that has gone away holds the only other reference no more.
                w.retain(|d| Arc::strong_count(d) > 1);
                w.iter().all(|d| d.load(Ordering::Acquire) >= want)
            };
            if all {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl StatsTicket {
    /// Has a push been asked for that this worker has not done yet? (One atomic load.)
    #[inline]
    pub fn pending(&self) -> bool {
        self.sync.requested.load(Ordering::Acquire) != self.seen
    }

    /// When a push is pending ([`StatsTicket::pending`]): the filter of a megaflow dump
    /// asked for with it, if one is.
    pub fn dump_wanted(&mut self) -> Option<Arc<CompiledFilter>> {
        let gen = self.sync.dump_gen.load(Ordering::Acquire);
        if gen == self.dump_seen {
            return None;
        }
        self.dump_seen = gen;
        self.sync.dump_filter.lock().ok()?.clone()
    }

    /// Hand this worker's dump over (before the push completes with [`StatsTicket::poll`]).
    pub fn deliver(&self, dump: MegaflowDump) {
        if let Ok(mut d) = self.sync.dumps.lock() {
            d.push(dump);
        }
    }

    /// Called by the worker between batches: one atomic load when nothing is asked.
    #[inline]
    pub fn poll(&mut self, dp: &mut Datapath) {
        let req = self.sync.requested.load(Ordering::Acquire);
        if req != self.seen {
            dp.push_rule_stats();
            self.seen = req;
            self.done.store(req, Ordering::Release);
        }
    }
}
