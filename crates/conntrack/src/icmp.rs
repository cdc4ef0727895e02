//! ICMP and ICMPv6 as the tracker sorts them: echo (a connection of its own), errors
//! (related to the connection whose packet they quote) and the rest; and the quoted
//! packet's tuple read from an error.

use crate::tuple::Tuple;
use flowpath_packet::key::ipproto;

/// What an ICMP message is to the tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IcmpKind {
    /// Echo request (starts a connection).
    Request,
    /// Echo reply (answers one).
    Reply,
    /// Destination unreachable, time exceeded, parameter problem (and ICMPv6's packet too
    /// big): quotes the packet that caused it.
    Error,
    /// Anything else: not tracked.
    Other,
}

pub(crate) fn kind(proto: u8, ty: u8) -> IcmpKind {
    match (proto, ty) {
        (ipproto::ICMP, 8) | (ipproto::ICMPV6, 128) => IcmpKind::Request,
        (ipproto::ICMP, 0) | (ipproto::ICMPV6, 129) => IcmpKind::Reply,
        (ipproto::ICMP, 3 | 11 | 12) | (ipproto::ICMPV6, 1..=4) => IcmpKind::Error,
        _ => IcmpKind::Other,
    }
}

/// The tuple (in `zone`) of the packet quoted by the ICMP error whose header starts at
/// `l4`; `None` when the quote is cut short, of the wrong family, a non-first fragment or
/// an ICMP message other than echo.
pub(crate) fn quoted_tuple(frame: &[u8], l4: usize, ipv6: bool, zone: u16) -> Option<Tuple> {
    let ip = l4 + 8;
    let (src, dst, mut proto, mut inner_l4) = if ipv6 {
        let h = frame.get(ip..ip + 40)?;
        if h[0] >> 4 != 6 {
            return None;
        }
        let a = |o: usize| u128::from_be_bytes(h[o..o + 16].try_into().expect("16 bytes"));
        (a(8), a(24), h[6], ip + 40)
    } else {
        let h = frame.get(ip..ip + 20)?;
        let ihl = usize::from(h[0] & 0x0f) * 4;
        let frag_off = u16::from_be_bytes([h[6], h[7]]) & 0x1fff;
        if h[0] >> 4 != 4 || ihl < 20 || frag_off != 0 {
            return None;
        }
        let a = |o: usize| u128::from(u32::from_be_bytes(h[o..o + 4].try_into().expect("4"))) << 96;
        (a(12), a(16), h[9], ip + ihl)
    };
    if ipv6 {
        // Hop-by-hop, routing and destination options: skip (a fragment header: give up).
        for _ in 0..4 {
            if !matches!(
                proto,
                ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS
            ) {
                break;
            }
            let h = frame.get(inner_l4..inner_l4 + 2)?;
            proto = h[0];
            inner_l4 += (usize::from(h[1]) + 1) * 8;
        }
        if proto == ipproto::FRAGMENT {
            return None;
        }
    }
    let (src_port, dst_port) = match proto {
        ipproto::TCP | ipproto::UDP => {
            let p = frame.get(inner_l4..inner_l4 + 4)?;
            (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            )
        }
        ipproto::ICMP | ipproto::ICMPV6 => {
            if proto != if ipv6 { ipproto::ICMPV6 } else { ipproto::ICMP } {
                return None;
            }
            let p = frame.get(inner_l4..inner_l4 + 6)?;
            if !matches!(kind(proto, p[0]), IcmpKind::Request | IcmpKind::Reply) {
                return None;
            }
            (u16::from_be_bytes([p[4], p[5]]), u16::from(p[0]))
        }
        _ => (0, 0),
    };
    Some(Tuple {
        src,
        dst,
        src_port,
        dst_port,
        proto,
        ipv6,
        zone,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ICMPv6 error header (at 0) quoting an IPv6 packet with `ext` then UDP 7→9.
    fn v6_error(ext: &[u8], next: u8) -> Vec<u8> {
        let mut f = vec![1, 4, 0, 0, 0, 0, 0, 0];
        let mut ip = vec![0x60, 0, 0, 0, 0, 8, next, 64];
        ip.extend_from_slice(&[0xfd; 16]);
        ip.extend_from_slice(&[0xfe; 16]);
        f.extend_from_slice(&ip);
        f.extend_from_slice(ext);
        f.extend_from_slice(&[0, 7, 0, 9, 0, 8, 0, 0]);
        f
    }

    #[test]
    fn ipv6_quotes_skip_option_headers_and_refuse_fragments() {
        let plain = quoted_tuple(&v6_error(&[], ipproto::UDP), 0, true, 3).unwrap();
        assert_eq!((plain.src_port, plain.dst_port, plain.zone), (7, 9, 3));
        assert_eq!(plain.src, u128::from_be_bytes([0xfd; 16]));
        let hop = [ipproto::UDP, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            quoted_tuple(&v6_error(&hop, ipproto::HOPOPTS), 0, true, 3),
            Some(plain)
        );
        let frag = [ipproto::UDP, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            quoted_tuple(&v6_error(&frag, ipproto::FRAGMENT), 0, true, 3),
            None
        );
        // Cut short, or the wrong family.
        let f = v6_error(&[], ipproto::UDP);
        assert_eq!(quoted_tuple(&f[..50], 0, true, 3), None);
        assert_eq!(quoted_tuple(&f, 0, false, 3), None);
    }

    #[test]
    fn ipv4_quotes_of_later_fragments_and_non_echo_icmp_are_refused() {
        let mut f = vec![3, 1, 0, 0, 0, 0, 0, 0];
        f.extend_from_slice(&[0x45, 0, 0, 28, 0, 1, 0, 0, 64, ipproto::ICMP, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend_from_slice(&[8, 0, 0, 0, 0x12, 0x34, 0, 1]);
        let t = quoted_tuple(&f, 0, false, 0).unwrap();
        assert_eq!((t.src_port, t.dst_port), (0x1234, 8));
        assert_eq!(t.reverse().dst_port, 0, "an echo request's reply");
        f[28] = 13; // timestamp
        assert_eq!(quoted_tuple(&f, 0, false, 0), None);
        f[28] = 8;
        f[14] = 0x01; // fragment offset 8 bytes
        assert_eq!(quoted_tuple(&f, 0, false, 0), None);
    }

    #[test]
    fn kinds() {
        assert_eq!(kind(ipproto::ICMP, 8), IcmpKind::Request);
        assert_eq!(kind(ipproto::ICMPV6, 129), IcmpKind::Reply);
        assert_eq!(kind(ipproto::ICMPV6, 2), IcmpKind::Error);
        assert_eq!(kind(ipproto::ICMPV6, 135), IcmpKind::Other);
        assert_eq!(kind(ipproto::ICMP, 5), IcmpKind::Other);
    }
}
