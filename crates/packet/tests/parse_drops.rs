//! One hand-built frame per [`DropReason`], the same reasons for a VXLAN inner frame,
//! and truncation at every length of a frame, which must drop and never panic.

mod parse_support;

use flowpath_packet::{DropReason, ParseOptions};
use parse_support::{arp, eth, ext, frag6, ipv4, ipv6, run, tcp, udp, vxlan};

/// A frame that must be dropped for exactly `reason`. The match is exhaustive, so a new
/// reason does not compile until it has a case.
fn drop_case(reason: DropReason) -> (Vec<u8>, ParseOptions) {
    use DropReason::*;
    let udp4 = || eth(&[], 0x0800, &ipv4(17, &udp(1, 2, b"data")));
    let v6 = |next: u8, payload: &[u8]| eth(&[], 0x86dd, &ipv6(next, payload));
    let frame = match reason {
        EthTruncated => udp4()[..13].to_vec(),
        VlanTruncated => eth(&[], 0x8100, &[0x00, 0x01, 0x08]),
        TooManyVlans => eth(&[(0x88a8, 1), (0x8100, 2), (0x8100, 3)], 0x0800, &[0; 40]),
        ArpTruncated => eth(&[], 0x0806, &arp(1)[..27]),
        Ipv4Truncated => {
            // Options announced (IHL 15) but the frame ends after 40 bytes of header.
            let mut ip = ipv4(17, &[0; 20]);
            ip[0] = 0x4f;
            eth(&[], 0x0800, &ip)
        }
        Ipv4BadVersion => {
            let mut f = udp4();
            f[14] = 0x65;
            f
        }
        Ipv4BadHeaderLength => {
            let mut f = udp4();
            f[14] = 0x44;
            f
        }
        Ipv4BadTotalLength => {
            let mut f = udp4();
            f[16..18].copy_from_slice(&200u16.to_be_bytes());
            f
        }
        Ipv6Truncated => v6(17, &udp(1, 2, &[]))[..14 + 39].to_vec(),
        Ipv6BadVersion => {
            let mut f = v6(17, &udp(1, 2, &[]));
            f[14] = 0x4a;
            f
        }
        Ipv6BadPayloadLength => {
            let mut f = v6(17, &udp(1, 2, &[]));
            f[18..20].copy_from_slice(&9u16.to_be_bytes());
            f
        }
        // The routing header claims 16 bytes; only 8 are in the payload.
        Ipv6ExtTruncated => v6(0, &ext(43, 0, &[43, 1, 0, 0, 0, 0, 0, 0])),
        Ipv6TooManyExtHeaders => {
            let mut p = udp(1, 2, &[]);
            for i in 0..9 {
                p = ext(if i == 0 { 17 } else { 60 }, 0, &p);
            }
            v6(60, &p)
        }
        TcpTruncated => eth(&[], 0x0800, &ipv4(6, &tcp(1, 2, 0, &[], &[])[..19])),
        TcpBadDataOffset => {
            // 24 bytes in the IP payload; the data offset claims 28.
            let mut t = tcp(1, 2, 0, &[], &[0; 4]);
            t[12] = 0x70;
            eth(&[], 0x0800, &ipv4(6, &t))
        }
        UdpTruncated => v6(17, &udp(1, 2, &[])[..7]),
        UdpBadLength => {
            let mut u = udp(1, 2, b"abc");
            u[4..6].copy_from_slice(&7u16.to_be_bytes());
            eth(&[], 0x0800, &ipv4(17, &u))
        }
        IcmpTruncated => eth(&[], 0x0800, &ipv4(1, &[8, 0, 0])),
        Icmpv6Truncated => v6(58, &[128, 0, 0]),
        VxlanTruncated => eth(
            &[],
            0x0800,
            &ipv4(17, &udp(9, 4789, &[0x08, 0, 0, 0, 0, 0, 1])),
        ),
        VxlanBadFlags => {
            let inner = eth(&[], 0x0800, &ipv4(17, &udp(1, 2, &[])));
            let mut vx = vxlan(3, &inner);
            vx[0] = 0x80;
            eth(&[], 0x86dd, &ipv6(17, &udp(9, 4789, &vx)))
        }
    };
    (frame, ParseOptions::default())
}

fn assert_drop(reason: DropReason) {
    let (frame, opts) = drop_case(reason);
    assert_eq!(run(&frame, &opts).map(|_| ()), Err(reason));
}

macro_rules! drop_tests {
    ($($test:ident => $reason:ident,)*) => {
        $(
            #[test]
            fn $test() {
                assert_drop(DropReason::$reason);
            }
        )*
    };
}

drop_tests! {
    drop_eth_truncated => EthTruncated,
    drop_vlan_truncated => VlanTruncated,
    drop_too_many_vlans => TooManyVlans,
    drop_arp_truncated => ArpTruncated,
    drop_ipv4_truncated => Ipv4Truncated,
    drop_ipv4_bad_version => Ipv4BadVersion,
    drop_ipv4_bad_header_length => Ipv4BadHeaderLength,
    drop_ipv4_bad_total_length => Ipv4BadTotalLength,
    drop_ipv6_truncated => Ipv6Truncated,
    drop_ipv6_bad_version => Ipv6BadVersion,
    drop_ipv6_bad_payload_length => Ipv6BadPayloadLength,
    drop_ipv6_ext_truncated => Ipv6ExtTruncated,
    drop_ipv6_too_many_ext_headers => Ipv6TooManyExtHeaders,
    drop_tcp_truncated => TcpTruncated,
    drop_tcp_bad_data_offset => TcpBadDataOffset,
    drop_udp_truncated => UdpTruncated,
    drop_udp_bad_length => UdpBadLength,
    drop_icmp_truncated => IcmpTruncated,
    drop_icmpv6_truncated => Icmpv6Truncated,
    drop_vxlan_truncated => VxlanTruncated,
    drop_vxlan_bad_flags => VxlanBadFlags,
}

#[test]
fn inner_frame_errors_use_the_same_reasons() {
    let cases: [(Vec<u8>, DropReason); 4] = [
        (
            eth(&[], 0x0800, &[0; 8])[..13].to_vec(),
            DropReason::EthTruncated,
        ),
        (
            eth(&[], 0x0800, &ipv4(17, &[1, 2])),
            DropReason::UdpTruncated,
        ),
        (
            eth(&[(0x8100, 1)], 0x86dd, &[0x60; 20]),
            DropReason::Ipv6Truncated,
        ),
        (eth(&[], 0x0806, &arp(1)[..20]), DropReason::ArpTruncated),
    ];
    for (inner, reason) in cases {
        let f = eth(&[], 0x0800, &ipv4(17, &udp(1, 4789, &vxlan(1, &inner))));
        assert_eq!(run(&f, &ParseOptions::default()).map(|_| ()), Err(reason));
    }
}

#[test]
fn every_drop_reason_has_a_case() {
    for (i, reason) in DropReason::ALL.into_iter().enumerate() {
        assert_eq!(reason as usize, i, "ALL is in declaration order");
        assert_drop(reason);
    }
    let names: std::collections::HashSet<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
    assert_eq!(names.len(), DropReason::ALL.len(), "names are unique");
}

#[test]
fn a_frame_shorter_than_every_header_is_dropped_not_panicking() {
    let full = eth(
        &[(0x88a8, 1), (0x8100, 2)],
        0x86dd,
        &ipv6(
            0,
            &ext(44, 0, &frag6(6, 0, false, &tcp(1, 2, 0x10, &[0; 8], &[]))),
        ),
    );
    assert!(run(&full, &ParseOptions::default()).is_ok());
    for len in 0..full.len() {
        assert!(
            run(&full[..len], &ParseOptions::default()).is_err(),
            "len {len}"
        );
    }
}
