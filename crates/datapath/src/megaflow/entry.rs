//! One cached megaflow ([`MegaflowEntry`], laid out for the hit path), and what another
//! tier sees of it: the handle that names it ([`MegaflowId`]), a read-only view
//! ([`MegaflowView`]) and the events the cache reports ([`MegaflowEvent`], see `tier.rs`).

use flowpath_packet::{Action, FlowKey};
use flowpath_pipeline::{Ending, RuleRef};
use smallvec::SmallVec;

/// One cached megaflow. Its fields are the cache's own: other code reads them through the
/// accessors, and another tier reaches entries only by [`MegaflowId`] (see `tier.rs`).
///
/// Laid out by hand (`repr(C)`, one entry per five cache lines): everything a cache hit
/// touches (generation, liveness, the batch pin, counters, actions) is in the first line,
/// and the key follows, so an exact-match hit reads one line of the entry and a
/// signature/subtable hit on an IPv4 mask reads two. The compiler's order spread a hit
/// over all four lines of a 224-byte, unaligned entry.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct MegaflowEntry {
    /// Bumped whenever the slot is freed, so stale references can tell.
    pub(super) gen: u32,
    pub(super) hash: u32,
    pub(super) live: bool,
    /// Hit since the CLOCK hand last passed.
    pub(super) referenced: bool,
    pub(super) ending: Ending,
    pub(super) subtable: u16,
    /// The port of a megaflow whose actions are one output to a port below
    /// [`NO_DIRECT_OUT`] (the common megaflow), else `NO_DIRECT_OUT`: such a hit goes
    /// straight to its port from this line, without reading the actions (a separate
    /// allocation, one more dependent load a packet).
    pub(super) direct_out: u16,
    /// The batch that last used this entry: entries the current batch resolved to are
    /// pinned (never evicted before the batch's actions have run).
    pub(super) batch: u64,
    pub(super) packets: u64,
    pub(super) bytes: u64,
    /// TSC of the batch that last counted a packet for it (0: none yet), for dumps.
    pub(super) used: u64,
    pub(super) actions: Box<[Action]>,
    /// The masked key (every bit outside the subtable's mask is zero).
    pub(super) key: FlowKey,
    pub(super) path: SmallVec<[RuleRef; 4]>,
    /// What has already been credited to the rules on `path`.
    pub(super) pushed_packets: u64,
    pub(super) pushed_bytes: u64,
}

// What a hit touches (up to the actions' pointer and length) is on the first line.
const _: () = assert!(
    std::mem::offset_of!(MegaflowEntry, actions) + 16 <= 64,
    "megaflow entry: a hit's fields span two lines"
);

/// [`MegaflowEntry`]'s `direct_out` when the actions are not one output to a port below it.
pub(super) const NO_DIRECT_OUT: u16 = u16::MAX;

impl MegaflowEntry {
    /// The port every packet goes to when the actions are one output to a port below
    /// 65,535 and nothing else (the same as `[Action::Output(port)]`).
    #[inline(always)]
    pub fn direct_out(&self) -> Option<u32> {
        (self.direct_out != NO_DIRECT_OUT).then_some(u32::from(self.direct_out))
    }
    /// The masked key.
    pub fn key(&self) -> &FlowKey {
        &self.key
    }
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }
    pub fn ending(&self) -> Ending {
        self.ending
    }
    /// The rules this megaflow's decision went through (their counters get its counts).
    pub fn path(&self) -> &[RuleRef] {
        &self.path
    }
    pub fn packets(&self) -> u64 {
        self.packets
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// TSC when a packet last used it (the start of that batch); 0: never.
    pub fn used_tsc(&self) -> u64 {
        self.used
    }
    pub fn is_live(&self) -> bool {
        self.live
    }
    pub fn generation(&self) -> u32 {
        self.gen
    }
}

/// A megaflow as another tier names it: its slot and the slot's generation at install.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MegaflowId {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

impl MegaflowId {
    /// The cache slot (unique among live entries; reused after removal).
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The slot's generation when this megaflow was installed there.
    pub fn generation(&self) -> u32 {
        self.gen
    }
}

/// What the megaflow cache did, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MegaflowEvent {
    /// The slow path installed this megaflow.
    Installed(MegaflowId),
    /// Gone: evicted, removed by revalidation, or timed out.
    Removed(MegaflowId),
    /// Every megaflow is gone at once (no `Removed` for each).
    Flushed,
    /// The rules changed; every megaflow still live keeps its decision under the new
    /// version (`Datapath::rule_version`).
    Revalidated,
}

/// Read-only view of one live megaflow.
#[derive(Clone, Copy)]
pub struct MegaflowView<'a> {
    pub(crate) entry: &'a MegaflowEntry,
    pub(crate) mask: &'a FlowKey,
}

impl<'a> MegaflowView<'a> {
    /// The masked key.
    pub fn key(&self) -> &'a FlowKey {
        self.entry.key()
    }
    pub fn mask(&self) -> &'a FlowKey {
        self.mask
    }
    pub fn actions(&self) -> &'a [Action] {
        self.entry.actions()
    }
    pub fn ending(&self) -> Ending {
        self.entry.ending()
    }
    /// Packets and bytes counted for this megaflow (its own hits and credited ones).
    pub fn counts(&self) -> (u64, u64) {
        (self.entry.packets(), self.entry.bytes())
    }
    /// TSC when a packet last used it; 0: never.
    pub fn used_tsc(&self) -> u64 {
        self.entry.used_tsc()
    }
}

#[cfg(test)]
mod layout {
    use super::MegaflowEntry as E;
    use std::mem::{align_of, offset_of, size_of};

    /// What a hit touches stays in the entry's first cache line, the key starts the second.
    #[test]
    fn hit_fields_share_the_first_line() {
        assert_eq!(align_of::<E>(), 64);
        for end in [
            offset_of!(E, gen) + 4,
            offset_of!(E, live) + 1,
            offset_of!(E, batch) + 8,
            offset_of!(E, packets) + 8,
            offset_of!(E, bytes) + 8,
            offset_of!(E, used) + 8,
            offset_of!(E, referenced) + 1,
            offset_of!(E, ending) + 2,
            offset_of!(E, actions) + 16,
        ] {
            assert!(end <= 64, "a hit field ends at byte {end}");
        }
        assert_eq!(offset_of!(E, key), 64);
        assert_eq!(size_of::<E>(), 320);
    }
}
