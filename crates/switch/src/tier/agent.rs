//! A worker's side of the XDP tier, [`TierAgent`]: it follows the worker's megaflow
//! events, offers the megaflows that proved themselves to the kernel, deletes and
//! re-stamps their entries as the cache changes, and credits the kernel's counts back to
//! the megaflows (the design: [`crate::tier`]).

use super::{
    stamp, XdpTier, DORMANT_SWEEP, MAX_CANDIDATES, MAX_DORMANT, MAX_REVIEWS, REVIEW_EVERY,
    SLOT_CHUNK,
};
use flowpath_datapath::{Datapath, MegaflowEvent, MegaflowId, Tier};
use flowpath_packet::FlowKey;
use flowpath_xdptier::{actions_from, FlowTier, FpActions, FpStat, INVALID_VERSION};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A kernel entry a worker installed for one of its megaflows.
struct Tracked {
    mask_id: u32,
    mask: FlowKey,
    key: FlowKey,
    act: FpActions,
    kslot: u32,
    last: FpStat,
}

/// A worker's side of the tier, plugged into the worker loop through the datapath's
/// [`Tier`] interface: it follows the megaflow events (offers what the slow path installs,
/// deletes what the cache removes, re-stamps after a revalidation) and credits the kernel's
/// counts to the megaflows by id. It never touches the cache's entries.
pub struct TierAgent {
    tier: Arc<XdpTier>,
    /// Megaflow → its kernel entry.
    tracked: HashMap<MegaflowId, Tracked>,
    events: Vec<MegaflowEvent>,
    installed: Vec<MegaflowId>,
    removed: Vec<MegaflowId>,
    /// This worker's own free kernel slots (taken from the tier in chunks).
    free: Vec<u32>,
    /// Masks this worker has seen registered (so it asks the tier only for new ones).
    masks: Vec<(u32, FlowKey)>,
    /// Where the next partial [`Tier::collect`] starts.
    cursor: usize,
    /// Installed megaflows waiting to prove themselves, with the reviews they had.
    candidates: Vec<(MegaflowId, u8)>,
    batches_since_review: u32,
    /// Candidates dropped without a second packet (a flood's one-packet flows).
    pub not_proven: u64,
    /// Those, with their megaflow, while it lasts: offered if hit again later.
    dormant: VecDeque<MegaflowId>,
    /// Dormant megaflows offered after all (hit again after their reviews).
    pub offered_late: u64,
    /// Packets and bytes the kernel forwarded (or dropped) for this worker's entries.
    pub hits: u64,
    pub bytes: u64,
    /// Megaflows not offered: full (`xdp_tier_max`), no mask slot, or a failed insert.
    pub refused: u64,
    /// Megaflows whose actions the program cannot run (or that output to a port outside
    /// the tier).
    pub unsupported: u64,
}

impl TierAgent {
    pub fn new(tier: Arc<XdpTier>) -> TierAgent {
        TierAgent {
            tier,
            tracked: HashMap::new(),
            events: Vec::with_capacity(256),
            installed: Vec::with_capacity(64),
            removed: Vec::with_capacity(64),
            free: Vec::with_capacity(SLOT_CHUNK),
            masks: Vec::new(),
            cursor: 0,
            candidates: Vec::with_capacity(256),
            batches_since_review: 0,
            not_proven: 0,
            dormant: VecDeque::new(),
            offered_late: 0,
            hits: 0,
            bytes: 0,
            refused: 0,
            unsupported: 0,
        }
    }

    /// Kernel entries this worker holds.
    pub fn entries(&self) -> usize {
        self.tracked.len()
    }

    /// Megaflows waiting to prove themselves.
    pub fn candidates(&self) -> usize {
        self.candidates.len()
    }

    /// Offer the candidates hit again since their install (in one go), keep the others
    /// for up to [`MAX_REVIEWS`] reviews.
    fn review(&mut self, dp: &Datapath) {
        self.batches_since_review = 0;
        let mut proven = std::mem::take(&mut self.installed);
        proven.clear();
        let mut dropped = 0u64;
        self.candidates.retain_mut(|(id, reviews)| {
            let Some(mf) = dp.megaflow(*id) else {
                return false; // gone from the cache
            };
            if mf.counts().0 >= 2 {
                proven.push(*id);
                return false;
            }
            *reviews += 1;
            if *reviews >= MAX_REVIEWS {
                dropped += 1;
                if self.dormant.len() == MAX_DORMANT {
                    self.dormant.pop_front();
                }
                self.dormant.push_back(*id);
                return false;
            }
            true
        });
        self.not_proven += dropped;
        self.offer(dp, &proven);
        proven.clear();
        self.installed = proven;
    }

    /// Offer the megaflows in `installed`. Shared state is touched only through the flow
    /// table's bucket locks, except for a mask this worker has not seen and a refill of
    /// its slot pool.
    fn offer(&mut self, dp: &Datapath, installed: &[MegaflowId]) {
        let version = stamp(dp.rule_version());
        if version == INVALID_VERSION || installed.is_empty() {
            return;
        }
        let tier = self.tier.clone();
        for &id in installed {
            let Some(mf) = dp.megaflow(id) else {
                continue; // already gone again (evicted within the batch)
            };
            let (mask, key) = (*mf.mask(), *mf.key());
            // Tunnel traffic (decapsulated, or output to a tunnel port) stays in user space.
            let tunnels = dp.config().tunnels.as_deref();
            if !flowpath_xdptier::offerable(&key, mf.actions(), |p| {
                tunnels.is_some_and(|t| t.port(p).is_some())
            }) {
                self.unsupported += 1;
                continue;
            }
            let Some(act) = actions_from(mf.actions(), |p| tier.dev_of(p)) else {
                self.unsupported += 1;
                continue;
            };
            // Tunnel metadata (VXLAN) never reaches the kernel tier: no packet could hit.
            if flowpath_xdptier::flow_key(0, &mask, &key).is_none() {
                self.unsupported += 1;
                continue;
            }
            let (Some(mask_id), Some(kslot)) = (self.mask_id(&mask), self.slot()) else {
                self.refused += 1;
                continue;
            };
            let t = tier.read();
            // The slot's counters may hold a former owner's counts: start from them.
            let last = t.stats(kslot).unwrap_or_default();
            if let Err(err) = t.insert_versioned(mask_id, &mask, &key, act, kslot, version) {
                eprintln!("flowpath: xdp tier: {err}");
                self.free.push(kslot);
                self.refused += 1;
                continue;
            }
            drop(t);
            tier.in_use.fetch_add(1, Ordering::Relaxed);
            let tracked = Tracked {
                mask_id,
                mask,
                key,
                act,
                kslot,
                last,
            };
            self.tracked.insert(id, tracked);
        }
    }

    /// Look at up to `max` dormant megaflows: offer those hit again since they were
    /// dropped (a second packet), forget those the cache removed, keep the others.
    fn wake_dormant(&mut self, dp: &Datapath, max: usize) {
        let mut woken = std::mem::take(&mut self.installed);
        woken.clear();
        for _ in 0..max.min(self.dormant.len()) {
            let Some(id) = self.dormant.pop_front() else {
                break;
            };
            match dp.megaflow(id) {
                None => {}
                Some(mf) if mf.counts().0 >= 2 => woken.push(id),
                Some(_) => self.dormant.push_back(id),
            }
        }
        self.offered_late += woken.len() as u64;
        self.offer(dp, &woken);
        woken.clear();
        self.installed = woken;
    }

    /// The id of `mask`: from this worker's cache, else registered with the tier.
    fn mask_id(&mut self, mask: &FlowKey) -> Option<u32> {
        if let Some((id, _)) = self.masks.iter().find(|(_, m)| m == mask) {
            return Some(*id);
        }
        let id = self.tier.mask_id(mask)?;
        self.masks.push((id, *mask));
        Some(id)
    }

    /// A free kernel slot from this worker's pool (refilled from the tier in chunks).
    fn slot(&mut self) -> Option<u32> {
        if self.free.is_empty() {
            self.free = self.tier.take_slots(SLOT_CHUNK);
        }
        self.free.pop()
    }

    /// Delete the kernel entries of megaflows the cache removed (one read of the shared
    /// handle for all of them).
    fn forget(&mut self, removed: &[MegaflowId]) {
        let tier = self.tier.clone();
        let t = tier.read();
        for id in removed {
            if let Some(e) = self.tracked.remove(id) {
                let _ = t.remove(e.mask_id, &e.mask, &e.key);
                tier.in_use.fetch_sub(1, Ordering::Relaxed);
                self.free.push(e.kslot);
            }
        }
    }

    /// The rules changed and the megaflows were revalidated: the survivors' kernel entries
    /// get the new version (their decisions are unchanged), the others are deleted.
    fn resync(&mut self, dp: &Datapath) {
        let version = stamp(dp.rule_version());
        let tier = self.tier.clone();
        let mut dead = Vec::new();
        {
            let t = tier.read();
            for (&id, e) in &self.tracked {
                let alive = dp.megaflow(id).is_some() && version != INVALID_VERSION;
                if !alive
                    || t.insert_versioned(e.mask_id, &e.mask, &e.key, e.act, e.kslot, version)
                        .is_err()
                {
                    dead.push(id);
                }
            }
        }
        self.forget(&dead);
    }

    /// Credit the kernel's counts since the last read for at most `max` entries from the
    /// `skip`-th on; entries of megaflows that are gone are deleted. Returns entries seen.
    fn collect_range(&mut self, dp: &mut Datapath, skip: usize, max: usize) -> usize {
        if self.tracked.is_empty() {
            return 0;
        }
        // The slice in slot order, so that its counters come in a few batch reads.
        let mut slice: Vec<(u32, MegaflowId)> = self
            .tracked
            .iter()
            .skip(skip)
            .take(max)
            .map(|(&id, t)| (t.kslot, id))
            .collect();
        slice.sort_unstable_by_key(|&(k, _)| k);
        let last = slice.last().map_or(0, |&(k, _)| k);
        let tier = self.tier.clone();
        let g = tier.read();
        let mut window = CounterWindow::default();
        let mut dead = Vec::new();
        for &(kslot, id) in &slice {
            let Some(t) = self.tracked.get_mut(&id) else {
                continue;
            };
            let now = window.get(&g, kslot, last).unwrap_or(t.last);
            let (dpk, dby) = (
                now.packets.saturating_sub(t.last.packets),
                now.bytes.saturating_sub(t.last.bytes),
            );
            t.last = now;
            if dp.credit_megaflow(id, dpk, dby) {
                self.hits += dpk;
                self.bytes += dby;
            } else {
                dead.push(id);
            }
        }
        drop(g);
        self.forget(&dead);
        slice.len()
    }
}

/// Kernel slot counters read a window of slots at a time: one system call for up to
/// [`CounterWindow::MAX`] slots instead of one per slot (one per slot, a full table's
/// sweep would be 65,536 calls).
#[derive(Default)]
struct CounterWindow {
    first: u32,
    stats: Vec<FpStat>,
    /// A batch read failed (a kernel before 5.6): per-slot reads from then on.
    per_slot: bool,
}

impl CounterWindow {
    const MAX: u32 = 1024;

    /// `slot`'s counters. A slot outside the window reads the next window, from `slot` up
    /// to `last` (the highest slot still wanted, at most `MAX` of them); once a batch read
    /// has failed, the slot alone. None when the kernel does not say.
    fn get(&mut self, tier: &FlowTier, slot: u32, last: u32) -> Option<FpStat> {
        let end = self.first + self.stats.len() as u32;
        if !(self.first..end).contains(&slot) {
            if self.per_slot {
                return tier.stats(slot).ok();
            }
            self.first = slot;
            let n = (last.saturating_sub(slot) + 1).min(Self::MAX);
            self.stats.resize(n as usize, FpStat::default());
            if tier.stats_window(slot, &mut self.stats).is_err() {
                self.stats.clear();
                self.per_slot = true;
                return tier.stats(slot).ok();
            }
        }
        Some(self.stats[(slot - self.first) as usize])
    }
}

impl Tier for TierAgent {
    fn holds(&self, id: MegaflowId) -> bool {
        self.tracked.contains_key(&id)
    }

    /// Follow the megaflow events in order; two loads and a branch when there are none.
    #[inline]
    fn after_batch(&mut self, dp: &mut Datapath) {
        if !self.candidates.is_empty() {
            self.batches_since_review += 1;
            if self.batches_since_review >= REVIEW_EVERY || self.candidates.len() >= MAX_CANDIDATES
            {
                self.review(dp);
            }
        }
        if !dp.has_megaflow_events() {
            return;
        }
        let mut events = std::mem::take(&mut self.events);
        dp.take_megaflow_events(&mut events);
        // Scratch lists kept across batches (no allocation per batch).
        let mut installed = std::mem::take(&mut self.installed);
        let mut removed = std::mem::take(&mut self.removed);
        for ev in &events {
            match *ev {
                MegaflowEvent::Installed(id) => installed.push(id),
                MegaflowEvent::Removed(id) => {
                    if !installed.is_empty() {
                        installed.retain(|&i| i != id);
                    }
                    // Under a flood nearly every removal is of a megaflow never offered.
                    if !self.tracked.is_empty() {
                        removed.push(id);
                    }
                }
                MegaflowEvent::Flushed => {
                    installed.clear();
                    self.candidates.clear();
                    self.dormant.clear();
                    removed.extend(self.tracked.keys().copied());
                }
                MegaflowEvent::Revalidated => {
                    self.forget(&std::mem::take(&mut removed));
                    self.resync(dp);
                }
            }
        }
        self.forget(&removed);
        // New megaflows wait to prove themselves (see the module documentation); one that
        // is gone again by its review is simply not found then.
        self.candidates.extend(installed.iter().map(|&id| (id, 0)));
        events.clear();
        installed.clear();
        removed.clear();
        self.events = events;
        self.installed = installed;
        self.removed = removed;
    }

    fn collect(&mut self, dp: &mut Datapath, budget: usize) {
        if budget == usize::MAX {
            self.collect_range(dp, 0, usize::MAX);
            return;
        }
        let seen = self.collect_range(dp, self.cursor, budget);
        self.cursor = if seen < budget { 0 } else { self.cursor + seen };
        self.wake_dormant(dp, DORMANT_SWEEP);
    }

    /// Delete every kernel entry of this worker (it is stopping).
    fn clear(&mut self, _dp: &mut Datapath) {
        self.candidates.clear();
        let all: Vec<MegaflowId> = self.tracked.keys().copied().collect();
        self.forget(&all);
        let tier = self.tier.clone();
        tier.return_slots(&mut self.free);
    }

    fn waiting(&self) -> (u64, u64, u64) {
        (
            self.candidates.len() as u64,
            self.not_proven,
            self.offered_late,
        )
    }

    fn counters(&self) -> (u64, u64, u64) {
        (
            self.hits,
            self.tracked.len() as u64,
            self.refused + self.unsupported,
        )
    }
}
