//! NAT rewrites on random IPv4/IPv6 TCP/UDP/ICMP frames and ICMP errors built with
//! etherparse: the fields end up as the rewrite says, the rest of the frame is untouched,
//! and every checksum verifies against a from-scratch computation written here.

use etherparse::{icmpv4, icmpv6, Icmpv4Type, Icmpv6Type, PacketBuilder};
use flowpath_conntrack::nat::{apply, apply_related, Rewrite};
use flowpath_conntrack::Tuple;
use proptest::prelude::*;

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;
const L3: usize = 14;

/// RFC 1071 sum of `data` (odd length padded), folded, not complemented.
fn ones_sum(chunks: &[&[u8]]) -> u16 {
    let mut s: u64 = 0;
    for data in chunks {
        for (i, b) in data.iter().enumerate() {
            s += if i % 2 == 0 {
                u64::from(*b) << 8
            } else {
                u64::from(*b)
            };
        }
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The IP header at `l3` verifies (IPv6: has no checksum) and the transport segment after
/// it too, with its pseudo-header; returns the segment's offset and end.
fn verify(frame: &[u8], l3: usize, what: &str) -> (usize, usize) {
    let v6 = frame[l3] >> 4 == 6;
    let (l4, end, proto, pseudo) = if v6 {
        let plen = usize::from(u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]));
        let (l4, end) = (l3 + 40, l3 + 40 + plen);
        let mut p = frame[l3 + 8..l3 + 40].to_vec();
        p.extend_from_slice(&(plen as u32).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, frame[l3 + 6]]);
        (l4, end, frame[l3 + 6], p)
    } else {
        let ihl = usize::from(frame[l3] & 15) * 4;
        assert_eq!(
            ones_sum(&[&frame[l3..l3 + ihl]]),
            0xffff,
            "{what}: IPv4 header checksum"
        );
        let total = usize::from(u16::from_be_bytes([frame[l3 + 2], frame[l3 + 3]]));
        let (l4, end) = (l3 + ihl, l3 + total);
        let mut p = frame[l3 + 12..l3 + 20].to_vec();
        p.extend_from_slice(&[0, frame[l3 + 9]]);
        p.extend_from_slice(&((end - l4) as u16).to_be_bytes());
        (l4, end, frame[l3 + 9], p)
    };
    let seg = &frame[l4..end.min(frame.len())];
    match proto {
        UDP if seg[6..8] == [0, 0] => {}
        TCP | UDP | ICMPV6 => {
            assert_eq!(
                ones_sum(&[&pseudo, seg]),
                0xffff,
                "{what}: L4 checksum ({proto})"
            )
        }
        ICMP => assert_eq!(ones_sum(&[seg]), 0xffff, "{what}: ICMP checksum"),
        _ => {}
    }
    (l4, end)
}

fn v4(a: u32) -> u128 {
    u128::from(a) << 96
}

fn addr(frame: &[u8], at: usize, v6: bool) -> u128 {
    if v6 {
        u128::from_be_bytes(frame[at..at + 16].try_into().unwrap())
    } else {
        v4(u32::from_be_bytes(frame[at..at + 4].try_into().unwrap()))
    }
}

fn a4(a: u128) -> [u8; 4] {
    ((a >> 96) as u32).to_be_bytes()
}

/// A connection's packet: an Ethernet frame of `t` (ICMP: an echo request, id in
/// `src_port`) with `payload`.
fn frame_of(t: &Tuple, payload: &[u8]) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut out = Vec::new();
    let ip = if t.ipv6 {
        eth.ipv6(t.src.to_be_bytes(), t.dst.to_be_bytes(), 64)
    } else {
        eth.ipv4(a4(t.src), a4(t.dst), 64)
    };
    match t.proto {
        TCP => ip
            .tcp(t.src_port, t.dst_port, 0x1234_5678, 4096)
            .ack(99)
            .write(&mut out, payload),
        UDP => ip.udp(t.src_port, t.dst_port).write(&mut out, payload),
        ICMP => ip
            .icmpv4_echo_request(t.src_port, 7)
            .write(&mut out, payload),
        _ => ip
            .icmpv6_echo_request(t.src_port, 7)
            .write(&mut out, payload),
    }
    .unwrap();
    out
}

/// The connection's own fields as the frame holds them now.
fn fields_of(frame: &[u8], t: &Tuple) -> Tuple {
    let (l4, n) = if t.ipv6 { (L3 + 40, 16) } else { (L3 + 20, 4) };
    let src_at = if t.ipv6 { L3 + 8 } else { L3 + 12 };
    let p = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    let (src_port, dst_port) = match t.proto {
        TCP | UDP => (p(l4), p(l4 + 2)),
        _ => (p(l4 + 4), t.dst_port),
    };
    Tuple {
        src: addr(frame, src_at, t.ipv6),
        dst: addr(frame, src_at + n, t.ipv6),
        src_port,
        dst_port,
        ..*t
    }
}

fn tuple(v6: bool, proto: u8, a: [u128; 2], p: [u16; 2]) -> Tuple {
    let (src, dst) = if v6 {
        (a[0], a[1])
    } else {
        (v4(a[0] as u32), v4(a[1] as u32))
    };
    let icmp = matches!(proto, ICMP | ICMPV6);
    Tuple {
        src,
        dst,
        src_port: p[0],
        dst_port: if icmp {
            if v6 {
                128
            } else {
                8
            }
        } else {
            p[1]
        },
        proto: if icmp && v6 { ICMPV6 } else { proto },
        ipv6: v6,
        zone: 0,
    }
}

/// `from` with each of its fields changed or not as `change` says.
fn changed(from: &Tuple, change: u8, a: [u128; 2], p: [u16; 2]) -> Tuple {
    let other = tuple(from.ipv6, from.proto, a, p);
    let icmp = matches!(from.proto, ICMP | ICMPV6);
    Tuple {
        src: if change & 1 != 0 { other.src } else { from.src },
        dst: if change & 2 != 0 { other.dst } else { from.dst },
        src_port: if change & 4 != 0 {
            other.src_port
        } else {
            from.src_port
        },
        dst_port: if change & 8 != 0 && !icmp {
            other.dst_port
        } else {
            from.dst_port
        },
        ..*from
    }
}

fn proto_strategy() -> impl Strategy<Value = u8> {
    prop_oneof![Just(TCP), Just(UDP), Just(ICMP)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn rewritten_frames_verify(
        v6 in any::<bool>(),
        proto in proto_strategy(),
        a in any::<[u128; 4]>(),
        p in any::<[u16; 4]>(),
        change in 0u8..16,
        payload in proptest::collection::vec(any::<u8>(), 0..70),
        zero_udp in any::<bool>(),
    ) {
        let from = tuple(v6, proto, [a[0], a[1]], [p[0], p[1]]);
        let to = changed(&from, change, [a[2], a[3]], [p[2], p[3]]);
        let mut f = frame_of(&from, &payload);
        let l4 = if v6 { L3 + 40 } else { L3 + 20 };
        let zeroed = zero_udp && proto == UDP;
        if zeroed {
            f[l4 + 6..l4 + 8].fill(0);
        }
        let before = f.clone();
        let ok = apply(&mut f, L3, l4, &Rewrite { from, to });
        prop_assert!(ok);
        prop_assert_eq!(fields_of(&f, &from), to);
        verify(&f, L3, "rewritten");
        if zeroed {
            prop_assert_eq!(&f[l4 + 6..l4 + 8], &[0, 0], "UDP checksum 0 stays 0");
        }
        // Only the fields and checksums changed: the payload and headers' rest did not.
        prop_assert_eq!(&f[f.len() - payload.len()..], &payload[..]);
        prop_assert_eq!(&f[..L3 + 2], &before[..L3 + 2]);
        // And back.
        let ok = apply(&mut f, L3, l4, &Rewrite { from: to, to: from });
        prop_assert!(ok);
        prop_assert_eq!(&f, &before);
    }

    #[test]
    fn truncated_frames_are_refused_untouched(
        v6 in any::<bool>(),
        proto in proto_strategy(),
        a in any::<[u128; 4]>(),
        p in any::<[u16; 4]>(),
        change in 0u8..16,
        cut in any::<prop::sample::Index>(),
        related in any::<bool>(),
    ) {
        let from = tuple(v6, proto, [a[0], a[1]], [p[0], p[1]]);
        let to = changed(&from, change, [a[2], a[3]], [p[2], p[3]]);
        let rw = Rewrite { from, to };
        let full = if related { error_frame(&from, false, true, 40) } else { frame_of(&from, &[]) };
        let mut f = full[..cut.index(full.len())].to_vec();
        let l4 = if v6 { L3 + 40 } else { L3 + 20 };
        let before = f.clone();
        let ok = if related { apply_related(&mut f, L3, l4, &rw) } else { apply(&mut f, L3, l4, &rw) };
        if !ok {
            prop_assert_eq!(f, before);
        }
        // Offsets past the end, or before the header: refused, not a panic.
        let mut g = full.clone();
        prop_assert!(!apply(&mut g, full.len(), full.len() + 20, &rw));
        prop_assert!(!apply_related(&mut g, usize::MAX - 4, usize::MAX, &rw));
    }

    #[test]
    fn icmp_errors_are_rewritten_inside_and_out(
        v6 in any::<bool>(),
        proto in proto_strategy(),
        a in any::<[u128; 4]>(),
        p in any::<[u16; 4]>(),
        change in 0u8..16,
        from_peer in any::<bool>(),
        whole in any::<bool>(),
        payload in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        // `from` is the tuple the error travels with (the reverse of the quoted packet's).
        let from = tuple(v6, proto, [a[0], a[1]], [p[0], p[1]]);
        let to = changed(&from, change, [a[2], a[3]], [p[2], p[3]]);
        let mut f = error_frame(&from, from_peer, whole, payload.len());
        let l4 = if v6 { L3 + 40 } else { L3 + 20 };
        let outer_src_before = addr(&f, if v6 { L3 + 8 } else { L3 + 12 }, v6);
        let ok = apply_related(&mut f, L3, l4, &Rewrite { from, to });
        prop_assert!(ok);
        let (_, end) = verify(&f, L3, "outer");
        prop_assert_eq!(end, f.len());
        let n = if v6 { 16 } else { 4 };
        let src_at = if v6 { L3 + 8 } else { L3 + 12 };
        let want_src = if from_peer { to.src } else { outer_src_before };
        prop_assert_eq!(addr(&f, src_at, v6), want_src);
        prop_assert_eq!(addr(&f, src_at + n, v6), to.dst);
        // The quote: IPv4 header checksum, addresses, ports or id.
        let inner = l4 + 8;
        if !v6 {
            let ihl = usize::from(f[inner] & 15) * 4;
            prop_assert_eq!(ones_sum(&[&f[inner..inner + ihl]]), 0xffff, "inner IPv4 checksum");
        }
        let mut quoted = f[inner..].to_vec();
        quoted.splice(0..0, [0u8; L3]);
        let q = fields_of(&quoted, &from.reverse());
        prop_assert_eq!(q, to.reverse());
        if whole {
            verify(&quoted, L3, "quoted packet");
        }
    }
}

/// An ICMP error travelling as `t` says (outer destination `t.dst`; source `t.src` when
/// `from_peer`, else a router), quoting a packet of `t.reverse()` with a payload of
/// `len` bytes, the whole of it (`whole`) or its first 8 transport bytes.
fn error_frame(t: &Tuple, from_peer: bool, whole: bool, len: usize) -> Vec<u8> {
    let q = t.reverse();
    let mut quoted = frame_of(&q, &vec![0x5a; len]);
    quoted.drain(..L3);
    if !whole {
        quoted.truncate(if t.ipv6 { 48 } else { 28 });
    }
    let router = if t.ipv6 {
        0xfe80_u128 << 112 | 1
    } else {
        v4(0x0a00_00fe)
    };
    let src = if from_peer { t.src } else { router };
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 3], [2, 0, 0, 0, 0, 4]);
    let mut out = Vec::new();
    if t.ipv6 {
        let code = icmpv6::DestUnreachableCode::Port;
        eth.ipv6(src.to_be_bytes(), t.dst.to_be_bytes(), 64)
            .icmpv6(Icmpv6Type::DestinationUnreachable(code))
            .write(&mut out, &quoted)
    } else {
        let h = icmpv4::DestUnreachableHeader::Port;
        eth.ipv4(a4(src), a4(t.dst), 64)
            .icmpv4(Icmpv4Type::DestinationUnreachable(h))
            .write(&mut out, &quoted)
    }
    .unwrap();
    out
}

#[test]
fn snat_reply_error_reaches_the_client() {
    // Client 10.0.0.1:1234 -> server 192.0.2.9:80, source NAT to 198.51.100.1:5555. A
    // router 10.0.0.254 on the far side says the server is unreachable, quoting the
    // translated packet; the client must get it about its own packet.
    let client = Tuple {
        src: v4(0x0a00_0001),
        dst: v4(0xc000_0209),
        src_port: 1234,
        dst_port: 80,
        proto: TCP,
        ipv6: false,
        zone: 0,
    };
    let natted = Tuple {
        src: v4(0xc633_6401),
        src_port: 5555,
        ..client
    };
    let rw = Rewrite {
        from: natted.reverse(),
        to: client.reverse(),
    };
    let mut f = error_frame(&rw.from, false, false, 0);
    assert!(apply_related(&mut f, L3, L3 + 20, &rw));
    verify(&f, L3, "outer");
    assert_eq!(&f[L3 + 16..L3 + 20], &[10, 0, 0, 1], "to the client");
    let inner = L3 + 28;
    assert_eq!(&f[inner + 12..inner + 20], &[10, 0, 0, 1, 192, 0, 2, 9]);
    assert_eq!(&f[inner + 20..inner + 24], &[0x04, 0xd2, 0, 80]);
    // Not an error (an echo request), or a quote of another protocol: refused.
    let mut echo = frame_of(
        &Tuple {
            proto: ICMP,
            ..client
        },
        &[],
    );
    let before = echo.clone();
    assert!(!apply_related(
        &mut echo,
        L3,
        L3 + 20,
        &Rewrite {
            from: client,
            to: natted
        }
    ));
    assert_eq!(echo, before);
    let udp = Rewrite {
        from: Tuple {
            proto: UDP,
            ..rw.from
        },
        to: Tuple {
            proto: UDP,
            ..rw.to
        },
    };
    assert!(!apply_related(&mut f, L3, L3 + 20, &udp));
}

#[test]
fn headers_with_ipv4_options_or_ipv6_extensions() {
    let t = tuple(false, TCP, [0x0a00_0001, 0xc000_0209], [1234, 80]);
    let to = Tuple {
        src: v4(0xc633_6401),
        src_port: 5555,
        ..t
    };
    let plain = frame_of(&t, b"data");
    // IPv4 with 8 bytes of options (NOPs): the transport header starts 28 bytes in.
    let mut f = plain[..L3 + 20].to_vec();
    f.extend_from_slice(&[1; 8]);
    f.extend_from_slice(&plain[L3 + 20..]);
    f[L3] = 0x47;
    let total = (f.len() - L3) as u16;
    f[L3 + 2..L3 + 4].copy_from_slice(&total.to_be_bytes());
    f[L3 + 10..L3 + 12].fill(0);
    let c = !ones_sum(&[&f[L3..L3 + 28]]);
    f[L3 + 10..L3 + 12].copy_from_slice(&c.to_be_bytes());
    verify(&f, L3, "built with options");
    let before = f.clone();
    assert!(
        !apply(&mut f, L3, L3 + 20, &Rewrite { from: t, to }),
        "L4 inside the options"
    );
    assert_eq!(f, before);
    assert!(apply(&mut f, L3, L3 + 28, &Rewrite { from: t, to }));
    verify(&f, L3, "rewritten with options");
    assert_eq!(&f[L3 + 28..L3 + 30], &5555u16.to_be_bytes());

    // IPv6 with a hop-by-hop header (8 bytes of padding) before TCP.
    let t6 = tuple(true, TCP, [1, 2], [1234, 80]);
    let to6 = Tuple {
        dst: 3,
        dst_port: 8080,
        ..t6
    };
    let plain = frame_of(&t6, b"data");
    let mut f = plain[..L3 + 40].to_vec();
    f.extend_from_slice(&[TCP, 0, 1, 4, 0, 0, 0, 0]);
    f.extend_from_slice(&plain[L3 + 40..]);
    f[L3 + 6] = 0;
    let plen = (f.len() - L3 - 40) as u16;
    f[L3 + 4..L3 + 6].copy_from_slice(&plen.to_be_bytes());
    let l4 = L3 + 48;
    assert!(apply(&mut f, L3, l4, &Rewrite { from: t6, to: to6 }));
    assert_eq!(addr(&f, L3 + 24, true), 3);
    let seg = &f[l4..];
    let mut pseudo = f[L3 + 8..L3 + 40].to_vec();
    pseudo.extend_from_slice(&(seg.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, TCP]);
    assert_eq!(
        ones_sum(&[&pseudo, seg]),
        0xffff,
        "TCP checksum after the extension"
    );
    assert_eq!(&seg[2..4], &8080u16.to_be_bytes());
}
