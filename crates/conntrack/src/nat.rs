//! NAT's frame rewrite: a packet's addresses, ports or ICMP echo id from one tuple to
//! another with every checksum they are under updated incrementally (RFC 1624), and the
//! same for ICMP errors and the packet they quote.
//!
//! Which tuple a connection's packets are translated to is the table's choice; this module
//! only rewrites frames. Nothing here allocates; a frame too short for a field the rewrite
//! needs is refused (`false`) before anything is written.

mod fields;

use crate::tuple::Tuple;
use fields::{addr_bytes, fix_csum, ip_header, l4_fields, put, IpHeader, L4Fields};
use flowpath_packet::checksum::{finish, sum16};
use flowpath_packet::key::ipproto;

/// How one direction of a connection is rewritten: its packets arrive as `from` and leave
/// as `to`. Each address and port (ICMP echo: the identifier, in `src_port`) in which the
/// two differ is set to `to`'s; the checksums follow the bytes actually replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rewrite {
    pub from: Tuple,
    pub to: Tuple,
}

impl Rewrite {
    /// The rewrite of the opposite direction: the same translation undone.
    pub fn reverse(&self) -> Rewrite {
        Rewrite {
            from: self.to.reverse(),
            to: self.from.reverse(),
        }
    }

    /// Nothing to rewrite.
    pub fn is_identity(&self) -> bool {
        self.from.src == self.to.src
            && self.from.dst == self.to.dst
            && self.from.src_port == self.to.src_port
            && self.from.dst_port == self.to.dst_port
    }
}

/// Rewrite `frame` (whose IP header starts at `l3` and L4 header at `l4`) from `rw.from`
/// to `rw.to`: the source and destination addresses, TCP/UDP ports and ICMP echo id that
/// differ between the two, with the IPv4 header checksum and the L4 checksum (TCP, UDP
/// unless 0, ICMPv6 with its pseudo-header, ICMP for the id) updated. `rw.from.ipv6` says
/// which IP version the frame holds and `rw.from.proto` its protocol (checked against the
/// IPv4 header); the transport header must lie inside the IP packet. An IPv4 fragment
/// after the first gets its addresses rewritten only.
/// Returns false, writing nothing, when the frame is not that or too short.
pub fn apply(frame: &mut [u8], l3: usize, l4: usize, rw: &Rewrite) -> bool {
    let proto = rw.from.proto;
    let Some(ip) = ip_header(frame, l3, rw.from.ipv6) else {
        return false;
    };
    if !ip.v6 && frame[l3 + 9] != proto || l4 < ip.hdr_end {
        return false;
    }
    let l4f = if ip.later_fragment {
        L4Fields::default()
    } else {
        match l4_fields(frame, l4, ip.end.min(frame.len()), proto, true) {
            Some(f) => f,
            None => return false,
        }
    };
    let pseudo = rewrite_addrs(frame, &ip, &rw.from, &rw.to);
    rewrite_l4(frame, &l4f, pseudo, &rw.from, &rw.to);
    true
}

/// Rewrite an ICMP error (ICMPv4 destination unreachable, source quench, redirect, time
/// exceeded, parameter problem; ICMPv6 types 1–4) at `l4` that quotes a packet of a
/// NATed connection.
///
/// `rw` is the rewrite of the direction the error travels in, the same one the
/// connection's ordinary packets in that direction get (for an error about an
/// original-direction packet, the reply direction's rewrite). The quoted packet travelled
/// the other way, so it is rewritten with `rw` reversed: its source from `rw.from.dst` to
/// `rw.to.dst` (with the port), its destination from `rw.from.src` to `rw.to.src`. The
/// outer header's addresses are rewritten where they equal `rw.from`'s (the destination,
/// the quoted packet's sender; the source when the error comes from the connection's
/// other end, not a router on the way). Fixed: the outer IPv4 header checksum, the quoted
/// IPv4 header checksum, the quoted transport checksum where the quote holds it, and the
/// ICMP checksum (summed anew over the message, as Linux does). `rw.from.proto` is the
/// quoted packet's protocol. Returns false, writing nothing, when the frame is not such
/// an error or is too short (the quote needs its IP header and the first 8 bytes of the
/// transport header).
pub fn apply_related(frame: &mut [u8], l3: usize, l4: usize, rw: &Rewrite) -> bool {
    let Some(outer) = ip_header(frame, l3, rw.from.ipv6) else {
        return false;
    };
    let icmp = if outer.v6 {
        ipproto::ICMPV6
    } else {
        ipproto::ICMP
    };
    let end = outer.end;
    let inner_l3 = l4.saturating_add(8);
    if (!outer.v6 && frame[l3 + 9] != icmp)
        || l4 < outer.hdr_end
        || outer.later_fragment
        || end > frame.len()
        || inner_l3 >= end
        || !is_error(icmp, frame[l4])
    {
        return false;
    }
    let Some(inner) = ip_header(&frame[..end], inner_l3, outer.v6) else {
        return false;
    };
    let inner_l4 = if inner.v6 {
        // The quoted header's next header must be the transport itself.
        if frame[inner_l3 + 6] != rw.from.proto {
            return false;
        }
        inner_l3 + 40
    } else {
        if frame[inner_l3 + 9] != rw.from.proto || inner.later_fragment {
            return false;
        }
        inner_l3 + usize::from(frame[inner_l3] & 0x0f) * 4
    };
    let Some(inner_f) = l4_fields(frame, inner_l4, end, rw.from.proto, false) else {
        return false;
    };

    // The quoted packet: the reverse rewrite.
    let (back_from, back_to) = (rw.from.reverse(), rw.to.reverse());
    let pseudo = rewrite_addrs(frame, &inner, &back_from, &back_to);
    rewrite_l4(frame, &inner_f, pseudo, &back_from, &back_to);

    // The outer header: each address where it is `rw.from`'s.
    let (s, d) = (outer.src_at, outer.src_at + outer.alen);
    let (mut f, mut t) = (rw.from, rw.from);
    f.src = read_addr(frame, s, outer.alen);
    f.dst = read_addr(frame, d, outer.alen);
    t.src = if f.src == rw.from.src {
        rw.to.src
    } else {
        f.src
    };
    t.dst = if f.dst == rw.from.dst {
        rw.to.dst
    } else {
        f.dst
    };
    rewrite_addrs(frame, &outer, &f, &t);

    // The ICMP checksum, over the whole message (and IPv6's pseudo-header).
    frame[l4 + 2..l4 + 4].fill(0);
    let mut acc = sum16(&frame[l4..end], 0);
    if outer.v6 {
        acc = sum16(&frame[s..d + outer.alen], acc);
        acc += (end - l4) as u64 + u64::from(ipproto::ICMPV6);
    }
    let c = finish(acc);
    frame[l4 + 2..l4 + 4].copy_from_slice(&c.to_be_bytes());
    true
}

/// ICMP error types (the ones that quote a packet).
fn is_error(icmp: u8, ty: u8) -> bool {
    match icmp {
        ipproto::ICMP => matches!(ty, 3 | 4 | 5 | 11 | 12),
        _ => matches!(ty, 1..=4),
    }
}

/// The address at `at` as a tuple holds it.
fn read_addr(frame: &[u8], at: usize, alen: usize) -> u128 {
    let mut b = [0u8; 16];
    b[..alen].copy_from_slice(&frame[at..at + alen]);
    if alen == 4 {
        u128::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])) << 96
    } else {
        u128::from_be_bytes(b)
    }
}

/// Write `to`'s addresses where they differ from `from`'s, fix the IPv4 header checksum,
/// and return the pseudo-header checksum difference.
fn rewrite_addrs(frame: &mut [u8], ip: &IpHeader, from: &Tuple, to: &Tuple) -> u32 {
    let n = ip.alen;
    let mut delta = 0;
    if from.src != to.src {
        delta += put(frame, ip.src_at, &addr_bytes(to.src, n)[..n]);
    }
    if from.dst != to.dst {
        delta += put(frame, ip.src_at + n, &addr_bytes(to.dst, n)[..n]);
    }
    if let Some(at) = ip.csum_at {
        fix_csum(frame, at, delta, false);
    }
    delta
}

/// Write the ports or echo id that differ between `from` and `to` and fix the transport
/// checksum (with `pseudo`, the addresses' difference, where it covers them).
fn rewrite_l4(frame: &mut [u8], f: &L4Fields, pseudo: u32, from: &Tuple, to: &Tuple) {
    let mut delta = if f.pseudo { pseudo } else { 0 };
    if let Some(at) = f.ports_at {
        if from.src_port != to.src_port {
            delta += put(frame, at, &to.src_port.to_be_bytes());
        }
        if from.dst_port != to.dst_port {
            delta += put(frame, at + 2, &to.dst_port.to_be_bytes());
        }
    }
    if let Some(at) = f.id_at {
        if from.src_port != to.src_port {
            delta += put(frame, at, &to.src_port.to_be_bytes());
        }
    }
    if let Some(at) = f.csum_at {
        fix_csum(frame, at, delta, f.zero_is_none);
    }
}
