//! Underlay routing for tunnel ports from the kernel: route, next hop MAC and source per remote,
//! kept current from rtnetlink events, as OVS's ovs-router and tunnel neighbour cache do.
//!
//! [`NetlinkUnderlay`] implements the datapath's [`UnderlayResolver`]. For every remote it
//! knows (given at start with [`NetlinkUnderlay::new`] or [`NetlinkUnderlay::watch`], or
//! first asked for with [`UnderlayResolver::resolve`]) it asks the kernel which route it
//! would take (`RTM_GETROUTE` for that destination, so policy rules, longest prefix,
//! metrics and multipath are the kernel's choice), checks that the route leaves by one of
//! flowpath's underlay ports, takes the gateway (or the remote itself) as the next hop, its
//! MAC from the neighbour table (REACHABLE, STALE, DELAY, PROBE, PERMANENT, NOARP are
//! usable; INCOMPLETE and FAILED are not), the route's preferred source (else the
//! interface's address) and the interface's MAC. The answers are published as one
//! immutable snapshot behind an `ArcSwap`: [`UnderlayResolver::hop`] is a hash lookup in
//! it, no lock and no system call.
//!
//! A background thread joins the rtnetlink groups for links, neighbours, IPv4/IPv6
//! addresses and IPv4/IPv6 routes. A neighbour event recomputes from its tables; a route,
//! address or link event asks the kernel again for every remote's route. A new snapshot is
//! published, and [`UnderlayResolver::generation`] bumped, only when some answer changed.
//! Lost events (`ENOBUFS`) cause a full re-dump.
//!
//! **Resolution.** [`UnderlayResolver::resolve`] never blocks: it queues the remote to the
//! thread (rate-limited per remote, [`UnderlayConfig::resolve_interval`]), which sends
//! `RTM_NEWNEIGH` with `NTF_USE` for the route's next hop on its interface. The kernel
//! treats that as a packet waiting on the entry: it creates it INCOMPLETE and sends an ARP
//! request or neighbour solicitation (or re-probes a FAILED one); when the answer comes the
//! neighbour event fills the hop in. Nothing is sent to the remote itself. Every
//! [`UnderlayConfig::stale_refresh`] the thread does the same for next hops in use whose
//! entry is STALE, so the kernel confirms them by a unicast probe: flowpath's own packets
//! bypass the kernel and would never confirm them, and a MAC that moved would otherwise
//! never be noticed.
//!
//! The kernel must see the ARP replies / neighbour advertisements: on an AF_XDP port the
//! XDP program has to pass ARP and ICMPv6 ND to the kernel (on AF_PACKET and tap ports it
//! does anyway).

mod nl;
mod tables;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
pub use flowpath_packet::hop::{HopMiss, UnderlayHop, UnderlayResolver};
use rustc_hash::FxBuildHasher;

use nl::{Netlink, RouteAnswer};
use tables::Tables;

/// One of flowpath's underlay ports: its port number and the Linux interface it sends
/// on (the daemon's `[[port]]` entries of type afxdp, afpacket or tap).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnderlayPort {
    pub port: u32,
    pub ifname: String,
}

/// A usable route to a remote: the hop the datapath encapsulates with, and where it came
/// from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub hop: UnderlayHop,
    /// The output interface (one of the underlay ports).
    pub ifindex: u32,
    pub ifname: String,
    /// The gateway, or the remote itself when it is directly connected.
    pub next_hop: IpAddr,
    pub gateway: Option<IpAddr>,
}

/// Why a remote has no hop. [`Refusal::name`] is the counter name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The kernel has no route (`RTM_GETROUTE` failed with this errno).
    NoRoute { errno: i32 },
    /// The route is not a unicast one (local address, blackhole, unreachable, prohibit…).
    RouteType { kind: String },
    /// The route leaves by an interface that is not one of flowpath's underlay ports.
    NotFlowpathPort { ifindex: u32, ifname: String },
    /// The output interface is administratively down.
    LinkDown { ifname: String },
    /// The output interface has no Ethernet address.
    NoLinkAddress { ifname: String },
    /// No prefsrc on the route and no usable address of the remote's family on the
    /// interface.
    NoSourceAddress { ifname: String },
    /// The next hop's MAC is not known (no entry, INCOMPLETE or FAILED): resolve it.
    NeighbourUnresolved {
        next_hop: IpAddr,
        ifindex: u32,
        ifname: String,
        state: &'static str,
    },
}

impl Refusal {
    pub fn name(&self) -> &'static str {
        match self {
            Refusal::NoRoute { .. } => "no_route",
            Refusal::RouteType { .. } => "route_type",
            Refusal::NotFlowpathPort { .. } => "not_flowpath_port",
            Refusal::LinkDown { .. } => "link_down",
            Refusal::NoLinkAddress { .. } => "no_link_address",
            Refusal::NoSourceAddress { .. } => "no_source_address",
            Refusal::NeighbourUnresolved { .. } => "neighbour_unresolved",
        }
    }

    /// The datapath's drop reason for it.
    pub fn miss(&self) -> HopMiss {
        match self {
            Refusal::NeighbourUnresolved { .. } => HopMiss::NeighUnresolved,
            _ => HopMiss::NoRoute,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoRoute { errno } => {
                write!(f, "no route ({})", io::Error::from_raw_os_error(*errno))
            }
            Refusal::RouteType { kind } => write!(f, "route type {kind}"),
            Refusal::NotFlowpathPort { ifname, .. } => {
                write!(
                    f,
                    "no route via a flowpath port (the route leaves by {ifname})"
                )
            }
            Refusal::LinkDown { ifname } => write!(f, "{ifname} is down"),
            Refusal::NoLinkAddress { ifname } => write!(f, "{ifname} has no MAC address"),
            Refusal::NoSourceAddress { ifname } => {
                write!(f, "no source address on {ifname} for this family")
            }
            Refusal::NeighbourUnresolved {
                next_hop,
                ifname,
                state,
                ..
            } => write!(f, "neighbour {next_hop} on {ifname} unresolved ({state})"),
        }
    }
}

/// Tuning; the defaults suit a switch.
#[derive(Clone, Debug)]
pub struct UnderlayConfig {
    /// At most one resolution request per remote per this interval.
    pub resolve_interval: Duration,
    /// How often next hops in use whose neighbour entry is STALE are re-confirmed.
    pub stale_refresh: Duration,
    /// At most this many remotes are tracked (each costs an `RTM_GETROUTE` on every
    /// route change); others stay unknown (`UnderlayStats::remotes_over_limit`).
    pub max_remotes: usize,
}

impl Default for UnderlayConfig {
    fn default() -> Self {
        UnderlayConfig {
            resolve_interval: Duration::from_millis(500),
            stale_refresh: Duration::from_secs(15),
            max_remotes: 16_384,
        }
    }
}

/// One remote's status, for `flowpath stats` and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteStatus {
    pub remote: IpAddr,
    pub route: Result<Route, Refusal>,
    /// `hop()` calls that found it refused.
    pub refused: u64,
}

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

#[derive(Default)]
struct Slot {
    /// When the last resolution request was let through (ns since `Shared::epoch`, +1).
    last_request: AtomicU64,
    refused: AtomicU64,
}

struct Entry {
    route: Result<Route, Refusal>,
    slot: Arc<Slot>,
}

#[derive(Default)]
struct Snapshot {
    map: HashMap<IpAddr, Entry, FxBuildHasher>,
    missing_ports: Vec<String>,
}

enum Request {
    Watch(IpAddr),
    Resolve(IpAddr),
}

#[derive(Default)]
struct Counters {
    unknown: AtomicU64,
    neigh_requests: AtomicU64,
    neigh_request_errors: AtomicU64,
    dropped: AtomicU64,
    resyncs: AtomicU64,
    over_limit: AtomicU64,
}

struct Shared {
    snapshot: ArcSwap<Snapshot>,
    generation: AtomicU64,
    tx: SyncSender<Request>,
    /// eventfd the thread polls besides the event socket.
    wake: OwnedFd,
    /// Set by a requester that wrote `wake`; cleared by the thread before it drains the
    /// queue, so there is one write per thread wake-up at most.
    wake_pending: AtomicBool,
    stop: AtomicBool,
    epoch: Instant,
    resolve_interval_ns: u64,
    last_unknown_request: AtomicU64,
    counters: Counters,
}

impl Shared {
    fn send(&self, r: Request) {
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

    fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe {
            libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }
}

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
        let mut state = State {
            request,
            events,
            tables: Tables::default(),
            ports,
            remotes: HashMap::new(),
            shared: shared.clone(),
            rx,
            config,
            published: HashMap::new(),
            last_stale_refresh: Instant::now(),
        };
        state.dump()?;
        for &r in remotes {
            state.add_remote(r);
        }
        state.publish();
        for &r in remotes {
            state.resolve(r);
        }
        let thread = std::thread::Builder::new()
            .name("fp-underlay".into())
            .spawn(move || state.run())?;
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

/// Two resolvers in order: `first`'s hop if it has one, else `then`'s. For a daemon whose
/// tunnel ports mix static hops (`underlay_port` + `next_hop_mac`, a `StaticUnderlay`)
/// with ports routed by the kernel (a [`NetlinkUnderlay`]): the static hops win for their
/// remotes. Resolution requests and miss reasons go to `then`.
pub struct Layered {
    pub first: Arc<dyn UnderlayResolver>,
    pub then: Arc<dyn UnderlayResolver>,
}

impl UnderlayResolver for Layered {
    #[inline]
    fn hop(&self, remote: IpAddr) -> Option<UnderlayHop> {
        self.first.hop(remote).or_else(|| self.then.hop(remote))
    }

    fn resolve(&self, remote: IpAddr) {
        self.then.resolve(remote)
    }

    fn generation(&self) -> u64 {
        // Both only grow, so the sum bumps whenever either does.
        self.first.generation().wrapping_add(self.then.generation())
    }

    fn miss(&self, remote: IpAddr) -> HopMiss {
        self.then.miss(remote)
    }
}

/// What the thread keeps per remote.
struct Remote {
    answer: RouteAnswer,
    slot: Arc<Slot>,
}

/// The thread's side.
struct State {
    request: Netlink,
    events: Netlink,
    tables: Tables,
    ports: Vec<UnderlayPort>,
    remotes: HashMap<IpAddr, Remote>,
    shared: Arc<Shared>,
    rx: Receiver<Request>,
    config: UnderlayConfig,
    /// What the current snapshot holds (to publish only on change).
    published: HashMap<IpAddr, Result<Route, Refusal>>,
    last_stale_refresh: Instant,
}

impl State {
    fn dump(&mut self) -> io::Result<()> {
        let mut t = Tables::default();
        for m in self.request.dump_links()? {
            t.apply(&m);
        }
        for m in self.request.dump_addresses()? {
            t.apply(&m);
        }
        for m in self.request.dump_neighbours()? {
            t.apply(&m);
        }
        self.tables = t;
        Ok(())
    }

    fn lookup(&mut self, remote: IpAddr) -> RouteAnswer {
        match self.request.route_get(remote) {
            Ok(a) => a,
            Err(e) => RouteAnswer::Error(e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }

    fn add_remote(&mut self, remote: IpAddr) -> bool {
        if self.remotes.contains_key(&remote) {
            return false;
        }
        if self.remotes.len() >= self.config.max_remotes {
            self.shared
                .counters
                .over_limit
                .fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let answer = self.lookup(remote);
        self.remotes.insert(
            remote,
            Remote {
                answer,
                slot: Arc::default(),
            },
        );
        true
    }

    fn requery(&mut self) {
        let keys: Vec<IpAddr> = self.remotes.keys().copied().collect();
        for r in keys {
            let a = self.lookup(r);
            if let Some(e) = self.remotes.get_mut(&r) {
                e.answer = a;
            }
        }
    }

    fn port_map(&self) -> (HashMap<u32, u32>, Vec<String>) {
        let mut map = HashMap::new();
        let mut missing = Vec::new();
        for p in &self.ports {
            match self.tables.ifindex_of(&p.ifname) {
                Some(i) => {
                    map.insert(i, p.port);
                }
                None => missing.push(p.ifname.clone()),
            }
        }
        (map, missing)
    }

    /// Recompute every remote; publish a new snapshot and bump the generation if any
    /// answer changed.
    fn publish(&mut self) {
        let (ports, missing) = self.port_map();
        let mut fresh = HashMap::with_capacity(self.remotes.len());
        for (r, e) in &self.remotes {
            fresh.insert(*r, tables::compute(*r, &e.answer, &ports, &self.tables));
        }
        let old_missing = &self.shared.snapshot.load().missing_ports;
        if fresh == self.published && *old_missing == missing {
            return;
        }
        let mut map = HashMap::with_capacity_and_hasher(fresh.len(), FxBuildHasher);
        for (r, route) in &fresh {
            map.insert(
                *r,
                Entry {
                    route: route.clone(),
                    slot: self.remotes[r].slot.clone(),
                },
            );
        }
        let changed = fresh != self.published;
        self.published = fresh;
        self.shared.snapshot.store(Arc::new(Snapshot {
            map,
            missing_ports: missing,
        }));
        if changed {
            self.shared.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Ask the kernel to resolve `remote`'s next hop, if that is what it lacks.
    fn resolve(&mut self, remote: IpAddr) {
        if let Some(Err(Refusal::NeighbourUnresolved {
            next_hop, ifindex, ..
        })) = self.published.get(&remote)
        {
            let (ifindex, next_hop) = (*ifindex, *next_hop);
            self.neigh_use(ifindex, next_hop);
        }
    }

    fn neigh_use(&mut self, ifindex: u32, ip: IpAddr) {
        let c = &self.shared.counters;
        c.neigh_requests.fetch_add(1, Ordering::Relaxed);
        if self.request.neigh_use(ifindex, ip).is_err() {
            c.neigh_request_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Re-confirm STALE next hops in use (see the crate documentation).
    fn refresh_stale(&mut self) {
        let mut todo = HashSet::new();
        for route in self.published.values().flatten() {
            let key = (route.ifindex, route.next_hop);
            if let Some(n) = self.tables.neighs.get(&key) {
                if n.state == netlink_packet_route::neighbour::NeighbourState::Stale {
                    todo.insert(key);
                }
            }
        }
        for (i, ip) in todo {
            self.neigh_use(i, ip);
        }
    }

    fn run(mut self) {
        let mut msgs = Vec::new();
        let mut resolve = Vec::new();
        loop {
            let timeout = self
                .config
                .stale_refresh
                .saturating_sub(self.last_stale_refresh.elapsed())
                .as_millis()
                .min(60_000) as i32;
            let mut fds = [
                libc::pollfd {
                    fd: self.events.fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.shared.wake.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: `fds` is a live array of two pollfds.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout.max(1)) };
            if self.shared.stop.load(Ordering::Acquire) {
                return;
            }
            let mut counter = 0u64;
            // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
            unsafe {
                libc::read(
                    self.shared.wake.as_raw_fd(),
                    (&mut counter as *mut u64).cast(),
                    8,
                )
            };
            self.shared.wake_pending.store(false, Ordering::Release);

            let mut touched = tables::Touched::default();
            msgs.clear();
            match self.events.events(&mut msgs) {
                Ok(()) => {}
                Err(_) => {
                    // ENOBUFS (events lost) or a truncated datagram: start over.
                    self.shared.counters.resyncs.fetch_add(1, Ordering::Relaxed);
                    msgs.clear();
                    let _ = self.events.events(&mut msgs);
                    msgs.clear();
                    if self.dump().is_ok() {
                        touched.routes = true;
                    }
                }
            }
            for m in &msgs {
                touched |= self.tables.apply(m);
            }
            if touched.routes {
                self.requery();
            }
            resolve.clear();
            while let Ok(r) = self.rx.try_recv() {
                // A watched remote is resolved at once too, as the ones given at start.
                let (Request::Watch(ip) | Request::Resolve(ip)) = r;
                self.add_remote(ip);
                resolve.push(ip);
            }
            self.publish();
            resolve.sort();
            resolve.dedup();
            for &ip in &resolve {
                self.resolve(ip);
            }
            if self.last_stale_refresh.elapsed() >= self.config.stale_refresh {
                self.last_stale_refresh = Instant::now();
                self.refresh_stale();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_packet::hop::StaticUnderlay;

    #[test]
    fn layered_prefers_the_static_hop_and_sums_generations() {
        let hop = |port| UnderlayHop {
            port,
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: "10.0.0.1".parse().unwrap(),
        };
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap());
        let first = Arc::new(StaticUnderlay::with(a, hop(1)));
        let then = Arc::new(StaticUnderlay::new());
        then.insert(a, hop(2));
        then.insert(b, hop(3));
        let l = Layered {
            first: first.clone(),
            then: then.clone(),
        };
        assert_eq!(l.hop(a).unwrap().port, 1);
        assert_eq!(l.hop(b).unwrap().port, 3);
        let g = l.generation();
        then.remove(b);
        assert!(l.generation() > g);
        assert_eq!(l.hop(b), None);
        l.resolve(b);
        assert_eq!(then.asked(), vec![b]);
        assert!(first.asked().is_empty());
    }
}
