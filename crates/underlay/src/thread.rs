//! The underlay's thread: it keeps the kernel's tables from rtnetlink events, asks the
//! kernel for every tracked remote's route, publishes the answers as one snapshot when
//! one changed, asks the kernel to resolve missing next hops and re-confirms STALE ones
//! (see the crate documentation).

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use rustc_hash::FxBuildHasher;

use crate::config::{UnderlayConfig, UnderlayPort};
use crate::nl::{Netlink, RouteAnswer};
use crate::route::{Refusal, Route};
use crate::shared::{Entry, Request, Shared, Slot, Snapshot};
use crate::tables::{self, Tables};

/// What the thread keeps per remote.
struct Remote {
    answer: RouteAnswer,
    slot: Arc<Slot>,
}

/// The thread's side.
pub(crate) struct State {
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
    /// The thread's side of an underlay reading `ports` through `request` and `events`.
    pub(crate) fn new(
        request: Netlink,
        events: Netlink,
        ports: Vec<UnderlayPort>,
        shared: Arc<Shared>,
        rx: Receiver<Request>,
        config: UnderlayConfig,
    ) -> State {
        State {
            request,
            events,
            tables: Tables::default(),
            ports,
            remotes: HashMap::new(),
            shared,
            rx,
            config,
            published: HashMap::new(),
            last_stale_refresh: Instant::now(),
        }
    }

    /// Dump the tables, look `remotes`' routes up and publish them, ask the kernel to
    /// resolve the neighbours they lack, and start the thread.
    pub(crate) fn start(mut self, remotes: &[IpAddr]) -> io::Result<JoinHandle<()>> {
        self.dump()?;
        for &r in remotes {
            self.add_remote(r);
        }
        self.publish();
        for &r in remotes {
            self.resolve(r);
        }
        std::thread::Builder::new()
            .name("fp-underlay".into())
            .spawn(move || self.run())
    }

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
