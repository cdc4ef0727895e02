//! `CtMemo`: the second pass of a `ct(table=T)` flow, remembered. One per worker, no locks.
//!
//! A security-group pipeline sends every packet through the lookup stages twice: the
//! first pass's megaflow says `ct(zone=Z,table=T)`, the tracker sets the packet's ct
//! fields, and the second pass looks the packet up again under its new key (`recirc_id`,
//! `ct_state`, mark, label, original tuple) to find `output` or `drop`. Hashing and
//! comparing the second key costs as much as the first pass's lookup, and queueing the
//! packet for a pass of its own costs more.
//!
//! The memo keeps, per first-pass key, the second-pass key the tracker produced last time
//! and the megaflow that answered it, in one of two entries chosen by the first pass's
//! hash (known already: no second hash). The key's words before the ct fields say which
//! flow an entry is for (a first pass's key is the second's without them). When the tracker produces the same second key again, that
//! megaflow (if it is still live, same generation) is the decision, exactly as the EMC
//! would have found it: the packet is sent at once, in the first pass. Anything else (a
//! new state, a new mark, another flow at that position) goes the normal way, and the
//! entry is dropped so that the flow's later packets in the batch keep their order.
//!
//! Each entry also keeps the tracker's [`ConnHint`] for the flow: the next packet's
//! tracker call tries that connection slot before hashing its tuple.

use crate::megaflow::MegaflowId;
use flowpath_conntrack::ConnHint;
use flowpath_packet::{Field, FlowKey};

/// One remembered second pass: the key it was looked up with, the megaflow that
/// answered, and the connection the flow's packets belong to.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct MemoEntry {
    key: FlowKey,
    mf: Option<MegaflowId>,
    hint: Option<ConnHint>,
}

const _: () = assert!(std::mem::size_of::<MemoEntry>() == 192, "memo entry layout");

const EMPTY: MemoEntry = MemoEntry {
    key: FlowKey::ZERO,
    mf: None,
    hint: None,
};

/// The first word of the key's connection-tracking part (`recirc_id` and the ct fields,
/// set by the tracker; zero in a first pass's key). The words before it say which flow an
/// entry is for, those from it which second pass.
const CT_WORD: usize = Field::RecircId.range().0 / 8;

const _: () = assert!(
    Field::RecircId.range().0 % 8 == 0 && Field::CtState.range().0 / 8 == CT_WORD,
    "the ct fields start a key word"
);

/// A flow's second pass, to remember once it has run: where its memo entry is and the
/// connection the tracker found.
#[derive(Clone, Copy)]
pub(crate) struct MemoSeed {
    pub(crate) at: u32,
    pub(crate) hint: Option<ConnHint>,
}

impl MemoSeed {
    pub(crate) const NONE: MemoSeed = MemoSeed { at: 0, hint: None };
}

/// Where a flow may be in the memo (two candidate entries), and the one it is in.
#[derive(Clone, Copy)]
pub(crate) struct Place {
    ways: [u32; 2],
    pub(crate) found: Option<u32>,
}

impl Place {
    /// The entry to remember the flow's next second pass in: its own, else an empty
    /// candidate, else the first (a direct-mapped eviction).
    pub(crate) fn target(&self, memo: &CtMemo) -> u32 {
        self.found.unwrap_or_else(|| {
            let empty = |w: &u32| {
                memo.table
                    .as_ref()
                    .is_some_and(|t| t[*w as usize].mf.is_none())
            };
            self.ways
                .iter()
                .copied()
                .find(empty)
                .unwrap_or(self.ways[0])
        })
    }
}

/// The memo: two tables' worth of the EMC's entries per table, 192 bytes each, allocated
/// at the first `ct` that can use it (most datapaths never track).
pub(crate) struct CtMemo {
    table: Option<Box<[MemoEntry]>>,
    entries: usize,
}

impl CtMemo {
    /// A memo of `entries` (rounded up to a power of two) once used.
    pub(crate) fn new(entries: usize) -> CtMemo {
        CtMemo {
            table: None,
            entries: entries.max(2).next_power_of_two(),
        }
    }

    /// Where the flow whose first-pass key `key` hashed to `hash` is (or may go), and
    /// the connection hint its entry keeps.
    #[inline(always)]
    pub(crate) fn place(&mut self, hash: u32, key: &FlowKey) -> (Place, Option<ConnHint>) {
        let n = self.entries;
        let t = self
            .table
            .get_or_insert_with(|| vec![EMPTY; n].into_boxed_slice());
        let m = t.len() - 1;
        // The EMC indexes by the hash's low bits: these spread differently.
        let a = hash.rotate_right(16) as usize & m;
        let b = (hash.wrapping_mul(0x9e37_79b1).rotate_right(7) as usize & m)
            ^ usize::from(hash.wrapping_mul(0x9e37_79b1).rotate_right(7) as usize & m == a);
        let ways = [a as u32, b as u32];
        let same_flow = |w: &u32| {
            let e = &t[*w as usize];
            e.mf.is_some() && e.key.words[..CT_WORD] == key.words[..CT_WORD]
        };
        let found = ways.iter().copied().find(same_flow);
        let hint = found.and_then(|w| t[w as usize].hint);
        (Place { ways, found }, hint)
    }

    /// The megaflow remembered at `at` (the flow's entry) for second-pass key `key`, if
    /// that is the second pass remembered. Otherwise the entry is dropped: the flow's
    /// state changed, and its later packets in this batch must take the same way as this
    /// one, to keep their order.
    #[inline(always)]
    pub(crate) fn find(&mut self, at: u32, key: &FlowKey) -> Option<MegaflowId> {
        let e = &mut self.table.as_mut()?[at as usize];
        let mf = e.mf?;
        if e.key.words[CT_WORD..] == key.words[CT_WORD..] {
            Some(mf)
        } else {
            e.mf = None;
            None
        }
    }

    /// Drop the entry at `at` (its megaflow no longer answers as remembered).
    pub(crate) fn forget(&mut self, at: u32) {
        if let Some(t) = &mut self.table {
            t[at as usize].mf = None;
        }
    }

    /// Remember at `at` that second-pass key `key` was answered by megaflow `mf`.
    pub(crate) fn remember(
        &mut self,
        at: u32,
        key: &FlowKey,
        mf: MegaflowId,
        hint: Option<ConnHint>,
    ) {
        if let Some(t) = &mut self.table {
            t[at as usize] = MemoEntry {
                key: *key,
                mf: Some(mf),
                hint,
            };
        }
    }

    /// Forget everything (the caches are flushed, or the tracker replaced).
    pub(crate) fn clear(&mut self) {
        if let Some(t) = &mut self.table {
            t.fill(EMPTY);
        }
    }
}
