//! Stage 5, execute: count every packet of a pass against its megaflow and run its
//! actions, over any set of frames ([`Frames`]): a received batch, or a recirculated pass's
//! packets gathered from it and from the copies forks made (see `recirculate.rs`).

use super::{Datapath, UNCACHED};
use crate::actions::{execute, Ctx};
use crate::recirc::{CtRun, Src};
use crate::sink::OutputSink;
use flowpath_base::BATCH;
use flowpath_packet::Packet;
use flowpath_pipeline::{Pipeline, RuleRef};

/// The frames of one pass, by the index the pass's scratch arrays use.
pub(super) trait Frames<'a> {
    /// Packet `i` of the pass.
    fn frame(&mut self, i: usize) -> &mut Packet<'a>;
    /// Where packet `i`'s frame lives (what a recirculation of it moves or copies).
    fn src(&self, i: usize) -> Src;
}

/// A received batch: packet `i` is the batch's `i`th.
impl<'a> Frames<'a> for [Packet<'a>] {
    #[inline(always)]
    fn frame(&mut self, i: usize) -> &mut Packet<'a> {
        &mut self[i]
    }
    #[inline(always)]
    fn src(&self, i: usize) -> Src {
        Src::Batch(i as u8)
    }
}

/// Received packets a recirculated pass runs again: packet `i` is the batch's `map[i]`th.
pub(super) struct Gathered<'s, 'a> {
    pub(super) pkts: &'s mut [Packet<'a>],
    pub(super) map: [u8; BATCH],
}

impl<'a> Frames<'a> for Gathered<'_, 'a> {
    #[inline(always)]
    fn frame(&mut self, i: usize) -> &mut Packet<'a> {
        &mut self.pkts[self.map[i] as usize]
    }
    #[inline(always)]
    fn src(&self, i: usize) -> Src {
        Src::Batch(self.map[i])
    }
}

/// Copies a fork made, run in a recirculated pass (a further recirculation copies again).
pub(super) struct Copies<'p>(pub(super) smallvec::SmallVec<[Packet<'p>; BATCH]>);

impl<'p> Frames<'p> for Copies<'p> {
    #[inline(always)]
    fn frame(&mut self, i: usize) -> &mut Packet<'p> {
        &mut self.0[i]
    }
    #[inline(always)]
    fn src(&self, _: usize) -> Src {
        Src::Detached
    }
}

impl Datapath {
    /// Stage 5: count every parsed packet against its megaflow and run its actions, in
    /// packet order. `uncached` has the bits of the packets whose decision was not cached
    /// (slot [`UNCACHED`]).
    #[inline(always)]
    pub(super) fn stage_execute<'a, F: Frames<'a> + ?Sized, S: OutputSink>(
        &mut self,
        in_port: u32,
        pkts: &mut F,
        valid: u32,
        uncached: u32,
        sink: &mut S,
    ) {
        let mut m = valid;
        if self.cfg.tunnels.is_some() {
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                let src = pkts.src(i);
                self.execute_packet(in_port, pkts.frame(i), i, src, false, sink);
            }
            return;
        }
        // Without tunnel ports most packets hit a megaflow whose actions are one output
        // to another plain port: this loop sends those straight to the sink and leaves
        // everything else to `execute_packet` (out of line, so that this loop keeps its
        // state in registers: with the action interpreter inlined here it kept it on the
        // stack). Packet order is kept: the others run in their turn.
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let src = pkts.src(i);
            let pkt = pkts.frame(i);
            let counted = uncached & (1 << i) == 0 && self.scratch.metas[i].l2 == 0;
            if counted {
                let e = self.megaflows.hit(self.scratch.slots[i], pkt.len() as u64);
                if let Some(p) = e.direct_out().filter(|&p| p != in_port) {
                    sink.output(p, pkt.data());
                    continue;
                }
            }
            self.execute_packet_cold(in_port, pkt, i, src, counted, sink);
        }
    }

    /// [`Datapath::execute_packet`] out of line, for the fast loop's exceptions. The
    /// tunnel loop inlines it instead: one out-of-line function for both cost
    /// `vxlan_decap` 35 instructions a packet more and `emc_hit` 7 (callgrind).
    #[inline(never)]
    fn execute_packet_cold<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkt: &mut Packet<'_>,
        i: usize,
        src: Src,
        counted: bool,
        sink: &mut S,
    ) {
        self.execute_packet(in_port, pkt, i, src, counted, sink);
    }

    /// Stage 5 for packet `i` of the pass (its frame at `src`): count it against its
    /// megaflow (unless `counted`: the caller did) and run its actions, or run its
    /// uncached decision.
    #[inline(always)]
    fn execute_packet<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkt: &mut Packet<'_>,
        i: usize,
        src: Src,
        counted: bool,
        sink: &mut S,
    ) {
        if self.ct_first_if_memo(in_port, pkt, i, src, counted, sink) {
            return;
        }
        let sc = &mut *self.scratch;
        let tunnels = self.cfg.tunnels.as_deref();
        let mut ctx = Ctx {
            in_port,
            controller: &self.controller,
            ports: &self.ports,
            tunnels,
            encap: &self.encap,
        };
        let mut ct = CtRun {
            tracker: &mut self.tracker,
            rc: &mut self.recirc,
            src,
        };
        let meta = &mut sc.metas[i];
        // The packet's working key: `ct_clear` and `ct` read and write it (this pass has
        // no further use for the scratch copy).
        let key = &mut sc.keys[i];
        // VXLAN: from here on the packet is its inner frame.
        meta.strip_outer(pkt);
        if tunnels.is_some() {
            // A decapsulated packet came in on its tunnel port.
            let k = key.bytes();
            ctx.in_port = u32::from_be_bytes([k[0], k[1], k[2], k[3]]);
        }
        if sc.slots[i] == UNCACHED {
            let Some((_, tr)) = sc.uncached.iter().find(|(p, _)| *p as usize == i) else {
                return;
            };
            credit_rules(&self.pipeline, &tr.path, pkt.len());
            let st = &mut self.stats;
            execute(
                &tr.actions,
                tr.ending,
                pkt,
                meta,
                key,
                &ctx,
                &mut ct,
                sink,
                st,
            );
            return;
        }
        let e = if counted {
            self.megaflows.entry(sc.slots[i])
        } else {
            self.megaflows.hit(sc.slots[i], pkt.len() as u64)
        };
        // The common megaflow, one output to a plain port: straight to the sink.
        if let (Some(p), None) = (e.direct_out(), tunnels) {
            if p != in_port {
                sink.output(p, pkt.data());
                return;
            }
        }
        execute(
            e.actions(),
            e.ending(),
            pkt,
            meta,
            key,
            &ctx,
            &mut ct,
            sink,
            &mut self.stats,
        );
    }
}

/// Count one packet of `len` bytes for the rules on `path` (an uncached decision's).
fn credit_rules(pipeline: &Pipeline, path: &[RuleRef], len: usize) {
    let now = flowpath_pipeline::rule::now_ns();
    for r in path {
        pipeline.rule(*r).counters.add_at(1, len as u64, now);
    }
}
