//! Connection tracking in the datapath: running a `ct(...)` action through the tracker,
//! and the packets it recirculates. `ct(table=T)` gives a packet its ct fields and
//! `recirc_id` (T's) and queues it for the next pass through the lookup stages; the
//! datapath runs each pass's queue as batches (`datapath/recirculate.rs`).
//!
//! Fork semantics (OVS's): when actions that output or modify follow `ct(table=T)`, the
//! tracked packet is a copy and the packet itself goes on, untracked, with them; when
//! nothing does (the common case), the packet itself moves to the next pass, uncopied:
//! its frame, key and offsets stay where they are (a bit in [`Recirc::moved`]), unless
//! the pass also runs copies (then it is queued with its key).

use crate::stats::{DatapathDrop, DatapathStats};
use flowpath_base::packet::HEADROOM;
use flowpath_base::BATCH;
use flowpath_conntrack::{CtConfig, Tracker};
use flowpath_packet::ct::recirc_id;
use flowpath_packet::{Action, CtId, Field, FlowKey, Packet, PacketMeta};
use std::sync::Arc;

/// Passes a packet may make through the lookup stages (the first included); a `ct(table=)`
/// in the last one drops the packet (`recirc_depth`).
pub const MAX_PASSES: u8 = 8;

/// Packets one pass may queue for the next (copies, and packets of a pass that runs
/// copies: forks can make more than a batch holds); past it a recirculation is dropped
/// (`recirc_overflow`). Packets that stay in place are at most a batch and not counted.
pub const RECIRC_MAX: usize = 8 * BATCH;

/// Where a recirculated packet's frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// Packet `i` of the received batch (moved: the frame is where it was received).
    Batch(u8),
    /// Not in the received batch (a copy, a packet-out): a recirculation copies it.
    Detached,
    /// A copy a fork made: `len` bytes at [`HEADROOM`] in copy buffer `buf`.
    Copy { buf: u16, len: u32 },
}

/// One packet queued for the next pass: its frame, its key (ct fields and `recirc_id`
/// set) and its headers' offsets.
pub(crate) struct RecircPacket {
    pub(crate) src: Src,
    pub(crate) key: FlowKey,
    pub(crate) meta: PacketMeta,
}

/// The recirculation state of one datapath: the next pass's packets, the copies forks
/// made for it, the pass being run, and the tracker's clock for this batch.
pub(crate) struct Recirc {
    pub(crate) next: Vec<RecircPacket>,
    /// The next pass's packets that stay in place: bit i, packet i of the received batch,
    /// its key and offsets at index i of the scratch arrays (set while the pass running
    /// is `in_place`).
    pub(crate) moved: u32,
    /// Whether the pass running has its packets at their batch index in the scratch
    /// arrays (a received batch, or a pass of only such packets): then a packet moved on
    /// stays there.
    pub(crate) in_place: bool,
    /// The pass being run's queue and copies (kept here between batches, recycled).
    pub(crate) cur: Vec<RecircPacket>,
    pub(crate) cur_bufs: Vec<Vec<u8>>,
    /// The frames of the next pass's copies (recycled: a buffer grows to the largest
    /// frame it held and is reused, so a fork allocates only until the buffers are warm).
    pub(crate) next_bufs: Vec<Vec<u8>>,
    pub(crate) next_used: usize,
    /// The pass being run: 1 for a received batch.
    pub(crate) pass: u8,
    /// The tracker's clock, read at this batch's first `ct` (0: not yet).
    pub(crate) now_ms: Option<u64>,
    /// Whether this datapath has run `ct` (then it expires connections between batches).
    pub(crate) used: bool,
    /// TSC of the last expiry step.
    pub(crate) expired_at: u64,
}

impl Recirc {
    pub(crate) fn new() -> Recirc {
        Recirc {
            next: Vec::with_capacity(BATCH),
            moved: 0,
            in_place: true,
            cur: Vec::with_capacity(BATCH),
            cur_bufs: Vec::new(),
            next_bufs: Vec::new(),
            next_used: 0,
            pass: 1,
            now_ms: None,
            used: false,
            expired_at: 0,
        }
    }

    /// Copy `frame` into the next free copy buffer (at [`HEADROOM`], with as much room
    /// after it); its index.
    fn copy_frame(&mut self, frame: &[u8]) -> u16 {
        if self.next_used == self.next_bufs.len() {
            self.next_bufs.push(Vec::new());
        }
        let b = &mut self.next_bufs[self.next_used];
        let need = 2 * HEADROOM + frame.len();
        if b.len() < need {
            b.resize(need, 0);
        }
        b[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
        self.next_used += 1;
        (self.next_used - 1) as u16
    }
}

/// What one packet's `ct` actions need: the tracker (made at the first need), the
/// recirculation state, and where the packet's frame is.
pub(crate) struct CtRun<'a> {
    pub(crate) tracker: &'a mut Option<Arc<Tracker>>,
    pub(crate) rc: &'a mut Recirc,
    pub(crate) src: Src,
}

/// Whether an action after `ct(table=)` leaves the packet as it is and sends nothing:
/// then the packet itself is recirculated, not a copy.
#[inline]
pub(crate) fn inert(a: &Action) -> bool {
    matches!(
        a,
        Action::SetTunnel(_)
            | Action::SetTunnelDst(_)
            | Action::CtClear
            | Action::WriteMetadata { .. }
            | Action::Table
    )
}

/// Run `ct(id)` on `pkt` (headers at `meta`, working key `key`); `rest` is the actions
/// after it. True when the packet is done in this pass: moved to the next one, or
/// dropped (`recirc_depth`, `recirc_overflow`); false when it goes on with `rest`.
#[inline(never)]
pub(crate) fn ct_action(
    id: CtId,
    rest: &[Action],
    pkt: &mut Packet<'_>,
    meta: &PacketMeta,
    key: &mut FlowKey,
    run: &mut CtRun<'_>,
    st: &mut DatapathStats,
) -> bool {
    let spec = id.spec();
    let rc = &mut *run.rc;
    rc.used = true;
    let tracker = run
        .tracker
        .get_or_insert_with(|| Arc::new(Tracker::new(CtConfig::default())));
    let now = *rc.now_ms.get_or_insert_with(|| tracker.now_ms());
    let Some(table) = spec.table else {
        // The packet goes on; its key for the rest of this pass is unchanged.
        let mut k = *key;
        st.ct_executed += 1;
        let s = track(pkt, spec.nat.is_some(), |f| {
            tracker.execute(f, meta, &mut k, spec, now)
        });
        count_new(st, s);
        return false;
    };
    let fork = rest.iter().any(|a| !inert(a));
    if rc.pass >= MAX_PASSES {
        st.drop(DatapathDrop::RecircDepth);
        return !fork;
    }
    if let (Src::Batch(i), false, true) = (run.src, fork, rc.in_place) {
        // The common case: the packet stays where it is for the next pass, its key and
        // offsets in the pass's scratch (no copy at all).
        st.ct_executed += 1;
        st.recirculations += 1;
        let s = track(pkt, spec.nat.is_some(), |f| {
            tracker.execute(f, meta, key, spec, now)
        });
        count_new(st, s);
        key.set(Field::RecircId, u128::from(recirc_id(table)));
        rc.moved |= 1 << i;
        return true;
    }
    if rc.next.len() >= RECIRC_MAX {
        st.drop(DatapathDrop::RecircOverflow);
        return !fork;
    }
    st.ct_executed += 1;
    st.recirculations += 1;
    // The queued packet's key is written in its queue slot (one copy of the key).
    let src = match run.src {
        Src::Batch(i) if !fork => Src::Batch(i),
        _ => Src::Copy {
            buf: rc.copy_frame(pkt.data()),
            len: pkt.len() as u32,
        },
    };
    rc.next.push(RecircPacket {
        src,
        key: *key,
        meta: *meta,
    });
    let Some(q) = rc.next.last_mut() else {
        return !fork;
    };
    let rk = &mut q.key;
    let s = match src {
        Src::Copy { buf, len } => {
            let f = &mut rc.next_bufs[buf as usize][HEADROOM..HEADROOM + len as usize];
            tracker.execute(f, meta, rk, spec, now)
        }
        _ => track(pkt, spec.nat.is_some(), |f| {
            tracker.execute(f, meta, rk, spec, now)
        }),
    };
    count_new(st, s);
    rk.set(Field::RecircId, u128::from(recirc_id(table)));
    !fork
}

/// Run the tracker (`exec`) on `pkt`'s frame. Only NAT writes to the frame: without it
/// the packet is not marked modified (a source that replays its frames restores the
/// modified ones).
#[inline(always)]
fn track(pkt: &mut Packet<'_>, nat: bool, exec: impl FnOnce(&mut [u8]) -> u8) -> u8 {
    let was = pkt.modified;
    let s = exec(pkt.data_mut());
    if !nat {
        pkt.modified = was;
    }
    s
}

/// Count a `+new` packet (not one the tracker refused as `+inv`).
#[inline(always)]
pub(crate) fn count_new(st: &mut DatapathStats, ct_state: u8) {
    use flowpath_packet::ct::state::{INVALID, NEW};
    st.ct_new += u64::from(ct_state & (NEW | INVALID) == NEW);
}
