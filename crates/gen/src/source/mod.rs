//! [`InMemorySource`]: replays pre-built frames, copied into a port's batch
//! ([`InMemorySource::fill`], what [`crate::GeneratedPort`] does) or lent as [`Packet`]
//! views without copying ([`InMemorySource::lend`], for the pcap writer and tests).
//!
//! Every frame lives in its own slot of one contiguous, 64-byte-aligned arena:
//! [`HEADROOM`] bytes of headroom, the frame, and at least [`SLOT_TAILROOM`] bytes of
//! tailroom. [`InMemorySource::lend`] hands out views of consecutive slots (wrapping
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

use flowpath_base::{BATCH, HEADROOM};

use crate::build::{build, FrameSpec};

/// Minimum tailroom after the longest frame of a slot.
pub const SLOT_TAILROOM: usize = 64;
/// Slot count when the caller does not choose one (at least the number of templates).
pub const DEFAULT_SLOTS: usize = 1024;
/// First source address of stamped IPv4 new flows: 100.64.0.0/10 (RFC 6598 shared space).
pub const NEW_FLOW_V4_BASE: u32 = 0x6440_0000;
/// Stamped IPv4 sources are `NEW_FLOW_V4_BASE + (n & NEW_FLOW_V4_MASK)` (2^22 addresses).
pub const NEW_FLOW_V4_MASK: u32 = (1 << 22) - 1;

const ALIGN: usize = 64;
mod fill;
mod lend;
mod lifetime;
mod stamp;

pub use fill::Filled;
pub use lend::LentFrames;
pub use lifetime::Lifetime;
use lifetime::{life_seed, FlowLife, LifeState, ORIGINAL, UNSTARTED};
pub(crate) use stamp::splitmix64;
use stamp::{walk, StampInfo};

struct Template {
    bytes: Vec<u8>,
    stamp: StampInfo,
    /// The flow this template is a frame of (its index unless set by `with_flow_ids`).
    flow: u32,
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
}

/// Slot `i` holds template `i % templates`, for `max(n, templates)` slots.
fn round_robin(templates: usize, n: usize) -> Vec<u32> {
    (0..n.max(templates))
        .map(|i| (i % templates) as u32)
        .collect()
}
