//! Hand-built frames for every protocol combination the parser knows, checking the whole
//! key (every field not listed must be zero) and the header offsets, plus one case per
//! [`DropReason`].

use flowpath_packet::key::{
    Field, FlowKey, FRAG_ANY, FRAG_LATER, TUN_IPV6, TUN_PRESENT, VLAN_PRESENT,
};
use flowpath_packet::{parse, DropReason, PacketMeta, ParseOptions};

const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const IN_PORT: u32 = 0x0102_0304;
const V4_SRC: [u8; 4] = [10, 1, 0, 1];
const V4_DST: [u8; 4] = [192, 168, 7, 9];
const V6_SRC: [u8; 16] = [
    0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0x01,
];
const V6_DST: [u8; 16] = [
    0xfd, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0x02,
];

// ---- frame builders (checksums are irrelevant to the parser and left zero) ----

fn eth(tags: &[(u16, u16)], etype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = [DST, SRC].concat();
    for &(tpid, tci) in tags {
        f.extend(tpid.to_be_bytes());
        f.extend(tci.to_be_bytes());
    }
    f.extend(etype.to_be_bytes());
    f.extend(payload);
    f
}

struct V4 {
    proto: u8,
    tos: u8,
    ttl: u8,
    /// Flags and fragment offset field (MF = 0x2000, offset in 8-byte units).
    frag: u16,
    options: Vec<u8>,
}

impl V4 {
    fn new(proto: u8) -> V4 {
        V4 {
            proto,
            tos: 0xb9,
            ttl: 61,
            frag: 0x4000, // DF: not a fragment
            options: Vec::new(),
        }
    }
    fn build(&self, payload: &[u8]) -> Vec<u8> {
        assert_eq!(self.options.len() % 4, 0);
        let hlen = 20 + self.options.len();
        let total = (hlen + payload.len()) as u16;
        let mut h = vec![0x40 | (hlen / 4) as u8, self.tos];
        h.extend(total.to_be_bytes());
        h.extend([0x12, 0x34]);
        h.extend(self.frag.to_be_bytes());
        h.extend([self.ttl, self.proto, 0, 0]);
        h.extend(V4_SRC);
        h.extend(V4_DST);
        h.extend(&self.options);
        h.extend(payload);
        h
    }
}

fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    V4::new(proto).build(payload)
}

/// IPv6 with traffic class 0xa5 and hop limit 33.
fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x6a, 0x5c, 0xde, 0xf0];
    h.extend((payload.len() as u16).to_be_bytes());
    h.extend([next, 33]);
    h.extend(V6_SRC);
    h.extend(V6_DST);
    h.extend(payload);
    h
}

/// Hop-by-hop / routing / destination-options style header of `(units + 1) * 8` bytes.
fn ext(next: u8, units: u8, rest: &[u8]) -> Vec<u8> {
    let mut h = vec![next, units];
    h.resize((usize::from(units) + 1) * 8, 0x01);
    h.extend(rest);
    h
}

fn frag6(next: u8, offset_units: u16, more: bool, rest: &[u8]) -> Vec<u8> {
    let mut h = vec![next, 0];
    h.extend(((offset_units << 3) | u16::from(more)).to_be_bytes());
    h.extend([0xde, 0xad, 0xbe, 0xef]);
    h.extend(rest);
    h
}

fn udp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = sp.to_be_bytes().to_vec();
    h.extend(dp.to_be_bytes());
    h.extend(((8 + payload.len()) as u16).to_be_bytes());
    h.extend([0, 0]);
    h.extend(payload);
    h
}

/// TCP with the 12-bit `flags` and `opts` (a multiple of 4 bytes) of options.
fn tcp(sp: u16, dp: u16, flags: u16, opts: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut h = sp.to_be_bytes().to_vec();
    h.extend(dp.to_be_bytes());
    h.extend([0, 0, 0, 1, 0, 0, 0, 2]);
    let doff = ((20 + opts.len()) / 4) as u16;
    h.extend(((doff << 12) | (flags & 0x0fff)).to_be_bytes());
    h.extend([0xff, 0xff, 0, 0, 0, 0]);
    h.extend(opts);
    h.extend(payload);
    h
}

fn icmp(ty: u8, code: u8) -> Vec<u8> {
    vec![ty, code, 0, 0, 0, 1, 0, 1, b'p', b'i', b'n', b'g']
}

fn vxlan(vni: u32, inner: &[u8]) -> Vec<u8> {
    let v = vni.to_be_bytes();
    let mut h = vec![0x08, 0, 0, 0, v[1], v[2], v[3], 0];
    h.extend(inner);
    h
}

fn arp(op: u16) -> Vec<u8> {
    let mut a = vec![0, 1, 0x08, 0x00, 6, 4];
    a.extend(op.to_be_bytes());
    a.extend(SRC);
    a.extend(V4_SRC);
    a.extend([0; 6]);
    a.extend(V4_DST);
    a
}

// ---- checking helpers ----

fn run(frame: &[u8], opts: &ParseOptions) -> Result<(FlowKey, PacketMeta), DropReason> {
    let mut k = FlowKey::ONES; // the parser must clear what it does not set
    parse(frame, IN_PORT, opts, &mut k).map(|m| (k, m))
}

fn ok(frame: &[u8]) -> (FlowKey, PacketMeta) {
    run(frame, &ParseOptions::default()).unwrap_or_else(|r| panic!("dropped: {r}"))
}

fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0, |a, &b| (a << 8) | u128::from(b))
}

fn addr<const N: usize>(a: [u8; N]) -> u128 {
    a.iter().fold(0, |acc, &b| (acc << 8) | u128::from(b))
}

/// The expected key: in_port and the Ethernet addresses of [`eth`] plus `fields`; every
/// other field zero. Compared as a whole, so a stray byte anywhere fails.
fn key(fields: &[(Field, u128)]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, IN_PORT.into());
    k.set(Field::EthDst, mac(DST));
    k.set(Field::EthSrc, mac(SRC));
    for &(f, v) in fields {
        k.set(f, v);
    }
    k
}

fn meta(l2: u16, l3: u16, l4: u16, vlans: u8) -> PacketMeta {
    PacketMeta { l2, l3, l4, vlans }
}

fn v4_fields(proto: u8) -> Vec<(Field, u128)> {
    vec![
        (Field::EthType, 0x0800),
        (Field::NwProto, proto.into()),
        (Field::NwTos, 0xb9),
        (Field::NwTtl, 61),
        (Field::Ipv4Src, addr(V4_SRC)),
        (Field::Ipv4Dst, addr(V4_DST)),
    ]
}

fn v6_fields(proto: u8) -> Vec<(Field, u128)> {
    vec![
        (Field::EthType, 0x86dd),
        (Field::NwProto, proto.into()),
        (Field::NwTos, 0xa5),
        (Field::NwTtl, 33),
        (Field::Ipv6Src, addr(V6_SRC)),
        (Field::Ipv6Dst, addr(V6_DST)),
    ]
}

fn with(mut base: Vec<(Field, u128)>, more: &[(Field, u128)]) -> Vec<(Field, u128)> {
    base.extend_from_slice(more);
    base
}

// ---- valid packets ----

#[test]
fn ipv4_udp_untagged_with_ethernet_padding() {
    let mut f = eth(&[], 0x0800, &ipv4(17, &udp(1234, 53, b"q")));
    f.resize(60, 0xee); // minimum frame: padding after the IP packet is not payload
    let (k, m) = ok(&f);
    let want = with(v4_fields(17), &[(Field::TpSrc, 1234), (Field::TpDst, 53)]);
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 34, 0));
}

#[test]
fn ipv4_tcp_one_tag_keeps_pcp_and_vid_and_sets_present() {
    // DEI set in the frame: OVS's convention replaces it with "present".
    let f = eth(
        &[(0x8100, 0xb123)],
        0x0800,
        &ipv4(6, &tcp(80, 40000, 0x0812, &[], b"GET")),
    );
    let (k, m) = ok(&f);
    let want = with(
        v4_fields(6),
        &[
            (Field::VlanTci, 0xb123),
            (Field::TpSrc, 80),
            (Field::TpDst, 40000),
            (Field::TcpFlags, 0x812),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 18, 38, 1));
    assert_eq!(k.get(Field::VlanTci) as u16 & VLAN_PRESENT, VLAN_PRESENT);
}

#[test]
fn ipv4_udp_two_tags_qinq() {
    for outer_tpid in [0x88a8, 0x8100] {
        let f = eth(
            &[(outer_tpid, 0x2005), (0x8100, 0x0064)],
            0x0800,
            &ipv4(17, &udp(9, 10, &[])),
        );
        let (k, m) = ok(&f);
        let want = with(
            v4_fields(17),
            &[
                (Field::VlanTci, 0x3005),
                (Field::VlanInnerTci, 0x1064),
                (Field::TpSrc, 9),
                (Field::TpDst, 10),
            ],
        );
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 22, 42, 2));
    }
}

#[test]
fn arp_request_and_reply() {
    for op in [1u16, 2] {
        let (k, m) = ok(&eth(&[], 0x0806, &arp(op)));
        let want = [
            (Field::EthType, 0x0806),
            (Field::NwProto, op.into()),
            (Field::Ipv4Src, addr(V4_SRC)),
            (Field::Ipv4Dst, addr(V4_DST)),
        ];
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 14, 0, 0));
    }
}

#[test]
fn arp_in_a_vlan() {
    let (k, m) = ok(&eth(&[(0x8100, 7)], 0x0806, &arp(0x0102)));
    let want = [
        (Field::EthType, 0x0806),
        (Field::VlanTci, 0x1007),
        (Field::NwProto, 2), // low byte of the opcode
        (Field::Ipv4Src, addr(V4_SRC)),
        (Field::Ipv4Dst, addr(V4_DST)),
    ];
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 18, 0, 1));
}

#[test]
fn ipv4_options_move_l4() {
    for words in [1usize, 10] {
        let mut v4 = V4::new(6);
        v4.options = vec![0x01; words * 4];
        // TCP with 12 bytes of options.
        let f = eth(
            &[],
            0x0800,
            &v4.build(&tcp(22, 2222, 0x018, &[1; 12], b"x")),
        );
        let (k, m) = ok(&f);
        let want = with(
            v4_fields(6),
            &[
                (Field::TpSrc, 22),
                (Field::TpDst, 2222),
                (Field::TcpFlags, 0x018),
            ],
        );
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 14, 34 + 4 * words as u16, 0));
    }
}

#[test]
fn ipv4_first_fragment_keeps_ports() {
    let mut v4 = V4::new(17);
    v4.frag = 0x2000; // MF, offset 0
    let (k, m) = ok(&eth(&[], 0x0800, &v4.build(&udp(5, 6, &[0; 16]))));
    let want = with(
        v4_fields(17),
        &[
            (Field::NwFrag, FRAG_ANY.into()),
            (Field::TpSrc, 5),
            (Field::TpDst, 6),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 34, 0));
}

#[test]
fn a_first_fragments_udp_length_covers_the_whole_datagram() {
    // UDP says 1408 bytes; this fragment carries 24 of them (scapy's fragment() makes
    // these; an unfragmented packet with that length is still udp_bad_length).
    let mut u = udp(5, 6, &[0; 16]);
    u[4..6].copy_from_slice(&1408u16.to_be_bytes());
    let mut v4 = V4::new(17);
    v4.frag = 0x2000;
    let (k, _) = ok(&eth(&[], 0x0800, &v4.build(&u)));
    assert_eq!((k.get(Field::TpSrc), k.get(Field::TpDst)), (5, 6));
    assert_eq!(
        run(&eth(&[], 0x0800, &ipv4(17, &u)), &ParseOptions::default()).unwrap_err(),
        DropReason::UdpBadLength
    );
}

#[test]
fn arp_of_other_hardware_or_protocol_types_is_keyed_on_the_ethertype() {
    // Not Ethernet/IPv4 ARP: a valid frame (tshark dissects it), keyed as OVS keys it.
    for (at, v) in [(1, 6u8), (3, 0xdd), (4, 8), (5, 16)] {
        let mut a = arp(1);
        a[at] = v;
        let (k, m) = ok(&eth(&[], 0x0806, &a));
        assert_eq!(k, key(&[(Field::EthType, 0x0806)]), "byte {at} = {v}");
        assert_eq!(m, meta(0, 14, 0, 0));
    }
    // Such an ARP is as long as its sizes say, which may be shorter than Ethernet/IPv4's
    // 28 bytes (tshark dissects this one cleanly; it came from randpkt): still valid.
    let short = [0x25, 0x73, 0x00, 0x61, 0x00, 0x01, 0xdb, 0xa6, 0x43, 0x90];
    let (k, _) = ok(&eth(&[], 0x0806, &short));
    assert_eq!(k, key(&[(Field::EthType, 0x0806)]));
    // Shorter than the fixed 8 bytes is truncated whatever it is.
    assert_eq!(
        run(&eth(&[], 0x0806, &short[..7]), &ParseOptions::default()).map(|_| ()),
        Err(DropReason::ArpTruncated)
    );
}

#[test]
fn ipv4_later_fragments_have_no_l4() {
    // Middle fragment (MF + offset) and last fragment (offset only). The payload would
    // be a bad UDP header: it must not be looked at.
    for frag in [0x2000 | 185, 370] {
        let mut v4 = V4::new(17);
        v4.frag = frag;
        let (k, m) = ok(&eth(&[], 0x0800, &v4.build(&[0xff; 3])));
        let want = with(
            v4_fields(17),
            &[(Field::NwFrag, (FRAG_ANY | FRAG_LATER).into())],
        );
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 14, 0, 0));
    }
}

#[test]
fn ipv4_icmp() {
    let (k, m) = ok(&eth(&[], 0x0800, &ipv4(1, &icmp(3, 13))));
    let want = with(v4_fields(1), &[(Field::TpSrc, 3), (Field::TpDst, 13)]);
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 34, 0));
}

#[test]
fn unknown_l4_and_wrong_family_icmp_are_not_parsed() {
    for (proto, payload) in [(47u8, vec![0u8; 4]), (58, icmp(128, 0)), (132, vec![])] {
        let (k, m) = ok(&eth(&[], 0x0800, &ipv4(proto, &payload)));
        assert_eq!(k, key(&v4_fields(proto)), "proto {proto}");
        assert_eq!(m, meta(0, 14, 0, 0));
    }
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(1, &icmp(8, 0))));
    assert_eq!(k, key(&v6_fields(1)));
    assert_eq!(m, meta(0, 14, 0, 0));
}

#[test]
fn non_ip_ethertypes_are_keyed_on_the_ethertype_only() {
    // An 802.3 length (below 0x0600) is keyed as 0x05ff, as OVS keys it.
    for (etype, keyed) in [
        (0x88cc_u16, 0x88cc_u16),
        (0x0050, 0x05ff),
        (0x05ff, 0x05ff),
        (0x8847, 0x8847),
    ] {
        let (k, m) = ok(&eth(&[(0x8100, 1)], etype, &[0xab; 40]));
        let want = [(Field::EthType, keyed.into()), (Field::VlanTci, 0x1001)];
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 0, 0, 1));
    }
}

#[test]
fn ipv6_tcp_and_udp() {
    let (k, m) = ok(&eth(
        &[],
        0x86dd,
        &ipv6(6, &tcp(443, 5555, 0xfff, &[], &[])),
    ));
    let want = with(
        v6_fields(6),
        &[
            (Field::TpSrc, 443),
            (Field::TpDst, 5555),
            (Field::TcpFlags, 0xfff),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 54, 0));

    let (k, m) = ok(&eth(
        &[(0x8100, 0xe0ff)],
        0x86dd,
        &ipv6(17, &udp(1, 2, b"a")),
    ));
    let want = with(
        v6_fields(17),
        &[
            (Field::VlanTci, 0xf0ff),
            (Field::TpSrc, 1),
            (Field::TpDst, 2),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 18, 58, 1));
}

#[test]
fn ipv6_icmpv6() {
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(58, &icmp(135, 0))));
    let want = with(v6_fields(58), &[(Field::TpSrc, 135)]);
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 54, 0));
}

#[test]
fn ipv6_extension_chain_to_udp() {
    // hop-by-hop (8) -> routing (24) -> destination options (16) -> fragment (8, first) -> UDP
    let payload = ext(
        43,
        0,
        &ext(
            60,
            2,
            &ext(44, 1, &frag6(17, 0, true, &udp(4000, 4001, &[7; 9]))),
        ),
    );
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(0, &payload)));
    let want = with(
        v6_fields(17),
        &[
            (Field::NwFrag, FRAG_ANY.into()),
            (Field::TpSrc, 4000),
            (Field::TpDst, 4001),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 54 + 8 + 24 + 16 + 8, 0));
}

#[test]
fn ipv6_unfragmented_fragment_header_and_dstopts_to_tcp() {
    // An "atomic" fragment (offset 0, no M) is not a fragment.
    let payload = frag6(60, 0, false, &ext(6, 0, &tcp(1, 2, 0x002, &[], &[])));
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(44, &payload)));
    let want = with(
        v6_fields(6),
        &[(Field::TpSrc, 1), (Field::TpDst, 2), (Field::TcpFlags, 2)],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 70, 0));
}

#[test]
fn ipv6_later_fragment_records_next_header_and_stops() {
    let payload = ext(44, 0, &frag6(58, 100, false, &[0xff; 5]));
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(0, &payload)));
    let want = with(
        v6_fields(58),
        &[(Field::NwFrag, (FRAG_ANY | FRAG_LATER).into())],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 0, 0));
}

#[test]
fn ipv6_no_next_header_and_eight_extension_headers() {
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(59, &[])));
    assert_eq!(k, key(&v6_fields(59)));
    assert_eq!(m, meta(0, 14, 0, 0));

    // Exactly the limit: 8 destination-options headers, then UDP.
    let mut p = udp(8, 9, &[]);
    for _ in 0..8 {
        p = ext(if p.len() == 8 { 17 } else { 60 }, 0, &p);
    }
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(60, &p)));
    let want = with(v6_fields(17), &[(Field::TpSrc, 8), (Field::TpDst, 9)]);
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 54 + 64, 0));
}

fn tunnel_v4(vni: u32) -> Vec<(Field, u128)> {
    vec![
        (Field::TunId, vni.into()),
        (Field::TunFlags, TUN_PRESENT.into()),
        (Field::TunSrc, addr(V4_SRC) << 96),
        (Field::TunDst, addr(V4_DST) << 96),
    ]
}

#[test]
fn vxlan_over_ipv4_inner_ipv4_tcp() {
    let inner = eth(&[], 0x0800, &ipv4(6, &tcp(3000, 22, 0x011, &[0; 4], &[])));
    // The outer frame is tagged: the tag belongs to the outer packet and is dropped.
    let f = eth(
        &[(0x8100, 55)],
        0x0800,
        &ipv4(17, &udp(51000, 4789, &vxlan(0xabcdef, &inner))),
    );
    let (k, m) = ok(&f);
    let mut want = with(
        v4_fields(6),
        &[
            (Field::TpSrc, 3000),
            (Field::TpDst, 22),
            (Field::TcpFlags, 0x011),
        ],
    );
    want.extend(tunnel_v4(0xabcdef));
    assert_eq!(k, key(&want));
    let l2 = 18 + 20 + 8 + 8;
    assert_eq!(m, meta(l2, l2 + 14, l2 + 34, 0));
}

#[test]
fn vxlan_over_ipv6_inner_ipv6_udp() {
    let inner = eth(&[], 0x86dd, &ipv6(17, &udp(68, 67, b"dhcp")));
    let f = eth(&[], 0x86dd, &ipv6(17, &udp(1, 4789, &vxlan(1, &inner))));
    let (k, m) = ok(&f);
    let want = with(
        v6_fields(17),
        &[
            (Field::TpSrc, 68),
            (Field::TpDst, 67),
            (Field::TunId, 1),
            (Field::TunFlags, (TUN_PRESENT | TUN_IPV6).into()),
            (Field::TunSrc, addr(V6_SRC)),
            (Field::TunDst, addr(V6_DST)),
        ],
    );
    assert_eq!(k, key(&want));
    let l2 = 14 + 40 + 8 + 8;
    assert_eq!(m, meta(l2, l2 + 14, l2 + 54, 0));
}

#[test]
fn vxlan_inner_vlan_and_inner_vxlan_port_is_plain_udp() {
    let innermost = eth(&[], 0x0800, &ipv4(1, &icmp(8, 0)));
    let inner = eth(
        &[(0x8100, 0x0100)],
        0x0800,
        &ipv4(17, &udp(7, 4789, &vxlan(9, &innermost))),
    );
    let mut f = eth(
        &[],
        0x0800,
        &ipv4(17, &udp(7, 4789, &vxlan(0x00ff_ffff, &inner))),
    );
    f.resize(f.len() + 6, 0); // outer Ethernet trailer
    let (k, m) = ok(&f);
    let mut want = with(
        v4_fields(17),
        &[
            (Field::VlanTci, 0x1100),
            (Field::TpSrc, 7),
            (Field::TpDst, 4789),
        ],
    );
    want.extend(tunnel_v4(0x00ff_ffff));
    assert_eq!(k, key(&want));
    let l2 = 14 + 20 + 8 + 8;
    assert_eq!(m, meta(l2, l2 + 18, l2 + 38, 1));
}

#[test]
fn vxlan_inner_arp() {
    let inner = eth(&[], 0x0806, &arp(1));
    let (k, m) = ok(&eth(
        &[],
        0x0800,
        &ipv4(17, &udp(7, 4789, &vxlan(42, &inner))),
    ));
    let mut want = vec![
        (Field::EthType, 0x0806),
        (Field::NwProto, 1),
        (Field::Ipv4Src, addr(V4_SRC)),
        (Field::Ipv4Dst, addr(V4_DST)),
    ];
    want.extend(tunnel_v4(42));
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(50, 64, 0, 0));
}

#[test]
fn vxlan_not_decapsulated_when_disabled_other_port_or_fragment() {
    let inner = eth(&[], 0x0800, &ipv4(6, &tcp(1, 2, 0, &[], &[])));
    let payload = udp(7, 4789, &vxlan(42, &inner));
    let plain = with(v4_fields(17), &[(Field::TpSrc, 7), (Field::TpDst, 4789)]);

    let f = eth(&[], 0x0800, &ipv4(17, &payload));
    let off = ParseOptions { vxlan_port: None };
    let (k, m) = run(&f, &off).unwrap();
    assert_eq!(k, key(&plain));
    assert_eq!(m, meta(0, 14, 34, 0));

    let other = ParseOptions {
        vxlan_port: Some(8472),
    };
    let (k, _) = run(&f, &other).unwrap();
    assert_eq!(k, key(&plain));

    let mut v4 = V4::new(17);
    v4.frag = 0x2000;
    let (k, m) = ok(&eth(&[], 0x0800, &v4.build(&payload)));
    assert_eq!(k, key(&with(plain, &[(Field::NwFrag, FRAG_ANY.into())])));
    assert_eq!(m, meta(0, 14, 34, 0));
}

#[test]
fn vxlan_on_a_custom_port() {
    let inner = eth(&[], 0x0800, &ipv4(1, &icmp(0, 0)));
    let f = eth(&[], 0x0800, &ipv4(17, &udp(7, 8472, &vxlan(5, &inner))));
    let opts = ParseOptions {
        vxlan_port: Some(8472),
    };
    let (k, m) = run(&f, &opts).unwrap();
    let mut want = v4_fields(1);
    want.extend(tunnel_v4(5));
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(50, 64, 84, 0));
}

#[test]
fn key_is_fully_overwritten_between_packets() {
    let mut k = FlowKey::ZERO;
    let opts = ParseOptions::default();
    let inner = eth(&[(0x8100, 3)], 0x86dd, &ipv6(6, &tcp(1, 2, 0x3f, &[], &[])));
    let big = eth(&[], 0x86dd, &ipv6(17, &udp(1, 4789, &vxlan(77, &inner))));
    parse(&big, 9, &opts, &mut k).unwrap();
    let small = eth(&[], 0x0806, &arp(1));
    parse(&small, IN_PORT, &opts, &mut k).unwrap();
    let want = [
        (Field::EthType, 0x0806),
        (Field::NwProto, 1),
        (Field::Ipv4Src, addr(V4_SRC)),
        (Field::Ipv4Dst, addr(V4_DST)),
    ];
    assert_eq!(k, key(&want));
}

// ---- one case per drop reason ----

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
