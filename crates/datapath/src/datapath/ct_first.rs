//! A first pass whose megaflow starts with `ct(table=T)` (no commit, NAT or force: the
//! packet is only looked up in the tracker): the tracker runs with the flow's connection
//! hint, and the second pass is answered from the memo (`ct_memo.rs`) when the packet's
//! new key is the one remembered; otherwise the packet moves to the next pass as
//! `recirc.rs` would move it, and what that pass finds is remembered after it.

use super::{Datapath, UNCACHED};
use crate::actions::no_output_drop;
use crate::ct_memo::MemoSeed;
use crate::recirc::{count_new, inert, Src};
use crate::sink::OutputSink;
use flowpath_base::BATCH;
use flowpath_conntrack::{CtConfig, Tracker};
use flowpath_packet::ct::recirc_id;
use flowpath_packet::{Action, CtId, Field, Packet};
use std::sync::Arc;

/// The `ct` action a megaflow's actions lead with, if the memo can stand in for the pass
/// it starts: `ct(table=T)` first (the key it tracks is the packet's as received), only
/// actions after it that neither send nor change the packet, and a spec that only looks
/// the connection up.
#[inline]
fn memo_ct(actions: &[Action]) -> Option<CtId> {
    let [Action::Ct(id), rest @ ..] = actions else {
        return None;
    };
    let s = id.spec();
    let lookup_only = s.table.is_some() && !s.commit && !s.force && s.nat.is_none();
    (lookup_only && rest.iter().all(inert)).then_some(*id)
}

/// What a remembered second pass does: send to one port (not the ingress), or drop.
/// Other decisions (more `ct`, several outputs, rewrites) run as a pass of their own.
#[inline(always)]
fn memo_shape(direct_out: Option<u32>, actions: &[Action], in_port: u32) -> bool {
    match direct_out {
        Some(p) => p != in_port,
        None => actions.is_empty(),
    }
}

impl Datapath {
    /// Whether this pass's packets may use the memo: a received batch's first pass, with
    /// the EMC on (the memo is indexed by its hash) and no tunnel ports.
    #[inline(always)]
    fn memo_usable(&self) -> bool {
        self.cfg.emc && self.cfg.tunnels.is_none() && self.recirc.in_place && self.recirc.pass == 1
    }

    /// A first pass that only looks its connection up: the memo may answer the next
    /// ([`Datapath::ct_first`]). True when the packet was handled so.
    #[inline(always)]
    pub(super) fn ct_first_if_memo<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkt: &mut Packet<'_>,
        i: usize,
        src: Src,
        counted: bool,
        sink: &mut S,
    ) -> bool {
        let slot = self.scratch.slots[i];
        if slot == UNCACHED || src != Src::Batch(i as u8) || !self.memo_usable() {
            return false;
        }
        let Some(id) = memo_ct(self.megaflows.entry(slot).actions()) else {
            return false;
        };
        if !counted {
            self.megaflows.hit(slot, pkt.len() as u64);
        }
        self.ct_first(in_port, pkt, i, id, sink);
        true
    }

    /// Run `ct(id)` (see [`memo_ct`]) for packet `i` of the received batch: track it, then
    /// send it as the memo says, or move it to the next pass.
    pub(super) fn ct_first<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkt: &mut Packet<'_>,
        i: usize,
        id: CtId,
        sink: &mut S,
    ) {
        let spec = id.spec();
        let Some(table) = spec.table else {
            return;
        };
        let rc = &mut self.recirc;
        rc.used = true;
        let tracker = self
            .tracker
            .get_or_insert_with(|| Arc::new(Tracker::new(CtConfig::default())));
        let now = *rc.now_ms.get_or_insert_with(|| tracker.now_ms());
        let sc = &mut *self.scratch;
        let st = &mut self.stats;
        let key = &mut sc.keys[i];
        let (place, hint) = self.ct_memo.place(sc.hashes[i], key);
        st.ct_executed += 1;
        st.recirculations += 1;
        // Without NAT the tracker reads the frame only: it stays unmodified.
        let was = pkt.modified;
        let (s, found) = tracker.execute_hinted(hint, pkt.data_mut(), &sc.metas[i], key, spec, now);
        pkt.modified = was;
        count_new(st, s);
        key.set(Field::RecircId, u128::from(recirc_id(table)));
        let memo = place
            .found
            .and_then(|at| Some((at, self.ct_memo.find(at, key)?)));
        if let Some((at, mf)) = memo {
            let e = self.megaflows.entry(mf.slot());
            let shape = memo_shape(e.direct_out(), e.actions(), in_port);
            if shape && self.megaflows.claim(mf.slot(), mf.generation()) {
                let e = self.megaflows.hit(mf.slot(), pkt.len() as u64);
                st.emc_hits += 1;
                st.ct_memo_hits += 1;
                match e.direct_out() {
                    Some(p) => sink.output(p, pkt.data()),
                    None => st.drop(no_output_drop(e.ending())),
                }
                return;
            }
            self.ct_memo.forget(at);
        }
        sc.memo_seeds[i] = MemoSeed {
            at: place.target(&self.ct_memo),
            hint: found,
        };
        sc.memo_seeded |= 1 << i;
        self.recirc.moved |= 1 << i;
    }

    /// After the second pass of the packets `moved` (in place, at their batch index):
    /// remember what answered each one that [`Datapath::ct_first`] moved.
    pub(super) fn remember_second_passes(&mut self, in_port: u32, moved: u32) {
        let sc = &mut *self.scratch;
        let mut m = moved & sc.memo_seeded;
        sc.memo_seeded = 0;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            debug_assert!(i < BATCH);
            let slot = sc.slots[i];
            if slot == UNCACHED {
                continue;
            }
            let e = self.megaflows.entry(slot);
            if e.is_live() && memo_shape(e.direct_out(), e.actions(), in_port) {
                let seed = sc.memo_seeds[i];
                let id = self.megaflows.id(slot);
                self.ct_memo.remember(seed.at, &sc.keys[i], id, seed.hint);
            }
        }
    }
}
