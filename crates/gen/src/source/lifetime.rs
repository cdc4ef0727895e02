//! Flow lifetimes: each flow lives a number of its packets, then is replaced by a
//! never-seen flow; slots are brought up to date lazily when handed out.

use super::stamp::{splitmix64, stamp};
use super::{Slot, Template};
use serde::{Deserialize, Serialize};

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
pub(super) const UNSTARTED: u64 = u64::MAX;
/// `FlowLife::num` of a flow (and `SlotLife::num` of a slot) in its original identity.
pub(super) const ORIGINAL: u64 = u64::MAX;

/// Flow lifetimes: per flow, its current identity and the packets it has left; per slot,
/// the identity its bytes carry (brought up to date lazily, when the slot is handed out).
pub(super) struct LifeState {
    pub(super) lifetime: Lifetime,
    pub(super) rng: u64,
    pub(super) flows: Vec<FlowLife>,
    /// Per flow: its templates.
    pub(super) tpls: Vec<Vec<u32>>,
    pub(super) slots: Vec<SlotLife>,
}

#[derive(Clone, Copy)]
pub(super) struct FlowLife {
    /// The new-flow number the flow was last stamped with, or `ORIGINAL`.
    pub(super) num: u64,
    /// Packets left in its current life, or `UNSTARTED`.
    pub(super) left: u64,
}

/// A slot's flow and the identity (a `FlowLife::num`) its bytes carry, side by side so
/// the per-packet check reads one entry per slot and one per flow.
#[derive(Clone, Copy)]
pub(super) struct SlotLife {
    pub(super) num: u64,
    pub(super) flow: u32,
}

impl LifeState {
    /// Per-slot state for `slots` holding their templates' current identities.
    pub(super) fn slot_lives(&self, slots: &[Slot], templates: &[Template]) -> Vec<SlotLife> {
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

/// The lifetime RNG's seed, derived from the source's seed so the two streams differ.
pub(super) fn life_seed(seed: u64) -> u64 {
    seed ^ 0x6c69_6665_7469_6d65
}

/// One packet of a flow with a lifetime (not stamped as a one-packet flow), off the fast
/// path: start its life, or replace it by a new flow when its life is over, and bring the
/// slot's bytes (`frame`) up to the flow's current identity. The packet will be handed
/// out unmodified (the slot keeps the new identity; its template was stamped alike).
#[inline(never)]
pub(super) fn live(
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

/// Whether this packet is stamped as a one-packet new flow: one random draw per packet
/// when a share is set (also for templates that cannot be stamped, so the stream of draws
/// does not depend on the templates).
#[inline(always)]
pub(super) fn draws_new_flow(rng: &mut u64, threshold: u64, ip: u8) -> bool {
    threshold != 0 && (splitmix64(rng) >> 11) < threshold && ip != 0
}

/// One packet of slot `idx` (holding template `tpl`, bytes `frame`) under lifetimes, when
/// it is not a one-packet new flow: the fast path when the flow is mid-life and the slot
/// carries its identity, else [`live`]. Works on the slot's bytes before any packet view
/// of them exists (a live view would stall its copy into the batch).
#[inline(always)]
pub(super) fn step(
    l: &mut LifeState,
    templates: &mut [Template],
    tpl: u32,
    idx: usize,
    frame: &mut [u8],
    new_flows: &mut u64,
) {
    let sl = l.slots[idx];
    let fl = &mut l.flows[sl.flow as usize];
    if fl.left.wrapping_sub(1) < UNSTARTED - 1 && sl.num == fl.num {
        fl.left -= 1;
    } else {
        live(l, templates, tpl, idx, frame, new_flows);
    }
}
