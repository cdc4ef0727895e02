//! The parser's IPv4 and IPv6 TCP/UDP fast paths against the general parser: for
//! Ethernet/IPv4 and Ethernet/IPv6 frames of every shape near the one a fast path takes
//! (header length, version, total or payload length, fragment bits, next header, L4
//! lengths and data offsets, truncation, padding, the VXLAN port), `parse_into` and
//! `parse_into_general` (the general parser alone) give the same result, key and header
//! offsets, starting from garbage in both.

mod common;
use common::assert_same;
use flowpath_packet::ParseOptions;
use proptest::prelude::*;

/// What both IP versions carry after the IP header, and how the frame ends. `None` means
/// "the consistent value".
#[derive(Debug, Clone)]
struct L4 {
    /// UDP's length field.
    udp_len: Option<u16>,
    /// TCP's data offset (top 4 bits) and flags.
    tcp_doff_flags: u16,
    ports: [u8; 4],
    payload: usize,
    pad: usize,
    /// Truncate the frame here.
    cut: Option<usize>,
}

impl L4 {
    /// Bytes of L4 header for `proto` (TCP 20, anything else is given a UDP header).
    fn header_len(proto: u8) -> usize {
        if proto == 6 {
            20
        } else {
            8
        }
    }

    /// Append the L4 header, payload and padding, then cut.
    fn finish(&self, mut f: Vec<u8>, proto: u8) -> Vec<u8> {
        f.extend_from_slice(&self.ports);
        if proto == 6 {
            f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
            f.extend_from_slice(&self.tcp_doff_flags.to_be_bytes());
            f.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        } else {
            let len = self.udp_len.unwrap_or((8 + self.payload) as u16);
            f.extend_from_slice(&len.to_be_bytes());
            f.extend_from_slice(&[0, 0]);
        }
        f.extend(std::iter::repeat_n(0xa5u8, self.payload));
        f.extend(std::iter::repeat_n(0u8, self.pad));
        if let Some(c) = self.cut {
            f.truncate(c.min(f.len()));
        }
        f
    }
}

fn l4() -> impl Strategy<Value = L4> {
    (
        prop_oneof![6 => Just(None), 1 => (0u16..80).prop_map(Some)],
        prop_oneof![4 => (0u16..0x1000).prop_map(|f| 0x5000 | f), 1 => any::<u16>()],
        prop_oneof![
            4 => any::<[u8; 4]>(),
            // UDP to the VXLAN port.
            1 => any::<[u8; 2]>().prop_map(|s| [s[0], s[1], 0x12, 0xb5])
        ],
        0usize..40,
        prop_oneof![4 => Just(0usize), 1 => 0usize..20],
        prop_oneof![6 => Just(None), 1 => (0usize..100).prop_map(Some)],
    )
        .prop_map(|(udp_len, tcp_doff_flags, ports, payload, pad, cut)| L4 {
            udp_len,
            tcp_doff_flags,
            ports,
            payload,
            pad,
            cut,
        })
}

/// An IPv4 frame's knobs.
#[derive(Debug, Clone)]
struct Shape {
    ethertype: u16,
    ver_ihl: u8,
    proto: u8,
    tos: u8,
    ttl: u8,
    frag: u16,
    total: Option<u16>,
    macs: [u8; 12],
    addrs: [u8; 8],
    l4: L4,
}

fn frame(s: &Shape) -> Vec<u8> {
    let mut f = s.macs.to_vec();
    f.extend_from_slice(&s.ethertype.to_be_bytes());
    let opts = (usize::from(s.ver_ihl & 0x0f) * 4).saturating_sub(20);
    let total = s
        .total
        .unwrap_or((20 + opts + L4::header_len(s.proto) + s.l4.payload) as u16);
    f.extend_from_slice(&[s.ver_ihl, s.tos]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34]);
    f.extend_from_slice(&s.frag.to_be_bytes());
    f.extend_from_slice(&[s.ttl, s.proto, 0, 0]);
    f.extend_from_slice(&s.addrs);
    f.extend(std::iter::repeat_n(1u8, opts));
    s.l4.finish(f, s.proto)
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        (
            prop_oneof![8 => Just(0x0800u16), 1 => Just(0x86ddu16), 1 => any::<u16>()],
            prop_oneof![8 => Just(0x45u8), 1 => Just(0x46u8), 1 => any::<u8>()],
            prop_oneof![4 => Just(6u8), 4 => Just(17u8), 1 => Just(1u8), 1 => any::<u8>()],
            any::<(u8, u8)>(),
            prop_oneof![4 => Just(0u16), 2 => Just(0x4000u16), 1 => Just(0x2000u16), 1 => any::<u16>()],
            prop_oneof![6 => Just(None), 1 => any::<u16>().prop_map(Some)],
        ),
        any::<([u8; 12], [u8; 8])>(),
        l4(),
    )
        .prop_map(
            |((ethertype, ver_ihl, proto, (tos, ttl), frag, total), (macs, addrs), l4)| Shape {
                ethertype,
                ver_ihl,
                proto,
                tos,
                ttl,
                frag,
                total,
                macs,
                addrs,
                l4,
            },
        )
}

/// An IPv6 frame's knobs.
#[derive(Debug, Clone)]
struct Shape6 {
    ver_tc: u8,
    tc_flow: u8,
    plen: Option<u16>,
    next: u8,
    hops: u8,
    macs: [u8; 12],
    addrs: [u8; 32],
    l4: L4,
}

fn frame6(s: &Shape6) -> Vec<u8> {
    let mut f = s.macs.to_vec();
    f.extend_from_slice(&[0x86, 0xdd]);
    let plen = s
        .plen
        .unwrap_or((L4::header_len(s.next) + s.l4.payload) as u16);
    f.extend_from_slice(&[s.ver_tc, s.tc_flow, 0x12, 0x34]);
    f.extend_from_slice(&plen.to_be_bytes());
    f.extend_from_slice(&[s.next, s.hops]);
    f.extend_from_slice(&s.addrs);
    s.l4.finish(f, s.next)
}

fn shape6() -> impl Strategy<Value = Shape6> {
    (
        prop_oneof![8 => (0u8..16).prop_map(|t| 0x60 | t), 1 => any::<u8>()],
        any::<u8>(),
        prop_oneof![6 => Just(None), 1 => (0u16..90).prop_map(Some), 1 => any::<u16>().prop_map(Some)],
        prop_oneof![4 => Just(6u8), 4 => Just(17u8), 1 => Just(58u8), 1 => Just(0u8), 1 => Just(44u8), 1 => any::<u8>()],
        any::<u8>(),
        any::<([u8; 12], [u8; 32])>(),
        l4(),
    )
        .prop_map(
            |(ver_tc, tc_flow, plen, next, hops, (macs, addrs), l4)| Shape6 {
                ver_tc,
                tc_flow,
                plen,
                next,
                hops,
                macs,
                addrs,
                l4,
            },
        )
}

fn opts(vxlan: bool) -> ParseOptions {
    ParseOptions {
        vxlan_port: vxlan.then_some(4789),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn ipv4_fast_path_agrees_with_the_general_parser(s in shape(), vxlan in any::<bool>()) {
        assert_same(&frame(&s), &opts(vxlan)).ok();
    }

    #[test]
    fn ipv6_fast_path_agrees_with_the_general_parser(s in shape6(), vxlan in any::<bool>()) {
        assert_same(&frame6(&s), &opts(vxlan)).ok();
    }
}

fn plain_l4() -> L4 {
    L4 {
        udp_len: None,
        tcp_doff_flags: 0x5018,
        ports: [0x30, 0x39, 0x00, 0x35],
        payload: 18,
        pad: 0,
        cut: None,
    }
}

/// The shapes the fast paths take, each checked once by hand (so a change that sends them
/// all the general way still has to key them right): TCP and UDP, with and without
/// Ethernet padding, over IPv4 and IPv6.
#[test]
fn common_frames_key_alike() {
    let v4 = Shape {
        ethertype: 0x0800,
        ver_ihl: 0x45,
        proto: 17,
        tos: 0xb8,
        ttl: 63,
        frag: 0x4000,
        total: None,
        macs: [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2],
        addrs: [10, 0, 0, 1, 10, 0, 0, 2],
        l4: plain_l4(),
    };
    let v6 = Shape6 {
        ver_tc: 0x6b,
        tc_flow: 0x81,
        plen: None,
        next: 17,
        hops: 64,
        macs: v4.macs,
        addrs: [0x20; 32],
        l4: L4 {
            payload: 2,
            ..plain_l4()
        },
    };
    for proto in [6u8, 17] {
        for pad in [0usize, 6] {
            let mut s = v4.clone();
            (s.proto, s.l4.pad) = (proto, pad);
            assert_eq!(assert_same(&frame(&s), &opts(false)), Ok(()));
            let mut s = v6.clone();
            (s.next, s.l4.pad) = (proto, pad);
            assert_eq!(assert_same(&frame6(&s), &opts(false)), Ok(()));
        }
    }
    // UDP to the VXLAN port with VXLAN parsing on: not the fast path's.
    let mut s = v4.clone();
    (s.l4.ports, s.l4.payload) = ([0x30, 0x39, 0x12, 0xb5], 30);
    let _ = assert_same(&frame(&s), &opts(true));
    // Too short for the IPv4 fast path's 50-byte window, still a valid UDP frame.
    let mut s = v4;
    s.l4.payload = 0;
    assert_eq!(assert_same(&frame(&s), &opts(false)), Ok(()));
}
