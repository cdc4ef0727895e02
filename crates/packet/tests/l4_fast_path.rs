//! The parser's IPv4 and IPv6 TCP/UDP fast paths against the general parser: for
//! Ethernet/IPv4 and Ethernet/IPv6 frames of every shape near the one a fast path takes
//! (header length, version, total or payload length, fragment bits, next header, L4
//! lengths and data offsets, truncation, padding, the VXLAN port), `parse_into` and
//! `parse_into_general` (the general parser alone) give the same result, key and header
//! offsets, starting from garbage in both.

use flowpath_packet::parse::{parse_into, parse_into_general};
use flowpath_packet::{DropReason, FlowKey, PacketMeta, ParseOptions};
use proptest::prelude::*;

type Outcome = (Result<(), DropReason>, FlowKey, PacketMeta);

fn run(data: &[u8], opts: &ParseOptions, general: bool) -> Outcome {
    let mut key = FlowKey::ONES;
    let mut meta = PacketMeta {
        l2: 7,
        l3: 7,
        l4: 7,
        vlans: 7,
    };
    let r = if general {
        parse_into_general(data, 0x0102_0304, opts, &mut key, &mut meta)
    } else {
        parse_into(data, 0x0102_0304, opts, &mut key, &mut meta)
    };
    (r, key, meta)
}

fn assert_same(data: &[u8], opts: &ParseOptions) -> Result<(), DropReason> {
    let fast = run(data, opts, false);
    let general = run(data, opts, true);
    assert_eq!(fast.0, general.0, "result differs for {data:02x?}");
    assert_eq!(fast.2, general.2, "offsets differ for {data:02x?}");
    assert!(
        fast.1 == general.1,
        "key differs for {data:02x?}:\n{:?}\n{:?}",
        fast.1,
        general.1
    );
    fast.0
}

/// Knobs for one frame; `None` means "the consistent value".
#[derive(Debug, Clone)]
struct Shape {
    ethertype: u16,
    ver_ihl: u8,
    proto: u8,
    tos: u8,
    ttl: u8,
    frag: u16,
    total: Option<u16>,
    l4_len: Option<u16>,
    tcp_doff_flags: u16,
    ports: [u8; 4],
    payload: usize,
    pad: usize,
    cut: Option<usize>,
    macs: [u8; 12],
    addrs: [u8; 8],
}

fn frame(s: &Shape) -> Vec<u8> {
    let mut f = s.macs.to_vec();
    f.extend_from_slice(&s.ethertype.to_be_bytes());
    let ihl = usize::from(s.ver_ihl & 0x0f) * 4;
    let l4_hdr = if s.proto == 6 { 20 } else { 8 };
    let opts = ihl.saturating_sub(20);
    let total = s.total.unwrap_or((20 + opts + l4_hdr + s.payload) as u16);
    f.push(s.ver_ihl);
    f.push(s.tos);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34]);
    f.extend_from_slice(&s.frag.to_be_bytes());
    f.push(s.ttl);
    f.push(s.proto);
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&s.addrs);
    f.extend(std::iter::repeat_n(1u8, opts));
    f.extend_from_slice(&s.ports);
    if s.proto == 6 {
        f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
        f.extend_from_slice(&s.tcp_doff_flags.to_be_bytes());
        f.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    } else {
        let len = s.l4_len.unwrap_or((8 + s.payload) as u16);
        f.extend_from_slice(&len.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
    }
    f.extend(std::iter::repeat_n(0xa5u8, s.payload));
    f.extend(std::iter::repeat_n(0u8, s.pad));
    if let Some(c) = s.cut {
        f.truncate(c.min(f.len()));
    }
    f
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        (
            prop_oneof![8 => Just(0x0800u16), 1 => Just(0x86ddu16), 1 => any::<u16>()],
            prop_oneof![8 => Just(0x45u8), 1 => Just(0x46u8), 1 => any::<u8>()],
            prop_oneof![4 => Just(6u8), 4 => Just(17u8), 1 => Just(1u8), 1 => any::<u8>()],
            any::<u8>(),
            any::<u8>(),
            prop_oneof![4 => Just(0u16), 2 => Just(0x4000u16), 1 => Just(0x2000u16), 1 => any::<u16>()],
            prop_oneof![6 => Just(None), 1 => any::<u16>().prop_map(Some)],
            prop_oneof![6 => Just(None), 1 => (0u16..80).prop_map(Some)],
        ),
        (
            prop_oneof![4 => (0u16..0x1000).prop_map(|f| 0x5000 | f), 1 => any::<u16>()],
            prop_oneof![
                4 => any::<[u8; 4]>(),
                1 => any::<[u8; 2]>().prop_map(|s| [s[0], s[1], 0x12, 0xb5])
            ],
            0usize..40,
            prop_oneof![4 => Just(0usize), 1 => 0usize..20],
            prop_oneof![6 => Just(None), 1 => (0usize..80).prop_map(Some)],
            any::<[u8; 12]>(),
            any::<[u8; 8]>(),
        ),
    )
        .prop_map(
            |(
                (ethertype, ver_ihl, proto, tos, ttl, frag, total, l4_len),
                (tcp_doff_flags, ports, payload, pad, cut, macs, addrs),
            )| Shape {
                ethertype,
                ver_ihl,
                proto,
                tos,
                ttl,
                frag,
                total,
                l4_len,
                tcp_doff_flags,
                ports,
                payload,
                pad,
                cut,
                macs,
                addrs,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn fast_path_agrees_with_the_general_parser(s in shape(), vxlan in any::<bool>()) {
        let opts = ParseOptions {
            vxlan_port: vxlan.then_some(4789),
        };
        assert_same(&frame(&s), &opts).ok();
    }
}

/// Knobs for one IPv6 frame; `None` means "the consistent value".
#[derive(Debug, Clone)]
struct Shape6 {
    ver_tc: u8,
    tc_flow: u8,
    plen: Option<u16>,
    next: u8,
    hops: u8,
    l4_len: Option<u16>,
    tcp_doff_flags: u16,
    ports: [u8; 4],
    payload: usize,
    pad: usize,
    cut: Option<usize>,
    macs: [u8; 12],
    addrs: [u8; 32],
}

fn frame6(s: &Shape6) -> Vec<u8> {
    let mut f = s.macs.to_vec();
    f.extend_from_slice(&[0x86, 0xdd]);
    let l4_hdr = if s.next == 6 { 20 } else { 8 };
    let plen = s.plen.unwrap_or((l4_hdr + s.payload) as u16);
    f.extend_from_slice(&[s.ver_tc, s.tc_flow, 0x12, 0x34]);
    f.extend_from_slice(&plen.to_be_bytes());
    f.push(s.next);
    f.push(s.hops);
    f.extend_from_slice(&s.addrs);
    f.extend_from_slice(&s.ports);
    if s.next == 6 {
        f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
        f.extend_from_slice(&s.tcp_doff_flags.to_be_bytes());
        f.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    } else {
        let len = s.l4_len.unwrap_or((8 + s.payload) as u16);
        f.extend_from_slice(&len.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
    }
    f.extend(std::iter::repeat_n(0xa5u8, s.payload));
    f.extend(std::iter::repeat_n(0u8, s.pad));
    if let Some(c) = s.cut {
        f.truncate(c.min(f.len()));
    }
    f
}

fn shape6() -> impl Strategy<Value = Shape6> {
    (
        (
            prop_oneof![8 => (0u8..16).prop_map(|t| 0x60 | t), 1 => any::<u8>()],
            any::<u8>(),
            prop_oneof![6 => Just(None), 1 => (0u16..90).prop_map(Some), 1 => any::<u16>().prop_map(Some)],
            prop_oneof![4 => Just(6u8), 4 => Just(17u8), 1 => Just(58u8), 1 => Just(0u8), 1 => Just(44u8), 1 => any::<u8>()],
            any::<u8>(),
            prop_oneof![6 => Just(None), 1 => (0u16..80).prop_map(Some)],
        ),
        (
            prop_oneof![4 => (0u16..0x1000).prop_map(|f| 0x5000 | f), 1 => any::<u16>()],
            prop_oneof![
                4 => any::<[u8; 4]>(),
                1 => any::<[u8; 2]>().prop_map(|s| [s[0], s[1], 0x12, 0xb5])
            ],
            0usize..40,
            prop_oneof![4 => Just(0usize), 1 => 0usize..20],
            prop_oneof![6 => Just(None), 1 => (0usize..100).prop_map(Some)],
            any::<[u8; 12]>(),
            any::<[u8; 32]>(),
        ),
    )
        .prop_map(
            |(
                (ver_tc, tc_flow, plen, next, hops, l4_len),
                (tcp_doff_flags, ports, payload, pad, cut, macs, addrs),
            )| Shape6 {
                ver_tc,
                tc_flow,
                plen,
                next,
                hops,
                l4_len,
                tcp_doff_flags,
                ports,
                payload,
                pad,
                cut,
                macs,
                addrs,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn ipv6_fast_path_agrees_with_the_general_parser(s in shape6(), vxlan in any::<bool>()) {
        let opts = ParseOptions {
            vxlan_port: vxlan.then_some(4789),
        };
        assert_same(&frame6(&s), &opts).ok();
    }
}

/// IPv6 TCP and UDP frames the fast path takes, with and without padding.
#[test]
fn common_ipv6_frames_key_alike() {
    let base = Shape6 {
        ver_tc: 0x6b,
        tc_flow: 0x81,
        plen: None,
        next: 17,
        hops: 64,
        l4_len: None,
        tcp_doff_flags: 0x5012,
        ports: [0x30, 0x39, 0x00, 0x35],
        payload: 2,
        pad: 0,
        cut: None,
        macs: [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2],
        addrs: [0x20; 32],
    };
    for next in [6u8, 17] {
        for pad in [0usize, 6] {
            let s = Shape6 {
                next,
                pad,
                ..base.clone()
            };
            assert_eq!(assert_same(&frame6(&s), &ParseOptions::default()), Ok(()));
        }
    }
}

/// The shapes the fast path takes, each checked once by hand (so a change that sends them
/// all the general way still has to key them right).
#[test]
fn common_frames_key_alike() {
    let base = Shape {
        ethertype: 0x0800,
        ver_ihl: 0x45,
        proto: 17,
        tos: 0xb8,
        ttl: 63,
        frag: 0x4000,
        total: None,
        l4_len: None,
        tcp_doff_flags: 0x5018,
        ports: [0x30, 0x39, 0x00, 0x35],
        payload: 18,
        pad: 0,
        cut: None,
        macs: [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2],
        addrs: [10, 0, 0, 1, 10, 0, 0, 2],
    };
    let opts = ParseOptions::default();
    for proto in [6u8, 17] {
        for pad in [0usize, 6] {
            let s = Shape {
                proto,
                pad,
                ..base.clone()
            };
            assert_eq!(assert_same(&frame(&s), &opts), Ok(()));
        }
    }
    // UDP to the VXLAN port with VXLAN parsing on: not the fast path's.
    let s = Shape {
        ports: [0x30, 0x39, 0x12, 0xb5],
        payload: 30,
        ..base.clone()
    };
    let vx = ParseOptions {
        vxlan_port: Some(4789),
    };
    let _ = assert_same(&frame(&s), &vx);
    // Too short for the fast path's 50-byte window, still a valid UDP frame.
    let s = Shape { payload: 0, ..base };
    assert_eq!(assert_same(&frame(&s), &opts), Ok(()));
}
