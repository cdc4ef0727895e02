//! Connection hints: which slot and direction a flow's last packet had, so that the
//! flow's next packet can try that connection before hashing its tuple.

use crate::conn::{Conn, Slab};
use crate::tuple::Tuple;
use std::sync::MutexGuard;

/// What a packet's lookup found: its slot, the locked connection, and whether the packet
/// is in the reply direction.
pub(crate) type Found<'a> = (u32, MutexGuard<'a, Conn>, bool);

/// Which connection, and which of its directions, a flow's packets belong to: what
/// [`Tracker::execute_hinted`] returns and takes back for the flow's next packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnHint {
    slot: u32,
    reply: bool,
}

impl ConnHint {
    pub(crate) fn of(at: &Found<'_>) -> ConnHint {
        ConnHint {
            slot: at.0,
            reply: at.2,
        }
    }
}

/// The connection `hint` names in `slab`, locked, if it is live and has tuple `t` in the
/// hinted direction (as the tracker's lookup would have found it).
#[inline]
pub(crate) fn at_hint<'a>(slab: &'a Slab, hint: ConnHint, t: &Tuple) -> Option<Found<'a>> {
    let c = slab.try_get(hint.slot)?;
    let reply = c.orig != *t;
    (c.live() && (!reply || c.reply == *t) && reply == hint.reply).then_some((hint.slot, c, reply))
}
