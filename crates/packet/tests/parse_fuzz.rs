//! Property tests: the parser never panics on arbitrary or damaged input, its offsets
//! always lie inside the data, and on valid frames built by etherparse (an independent
//! implementation) every key field equals the value the frame was built from.

use etherparse::{
    DoubleVlanHeader, IpHeaders, IpNumber, Ipv4Dscp, Ipv4Ecn, Ipv4Extensions, Ipv4Header,
    Ipv6Extensions, Ipv6FlowLabel, Ipv6Header, PacketBuilder, SingleVlanHeader, TcpHeader,
    VlanHeader, VlanId, VlanPcp,
};
use flowpath_packet::key::{Field, FlowKey, TUN_IPV6, TUN_PRESENT, VLAN_PRESENT};
use flowpath_packet::{parse, DropReason, PacketMeta, ParseOptions};
use proptest::prelude::*;

/// Checks that hold for any parse result, valid input or not.
fn parse_checked(data: &[u8], in_port: u32) -> Result<(FlowKey, PacketMeta), DropReason> {
    let mut k = FlowKey::ONES;
    let r = parse(data, in_port, &ParseOptions::default(), &mut k);
    if let Ok(m) = r {
        let len = data.len();
        assert!(usize::from(m.l2) + 14 <= len, "l2 {m:?} len {len}");
        assert!(m.l3 == 0 || usize::from(m.l3) < len, "l3 {m:?} len {len}");
        assert!(m.l4 == 0 || usize::from(m.l4) < len, "l4 {m:?} len {len}");
        assert!(m.l4 == 0 || m.l4 > m.l3, "l4 before l3: {m:?}");
        assert!(m.l3 == 0 || m.l3 >= m.l2 + 14, "l3 inside Ethernet: {m:?}");
        assert!(m.vlans <= 2);
        assert_eq!(k.get(Field::InPort), u128::from(in_port));
    }
    r.map(|m| (k, m))
}

#[derive(Clone, Copy, Debug)]
struct Tag {
    pcp: u8,
    dei: bool,
    vid: u16,
}

impl Tag {
    fn header(self) -> SingleVlanHeader {
        SingleVlanHeader {
            pcp: VlanPcp::try_new(self.pcp).unwrap(),
            drop_eligible_indicator: self.dei,
            vlan_id: VlanId::try_new(self.vid).unwrap(),
            ether_type: 0.into(), // set by the builder
        }
    }
    /// What the key should hold: DEI is replaced by "present".
    fn key_tci(self) -> u128 {
        u128::from((u16::from(self.pcp) << 13) | self.vid | VLAN_PRESENT)
    }
}

#[derive(Clone, Debug)]
enum L4 {
    Tcp { sp: u16, dp: u16, flags: u16 },
    Udp { sp: u16, dp: u16 },
    Icmp { id: u16, seq: u16 },
}

#[derive(Clone, Debug)]
struct Spec {
    src: [u8; 6],
    dst: [u8; 6],
    tags: Vec<Tag>,
    v6: bool,
    ip_src: [u8; 16],
    ip_dst: [u8; 16],
    tos: u8,
    ttl: u8,
    l4: L4,
    payload: Vec<u8>,
    /// Ethernet padding after the IP packet.
    trailer: usize,
}

fn tag() -> impl Strategy<Value = Tag> {
    (0u8..8, any::<bool>(), 0u16..4096).prop_map(|(pcp, dei, vid)| Tag { pcp, dei, vid })
}

fn l4() -> impl Strategy<Value = L4> {
    prop_oneof![
        (any::<u16>(), any::<u16>(), 0u16..0x200).prop_map(|(sp, dp, flags)| L4::Tcp {
            sp,
            dp,
            flags
        }),
        // Not to the VXLAN port (4789, `ParseOptions::default()`): the parser takes UDP
        // there as VXLAN, and a frame built without a VXLAN header would then rightly be
        // dropped as truncated (the VXLAN frames come from `frame`'s `vxlan` argument).
        (any::<u16>(), any::<u16>()).prop_map(|(sp, dp)| L4::Udp {
            sp,
            dp: if dp == 4789 { 4790 } else { dp },
        }),
        (any::<u16>(), any::<u16>()).prop_map(|(id, seq)| L4::Icmp { id, seq }),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            prop::collection::vec(tag(), 0..=2),
        ),
        (
            any::<bool>(),
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<u8>(),
            any::<u8>(),
        ),
        l4(),
        prop::collection::vec(any::<u8>(), 0..64),
        0usize..8,
    )
        .prop_map(
            |((src, dst, tags), (v6, ip_src, ip_dst, tos, ttl), l4, payload, trailer)| Spec {
                src,
                dst,
                tags,
                v6,
                ip_src,
                ip_dst,
                tos,
                ttl,
                l4,
                payload,
                trailer,
            },
        )
}

fn v4_addr(a: &[u8; 16]) -> [u8; 4] {
    [a[0], a[1], a[2], a[3]]
}

fn tcp_header(sp: u16, dp: u16, flags: u16) -> TcpHeader {
    let mut t = TcpHeader::new(sp, dp, 1, 1000);
    let bit = |n: u16| flags & (1 << n) != 0;
    (t.fin, t.syn, t.rst, t.psh, t.ack, t.urg, t.ece, t.cwr, t.ns) = (
        bit(0),
        bit(1),
        bit(2),
        bit(3),
        bit(4),
        bit(5),
        bit(6),
        bit(7),
        bit(8),
    );
    t
}

/// Serialise `s` with etherparse.
fn build(s: &Spec) -> Vec<u8> {
    let ip = if s.v6 {
        let h = Ipv6Header {
            traffic_class: s.tos,
            flow_label: Ipv6FlowLabel::try_new(0x12345).unwrap(),
            payload_length: 0,
            next_header: IpNumber::UDP,
            hop_limit: s.ttl,
            source: s.ip_src,
            destination: s.ip_dst,
        };
        IpHeaders::Ipv6(h, Ipv6Extensions::default())
    } else {
        let mut h = Ipv4Header::new(
            0,
            s.ttl,
            IpNumber::UDP,
            v4_addr(&s.ip_src),
            v4_addr(&s.ip_dst),
        )
        .unwrap();
        h.dscp = Ipv4Dscp::try_new(s.tos >> 2).unwrap();
        h.ecn = Ipv4Ecn::try_new(s.tos & 3).unwrap();
        IpHeaders::Ipv4(h, Ipv4Extensions::default())
    };
    let eth = PacketBuilder::ethernet2(s.src, s.dst);
    let step = match s.tags.as_slice() {
        [] => eth.ip(ip),
        [t] => eth.vlan(VlanHeader::Single(t.header())).ip(ip),
        [o, i] => eth
            .vlan(VlanHeader::Double(DoubleVlanHeader {
                outer: o.header(),
                inner: i.header(),
            }))
            .ip(ip),
        _ => unreachable!("at most two tags are generated"),
    };
    let mut out = Vec::new();
    let written = match s.l4 {
        L4::Tcp { sp, dp, flags } => step
            .tcp_header(tcp_header(sp, dp, flags))
            .write(&mut out, &s.payload),
        L4::Udp { sp, dp } => step.udp(sp, dp).write(&mut out, &s.payload),
        L4::Icmp { id, seq } if s.v6 => step
            .icmpv6_echo_request(id, seq)
            .write(&mut out, &s.payload),
        L4::Icmp { id, seq } => step
            .icmpv4_echo_request(id, seq)
            .write(&mut out, &s.payload),
    };
    written.expect("etherparse serialises");
    out.resize(out.len() + s.trailer, 0xa5);
    out
}

fn addr(a: &[u8]) -> u128 {
    a.iter().fold(0, |acc, &b| (acc << 8) | u128::from(b))
}

/// The key the parser must produce for `s`, with `in_port`.
fn expected_key(s: &Spec, in_port: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, in_port.into());
    k.set(Field::EthSrc, addr(&s.src));
    k.set(Field::EthDst, addr(&s.dst));
    if let Some(t) = s.tags.first() {
        k.set(Field::VlanTci, t.key_tci());
    }
    if let Some(t) = s.tags.get(1) {
        k.set(Field::VlanInnerTci, t.key_tci());
    }
    k.set(Field::NwTos, s.tos.into());
    k.set(Field::NwTtl, s.ttl.into());
    if s.v6 {
        k.set(Field::EthType, 0x86dd);
        k.set(Field::Ipv6Src, addr(&s.ip_src));
        k.set(Field::Ipv6Dst, addr(&s.ip_dst));
    } else {
        k.set(Field::EthType, 0x0800);
        k.set(Field::Ipv4Src, addr(&s.ip_src[..4]));
        k.set(Field::Ipv4Dst, addr(&s.ip_dst[..4]));
    }
    let (proto, tp_src, tp_dst) = match s.l4 {
        L4::Tcp { sp, dp, flags } => {
            k.set(Field::TcpFlags, flags.into());
            (6, sp, dp)
        }
        L4::Udp { sp, dp } => (17, sp, dp),
        L4::Icmp { .. } if s.v6 => (58, 128, 0),
        L4::Icmp { .. } => (1, 8, 0),
    };
    k.set(Field::NwProto, proto);
    k.set(Field::TpSrc, tp_src.into());
    k.set(Field::TpDst, tp_dst.into());
    k
}

fn expected_meta(s: &Spec) -> PacketMeta {
    let l3 = 14 + 4 * s.tags.len() as u16;
    PacketMeta {
        l2: 0,
        l3,
        l4: l3 + if s.v6 { 40 } else { 20 },
        vlans: s.tags.len() as u8,
    }
}

/// A valid frame from `s`, optionally carried in VXLAN (so that damage also reaches the
/// decapsulation path).
fn frame(s: &Spec, vxlan: Option<u32>) -> Vec<u8> {
    let inner = build(s);
    let Some(vni) = vxlan else { return inner };
    let v = vni.to_be_bytes();
    let mut payload = vec![0x08, 0, 0, 0, v[1], v[2], v[3], 0];
    payload.extend(inner);
    let mut out = Vec::new();
    let b = PacketBuilder::ethernet2(s.dst, s.src);
    let b = if s.v6 {
        b.ipv6(s.ip_dst, s.ip_src, 64)
    } else {
        b.ipv4(v4_addr(&s.ip_dst), v4_addr(&s.ip_src), 64)
    };
    b.udp(50000, 4789).write(&mut out, &payload).unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn arbitrary_bytes_never_panic(
        data in prop::collection::vec(any::<u8>(), 0..300),
        in_port in any::<u32>(),
    ) {
        let _ = parse_checked(&data, in_port);
    }

    /// Arbitrary bytes behind a plausible Ethernet header with one of the ethertypes the
    /// parser follows, so that random data reaches the L3/L4 code more often.
    #[test]
    fn arbitrary_bytes_behind_known_ethertypes_never_panic(
        etype in prop::sample::select(vec![0x0800u16, 0x86dd, 0x0806, 0x8100, 0x88a8]),
        body in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut data = vec![0u8; 12];
        data.extend(etype.to_be_bytes());
        data.extend(body);
        let _ = parse_checked(&data, 7);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn damaged_valid_frames_never_panic(
        s in spec(),
        vxlan in prop::option::of(0u32..(1 << 24)),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
    ) {
        let mut data = frame(&s, vxlan);
        // Undamaged, the frame parses.
        prop_assert!(parse_checked(&data, 1).is_ok());
        for (at, x) in flips {
            let i = at.index(data.len());
            data[i] ^= x;
        }
        if truncate {
            data.truncate(cut.index(data.len() + 1));
        }
        let _ = parse_checked(&data, 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn key_fields_equal_the_values_the_frame_was_built_from(
        s in spec(),
        in_port in any::<u32>(),
    ) {
        let data = build(&s);
        let (k, m) = parse_checked(&data, in_port).map_err(|r| TestCaseError::fail(r.name()))?;
        prop_assert_eq!(k, expected_key(&s, in_port));
        prop_assert_eq!(m, expected_meta(&s));
    }

    #[test]
    fn vxlan_key_is_the_inner_key_plus_tunnel_fields(
        s in spec(),
        vni in 0u32..(1 << 24),
    ) {
        let data = frame(&s, Some(vni));
        let (k, m) = parse_checked(&data, 3).map_err(|r| TestCaseError::fail(r.name()))?;
        let mut want = expected_key(&s, 3);
        want.set(Field::TunId, vni.into());
        // The outer packet was built with source and destination swapped.
        if s.v6 {
            want.set(Field::TunFlags, (TUN_PRESENT | TUN_IPV6).into());
            want.set(Field::TunSrc, addr(&s.ip_dst));
            want.set(Field::TunDst, addr(&s.ip_src));
        } else {
            want.set(Field::TunFlags, TUN_PRESENT.into());
            want.set(Field::TunSrc, addr(&s.ip_dst[..4]) << 96);
            want.set(Field::TunDst, addr(&s.ip_src[..4]) << 96);
        }
        prop_assert_eq!(k, want);
        let l2: u16 = if s.v6 { 14 + 40 + 16 } else { 14 + 20 + 16 };
        let inner = expected_meta(&s);
        prop_assert_eq!(m, PacketMeta { l2, l3: l2 + inner.l3, l4: l2 + inner.l4, vlans: inner.vlans });
    }
}
