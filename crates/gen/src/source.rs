//! [`InMemorySource`]: replays pre-built frames to the datapath in batches of [`Packet`]
//! views, without copying them.
//!
//! Every frame lives in its own slot of one contiguous, 64-byte-aligned arena:
//! [`HEADROOM`] bytes of headroom, the frame, and at least [`SLOT_TAILROOM`] bytes of
//! tailroom. [`InMemorySource::rx_batch`] hands out views of consecutive slots (wrapping
//! around). Actions may rewrite those packets; when the batch is dropped, the slots of
//! packets whose `modified` flag is set are remembered, and the next `lend` copies
//! their template back before anything is handed out again. Unmodified packets cost
//! nothing.
//!
//! Churn: with [`InMemorySource::set_new_flow_share`], a share of the packets is stamped
//! as a never-seen flow (a fresh source address; checksums fixed incrementally), so a
//! bench can measure the datapath's miss path at a chosen new-flow rate.
//!
//! Lifetimes: with [`InMemorySource::set_lifetime`], each flow (a template, or the
//! templates grouped by [`InMemorySource::with_flow_ids`]) lives for a number of its
//! packets and is then replaced by a never-seen flow, stamped the same way. The templates
//! of a replaced flow are stamped once, and each slot is brought up to date in place the
//! next time it is handed out, so a flow that lives `N` packets costs one stamp per slot
//! per generation rather than a copy per packet.

use std::net::Ipv4Addr;
use std::ops::{Deref, DerefMut};

use flowpath_base::{Packet, PacketBatch, BATCH, HEADROOM};
use flowpath_packet::key::{ethertype, ipproto};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::build::{build, FrameSpec, VXLAN_PORT};

/// Largest batch [`InMemorySource::rx_batch`] returns.
/// Minimum tailroom after the longest frame of a slot.
pub const SLOT_TAILROOM: usize = 64;
/// Slot count when the caller does not choose one (at least the number of templates).
pub const DEFAULT_SLOTS: usize = 1024;
/// First source address of stamped IPv4 new flows: 100.64.0.0/10 (RFC 6598 shared space).
pub const NEW_FLOW_V4_BASE: u32 = 0x6440_0000;
/// Stamped IPv4 sources are `NEW_FLOW_V4_BASE + (n & NEW_FLOW_V4_MASK)` (2^22 addresses).
pub const NEW_FLOW_V4_MASK: u32 = (1 << 22) - 1;

const ALIGN: usize = 64;

/// Where to stamp a template to make it a new flow (found by walking the template bytes at
/// construction; offsets are from the start of the frame).
#[derive(Clone, Copy, Debug, Default)]
struct StampInfo {
    /// 4 or 6 for the (inner) IP version; 0 for frames that are never stamped.
    ip: u8,
    /// True when the L4 checksum is UDP's, where 0 means "no checksum".
    udp: bool,
    /// Offset of the (inner, for VXLAN) IP header.
    l3: u32,
    /// Offset of the L4 checksum that covers the source address; 0 = none (ICMPv4, later
    /// fragments, unknown protocols).
    l4_csum: u32,
    /// Offset of the outer VXLAN UDP checksum, which covers the whole inner frame; 0 = none.
    outer_csum: u32,
}

struct Template {
    bytes: Vec<u8>,
    stamp: StampInfo,
    /// The flow this template is a frame of (its index unless set by `with_flow_ids`).
    flow: u32,
}

/// How long a flow lives before [`InMemorySource`] replaces it by a never-seen one, in
/// packets of that flow (packets stamped as one-packet new flows by the new-flow share do
/// not count).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifetime {
    /// Exactly this many packets (at least 1).
    Packets(u64),
    /// A geometric number of packets with this mean (at least 1.0): after each packet the
    /// flow ends with probability `1 / mean`, as flows whose end does not depend on age.
    Mean(f64),
}

impl Lifetime {
    /// The mean lifetime in packets.
    pub fn mean(&self) -> f64 {
        match *self {
            Lifetime::Packets(n) => n as f64,
            Lifetime::Mean(m) => m,
        }
    }

    /// `Err` with the reason for a lifetime below one packet (or a mean not finite).
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Lifetime::Packets(n) if (1..UNSTARTED).contains(&n) => Ok(()),
            Lifetime::Packets(n) => Err(format!("lifetime of {n} packets: must be at least 1")),
            Lifetime::Mean(m) if m >= 1.0 && m.is_finite() => Ok(()),
            Lifetime::Mean(m) => Err(format!(
                "mean lifetime of {m} packets: must be a finite number of at least 1"
            )),
        }
    }

    /// Draw one flow's lifetime in packets (at least 1).
    fn draw(&self, rng: &mut u64) -> u64 {
        match *self {
            Lifetime::Packets(n) => n,
            Lifetime::Mean(m) if m <= 1.0 => 1,
            Lifetime::Mean(m) => {
                // Inverse transform: 1 + floor(ln U / ln(1 - 1/m)), U uniform in (0, 1],
                // has P(L > k) = (1 - 1/m)^k, so mean m.
                let u = ((splitmix64(rng) >> 11) + 1) as f64 / (1u64 << 53) as f64;
                let l = 1.0 + (u.ln() / (1.0 - 1.0 / m).ln()).floor();
                l.min((UNSTARTED - 1) as f64) as u64
            }
        }
    }
}

/// `LifeState::left` of a flow that has not sent a packet yet.
const UNSTARTED: u64 = u64::MAX;
/// `FlowLife::num` of a flow (and `SlotLife::num` of a slot) in its original identity.
const ORIGINAL: u64 = u64::MAX;

/// Flow lifetimes: per flow, its current identity and the packets it has left; per slot,
/// the identity its bytes carry (brought up to date lazily, when the slot is handed out).
struct LifeState {
    lifetime: Lifetime,
    rng: u64,
    flows: Vec<FlowLife>,
    /// Per flow: its templates.
    tpls: Vec<Vec<u32>>,
    slots: Vec<SlotLife>,
}

#[derive(Clone, Copy)]
struct FlowLife {
    /// The new-flow number the flow was last stamped with, or `ORIGINAL`.
    num: u64,
    /// Packets left in its current life, or `UNSTARTED`.
    left: u64,
}

/// A slot's flow and the identity (a `FlowLife::num`) its bytes carry, side by side so
/// the per-packet check reads one entry per slot and one per flow.
#[derive(Clone, Copy)]
struct SlotLife {
    num: u64,
    flow: u32,
}

impl LifeState {
    /// Per-slot state for `slots` holding their templates' current identities.
    fn slot_lives(&self, slots: &[Slot], templates: &[Template]) -> Vec<SlotLife> {
        slots
            .iter()
            .map(|s| {
                let flow = templates[s.tpl as usize].flow;
                SlotLife {
                    num: self.flows[flow as usize].num,
                    flow,
                }
            })
            .collect()
    }
}

#[derive(Clone, Copy)]
struct Slot {
    tpl: u32,
    len: u32,
}

/// A source of frames replayed from memory (see the module documentation).
pub struct InMemorySource {
    /// Backing memory; slot `i` is `arena[base + i * slot_size..][..slot_size]`.
    arena: Vec<u8>,
    /// Offset of slot 0 in `arena`, chosen so that slot 0 is 64-byte aligned.
    base: usize,
    slot_size: usize,
    slots: Vec<Slot>,
    templates: Vec<Template>,
    /// Next slot to hand out.
    next: usize,
    /// Slots handed out modified, to restore on the next `lend`. Owned by the source
    /// and borrowed by the live batch, disjointly from `arena`.
    dirty: Vec<u32>,
    rng: u64,
    /// A packet is stamped when the top 53 bits of a random word are below this.
    threshold: u64,
    share: f64,
    new_flows: u64,
    packets: u64,
    /// Flow lifetimes; `None` (the default) costs nothing per packet.
    life: Option<Box<LifeState>>,
    /// Whether lifetimes are on (`life` keeps its state when they are turned off).
    life_on: bool,
}

impl InMemorySource {
    /// A source replaying `templates` over `max(templates.len(), DEFAULT_SLOTS)` slots;
    /// slot `i` holds template `i % templates.len()`.
    ///
    /// # Panics
    /// If `templates` is empty.
    pub fn new(templates: Vec<Vec<u8>>) -> InMemorySource {
        let mut s = InMemorySource::unlaid(templates);
        s.layout(round_robin(s.templates.len(), DEFAULT_SLOTS));
        s
    }

    /// A source whose slot `i` holds `templates[slot_templates[i]]`: the caller lays out
    /// the sequence the source loops over (a popularity, a size mix, a capture's order).
    /// Templates that no slot names are never handed out.
    ///
    /// # Panics
    /// If `templates` or `slot_templates` is empty, or a slot names a missing template.
    pub fn from_slot_templates(
        templates: Vec<Vec<u8>>,
        slot_templates: Vec<u32>,
    ) -> InMemorySource {
        let mut s = InMemorySource::unlaid(templates);
        s.layout(slot_templates);
        s
    }

    /// The source without slots.
    fn unlaid(templates: Vec<Vec<u8>>) -> InMemorySource {
        assert!(
            !templates.is_empty(),
            "InMemorySource needs at least one template"
        );
        let templates: Vec<Template> = templates
            .into_iter()
            .enumerate()
            .map(|(i, bytes)| Template {
                stamp: walk(&bytes),
                bytes,
                flow: i as u32,
            })
            .collect();
        InMemorySource {
            arena: Vec::new(),
            base: 0,
            slot_size: 0,
            slots: Vec::new(),
            templates,
            next: 0,
            dirty: Vec::with_capacity(BATCH),
            rng: 0,
            threshold: 0,
            share: 0.0,
            new_flows: 0,
            packets: 0,
            life: None,
            life_on: false,
        }
    }

    /// `n_flows` distinct UDP/IPv4 flows of `frame_size` bytes (FCS included, as in
    /// [`FrameSpec::frame_size`]) to 192.168.0.1:5001. Flow `i` comes from
    /// `10.0.0.0 + 1 + i mod (2^24 - 2)`, port `1024 + i mod 64511`: both vary per flow
    /// and the pair is unique.
    ///
    /// # Panics
    /// If `n_flows` is 0.
    pub fn udp4_flows(n_flows: usize, frame_size: usize) -> InMemorySource {
        assert!(n_flows > 0, "udp4_flows needs at least one flow");
        let dst = Ipv4Addr::new(192, 168, 0, 1);
        let templates = (0..n_flows)
            .map(|i| {
                let src = Ipv4Addr::from(0x0a00_0000 + 1 + (i % 0xff_fffe) as u32);
                let sport = 1024 + (i % 64511) as u16;
                build(&FrameSpec::udp4(src, dst, sport, 5001, frame_size))
            })
            .collect();
        InMemorySource::new(templates)
    }

    /// Use `n` slots (at least one per template); slot `i` holds template
    /// `i % template_count()`. Rebuilds the arena; call before use.
    pub fn with_slots(mut self, n: usize) -> InMemorySource {
        self.layout(round_robin(self.templates.len(), n));
        self
    }

    /// Seed the new-flow RNG (default seed 0). Equal seeds give equal stamping decisions
    /// (and equal lifetimes, see [`InMemorySource::set_lifetime`]).
    pub fn with_seed(mut self, seed: u64) -> InMemorySource {
        self.rng = seed;
        if let Some(l) = &mut self.life {
            l.rng = life_seed(seed);
        }
        self
    }

    /// Group templates into flows for [`InMemorySource::set_lifetime`]: template `i` is a
    /// frame of flow `flow_of_template[i]` (e.g. one flow's frames of several sizes), and
    /// replacing a flow restamps all its templates with one new identity. By default every
    /// template is its own flow. Call before `set_lifetime`.
    ///
    /// # Panics
    /// If the length differs from the template count, or lifetimes are already on.
    pub fn with_flow_ids(mut self, flow_of_template: Vec<u32>) -> InMemorySource {
        assert_eq!(
            flow_of_template.len(),
            self.templates.len(),
            "one flow id per template"
        );
        assert!(self.life.is_none(), "set flow ids before lifetimes");
        for (t, f) in self.templates.iter_mut().zip(flow_of_template) {
            t.flow = f;
        }
        self
    }

    /// Flow id of template `i` (see [`InMemorySource::with_flow_ids`]).
    pub fn flow_of_template(&self, i: usize) -> u32 {
        self.templates[i].flow
    }

    /// Give every flow a lifetime (`None`: flows live forever, the default). A flow's life
    /// starts with its first packet; the packet after its last is the first of a
    /// never-seen flow, stamped like a new flow of [`InMemorySource::set_new_flow_share`]
    /// (numbered from the same counter and counted in [`InMemorySource::new_flows`]), which
    /// then lives its own lifetime. With a new-flow share `s` as well, the share of packets
    /// that start a new flow is `s + (1 - s) / mean lifetime` in the long run.
    ///
    /// Templates that cannot be stamped (not IP) never change. Turning lifetimes off
    /// keeps every flow at its current identity. While on, [`InMemorySource::template`]
    /// returns the current identity's frame.
    ///
    /// # Panics
    /// If the lifetime is below one packet (or not finite).
    pub fn set_lifetime(&mut self, lifetime: Option<Lifetime>) {
        let Some(lifetime) = lifetime else {
            if self.life_on {
                // Bring every stale slot up to date: from now on nothing will.
                for i in 0..self.slots.len() {
                    self.restore(i);
                }
            }
            self.life_on = false;
            return;
        };
        if let Err(e) = lifetime.validate() {
            panic!("{e}");
        }
        if let Some(l) = &mut self.life {
            l.lifetime = lifetime;
        } else {
            let n_flows = self
                .templates
                .iter()
                .map(|t| t.flow as usize + 1)
                .max()
                .unwrap_or(0);
            let mut tpls = vec![Vec::new(); n_flows];
            for (i, t) in self.templates.iter().enumerate() {
                tpls[t.flow as usize].push(i as u32);
            }
            let mut l = LifeState {
                lifetime,
                rng: life_seed(self.rng),
                flows: vec![
                    FlowLife {
                        num: ORIGINAL,
                        left: UNSTARTED,
                    };
                    n_flows
                ],
                tpls,
                slots: Vec::new(),
            };
            l.slots = l.slot_lives(&self.slots, &self.templates);
            self.life = Some(Box::new(l));
        }
        self.life_on = true;
    }

    /// The flow lifetime, if set.
    pub fn lifetime(&self) -> Option<Lifetime> {
        self.life
            .as_ref()
            .filter(|_| self.life_on)
            .map(|l| l.lifetime)
    }

    /// Stamp this share (0.0..=1.0) of the packets handed out from now on as new flows.
    ///
    /// # Panics
    /// If `share` is outside 0.0..=1.0 (or NaN).
    pub fn set_new_flow_share(&mut self, share: f64) {
        assert!(
            (0.0..=1.0).contains(&share),
            "new-flow share {share} outside 0.0..=1.0"
        );
        self.share = share;
        self.threshold = (share * (1u64 << 53) as f64) as u64;
    }

    pub fn new_flow_share(&self) -> f64 {
        self.share
    }

    /// Packets stamped as new flows so far, including flows that replaced one whose
    /// lifetime ended (also the `n` the next stamp uses).
    pub fn new_flows(&self) -> u64 {
        self.new_flows
    }

    /// Packets handed out so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Bytes per slot (a multiple of 64).
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    pub fn template_count(&self) -> usize {
        self.templates.len()
    }

    /// Template `i`, as given to [`InMemorySource::new`] (with lifetimes: the frame of
    /// the flow's current identity).
    pub fn template(&self, i: usize) -> &[u8] {
        &self.templates[i].bytes
    }

    /// Index of the template slot `slot` holds.
    pub fn template_of_slot(&self, slot: usize) -> usize {
        self.slots[slot].tpl as usize
    }

    /// Lay out one slot per entry of `slot_tpl` (the template it holds) and fill them.
    fn layout(&mut self, slot_tpl: Vec<u32>) {
        assert!(
            !slot_tpl.is_empty(),
            "InMemorySource needs at least one slot"
        );
        let n = slot_tpl.len();
        let max_len = slot_tpl
            .iter()
            .map(|&t| self.templates[t as usize].bytes.len())
            .max()
            .unwrap_or(0);
        let slot_size = (HEADROOM + max_len + SLOT_TAILROOM).div_ceil(ALIGN) * ALIGN;
        let arena = vec![0u8; n * slot_size + ALIGN];
        let base = arena.as_ptr().align_offset(ALIGN).min(ALIGN);
        self.arena = arena;
        self.base = base;
        self.slot_size = slot_size;
        self.slots = slot_tpl
            .into_iter()
            .map(|tpl| Slot {
                tpl,
                len: self.templates[tpl as usize].bytes.len() as u32,
            })
            .collect();
        self.next = 0;
        self.dirty.clear();
        if let Some(l) = &mut self.life {
            l.slots = l.slot_lives(&self.slots, &self.templates);
        }
        for i in 0..n {
            self.restore(i);
        }
    }

    /// Copy slot `i`'s template back into it.
    fn restore(&mut self, i: usize) {
        let tpl = &self.templates[self.slots[i].tpl as usize];
        let t = &tpl.bytes;
        let at = self.base + i * self.slot_size + HEADROOM;
        self.arena[at..at + t.len()].copy_from_slice(t);
        if let Some(l) = &mut self.life {
            l.slots[i].num = l.flows[tpl.flow as usize].num;
        }
    }

    /// Up to `max` (at most [`BATCH`], and at most the slot count) packets from the
    /// next consecutive slots, wrapping around. Each is `Packet::new(slot, HEADROOM, len)`
    /// with `modified == false`; with a new-flow share set, some are stamped as new flows
    /// (and so already marked modified). With a lifetime set, a slot whose flow was
    /// replaced is restamped in place to the flow's current identity and stays unmodified.
    pub fn lend(&mut self, max: usize) -> LentFrames<'_> {
        // One branch per batch; the loop without lifetimes is the same code as before they
        // existed.
        if self.life_on {
            self.rx::<true>(max)
        } else {
            self.rx::<false>(max)
        }
    }

    #[inline(always)]
    fn rx<const LIFE: bool>(&mut self, max: usize) -> LentFrames<'_> {
        // Restore what the previous batch modified. Rare in steady state (only rewritten
        // or stamped packets), so the division-free index arithmetic is not needed here.
        while let Some(i) = self.dirty.pop() {
            self.restore(i as usize);
        }

        let n_slots = self.slots.len();
        let ss = self.slot_size;
        let count = max.min(BATCH).min(n_slots);
        let first = self.next;
        let mut next = first + count;
        if next >= n_slots {
            next -= n_slots;
        }
        self.next = next;
        self.packets += count as u64;

        let InMemorySource {
            arena,
            base,
            slots,
            templates,
            dirty,
            rng,
            threshold,
            new_flows,
            life,
            ..
        } = self;
        let region = &mut arena[*base..*base + n_slots * ss];
        let base_addr = region.as_ptr() as usize;
        let (head, tail) = region.split_at_mut(first * ss);
        let from_tail = count.min(n_slots - first);
        let bufs = tail
            .chunks_exact_mut(ss)
            .take(from_tail)
            .chain(head.chunks_exact_mut(ss).take(count - from_tail));

        let mut pkts = SmallVec::<[Packet<'_>; BATCH]>::new();
        let mut idxs = SmallVec::<[u32; BATCH]>::new();
        let mut idx = first;
        let threshold = *threshold;
        for buf in bufs {
            if idx == n_slots {
                idx = 0;
            }
            let slot = slots[idx];
            let p = if LIFE {
                // The lifetime works on the slot's bytes before the packet view exists:
                // handing `&mut Packet` to a call would keep the view in memory and stall
                // its copy into the batch.
                let info = &templates[slot.tpl as usize].stamp;
                let one_packet_flow =
                    threshold != 0 && (splitmix64(rng) >> 11) < threshold && info.ip != 0;
                if !one_packet_flow {
                    if let Some(l) = life.as_deref_mut() {
                        // Fast path: the flow is mid-life and the slot carries its identity.
                        let sl = l.slots[idx];
                        let fl = &mut l.flows[sl.flow as usize];
                        if fl.left.wrapping_sub(1) < UNSTARTED - 1 && sl.num == fl.num {
                            fl.left -= 1;
                        } else {
                            let frame = &mut buf[HEADROOM..HEADROOM + slot.len as usize];
                            live(l, templates, slot.tpl, idx, frame, new_flows);
                        }
                    }
                }
                let mut p = Packet::new(buf, HEADROOM, slot.len as usize);
                if one_packet_flow {
                    stamp(
                        p.data_mut(),
                        &templates[slot.tpl as usize].stamp,
                        *new_flows,
                    );
                    *new_flows += 1;
                }
                p
            } else {
                let mut p = Packet::new(buf, HEADROOM, slot.len as usize);
                if threshold != 0 && (splitmix64(rng) >> 11) < threshold {
                    let info = &templates[slot.tpl as usize].stamp;
                    if info.ip != 0 {
                        stamp(p.data_mut(), info, *new_flows);
                        *new_flows += 1;
                    }
                }
                p
            };
            pkts.push(p);
            idxs.push(idx as u32);
            idx += 1;
        }
        LentFrames {
            pkts,
            slots: idxs,
            dirty,
            base_addr,
            end_addr: base_addr + n_slots * ss,
            slot_size: ss,
        }
    }
}

impl InMemorySource {
    /// Copy the next frames (as many as `batch` has room for, at most the slot count) into
    /// `batch`, wrapping around: what a port's `recv` does. New-flow stamps are written into
    /// the copies, so the slots stay as laid out (no restoring later); lifetimes restamp
    /// the slots themselves, as with [`InMemorySource::lend`]. The same slots, random draws
    /// and stamps as `lend` would give.
    pub fn fill(&mut self, batch: &mut PacketBatch) -> Filled {
        if self.life_on {
            self.fill_with::<true>(batch)
        } else {
            self.fill_with::<false>(batch)
        }
    }

    #[inline(always)]
    fn fill_with<const LIFE: bool>(&mut self, batch: &mut PacketBatch) -> Filled {
        while let Some(i) = self.dirty.pop() {
            self.restore(i as usize);
        }
        let n_slots = self.slots.len();
        let count = batch.room().min(n_slots);
        let (ss, base, threshold) = (self.slot_size, self.base, self.threshold);
        let mut idx = self.next;
        let mut out = Filled::default();
        for _ in 0..count {
            if idx == n_slots {
                idx = 0;
            }
            let slot = self.slots[idx];
            let at = base + idx * ss + HEADROOM;
            let len = slot.len as usize;
            // The arena is larger than L1: start loading a slot a few frames ahead.
            prefetch(&self.arena, base + ((idx + 8) % n_slots) * ss + HEADROOM);
            let info = &self.templates[slot.tpl as usize].stamp;
            let new_flow = if LIFE {
                let one_packet_flow =
                    threshold != 0 && (splitmix64(&mut self.rng) >> 11) < threshold && info.ip != 0;
                if !one_packet_flow {
                    if let Some(l) = self.life.as_deref_mut() {
                        let sl = l.slots[idx];
                        let fl = &mut l.flows[sl.flow as usize];
                        if fl.left.wrapping_sub(1) < UNSTARTED - 1 && sl.num == fl.num {
                            fl.left -= 1;
                        } else {
                            let frame = &mut self.arena[at..at + len];
                            live(
                                l,
                                &mut self.templates,
                                slot.tpl,
                                idx,
                                frame,
                                &mut self.new_flows,
                            );
                        }
                    }
                }
                one_packet_flow
            } else {
                threshold != 0 && (splitmix64(&mut self.rng) >> 11) < threshold && info.ip != 0
            };
            idx += 1;
            // Whole cache lines: the slot's tailroom and the batch slot both have room for
            // the rounded-up length, and fixed 64-byte copies inline as vector moves where a
            // variable-length copy would call memcpy per frame.
            let lines = len.div_ceil(64) * 64;
            let Some(dst) = batch.next_slot().filter(|d| d.len() >= lines) else {
                out.dropped += 1;
                continue;
            };
            let src = &self.arena[at..at + lines];
            for (d, s) in dst[..lines].chunks_exact_mut(64).zip(src.chunks_exact(64)) {
                d.copy_from_slice(s);
            }
            out.frames += 1;
            out.bytes += len as u64;
            if new_flow {
                stamp(
                    &mut dst[..len],
                    &self.templates[slot.tpl as usize].stamp,
                    self.new_flows,
                );
                self.new_flows += 1;
            }
            batch.commit(len);
        }
        self.next = if idx == n_slots { 0 } else { idx };
        self.packets += count as u64;
        out
    }
}

/// A hint to load the cache line at `buf[at]` (ignored off x86_64 or out of bounds).
#[inline(always)]
fn prefetch(buf: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = buf.get(at) {
        // SAFETY: prefetching is a hint; the address is that of a live element.
        unsafe {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>((b as *const u8).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (buf, at);
}

/// What one [`InMemorySource::fill`] delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filled {
    pub frames: usize,
    pub bytes: u64,
    /// Frames longer than a batch slot holds, not delivered.
    pub dropped: usize,
}

/// A batch of packets borrowed from an [`InMemorySource`]; derefs to `[Packet]`. When it
/// is dropped, the slots of packets marked `modified` are queued for restoring (finding
/// each packet's slot from its address, so reordering the packets inside the batch is
/// fine). A batch that is leaked (`mem::forget`) leaves its modifications in place.
pub struct LentFrames<'a> {
    pkts: SmallVec<[Packet<'a>; BATCH]>,
    slots: SmallVec<[u32; BATCH]>,
    dirty: &'a mut Vec<u32>,
    base_addr: usize,
    end_addr: usize,
    slot_size: usize,
}

impl<'a> LentFrames<'a> {
    /// Slot index of each packet, in the order they were handed out.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }
}

impl<'a> Deref for LentFrames<'a> {
    type Target = [Packet<'a>];
    fn deref(&self) -> &[Packet<'a>] {
        &self.pkts
    }
}

impl<'a> DerefMut for LentFrames<'a> {
    fn deref_mut(&mut self) -> &mut [Packet<'a>] {
        &mut self.pkts
    }
}

impl Drop for LentFrames<'_> {
    fn drop(&mut self) {
        for p in self.pkts.iter().filter(|p| p.modified) {
            // `start` never leaves the slot (it is at most HEADROOM + frame length, less
            // than the slot size), so the data address identifies the slot.
            let addr = p.data().as_ptr() as usize;
            if (self.base_addr..self.end_addr).contains(&addr) {
                self.dirty
                    .push(((addr - self.base_addr) / self.slot_size) as u32);
            }
        }
    }
}

/// Slot `i` holds template `i % templates`, for `max(n, templates)` slots.
fn round_robin(templates: usize, n: usize) -> Vec<u32> {
    (0..n.max(templates))
        .map(|i| (i % templates) as u32)
        .collect()
}

/// The lifetime RNG's seed, derived from the source's seed so the two streams differ.
fn life_seed(seed: u64) -> u64 {
    seed ^ 0x6c69_6665_7469_6d65
}

/// One packet of a flow with a lifetime (not stamped as a one-packet flow), off the fast
/// path: start its life, or replace it by a new flow when its life is over, and bring the
/// slot's bytes (`frame`) up to the flow's current identity. The packet will be handed
/// out unmodified (the slot keeps the new identity; its template was stamped alike).
#[inline(never)]
fn live(
    l: &mut LifeState,
    templates: &mut [Template],
    tpl: u32,
    slot: usize,
    frame: &mut [u8],
    new_flows: &mut u64,
) {
    let t = &templates[tpl as usize];
    if t.stamp.ip == 0 {
        return;
    }
    let f = t.flow as usize;
    let mut left = l.flows[f].left;
    if left == UNSTARTED {
        left = l.lifetime.draw(&mut l.rng);
    } else if left == 0 {
        let n = *new_flows;
        *new_flows += 1;
        l.flows[f].num = n;
        for &other in &l.tpls[f] {
            let o = &mut templates[other as usize];
            if o.stamp.ip != 0 {
                stamp(&mut o.bytes, &o.stamp, n);
            }
        }
        left = l.lifetime.draw(&mut l.rng);
    }
    l.flows[f].left = left - 1;
    let num = l.flows[f].num;
    if l.slots[slot].num != num {
        stamp(frame, &templates[tpl as usize].stamp, num);
        l.slots[slot].num = num;
    }
}

/// splitmix64, the foundation's (one copy for the project): once per packet when churn is on.
pub(crate) use flowpath_base::rng::next as splitmix64;

#[inline(always)]
fn get16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline(always)]
fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

use flowpath_packet::checksum::{adjust as csum_adjust, word_delta};

/// Stamp `frame` as new flow number `n`: set the (inner) source address and fix the IPv4
/// header, L4 and outer VXLAN UDP checksums incrementally.
fn stamp(frame: &mut [u8], info: &StampInfo, n: u64) {
    let l3 = info.l3 as usize;
    let (addr_off, new) = if info.ip == 4 {
        (l3 + 12, NEW_FLOW_V4_BASE | (n as u32 & NEW_FLOW_V4_MASK))
    } else {
        (l3 + 8 + 12, n as u32)
    };
    let (o0, o1) = (get16(frame, addr_off), get16(frame, addr_off + 2));
    let (n0, n1) = ((new >> 16) as u16, new as u16);
    put16(frame, addr_off, n0);
    put16(frame, addr_off + 2, n1);
    let d_addr = word_delta(o0, n0) + word_delta(o1, n1);
    // Every changed word under the outer VXLAN UDP checksum (which covers the inner frame).
    let mut d_outer = d_addr;

    if info.ip == 4 {
        let old = get16(frame, l3 + 10);
        let new = csum_adjust(old, d_addr);
        put16(frame, l3 + 10, new);
        d_outer += word_delta(old, new);
    }
    if info.l4_csum != 0 {
        let at = info.l4_csum as usize;
        let old = get16(frame, at);
        // A zero UDP checksum means "none" and stays zero.
        if !(info.udp && old == 0) {
            let mut new = csum_adjust(old, d_addr);
            if info.udp && new == 0 {
                new = 0xffff;
            }
            put16(frame, at, new);
            d_outer += word_delta(old, new);
        }
    }
    if info.outer_csum != 0 {
        let at = info.outer_csum as usize;
        let old = get16(frame, at);
        if old != 0 {
            let mut new = csum_adjust(old, d_outer);
            if new == 0 {
                new = 0xffff;
            }
            put16(frame, at, new);
        }
    }
}

/// Find where to stamp `frame` (see [`StampInfo`]). Walks Ethernet, any number of
/// 802.1Q/802.1ad tags, IPv4 or IPv6 (with hop-by-hop, routing, destination-options and
/// fragment headers), and VXLAN (UDP port 4789) once; a VXLAN frame whose inner frame is
/// IP is stamped inside, otherwise on the outer header.
fn walk(frame: &[u8]) -> StampInfo {
    walk_eth(frame, 0, true).unwrap_or_default()
}

fn walk_eth(f: &[u8], eth: usize, vxlan: bool) -> Option<StampInfo> {
    let mut o = eth + 12;
    let mut ty = get16(f.get(..o + 2)?, o);
    while ty == ethertype::VLAN || ty == ethertype::QINQ || ty == 0x9100 {
        o += 4;
        ty = get16(f.get(..o + 2)?, o);
    }
    let l3 = o + 2;
    let (ip, proto, l4) = match ty {
        ethertype::IPV4 => {
            let h = f.get(l3..l3 + 20)?;
            let ihl = (h[0] & 0x0f) as usize * 4;
            if h[0] >> 4 != 4 || ihl < 20 || f.len() < l3 + ihl {
                return None;
            }
            let later_fragment = get16(h, 6) & 0x1fff != 0;
            (4, h[9], (!later_fragment).then_some(l3 + ihl))
        }
        ethertype::IPV6 => {
            let h = f.get(l3..l3 + 40)?;
            if h[0] >> 4 != 6 {
                return None;
            }
            let mut next = h[6];
            let mut o = l3 + 40;
            let mut l4 = Some(o);
            loop {
                match next {
                    ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS => {
                        let e = f.get(o..o + 2)?;
                        next = e[0];
                        o += (e[1] as usize + 1) * 8;
                    }
                    ipproto::FRAGMENT => {
                        let e = f.get(o..o + 8)?;
                        next = e[0];
                        if get16(e, 2) & 0xfff8 != 0 {
                            l4 = None;
                            break;
                        }
                        o += 8;
                    }
                    _ => break,
                }
                l4 = Some(o);
            }
            (6, next, l4)
        }
        _ => return None,
    };
    let mut info = StampInfo {
        ip,
        l3: l3 as u32,
        ..StampInfo::default()
    };
    let Some(l4) = l4 else { return Some(info) };
    match proto {
        ipproto::UDP if f.len() >= l4 + 8 => {
            if vxlan && get16(f, l4 + 2) == VXLAN_PORT {
                if let Some(mut inner) = walk_eth(f, l4 + 16, false) {
                    inner.outer_csum = (l4 + 6) as u32;
                    return Some(inner);
                }
            }
            info.udp = true;
            info.l4_csum = (l4 + 6) as u32;
        }
        ipproto::TCP if f.len() >= l4 + 20 => info.l4_csum = (l4 + 16) as u32,
        ipproto::ICMPV6 if ip == 6 && f.len() >= l4 + 4 => info.l4_csum = (l4 + 2) as u32,
        _ => {}
    }
    Some(info)
}
