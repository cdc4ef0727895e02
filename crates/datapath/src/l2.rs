//! OpenFlow `NORMAL`: a per-VLAN MAC-learning L2 switch, and how its decisions are kept
//! exact in the megaflow cache.
//!
//! [`MacLearningTable`] maps (VLAN, MAC) to the port the MAC was last seen on. One table is
//! shared (`Arc`) by every worker of a switch; it is bounded (the oldest entry is evicted
//! when full) and entries age out when not seen for `aging` (OVS's default, 300 s).
//!
//! **Where NORMAL is decided.** At translation time, on the slow path: the pipeline walk
//! leaves `Action::Normal` in a translation (with in_port, the VLAN's VID and present bit,
//! eth_src and eth_dst un-wildcarded), and [`resolve_normal`] replaces it by what the table
//! says for the key as the earlier actions left it: `Output(port)` for a learned unicast
//! destination (nothing when that port is the ingress port), else `Flood`. `FLOOD`/`ALL`
//! (and a flooding NORMAL) stay symbolic in the megaflow and are expanded at execution time
//! to the datapath's port list, so adding or removing a port never leaves a megaflow stale.
//!
//! **Learning** happens on that same slow path: a packet whose (in_port, eth_src) is new
//! misses (both are in the megaflow's mask) and its upcall learns. While traffic hits the
//! caches, the worker refreshes the entries of the megaflows that ran NORMAL and had
//! packets since its last sweep (OVS's revalidators do the same from datapath flow stats),
//! so a talking host does not age out.
//!
//! **No stale forwarding.** Every change that can alter an answer — a new MAC (it was
//! flooded to), a MAC moved, an entry aged out or evicted — bumps the table's generation
//! and is logged with its (VLAN, MAC). A worker holding NORMAL megaflows checks the
//! generation before every batch; when it moved, it re-translates only its megaflows that
//! ran NORMAL *and* whose destination is among the changed MACs (all of its NORMAL
//! megaflows if the change log overflowed), and removes those whose decision changed. The
//! rest of the cache — and every worker without NORMAL megaflows — is not touched.

use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_packet::key::{VLAN_PRESENT, VLAN_VID_MASK};
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_pipeline::replay_on_key;
use smallvec::SmallVec;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How a MAC learning table is sized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MacLearningConfig {
    /// Most (VLAN, MAC) entries; when full the least recently seen is evicted.
    pub max_entries: usize,
    /// An entry not seen for this long is removed.
    pub aging: Duration,
}

impl Default for MacLearningConfig {
    /// 8,192 entries, 300 s aging (Open vSwitch's defaults).
    fn default() -> Self {
        MacLearningConfig {
            max_entries: 8192,
            aging: Duration::from_secs(300),
        }
    }
}

/// (VLAN id, MAC): VLAN 0 is untagged (or priority-tagged) traffic.
pub type MacKey = (u16, [u8; 6]);

/// Changes kept in the log for targeted revalidation; a worker further behind
/// revalidates all of its NORMAL megaflows.
const CHANGE_LOG: usize = 256;

#[derive(Clone, Copy, Debug)]
struct MacEntry {
    port: u32,
    /// Last seen, in the table's clock (ms).
    seen: u64,
    /// The sequence number of its latest record in `Inner::order`.
    seq: u64,
}

/// An `Inner::order` record: (key, sequence number, seen).
type Record = (MacKey, u64, u64);

#[derive(Default)]
struct Inner {
    map: HashMap<MacKey, MacEntry>,
    /// Entries in order of `seen` (lazy: a record whose `seen` no longer matches the
    /// entry's is skipped), for aging and eviction of the oldest.
    order: VecDeque<Record>,
    next_seq: u64,
    /// (generation after the change, what changed), oldest first.
    changes: VecDeque<(u64, MacKey)>,
}

enum Clock {
    /// The TSC, in ms since the table was made.
    Tsc { t0: u64, per_ms: f64 },
    /// Moved only by [`MacLearningTable::advance`] (tests).
    Manual(AtomicU64),
}

/// What a lookup found, for `flowpath trace` and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormalDecision {
    /// The destination is learned on this port.
    Learned(u32),
    /// Learned on the ingress port: the packet is dropped (never sent back out).
    SamePort(u32),
    /// Unknown, broadcast or multicast destination: flooded within the VLAN.
    Flood,
}

/// The switch's MAC learning table (see the module documentation).
pub struct MacLearningTable {
    cfg: MacLearningConfig,
    inner: Mutex<Inner>,
    generation: AtomicU64,
    /// The table's clock (ms) at which the oldest entry ages out (u64::MAX: none).
    next_expiry: AtomicU64,
    clock: Clock,
}

impl std::fmt::Debug for MacLearningTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MacLearningTable")
            .field("cfg", &self.cfg)
            .field("entries", &self.len())
            .field("generation", &self.generation())
            .finish()
    }
}

fn is_multicast(mac: &[u8; 6]) -> bool {
    mac[0] & 1 != 0
}

fn mac_of(k: &FlowKey, f: Field) -> [u8; 6] {
    let v = k.get(f) as u64;
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// The VLAN NORMAL switches a key in: the outer VID, 0 when untagged.
pub fn vlan_of(k: &FlowKey) -> u16 {
    let tci = k.get(Field::VlanTci) as u16;
    if tci & VLAN_PRESENT != 0 {
        tci & VLAN_VID_MASK
    } else {
        0
    }
}

impl Inner {
    /// Record that `key`'s entry was (re)stamped `seen`; returns the record's number.
    fn record(&mut self, key: MacKey, seen: u64) -> u64 {
        self.next_seq += 1;
        self.order.push_back((key, self.next_seq, seen));
        self.next_seq
    }

    /// Whether `r` is its entry's latest record.
    fn live(&self, r: &Record) -> bool {
        self.map.get(&r.0).is_some_and(|e| e.seq == r.1)
    }
}

impl MacLearningTable {
    pub fn new(cfg: MacLearningConfig) -> MacLearningTable {
        let per_ms = tsc_hz() / 1000.0;
        Self::with_clock(
            cfg,
            Clock::Tsc {
                t0: rdtsc(),
                per_ms,
            },
        )
    }

    /// A table whose clock moves only by [`MacLearningTable::advance`] (for tests: aging
    /// without waiting).
    pub fn with_manual_clock(cfg: MacLearningConfig) -> MacLearningTable {
        Self::with_clock(cfg, Clock::Manual(AtomicU64::new(0)))
    }

    fn with_clock(cfg: MacLearningConfig, clock: Clock) -> MacLearningTable {
        MacLearningTable {
            cfg: MacLearningConfig {
                max_entries: cfg.max_entries.max(1),
                ..cfg
            },
            inner: Mutex::new(Inner::default()),
            generation: AtomicU64::new(0),
            next_expiry: AtomicU64::new(u64::MAX),
            clock,
        }
    }

    pub fn config(&self) -> &MacLearningConfig {
        &self.cfg
    }

    /// Move a manual clock forward (no-op on the real clock).
    pub fn advance(&self, by: Duration) {
        if let Clock::Manual(t) = &self.clock {
            t.fetch_add(by.as_millis() as u64, Ordering::AcqRel);
        }
    }

    /// The table's clock, in ms.
    pub fn now_ms(&self) -> u64 {
        match &self.clock {
            Clock::Tsc { t0, per_ms } => (rdtsc().saturating_sub(*t0) as f64 / per_ms) as u64,
            Clock::Manual(t) => t.load(Ordering::Acquire),
        }
    }

    fn aging_ms(&self) -> u64 {
        self.cfg.aging.as_millis() as u64
    }

    /// Bumped by every change that can alter a lookup's answer.
    #[inline(always)]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn len(&self) -> usize {
        self.inner.lock().map(|g| g.map.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every live entry: (VLAN, MAC, port, seconds since last seen).
    pub fn entries(&self) -> Vec<(u16, [u8; 6], u32, f64)> {
        let now = self.now_ms();
        let g = self.inner.lock().unwrap();
        let mut v: Vec<_> = g
            .map
            .iter()
            .map(|(&(vlan, mac), e)| (vlan, mac, e.port, now.saturating_sub(e.seen) as f64 / 1e3))
            .collect();
        v.sort_by_key(|e| (e.0, e.1));
        v
    }

    /// The port `mac` was learned on in `vlan` (an entry past its age counts as gone).
    pub fn lookup(&self, vlan: u16, mac: [u8; 6]) -> Option<u32> {
        let now = self.now_ms();
        let g = self.inner.lock().unwrap();
        g.map
            .get(&(vlan, mac))
            .filter(|e| now.saturating_sub(e.seen) < self.aging_ms())
            .map(|e| e.port)
    }

    /// NORMAL's answer for a packet from `in_port` to `dst` in `vlan`.
    pub fn decide(&self, in_port: u32, vlan: u16, dst: [u8; 6]) -> NormalDecision {
        if is_multicast(&dst) {
            return NormalDecision::Flood;
        }
        match self.lookup(vlan, dst) {
            Some(p) if p == in_port => NormalDecision::SamePort(p),
            Some(p) => NormalDecision::Learned(p),
            None => NormalDecision::Flood,
        }
    }

    /// `src` was seen on `port` in `vlan`: learn it, move it, or refresh it. A multicast
    /// source is never learned. Returns whether an answer changed (new or moved).
    pub fn learn(&self, vlan: u16, src: [u8; 6], port: u32) -> bool {
        if is_multicast(&src) {
            return false;
        }
        let now = self.now_ms();
        let mut g = self.inner.lock().unwrap();
        let key = (vlan, src);
        let changed = match g.map.get_mut(&key) {
            Some(e) if e.port == port => {
                // A refresh; an entry past its age (not yet expired) counted as gone, so
                // bringing it back is a change. One order record a second at most keeps
                // the log short.
                let was_gone = now.saturating_sub(e.seen) >= self.aging_ms();
                if was_gone || now.saturating_sub(e.seen) >= 1000 {
                    e.seen = now;
                    let seq = g.record(key, now);
                    g.map.get_mut(&key).unwrap().seq = seq;
                }
                was_gone
            }
            Some(e) => {
                e.port = port;
                e.seen = now;
                let seq = g.record(key, now);
                g.map.get_mut(&key).unwrap().seq = seq;
                true
            }
            None => {
                if g.map.len() >= self.cfg.max_entries {
                    self.evict_oldest(&mut g);
                }
                let seq = g.record(key, now);
                g.map.insert(
                    key,
                    MacEntry {
                        port,
                        seen: now,
                        seq,
                    },
                );
                true
            }
        };
        if changed {
            self.changed(&mut g, key);
        }
        self.compact(&mut g);
        self.note_expiry(&g);
        changed
    }

    /// Traffic from `src` still arrives on `port`: keep its entry from aging (only when the
    /// table has it on that port; a refresh never learns or moves).
    pub fn refresh(&self, vlan: u16, src: [u8; 6], port: u32) {
        let now = self.now_ms();
        let mut g = self.inner.lock().unwrap();
        let key = (vlan, src);
        let aging = self.aging_ms();
        match g.map.get_mut(&key) {
            Some(e) if e.port == port && now.saturating_sub(e.seen) < aging => {
                if now.saturating_sub(e.seen) >= 1000 {
                    e.seen = now;
                    let seq = g.record(key, now);
                    g.map.get_mut(&key).unwrap().seq = seq;
                }
            }
            _ => return,
        }
        self.compact(&mut g);
        self.note_expiry(&g);
    }

    /// Forget every entry on `port` (the port was removed).
    pub fn flush_port(&self, port: u32) {
        let mut g = self.inner.lock().unwrap();
        let gone: Vec<MacKey> = g
            .map
            .iter()
            .filter(|(_, e)| e.port == port)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            g.map.remove(&k);
            self.changed(&mut g, k);
        }
        self.note_expiry(&g);
    }

    /// Forget everything.
    pub fn flush(&self) {
        let mut g = self.inner.lock().unwrap();
        let gone: Vec<MacKey> = g.map.keys().copied().collect();
        g.map.clear();
        g.order.clear();
        for k in gone {
            self.changed(&mut g, k);
        }
        self.next_expiry.store(u64::MAX, Ordering::Release);
    }

    /// Whether an entry is due to age out (one load and a clock read).
    #[inline]
    pub fn expiry_due(&self) -> bool {
        self.expiry_due_at(self.now_ms())
    }

    /// [`MacLearningTable::expiry_due`] at the table time `now` (ms).
    #[inline]
    pub fn expiry_due_at(&self, now: u64) -> bool {
        now >= self.next_expiry.load(Ordering::Acquire)
    }

    /// Remove the entries past their age; returns how many.
    pub fn expire(&self) -> usize {
        let now = self.now_ms();
        let aging = self.aging_ms();
        let mut g = self.inner.lock().unwrap();
        let mut n = 0;
        while let Some(&r) = g.order.front() {
            let (key, _, seen) = r;
            let live = g.live(&r);
            if live && now.saturating_sub(seen) < aging {
                break;
            }
            g.order.pop_front();
            if live {
                g.map.remove(&key);
                self.changed(&mut g, key);
                n += 1;
            }
        }
        self.note_expiry(&g);
        n
    }

    /// The (VLAN, MAC)s changed after generation `since`; `None` when the log no longer
    /// reaches back that far (revalidate everything that depends on the table).
    pub fn changes_since(&self, since: u64) -> Option<SmallVec<[MacKey; 8]>> {
        let g = self.inner.lock().unwrap();
        let now = self.generation();
        if now == since {
            return Some(SmallVec::new());
        }
        match g.changes.front() {
            Some(&(first, _)) if first <= since + 1 => {}
            _ => return None,
        }
        let mut out: SmallVec<[MacKey; 8]> = SmallVec::new();
        for &(gen, k) in g.changes.iter() {
            if gen > since && !out.contains(&k) {
                out.push(k);
            }
        }
        Some(out)
    }

    fn evict_oldest(&self, g: &mut Inner) {
        while let Some(r) = g.order.pop_front() {
            if g.live(&r) {
                let key = r.0;
                g.map.remove(&key);
                self.changed(g, key);
                return;
            }
        }
        // The order log lost track (cannot happen, but never loop): drop any one entry.
        if let Some(&k) = g.map.keys().next() {
            g.map.remove(&k);
            self.changed(g, k);
        }
    }

    fn changed(&self, g: &mut Inner, key: MacKey) {
        let gen = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        if g.changes.len() == CHANGE_LOG {
            g.changes.pop_front();
        }
        g.changes.push_back((gen, key));
    }

    /// Rebuild the order log from the entries when stale records dominate it.
    fn compact(&self, g: &mut Inner) {
        if g.order.len() <= 4 * g.map.len() + 64 {
            return;
        }
        let mut v: Vec<Record> = g.map.iter().map(|(k, e)| (*k, e.seq, e.seen)).collect();
        v.sort_by_key(|&(_, seq, _)| seq);
        g.order = v.into();
    }

    fn note_expiry(&self, g: &Inner) {
        // The front record may be stale (then the due check runs early, harmlessly).
        let next = g
            .order
            .front()
            .map(|&(_, _, seen)| seen.saturating_add(self.aging_ms()))
            .unwrap_or(u64::MAX);
        self.next_expiry.store(next, Ordering::Release);
    }
}

/// What a megaflow's NORMAL depended on: (in_port, VLAN, eth_src, eth_dst) as NORMAL saw
/// them, one per NORMAL in its actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NormalDep {
    pub in_port: u32,
    pub vlan: u16,
    pub src: [u8; 6],
    pub dst: [u8; 6],
    pub decision: NormalDecision,
}

/// Replace every `Normal` in a translation's `actions` (translated from `key`) by the table's answer for the
/// key as the actions before it left it, learning the source first when `may_learn`
/// (upcalls do; revalidation and packet-outs do not). Returns what the NORMALs depended
/// on (empty: the translation had none).
pub fn resolve_normal(
    actions: &mut SmallVec<[Action; 4]>,
    key: &FlowKey,
    table: &MacLearningTable,
    may_learn: bool,
) -> SmallVec<[NormalDep; 1]> {
    let mut deps = SmallVec::new();
    if !actions.contains(&Action::Normal) {
        return deps;
    }
    let in_port = key.get(Field::InPort) as u32;
    let mut k = *key;
    let mut out: SmallVec<[Action; 4]> = SmallVec::with_capacity(actions.len());
    for a in actions.iter() {
        if *a != Action::Normal {
            replay_on_key(a, &mut k);
            out.push(*a);
            continue;
        }
        let (vlan, src, dst) = (
            vlan_of(&k),
            mac_of(&k, Field::EthSrc),
            mac_of(&k, Field::EthDst),
        );
        if may_learn {
            table.learn(vlan, src, in_port);
        }
        let decision = table.decide(in_port, vlan, dst);
        match decision {
            NormalDecision::Learned(p) => out.push(Action::Output(p)),
            NormalDecision::SamePort(_) => {}
            NormalDecision::Flood => out.push(Action::Flood),
        }
        deps.push(NormalDep {
            in_port,
            vlan,
            src,
            dst,
            decision,
        });
    }
    *actions = out;
    deps
}
