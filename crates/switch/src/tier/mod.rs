//! The XDP tier as the lowest cache of `flowpath switch` (`[datapath] xdp_tier = true`):
//! one `flow_tier` program and one set of maps ([`FlowTier`]) attached to every AF_XDP
//! port's interface, fed with the megaflows the workers' slow paths install, kept
//! consistent with the rules by versions.
//!
//! - **Attach.** [`XdpTier::setup`] loads the program once and attaches it to each afxdp
//!   port's interface (native, else generic; a stale `flow_tier` of a dead flowpath attached
//!   the legacy way is removed first). `fp_inport[ifindex] = {port number, xsk_base}`,
//!   `fp_ports[port number] = ifindex`; the AF_XDP sockets register in the tier's
//!   `xsks_map` at `xsk_base + queue` through [`XskRegistrar`].
//! - **Install, once proven.** A worker's [`TierAgent`] (a datapath [`Tier`]) reads, after
//!   each batch, the megaflow cache's events. A megaflow the slow path installed becomes a
//!   *candidate*; every [`REVIEW_EVERY`] batches the candidates are reviewed together, and
//!   those hit again since their install (a second packet: a flow, not a one-packet probe)
//!   are offered in one go; those that are not after [`MAX_REVIEWS`] reviews are dropped
//!   from the list (counted `not_proven`; they stay in the user-space caches) and wait,
//!   *dormant*, for a second packet: the counter sweep below looks at up to
//!   [`DORMANT_SWEEP`] of them each time and offers those hit again since (counted
//!   `offered_late`), so a flow whose packets come further apart than the reviews (a few
//!   ms: thousands of flows sharing a core, or a burst of new flows that overflows
//!   [`MAX_CANDIDATES`]) still gets into the kernel. A new-flow
//!   flood therefore costs the tier nothing: no map write, no syscall, nothing to evict in
//!   the kernel. An offered megaflow goes to `fp_flows` if its actions [`actions_from`]
//!   accepts and its mask has one of the 8 mask slots (masks are registered on first use
//!   and never retired), stamped with the rule version the worker classified it under; the
//!   kernel entry of every megaflow the cache removes is deleted. When `xdp_tier_max`
//!   entries are in use, new ones are refused (counted).
//! - **Locks.** The per-packet path takes none. Workers install, re-stamp and delete
//!   entries at the same time: the flow table locks only the bucket being written, and the
//!   [`FlowTier`] handle is shared for reading (an `RwLock` whose write side only mask
//!   registration, version changes and socket registration take). Each worker keeps its
//!   own pool of free kernel slots, refilled 64 at a time, and its own copy of the masks
//!   it has seen, so the shared registry is locked once per 64 installs or per new mask,
//!   not per miss. (A worker's pool can hold up to 63 slots another worker could have used.)
//! - **Consistency.** The switch calls [`RuleChangeHook::before_apply`] before every rule
//!   change (`fp_config.version = INVALID`: every kernel lookup misses, packets go to the
//!   workers, which answer with the rules they have) and
//!   [`RuleChangeHook::after_apply`] with the new version before it acknowledges
//!   (`fp_config.version = low 32 bits`). An entry stamped with an older version is a miss
//!   forever after. When a worker catches up with the rules, its megaflows are revalidated;
//!   the agent then re-stamps the kernel entries of those that survived with the new
//!   version, and deletes those of the removed ones.
//! - **Counters.** Every 100 ms (a slice of at most 512 entries, so a full table is swept in
//!   about 13 s without stalling the worker) and for all entries before `flows dump`, the
//!   agent reads the per-CPU `fp_stats` of its entries, in slot order a window of up to
//!   1,024 slots per system call (`BPF_MAP_LOOKUP_BATCH`), and adds the deltas to the
//!   megaflows' own counters, which the datapath then credits to the rules on their paths
//!   as usual.

mod agent;

pub use agent::TierAgent;

use crate::switch::RuleChangeHook;
use flowpath_packet::FlowKey;
use flowpath_ports::xdp::XskRegistrar;
use flowpath_xdptier::{
    Attached, FlowTier, Reason, XdpMode, INVALID_VERSION, MAX_DEVS, MAX_FLOWS, MAX_MASKS, MAX_XSKS,
};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The kernel version stamp of a rule-store version: its low 32 bits, never
/// [`INVALID_VERSION`] (that version is not offered: its entries would never hit).
pub fn stamp(version: u64) -> u32 {
    version as u32
}

/// One interface the tier is attached to.
#[derive(Clone, Debug)]
pub struct TierIface {
    pub port_name: String,
    pub port: u32,
    pub interface: String,
    pub ifindex: u32,
    pub xsk_base: u32,
    pub queues: u32,
    pub attached: Attached,
}

/// What [`XdpTier::setup`] needs of one afxdp port.
pub struct TierPort<'a> {
    pub name: &'a str,
    pub number: u32,
    pub interface: &'a str,
    pub queues: u32,
    pub mode: XdpMode,
}

/// Kernel slots a worker takes from the shared pool at a time (it then installs that
/// many flows without touching shared state but the flow table's bucket locks).
const SLOT_CHUNK: usize = 64;
/// Batches between two reviews of the candidates.
pub const REVIEW_EVERY: u32 = 32;
/// Reviews a candidate gets to be hit again before it is dropped from the list.
pub const MAX_REVIEWS: u8 = 4;
/// Most candidates a worker keeps; past it a review runs at once.
pub const MAX_CANDIDATES: usize = 4096;
/// Most dormant megaflows a worker remembers (the megaflow cache's default size); past
/// it the oldest is forgotten (it stays in the user-space caches).
pub const MAX_DORMANT: usize = 65536;
/// Dormant megaflows looked at per counter sweep (every 100 ms): a lookup in the
/// megaflow cache each, no syscall.
pub const DORMANT_SWEEP: usize = 4096;

/// Masks and free kernel slots: shared, but taken rarely (a mask the worker has not seen;
/// a chunk of slots every [`SLOT_CHUNK`] installs).
struct Registry {
    masks: Vec<(u32, FlowKey)>,
    free_slots: Vec<u32>,
}

/// The shared tier: the loaded program and maps, and what is attached where.
pub struct XdpTier {
    /// Read side: flow inserts and removes (the flow table serialises writers per bucket)
    /// and counter reads, by every worker at once. Write side: masks, the version, sockets.
    tier: RwLock<FlowTier>,
    registry: Mutex<Registry>,
    /// Kernel entries in use (all workers).
    in_use: AtomicUsize,
    ifaces: Vec<TierIface>,
    /// `in_tier[n]`: port number n is an afxdp port with a `fp_ports` entry.
    in_tier: Vec<bool>,
}

impl XdpTier {
    /// Load the program, attach it to every port's interface and fill `fp_inport` and
    /// `fp_ports`. Entries must carry `version` (the rule store's now) to hit.
    pub fn setup(ports: &[TierPort<'_>], max_entries: u32, version: u64) -> io::Result<XdpTier> {
        let mut tier = FlowTier::load()?;
        tier.set_version(stamp(version))?;
        let mut ifaces = Vec::new();
        let mut in_tier = vec![false; MAX_DEVS as usize];
        let mut base = 0u32;
        for p in ports {
            if base + p.queues > MAX_XSKS {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "port '{}': the XDP tier's xsks_map holds {MAX_XSKS} AF_XDP sockets \
                         for all ports together",
                        p.name
                    ),
                ));
            }
            flowpath_ports::xdp::clear_stale_xdp(p.interface)
                .map_err(|e| io::Error::new(e.kind(), format!("port '{}': {e}", p.name)))?;
            let attached = tier
                .attach(p.interface, p.mode)
                .map_err(|e| io::Error::new(e.kind(), format!("port '{}': {e}", p.name)))?;
            let ifindex = flowpath_xdptier::ifindex(p.interface)?;
            tier.set_in_port(ifindex, p.number, base)?;
            if p.number < MAX_DEVS {
                tier.set_output_dev(p.number, ifindex)?;
                in_tier[p.number as usize] = true;
            }
            ifaces.push(TierIface {
                port_name: p.name.to_string(),
                port: p.number,
                interface: p.interface.to_string(),
                ifindex,
                xsk_base: base,
                queues: p.queues,
                attached,
            });
            base += p.queues;
        }
        let max = max_entries.clamp(1, MAX_FLOWS);
        Ok(XdpTier {
            tier: RwLock::new(tier),
            registry: Mutex::new(Registry {
                masks: Vec::new(),
                free_slots: (0..max).rev().collect(),
            }),
            in_use: AtomicUsize::new(0),
            ifaces,
            in_tier,
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, FlowTier> {
        self.tier.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, FlowTier> {
        self.tier.write().unwrap_or_else(|p| p.into_inner())
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The slot of `mask` in `fp_masks`, registering it on first use; `None` when all
    /// [`MAX_MASKS`] are taken (masks are never retired).
    fn mask_id(&self, mask: &FlowKey) -> Option<u32> {
        let mut r = self.registry();
        if let Some((id, _)) = r.masks.iter().find(|(_, m)| m == mask) {
            return Some(*id);
        }
        if r.masks.len() >= MAX_MASKS {
            return None;
        }
        let id = r.masks.len() as u32;
        r.masks.push((id, *mask));
        if let Err(e) = self.write().set_masks(&r.masks) {
            eprintln!("flowpath: xdp tier: fp_masks: {e}");
            r.masks.pop();
            return None;
        }
        Some(id)
    }

    /// Up to `n` free kernel slots for a worker's own pool.
    fn take_slots(&self, n: usize) -> Vec<u32> {
        let mut r = self.registry();
        let at = r.free_slots.len().saturating_sub(n);
        r.free_slots.split_off(at)
    }

    /// Slots a worker no longer needs.
    fn return_slots(&self, slots: &mut Vec<u32>) {
        self.registry().free_slots.append(slots);
    }

    pub fn interfaces(&self) -> &[TierIface] {
        &self.ifaces
    }

    /// The devmap index of port `p` (its number), if it is in the tier.
    fn dev_of(&self, p: u32) -> Option<u32> {
        self.in_tier
            .get(p as usize)
            .copied()
            .unwrap_or(false)
            .then_some(p)
    }

    /// Verdict counts of the program (summed over CPUs).
    pub fn reason_counts(&self) -> io::Result<[u64; Reason::COUNT]> {
        self.read().reason_counts()
    }

    /// Masks registered, entries in use.
    pub fn usage(&self) -> (usize, usize) {
        let masks = self.registry().masks.len();
        (masks, self.in_use.load(Ordering::Relaxed))
    }

    /// Entries the program finds in their bucket's hot line, reading one cache line for
    /// a hit (a scan of the 16,384 lines: for statistics, not for a packet path).
    pub fn hot_lines(&self) -> usize {
        self.read().table().hot_len()
    }

    /// One line for `flowpath stats`.
    pub fn stats_line(&self) -> String {
        let (masks, entries) = self.usage();
        let hot = self.hot_lines();
        let mut s = format!("xdp tier: {entries} entries ({hot} in hot lines), {masks} masks;");
        if let Ok(c) = self.reason_counts() {
            for r in Reason::ALL {
                s.push_str(&format!(" {}={}", reason_name(r), c[r as usize]));
            }
        }
        for i in &self.ifaces {
            s.push_str(&format!(
                "; {} ({}): {}",
                i.interface,
                i.port_name,
                i.attached.as_str()
            ));
        }
        s
    }
}

/// The name `flowpath stats` uses for a verdict.
pub fn reason_name(r: Reason) -> &'static str {
    match r {
        Reason::HitOutput => "hit_output",
        Reason::HitDrop => "hit_drop",
        Reason::Miss => "miss",
        Reason::Stale => "stale",
        Reason::UpParse => "up_parse",
        Reason::UpUnsupported => "up_unsupported",
        Reason::UpNoInPort => "up_no_inport",
        Reason::UpTtl => "up_ttl",
        Reason::UpAction => "up_action",
    }
}

impl XskRegistrar for XdpTier {
    fn register(&self, ifindex: u32, queue: u32, fd: RawFd) -> io::Result<()> {
        let i = self
            .ifaces
            .iter()
            .find(|i| i.ifindex == ifindex)
            .ok_or_else(|| io::Error::other(format!("ifindex {ifindex} is not in the XDP tier")))?;
        if queue >= i.queues {
            return Err(io::Error::other(format!(
                "queue {queue} of {}: the XDP tier reserved {} queue(s)",
                i.interface, i.queues
            )));
        }
        self.write().register_xsk(i.xsk_base + queue, fd)
    }

    fn unregister(&self, ifindex: u32, queue: u32) {
        if let Some(i) = self.ifaces.iter().find(|i| i.ifindex == ifindex) {
            let _ = self.write().unregister_xsk(i.xsk_base + queue);
        }
    }

    fn describe(&self, ifindex: u32) -> String {
        match self.ifaces.iter().find(|i| i.ifindex == ifindex) {
            Some(i) => format!("{} (XDP tier)", i.attached.as_str()),
            None => "XDP tier".into(),
        }
    }
}

impl RuleChangeHook for XdpTier {
    fn before_apply(&self) {
        if let Err(e) = self.write().set_version(INVALID_VERSION) {
            eprintln!("flowpath: xdp tier: invalidating the kernel cache: {e}");
        }
    }

    fn after_apply(&self, version: u64) {
        if let Err(e) = self.write().set_version(stamp(version)) {
            eprintln!("flowpath: xdp tier: setting the kernel cache version: {e}");
        }
    }
}

/// Whether the XDP tier's program was compiled in (clang was present at build time).
pub fn tier_available() -> bool {
    flowpath_xdptier::bpf_available()
}
