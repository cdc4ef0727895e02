//! IP and transport rewrites case by case: explicit field values, the IPv6 traffic class
//! beside the flow label, the UDP checksum's zero cases, later IPv4 fragments, IPv6
//! routing headers, and TTL decrement and expiry.

mod rewrite_support;

use etherparse::PacketHeaders;
use flowpath_packet::action::Action;
use flowpath_packet::rewrite::RewriteDrop;
use rewrite_support::frames::{build, fix_ipv4_header_csum, ones_sum, params, run, Kind};
use rewrite_support::oracles::{etherparse_checksums_match, model, snap, verify_checksums};

#[test]
fn explicit_field_values() {
    let p = params();

    let (f, m) = build(Kind::V4Tcp, &p);
    let (_, out, _, _) = run(
        &f,
        m,
        &[
            Action::SetIpv4Src([1, 2, 3, 4]),
            Action::SetIpv4Dst([5, 6, 7, 8]),
            Action::SetTpSrc(1111),
            Action::SetTpDst(2222),
            Action::SetNwTos(0xfd),
        ],
    );
    let h = PacketHeaders::from_ethernet_slice(&out).unwrap();
    let (ip, _) = h.net.as_ref().unwrap().ipv4_ref().unwrap();
    assert_eq!(ip.source, [1, 2, 3, 4]);
    assert_eq!(ip.destination, [5, 6, 7, 8]);
    // 0x2e has ECN 0b10; the new DSCP is 0xfd >> 2.
    assert_eq!(ip.dscp.value(), 0x3f);
    assert_eq!(ip.ecn.value(), 0x2e & 3);
    let tcp = h.transport.as_ref().unwrap().clone().tcp().unwrap();
    assert_eq!((tcp.source_port, tcp.destination_port), (1111, 2222));
    verify_checksums(&out, false).unwrap();

    let (f, m) = build(Kind::V6HbhUdp, &p);
    let dst = [0x11; 16];
    let (_, out, _, _) = run(
        &f,
        m,
        &[
            Action::SetIpv6Dst(dst),
            Action::SetTpDst(53),
            Action::SetNwTos(0x80),
        ],
    );
    let h = PacketHeaders::from_ethernet_slice(&out).unwrap();
    let (ip, exts) = h.net.as_ref().unwrap().ipv6_ref().unwrap();
    assert!(exts.hop_by_hop_options.is_some());
    assert_eq!(ip.destination, dst);
    assert_eq!(ip.traffic_class, 0x80 | (0x2e & 3));
    // The flow label and version share those bytes and must survive.
    assert_eq!(out[14] >> 4, 6);
    assert_eq!(ip.flow_label.value(), 0);
    let udp = h.transport.as_ref().unwrap().clone().udp().unwrap();
    assert_eq!(udp.destination_port, 53);
    verify_checksums(&out, false).unwrap();
}

#[test]
fn ipv6_traffic_class_keeps_flow_label() {
    let p = params();
    let (mut f, m) = build(Kind::V6Tcp, &p);
    // Flow label 0xabcde.
    f[15] = (f[15] & 0xf0) | 0x0a;
    f[16] = 0xbc;
    f[17] = 0xde;
    let (_, out, _, _) = run(&f, m, &[Action::SetNwTos(0x55)]);
    let h = PacketHeaders::from_ethernet_slice(&out).unwrap();
    let (ip, _) = h.net.as_ref().unwrap().ipv6_ref().unwrap();
    assert_eq!(ip.flow_label.value(), 0xabcde);
    assert_eq!(ip.traffic_class, 0x54 | (0x2e & 3));
}

// ---------------------------------------------------------------------------------------
// UDP checksum special cases.

/// One's-complement addition, for constructing the corner cases below.
fn ones_add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

#[test]
fn udp_zero_checksum_stays_zero() {
    let p = params();
    let (f, m) = build(Kind::V4UdpNoCsum, &p);
    let l4 = usize::from(m.l4);
    let (res, out, _, _) = run(
        &f,
        m,
        &[
            Action::SetIpv4Src([9, 9, 9, 9]),
            Action::SetIpv4Dst([1, 1, 1, 1]),
            Action::SetTpSrc(7),
            Action::SetTpDst(8),
        ],
    );
    res.unwrap();
    assert_eq!(&out[l4 + 6..l4 + 8], &[0, 0]);
    assert_eq!(&out[l4..l4 + 4], &[0, 7, 0, 8]);
    verify_checksums(&out, true).unwrap();
}

/// Choose a new source port that makes the recomputed UDP checksum zero; it must then be
/// sent as 0xffff.
fn udp_result_zero_becomes_ffff(kind: Kind) {
    let p = params();
    let (f, m) = build(kind, &p);
    let l4 = usize::from(m.l4);
    let c = u16::from_be_bytes([f[l4 + 6], f[l4 + 7]]);
    let old = u16::from_be_bytes([f[l4], f[l4 + 1]]);
    // Sum of everything but the checksum and the port: S = ~C - old. The new checksum
    // ~(S + new) is zero when new = ~S.
    let s_minus_port = ones_add(!c, !old);
    let new = !s_minus_port;
    let (res, out, _, _) = run(&f, m, &[Action::SetTpSrc(new)]);
    res.unwrap();
    assert_eq!(u16::from_be_bytes([out[l4], out[l4 + 1]]), new);
    assert_eq!(&out[l4 + 6..l4 + 8], &[0xff, 0xff], "{kind:?}");
    verify_checksums(&out, false).unwrap();
    etherparse_checksums_match(&out).unwrap();
}

#[test]
fn udp_checksum_computing_to_zero_is_sent_as_ffff() {
    udp_result_zero_becomes_ffff(Kind::V4Udp);
    udp_result_zero_becomes_ffff(Kind::V6Udp);
    udp_result_zero_becomes_ffff(Kind::V6HbhUdp);
}

// ---------------------------------------------------------------------------------------
// Fragments and IPv6 routing headers.

#[test]
fn later_ipv4_fragment_only_fixes_the_header_checksum() {
    let p = params();
    let (mut f, mut m) = build(Kind::V4Udp, &p);
    let l3 = usize::from(m.l3);
    f[l3 + 6..l3 + 8].copy_from_slice(&[0x00, 0x10]); // fragment offset 128 bytes
    fix_ipv4_header_csum(&mut f, l3);
    m.l4 = 0; // what the parser reports for a later fragment
    let (res, out, _, _) = run(
        &f,
        m,
        &[
            Action::SetIpv4Src([4, 3, 2, 1]),
            Action::SetTpSrc(99),
            Action::SetTpDst(98),
        ],
    );
    res.unwrap();
    assert_eq!(&out[l3 + 12..l3 + 16], &[4, 3, 2, 1]);
    assert_eq!(
        &out[l3 + 20..],
        &f[l3 + 20..],
        "bytes after the IP header changed"
    );
    assert_eq!(ones_sum(&[&out[l3..l3 + 20]]), 0xffff);
}

#[test]
fn ipv6_dst_with_pending_routing_header_leaves_l4_checksum() {
    let p = params();
    for segments_left in [0u8, 1] {
        let (mut f, mut m) = build(Kind::V6Udp, &p);
        let l3 = usize::from(m.l3);
        let l4 = usize::from(m.l4);
        // Type-0 routing header with one address (the final destination, the original
        // dst, which the checksum was computed over).
        let mut rh = vec![17u8, 2, 0, segments_left, 0, 0, 0, 0];
        rh.extend_from_slice(&p.dst6);
        f.splice(l4..l4, rh);
        f[l3 + 6] = 43;
        let plen = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) + 24;
        f[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
        m.l4 += 24;
        let l4 = usize::from(m.l4);
        let (res, out, _, _) = run(&f, m, &[Action::SetIpv6Dst([0x77; 16])]);
        res.unwrap();
        assert_eq!(&out[l3 + 24..l3 + 40], &[0x77; 16]);
        if segments_left == 1 {
            // The pseudo-header uses the final destination, which did not change.
            assert_eq!(&out[l4 + 6..l4 + 8], &f[l4 + 6..l4 + 8]);
        } else {
            verify_checksums(&out, false).unwrap();
        }
        // The transport header is found through the routing header for port rewrites
        // (the original checksum covers dst == final destination, so it verifies).
        let (res, out, _, _) = run(&f, m, &[Action::SetTpSrc(5)]);
        res.unwrap();
        assert_eq!(&out[l4..l4 + 2], &[0, 5]);
        verify_checksums(&out, false).unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// TTL.

#[test]
fn dec_ttl() {
    for kind in [Kind::V4Tcp, Kind::V4Icmp, Kind::V6Udp, Kind::V4TcpVlan] {
        let mut p = params();
        let (f, m) = build(kind, &p);
        let (res, out, _, _) = run(&f, m, &[Action::DecTtl]);
        res.unwrap();
        let mut want = snap(&f);
        model(&mut want, &Action::DecTtl).unwrap();
        assert_eq!(snap(&out), want);
        let l3 = usize::from(m.l3);
        let ttl_off = if kind == Kind::V6Udp { 7 } else { 8 };
        assert_eq!(out[l3 + ttl_off], 63, "{kind:?}");
        verify_checksums(&out, false).unwrap();
        etherparse_checksums_match(&out).unwrap();

        for ttl in [0u8, 1] {
            p.ttl = ttl;
            let (f, m) = build(kind, &p);
            let (res, out, m2, modified) = run(&f, m, &[Action::DecTtl, Action::SetTpSrc(1)]);
            assert_eq!(res, Err(RewriteDrop::TtlExpired), "{kind:?} ttl {ttl}");
            assert_eq!(out, f, "{kind:?} ttl {ttl}: packet changed");
            assert_eq!(m2, m);
            assert!(!modified);
        }
        p.ttl = 2;
        let (f, m) = build(kind, &p);
        let (res, out, _, _) = run(&f, m, &[Action::DecTtl]);
        res.unwrap();
        assert_eq!(out[l3 + ttl_off], 1);
        verify_checksums(&out, false).unwrap();
    }
}
