//! [`InMemorySource`]: replays pre-built frames to the datapath in batches of [`Packet`]
//! views, without copying them.
//!
//! Every frame lives in its own slot of one contiguous, 64-byte-aligned arena:
//! [`HEADROOM`] bytes of headroom, the frame, and at least [`SLOT_TAILROOM`] bytes of
//! tailroom. [`InMemorySource::rx_batch`] hands out views of consecutive slots (wrapping
//! around). Actions may rewrite those packets; when the batch is dropped, the slots of
//! packets whose `modified` flag is set are remembered, and the next `rx_batch` copies
//! their template back before anything is handed out again. Unmodified packets cost
//! nothing.
//!
//! Churn: with [`InMemorySource::set_new_flow_share`], a share of the packets is stamped
//! as a never-seen flow (a fresh source address; checksums fixed incrementally), so a
//! bench can measure the datapath's miss path at a chosen new-flow rate.

use std::net::Ipv4Addr;
use std::ops::{Deref, DerefMut};

use flowpath_packet::key::{ethertype, ipproto};
use flowpath_packet::packet::HEADROOM;
use flowpath_packet::Packet;
use smallvec::SmallVec;

use crate::build::{build, FrameSpec, VXLAN_PORT};

/// Largest batch [`InMemorySource::rx_batch`] returns.
pub const MAX_BATCH: usize = 32;
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
    /// Slots handed out modified, to restore on the next `rx_batch`. Owned by the source
    /// and borrowed by the live batch, disjointly from `arena`.
    dirty: Vec<u32>,
    rng: u64,
    /// A packet is stamped when the top 53 bits of a random word are below this.
    threshold: u64,
    share: f64,
    new_flows: u64,
    packets: u64,
}

impl InMemorySource {
    /// A source replaying `templates` over `max(templates.len(), DEFAULT_SLOTS)` slots;
    /// slot `i` holds template `i % templates.len()`.
    ///
    /// # Panics
    /// If `templates` is empty.
    pub fn new(templates: Vec<Vec<u8>>) -> InMemorySource {
        assert!(
            !templates.is_empty(),
            "InMemorySource needs at least one template"
        );
        let templates: Vec<Template> = templates
            .into_iter()
            .map(|bytes| Template {
                stamp: walk(&bytes),
                bytes,
            })
            .collect();
        let mut s = InMemorySource {
            arena: Vec::new(),
            base: 0,
            slot_size: 0,
            slots: Vec::new(),
            templates,
            next: 0,
            dirty: Vec::with_capacity(MAX_BATCH),
            rng: 0,
            threshold: 0,
            share: 0.0,
            new_flows: 0,
            packets: 0,
        };
        s.layout(DEFAULT_SLOTS);
        s
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

    /// Use `n` slots (at least one per template). Rebuilds the arena; call before use.
    pub fn with_slots(mut self, n: usize) -> InMemorySource {
        self.layout(n);
        self
    }

    /// Seed the new-flow RNG (default seed 0). Equal seeds give equal stamping decisions.
    pub fn with_seed(mut self, seed: u64) -> InMemorySource {
        self.rng = seed;
        self
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

    /// Packets stamped as new flows so far (also the `n` the next stamp uses).
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

    /// Template `i`, as given to [`InMemorySource::new`].
    pub fn template(&self, i: usize) -> &[u8] {
        &self.templates[i].bytes
    }

    /// Index of the template slot `slot` holds.
    pub fn template_of_slot(&self, slot: usize) -> usize {
        self.slots[slot].tpl as usize
    }

    /// Lay out `n` slots (at least one per template) and fill them.
    fn layout(&mut self, n: usize) {
        let n = n.max(self.templates.len());
        let max_len = self
            .templates
            .iter()
            .map(|t| t.bytes.len())
            .max()
            .unwrap_or(0);
        let slot_size = (HEADROOM + max_len + SLOT_TAILROOM).div_ceil(ALIGN) * ALIGN;
        let arena = vec![0u8; n * slot_size + ALIGN];
        let base = arena.as_ptr().align_offset(ALIGN).min(ALIGN);
        self.arena = arena;
        self.base = base;
        self.slot_size = slot_size;
        self.slots = (0..n)
            .map(|i| {
                let tpl = i % self.templates.len();
                Slot {
                    tpl: tpl as u32,
                    len: self.templates[tpl].bytes.len() as u32,
                }
            })
            .collect();
        self.next = 0;
        self.dirty.clear();
        for i in 0..n {
            self.restore(i);
        }
    }

    /// Copy slot `i`'s template back into it.
    fn restore(&mut self, i: usize) {
        let t = &self.templates[self.slots[i].tpl as usize].bytes;
        let at = self.base + i * self.slot_size + HEADROOM;
        self.arena[at..at + t.len()].copy_from_slice(t);
    }

    /// Up to `max` (at most [`MAX_BATCH`], and at most the slot count) packets from the
    /// next consecutive slots, wrapping around. Each is `Packet::new(slot, HEADROOM, len)`
    /// with `modified == false`; with a new-flow share set, some are stamped as new flows
    /// (and so already marked modified).
    pub fn rx_batch(&mut self, max: usize) -> RxBatch<'_> {
        // Restore what the previous batch modified. Rare in steady state (only rewritten
        // or stamped packets), so the division-free index arithmetic is not needed here.
        while let Some(i) = self.dirty.pop() {
            self.restore(i as usize);
        }

        let n_slots = self.slots.len();
        let ss = self.slot_size;
        let count = max.min(MAX_BATCH).min(n_slots);
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

        let mut pkts = SmallVec::<[Packet<'_>; MAX_BATCH]>::new();
        let mut idxs = SmallVec::<[u32; MAX_BATCH]>::new();
        let mut idx = first;
        let threshold = *threshold;
        for buf in bufs {
            if idx == n_slots {
                idx = 0;
            }
            let slot = slots[idx];
            let mut p = Packet::new(buf, HEADROOM, slot.len as usize);
            if threshold != 0 && (splitmix64(rng) >> 11) < threshold {
                let info = &templates[slot.tpl as usize].stamp;
                if info.ip != 0 {
                    stamp(p.data_mut(), info, *new_flows);
                    *new_flows += 1;
                }
            }
            pkts.push(p);
            idxs.push(idx as u32);
            idx += 1;
        }
        RxBatch {
            pkts,
            slots: idxs,
            dirty,
            base_addr,
            end_addr: base_addr + n_slots * ss,
            slot_size: ss,
        }
    }
}

/// A batch of packets borrowed from an [`InMemorySource`]; derefs to `[Packet]`. When it
/// is dropped, the slots of packets marked `modified` are queued for restoring (finding
/// each packet's slot from its address, so reordering the packets inside the batch is
/// fine). A batch that is leaked (`mem::forget`) leaves its modifications in place.
pub struct RxBatch<'a> {
    pkts: SmallVec<[Packet<'a>; MAX_BATCH]>,
    slots: SmallVec<[u32; MAX_BATCH]>,
    dirty: &'a mut Vec<u32>,
    base_addr: usize,
    end_addr: usize,
    slot_size: usize,
}

impl<'a> RxBatch<'a> {
    /// Slot index of each packet, in the order they were handed out.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }
}

impl<'a> Deref for RxBatch<'a> {
    type Target = [Packet<'a>];
    fn deref(&self) -> &[Packet<'a>] {
        &self.pkts
    }
}

impl<'a> DerefMut for RxBatch<'a> {
    fn deref_mut(&mut self) -> &mut [Packet<'a>] {
        &mut self.pkts
    }
}

impl Drop for RxBatch<'_> {
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

/// splitmix64 (Steele, Lea, Flood 2014). Hand-written because it runs once per packet when
/// churn is on: three multiply/xor-shift rounds, no state beyond one word, and no
/// dependency on a `rand` crate whose generator might change under us.
#[inline(always)]
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[inline(always)]
fn get16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline(always)]
fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

/// Incremental Internet checksum update (RFC 1624, eqn. 3): `HC' = ~(~HC + ~m + m')`,
/// where `delta` is the one's-complement sum of `~m + m'` over every changed word.
/// Hand-written: it runs per stamped packet and touches only the changed words instead of
/// re-summing the whole (up to 9000-byte) frame.
#[inline(always)]
fn csum_adjust(csum: u16, delta: u32) -> u16 {
    let mut s = (!csum) as u32 + delta;
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    !(s as u16)
}

/// `~old + new` for a changed 16-bit word.
#[inline(always)]
fn word_delta(old: u16, new: u16) -> u32 {
    (!old) as u32 + new as u32
}

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
