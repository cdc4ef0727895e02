//! [`NetlinkUnderlay`]: the kernel's routing and neighbour tables as an
//! [`UnderlayResolver`], read from the published snapshot without a lock or a system call;
//! its thread ([`crate::thread`]) keeps the snapshot current.

use std::io;
use std::net::IpAddr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use arc_swap::ArcSwap;
use flowpath_packet::hop::{HopMiss, UnderlayHop, UnderlayResolver};

use crate::config::{UnderlayConfig, UnderlayPort};
use crate::nl::Netlink;
use crate::route::{Refusal, RemoteStatus};
use crate::shared::{Counters, Entry, Request, Shared, Snapshot};
use crate::thread::State;

/// Counters of the whole underlay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnderlayStats {
    pub generation: u64,
    pub remotes: usize,
    pub resolved: usize,
    /// `hop()` calls for a remote not tracked yet.
    pub unknown_remote: u64,
    /// `hop()` calls for a tracked remote without a hop.
    pub refused: u64,
    /// `NTF_USE` requests sent (resolve and STALE refresh) and the ones that failed.
    pub neigh_requests: u64,
    pub neigh_request_errors: u64,
    /// `resolve()`/`watch()` requests dropped because the thread's queue was full.
    pub requests_dropped: u64,
    /// Full re-dumps after lost events.
    pub resyncs: u64,
    /// Remotes asked for beyond [`UnderlayConfig::max_remotes`] (not tracked).
    pub remotes_over_limit: u64,
    /// Underlay ports whose interface does not exist (now).
    pub missing_ports: Vec<String>,
}

/// Requests for remotes not tracked yet: at most one per this gap (10,000 a second).
const UNKNOWN_REQUEST_GAP_NS: u64 = 100_000;

/// The kernel's routing and neighbour tables as an [`UnderlayResolver`]. See the crate
/// documentation.
pub struct NetlinkUnderlay {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl NetlinkUnderlay {
    /// Track routes to `remotes` (the tunnel ports' fixed `remote_ip`s; more can come
    /// later) over `ports`, with the default [`UnderlayConfig`].
    pub fn new(ports: Vec<UnderlayPort>, remotes: &[IpAddr]) -> io::Result<NetlinkUnderlay> {
        Self::with_config(ports, remotes, UnderlayConfig::default())
    }

    /// Dumps the tables and looks the remotes' routes up before it returns (so the first
    /// packets find their hops where the neighbours are known), asks the kernel to
    /// resolve the neighbours it lacks, and starts the thread. The sockets are opened in
    /// the calling thread's network namespace.
    pub fn with_config(
        ports: Vec<UnderlayPort>,
        remotes: &[IpAddr],
        config: UnderlayConfig,
    ) -> io::Result<NetlinkUnderlay> {
        // Join the groups before dumping, so no change falls between the two.
        let events = Netlink::event_socket()?;
        let request = Netlink::request_socket()?;
        // SAFETY: plain eventfd creation; the fd is owned below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `efd` is a fresh descriptor nobody else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        let (tx, rx) = sync_channel(1024);
        let shared = Arc::new(Shared {
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            generation: AtomicU64::new(0),
            tx,
            wake,
            wake_pending: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            epoch: Instant::now(),
            resolve_interval_ns: config.resolve_interval.as_nanos() as u64,
            last_unknown_request: AtomicU64::new(0),
            counters: Counters::default(),
        });
        let thread =
            State::new(request, events, ports, shared.clone(), rx, config).start(remotes)?;
        Ok(NetlinkUnderlay {
            shared,
            thread: Some(thread),
        })
    }

    /// Track `remote` too (a tunnel port added at run time). Non-blocking.
    pub fn watch(&self, remote: IpAddr) {
        self.shared.send(Request::Watch(remote));
    }

    /// `remote`'s route or refusal, if it is tracked.
    pub fn status(&self, remote: IpAddr) -> Option<RemoteStatus> {
        let snap = self.shared.snapshot.load();
        snap.map.get(&remote).map(|e| RemoteStatus {
            remote,
            route: e.route.clone(),
            refused: e.slot.refused.load(Ordering::Relaxed),
        })
    }

    /// Every tracked remote, sorted.
    pub fn remotes(&self) -> Vec<RemoteStatus> {
        let snap = self.shared.snapshot.load();
        let mut v: Vec<RemoteStatus> = snap
            .map
            .iter()
            .map(|(r, e)| RemoteStatus {
                remote: *r,
                route: e.route.clone(),
                refused: e.slot.refused.load(Ordering::Relaxed),
            })
            .collect();
        v.sort_by_key(|s| s.remote);
        v
    }

    pub fn stats(&self) -> UnderlayStats {
        let snap = self.shared.snapshot.load();
        let c = &self.shared.counters;
        UnderlayStats {
            generation: self.shared.generation.load(Ordering::Acquire),
            remotes: snap.map.len(),
            resolved: snap.map.values().filter(|e| e.route.is_ok()).count(),
            unknown_remote: c.unknown.load(Ordering::Relaxed),
            refused: snap
                .map
                .values()
                .map(|e| e.slot.refused.load(Ordering::Relaxed))
                .sum(),
            neigh_requests: c.neigh_requests.load(Ordering::Relaxed),
            neigh_request_errors: c.neigh_request_errors.load(Ordering::Relaxed),
            requests_dropped: c.dropped.load(Ordering::Relaxed),
            resyncs: c.resyncs.load(Ordering::Relaxed),
            remotes_over_limit: c.over_limit.load(Ordering::Relaxed),
            missing_ports: snap.missing_ports.clone(),
        }
    }
}

impl UnderlayResolver for NetlinkUnderlay {
    #[inline]
    fn hop(&self, remote: IpAddr) -> Option<UnderlayHop> {
        let snap = self.shared.snapshot.load();
        match snap.map.get(&remote) {
            Some(Entry { route: Ok(r), .. }) => Some(r.hop),
            Some(e) => {
                e.slot.refused.fetch_add(1, Ordering::Relaxed);
                None
            }
            None => {
                self.shared.counters.unknown.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn resolve(&self, remote: IpAddr) {
        let snap = self.shared.snapshot.load();
        if let Some(e) = snap.map.get(&remote) {
            // Only a missing neighbour is something to resolve; the rest changes by
            // itself with the routes (events).
            if !matches!(e.route, Err(Refusal::NeighbourUnresolved { .. })) {
                return;
            }
            let now = self.shared.epoch.elapsed().as_nanos() as u64 + 1;
            let last = e.slot.last_request.load(Ordering::Relaxed);
            if last != 0 && now.saturating_sub(last) < self.shared.resolve_interval_ns {
                return;
            }
            if e.slot
                .last_request
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                return;
            }
        } else {
            // Not tracked yet: the thread adds it. Until then (and for ever past
            // `max_remotes`) such requests are limited all together, to one per
            // UNKNOWN_REQUEST_GAP_NS.
            let s = &self.shared;
            let now = s.epoch.elapsed().as_nanos() as u64 + 1;
            let last = s.last_unknown_request.load(Ordering::Relaxed);
            if now.saturating_sub(last) < UNKNOWN_REQUEST_GAP_NS
                || s.last_unknown_request
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                return;
            }
        }
        self.shared.send(Request::Resolve(remote));
    }

    fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    fn miss(&self, remote: IpAddr) -> HopMiss {
        let snap = self.shared.snapshot.load();
        match snap.map.get(&remote) {
            Some(Entry { route: Err(r), .. }) => r.miss(),
            // Not looked up yet: resolving.
            _ => HopMiss::NeighUnresolved,
        }
    }
}

impl Drop for NetlinkUnderlay {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
