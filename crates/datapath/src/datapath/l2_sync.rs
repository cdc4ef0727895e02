//! Keeping this worker's NORMAL megaflows exact while the MAC learning table changes (the
//! table and the design are in `l2.rs`): the megaflows that ran NORMAL and what they
//! depended on, the refresh sweep that keeps talking hosts learned, and the revalidation
//! of the megaflows a MAC change concerns.

use super::Datapath;
use crate::l2::{resolve_normal, NormalDep};
use crate::megaflow::MegaflowId;
use smallvec::SmallVec;

/// A megaflow that ran NORMAL, and what its decision depended on (see `l2.rs`).
pub(super) struct L2Flow {
    pub(super) id: MegaflowId,
    pub(super) deps: SmallVec<[NormalDep; 1]>,
    /// Its packet count at the last refresh sweep.
    pub(super) packets: u64,
}

/// Refresh sweeps of NORMAL megaflows run at most this often (ms of the MAC table's
/// clock), and at least four times per aging period.
const L2_SWEEP_MS: u64 = 1000;

impl Datapath {
    /// Keep this worker's NORMAL megaflows exact (before every batch while it has any):
    /// age the MAC table out when due, refresh the entries of megaflows that had packets,
    /// and revalidate the megaflows a MAC change concerns.
    pub(super) fn sync_l2(&mut self) {
        let now = self.mac.now_ms();
        if self.mac.expiry_due_at(now) {
            self.mac.expire();
        }
        if now >= self.l2_sweep_at {
            let aging = self.mac.config().aging.as_millis() as u64;
            self.l2_sweep_at = now + L2_SWEEP_MS.min(aging / 4).max(1);
            self.refresh_l2();
        }
        let gen = self.mac.generation();
        if gen != self.mac_gen {
            self.revalidate_l2(gen);
        }
    }

    /// Fast-path hits do not learn: refresh the sources of the NORMAL megaflows that had
    /// packets since the last sweep, so a talking host does not age out. (A refresh never
    /// moves an entry: a megaflow whose source the table places elsewhere is removed by
    /// [`Datapath::revalidate_l2`], so its next packet learns on the slow path.) Drops dead
    /// entries.
    fn refresh_l2(&mut self) {
        let (mf, mac) = (&self.megaflows, &self.mac);
        self.l2_flows.retain_mut(|f| {
            let Some(v) = mf.get(f.id) else {
                return false;
            };
            let (packets, _) = v.counts();
            if packets != f.packets {
                f.packets = packets;
                for d in &f.deps {
                    mac.refresh(d.vlan, d.src, d.in_port);
                }
            }
            true
        });
    }

    /// The MAC table moved to `gen`: re-translate the NORMAL megaflows whose destination
    /// changed (all of them if the change log does not reach back) and remove those that
    /// now decide differently.
    fn revalidate_l2(&mut self, gen: u64) {
        let changed = self.mac.changes_since(self.mac_gen);
        self.mac_gen = gen;
        self.stats.l2_revalidations += 1;
        let mut i = 0;
        while i < self.l2_flows.len() {
            let f = &self.l2_flows[i];
            let Some(v) = self.megaflows.get(f.id) else {
                self.l2_flows.swap_remove(i);
                continue;
            };
            let concerned = match &changed {
                None => true,
                Some(c) => f
                    .deps
                    .iter()
                    .any(|d| c.contains(&(d.vlan, d.dst)) || c.contains(&(d.vlan, d.src))),
            };
            if !concerned {
                i += 1;
                continue;
            }
            // A megaflow whose source the table no longer places on its in_port (moved,
            // aged out, evicted) must go: its packets would not learn.
            let learned_here = f
                .deps
                .iter()
                .all(|d| d.src[0] & 1 != 0 || self.mac.lookup(d.vlan, d.src) == Some(d.in_port));
            let key = *v.key();
            let mut tr = self.pipeline.translate(&key);
            let deps = resolve_normal(&mut tr.actions, &key, &self.mac, false);
            let slot = f.id.slot();
            if !learned_here {
                self.megaflows.remove(slot, &self.pipeline);
                self.stats.l2_removed += 1;
                self.l2_flows.swap_remove(i);
            } else if self.megaflows.revalidate_one(slot, tr, &self.pipeline) {
                self.l2_flows[i].deps = deps;
                i += 1;
            } else {
                self.stats.l2_removed += 1;
                self.l2_flows.swap_remove(i);
            }
        }
    }
}
