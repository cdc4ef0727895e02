//! What the resolver's readers and the underlay thread share: the published snapshot of
//! every remote's answer, the generation, the request queue with its wake-up eventfd, and
//! the counters.

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use rustc_hash::FxBuildHasher;

use crate::route::{Refusal, Route};

/// A tracked remote's request pacing and refusal count (the thread keeps it across
/// snapshots).
#[derive(Default)]
pub(crate) struct Slot {
    /// When the last resolution request was let through (ns since `Shared::epoch`, +1).
    pub(crate) last_request: AtomicU64,
    pub(crate) refused: AtomicU64,
}

/// One remote in a snapshot.
pub(crate) struct Entry {
    pub(crate) route: Result<Route, Refusal>,
    pub(crate) slot: Arc<Slot>,
}

/// Every tracked remote's answer, published whole.
#[derive(Default)]
pub(crate) struct Snapshot {
    pub(crate) map: HashMap<IpAddr, Entry, FxBuildHasher>,
    pub(crate) missing_ports: Vec<String>,
}

/// What a reader asks of the thread.
pub(crate) enum Request {
    Watch(IpAddr),
    Resolve(IpAddr),
}

/// Counters kept outside the snapshot.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) unknown: AtomicU64,
    pub(crate) neigh_requests: AtomicU64,
    pub(crate) neigh_request_errors: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) resyncs: AtomicU64,
    pub(crate) over_limit: AtomicU64,
}

/// Everything a reader and the thread share.
pub(crate) struct Shared {
    pub(crate) snapshot: ArcSwap<Snapshot>,
    pub(crate) generation: AtomicU64,
    pub(crate) tx: SyncSender<Request>,
    /// eventfd the thread polls besides the event socket.
    pub(crate) wake: OwnedFd,
    /// Set by a requester that wrote `wake`; cleared by the thread before it drains the
    /// queue, so there is one write per thread wake-up at most.
    pub(crate) wake_pending: AtomicBool,
    pub(crate) stop: AtomicBool,
    pub(crate) epoch: Instant,
    pub(crate) resolve_interval_ns: u64,
    pub(crate) last_unknown_request: AtomicU64,
    pub(crate) counters: Counters,
}

impl Shared {
    pub(crate) fn send(&self, r: Request) {
        match self.tx.try_send(r) {
            Ok(()) => {
                if !self.wake_pending.swap(true, Ordering::AcqRel) {
                    self.wake();
                }
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe {
            libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }
}
