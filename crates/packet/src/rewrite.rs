//! Header rewrites: the actions that change packet bytes, with checksums kept right.

use crate::action::Action;
use crate::packet::Packet;
use crate::parse::PacketMeta;

/// Why a rewrite dropped the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewriteDrop {
    /// `DecTtl` on a packet whose TTL / hop limit is 0 or 1.
    TtlExpired,
    /// A VLAN push with neither headroom nor tailroom left in the buffer.
    NoRoom,
}

/// Apply one rewrite action to `pkt`, whose headers `meta` describes (offsets from the
/// start of `pkt.data()`, with `meta.l2 == 0`); `meta` is updated when headers move.
/// Non-rewrite actions (`Output`, `InPort`, `Controller`) are a no-op here.
pub fn apply(action: &Action, pkt: &mut Packet<'_>, meta: &mut PacketMeta) -> Result<(), RewriteDrop> {
    let _ = (action, pkt, meta);
    todo!("rewrites: being written")
}
