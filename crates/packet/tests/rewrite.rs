//! Header rewrites checked against independent oracles: frames are built with etherparse,
//! results are read back with etherparse and compared with a tiny model of each action,
//! and checksums are verified by a full recomputation written here (receiver-style sum)
//! as well as by etherparse's own checksum functions.
//!
//! The parser is not used: each test knows where it put the headers and builds the
//! `PacketMeta` itself.

use etherparse::{Ipv4Dscp, NetHeaders, PacketBuilder, PacketHeaders, TransportHeader, VlanId};
use flowpath_packet::action::Action;
use flowpath_packet::packet::{Packet, HEADROOM};
use flowpath_packet::parse::PacketMeta;
use flowpath_packet::rewrite::{apply, RewriteDrop};
use proptest::prelude::*;

const MAC_SRC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
const MAC_DST: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];

// ---------------------------------------------------------------------------------------
// Frame construction.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    V4Tcp,
    V4Udp,
    V4UdpNoCsum,
    V4Icmp,
    V6Tcp,
    V6Udp,
    V6HbhUdp,
    V6Icmp,
    V4TcpVlan,
    V6UdpQinQ,
    /// Hop-by-hop, destination options and an atomic fragment header, then TCP.
    V6ExtChainTcp,
}

const KINDS: [Kind; 11] = [
    Kind::V4Tcp,
    Kind::V4Udp,
    Kind::V4UdpNoCsum,
    Kind::V4Icmp,
    Kind::V6Tcp,
    Kind::V6Udp,
    Kind::V6HbhUdp,
    Kind::V6Icmp,
    Kind::V4TcpVlan,
    Kind::V6UdpQinQ,
    Kind::V6ExtChainTcp,
];

#[derive(Clone, Debug)]
struct Params {
    src4: [u8; 4],
    dst4: [u8; 4],
    src6: [u8; 16],
    dst6: [u8; 16],
    sport: u16,
    dport: u16,
    tos: u8,
    ttl: u8,
    tci: u16,
    payload: Vec<u8>,
}

fn params() -> Params {
    Params {
        src4: [10, 0, 0, 1],
        dst4: [192, 168, 1, 200],
        src6: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        dst6: [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0xff, 0xfe, 0x78, 0x9a, 0xbc,
        ],
        sport: 40000,
        dport: 443,
        tos: 0x2e,
        ttl: 64,
        tci: 0xa064,
        payload: b"hello, flowpath rewrite".to_vec(),
    }
}

/// Full one's-complement sum of `data` as 16-bit big-endian words (odd tail padded),
/// folded to 16 bits. A correct checksum makes the sum over the covered data 0xffff.
fn ones_sum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for p in parts {
        let mut it = p.chunks(2);
        for w in &mut it {
            let hi = u64::from(w[0]) << 8;
            let lo = w.get(1).copied().map_or(0, u64::from);
            sum += hi | lo;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn fix_ipv4_header_csum(frame: &mut [u8], l3: usize) {
    let ihl = usize::from(frame[l3] & 0x0f) * 4;
    frame[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
    let c = !ones_sum(&[&frame[l3..l3 + ihl]]);
    frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
}

/// Build a frame of `kind` and the `PacketMeta` the parser would produce for it.
fn build(kind: Kind, p: &Params) -> (Vec<u8>, PacketMeta) {
    let eth = || PacketBuilder::ethernet2(MAC_SRC, MAC_DST);
    let mut f = Vec::new();
    let (seq, win) = (0x1234_5678, 4096);
    match kind {
        Kind::V4Tcp => eth()
            .ipv4(p.src4, p.dst4, p.ttl)
            .tcp(p.sport, p.dport, seq, win)
            .write(&mut f, &p.payload),
        Kind::V4Udp | Kind::V4UdpNoCsum => eth()
            .ipv4(p.src4, p.dst4, p.ttl)
            .udp(p.sport, p.dport)
            .write(&mut f, &p.payload),
        Kind::V4Icmp => eth()
            .ipv4(p.src4, p.dst4, p.ttl)
            .icmpv4_echo_request(p.sport, p.dport)
            .write(&mut f, &p.payload),
        Kind::V6Tcp | Kind::V6ExtChainTcp => eth()
            .ipv6(p.src6, p.dst6, p.ttl)
            .tcp(p.sport, p.dport, seq, win)
            .write(&mut f, &p.payload),
        Kind::V6Udp | Kind::V6HbhUdp => eth()
            .ipv6(p.src6, p.dst6, p.ttl)
            .udp(p.sport, p.dport)
            .write(&mut f, &p.payload),
        Kind::V6Icmp => eth()
            .ipv6(p.src6, p.dst6, p.ttl)
            .icmpv6_echo_request(p.sport, p.dport)
            .write(&mut f, &p.payload),
        Kind::V4TcpVlan => eth()
            .single_vlan(VlanId::try_new(p.tci & 0x0fff).unwrap())
            .ipv4(p.src4, p.dst4, p.ttl)
            .tcp(p.sport, p.dport, seq, win)
            .write(&mut f, &p.payload),
        Kind::V6UdpQinQ => eth()
            .double_vlan(
                VlanId::try_new(p.tci & 0x0fff).unwrap(),
                VlanId::try_new(7).unwrap(),
            )
            .ipv6(p.src6, p.dst6, p.ttl)
            .udp(p.sport, p.dport)
            .write(&mut f, &p.payload),
    }
    .unwrap();

    let vlans: u8 = match kind {
        Kind::V4TcpVlan => 1,
        Kind::V6UdpQinQ => 2,
        _ => 0,
    };
    if vlans > 0 {
        // Full outer TCI (PCP/DEI too), which the builder does not take.
        f[14..16].copy_from_slice(&p.tci.to_be_bytes());
    }
    let l3 = 14 + 4 * usize::from(vlans);
    let v6 = matches!(
        kind,
        Kind::V6Tcp
            | Kind::V6Udp
            | Kind::V6HbhUdp
            | Kind::V6Icmp
            | Kind::V6UdpQinQ
            | Kind::V6ExtChainTcp
    );
    let mut l4 = l3 + if v6 { 40 } else { 20 };
    if v6 {
        // Traffic class = tos: bits 4..12 of the first 32-bit word.
        f[l3] = 0x60 | (p.tos >> 4);
        f[l3 + 1] = (f[l3 + 1] & 0x0f) | (p.tos << 4);
    } else {
        f[l3 + 1] = p.tos;
        fix_ipv4_header_csum(&mut f, l3);
    }
    if kind == Kind::V4UdpNoCsum {
        f[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
    }
    if kind == Kind::V6HbhUdp {
        // 8-byte hop-by-hop header: next header UDP, length 0, one PadN option of 4 bytes.
        // The UDP checksum does not cover extension headers, so it stays right.
        let nh = f[l3 + 6];
        f.splice(l4..l4, [nh, 0, 1, 4, 0, 0, 0, 0]);
        f[l3 + 6] = 0;
        let plen = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) + 8;
        f[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
        l4 += 8;
    }
    if kind == Kind::V6ExtChainTcp {
        // Hop-by-hop (8) -> destination options (16) -> fragment (8, offset 0, last) -> TCP.
        let mut chain = vec![60u8, 0, 1, 4, 0, 0, 0, 0];
        chain.extend_from_slice(&[44, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        chain.extend_from_slice(&[f[l3 + 6], 0, 0, 0, 0xde, 0xad, 0xbe, 0xef]);
        let n = chain.len();
        f.splice(l4..l4, chain);
        f[l3 + 6] = 0;
        let plen = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) + n as u16;
        f[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
        l4 += n;
    }
    let meta = PacketMeta {
        l2: 0,
        l3: l3 as u16,
        l4: l4 as u16,
        vlans,
    };
    (f, meta)
}

/// An Ethernet/ARP request (no checksums anywhere).
fn arp_frame() -> (Vec<u8>, PacketMeta) {
    let mut f = Vec::new();
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&MAC_SRC);
    f.extend_from_slice(&[0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&MAC_SRC);
    f.extend_from_slice(&[10, 0, 0, 1]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[10, 0, 0, 2]);
    let meta = PacketMeta {
        l2: 0,
        l3: 14,
        l4: 0,
        vlans: 0,
    };
    (f, meta)
}

/// A buffer with `HEADROOM` bytes in front of `frame` and `tail` bytes after it.
fn buffer(frame: &[u8], tail: usize) -> Vec<u8> {
    let mut buf = vec![0u8; HEADROOM];
    buf.extend_from_slice(frame);
    buf.resize(buf.len() + tail, 0);
    buf
}

/// Run `actions` on a copy of `frame` with 128 bytes of headroom; stop at the first drop.
fn run(
    frame: &[u8],
    meta: PacketMeta,
    actions: &[Action],
) -> (Result<(), RewriteDrop>, Vec<u8>, PacketMeta, bool) {
    let mut buf = buffer(frame, 0);
    let mut pkt = Packet::new(&mut buf, HEADROOM, frame.len());
    let mut meta = meta;
    let mut res = Ok(());
    for a in actions {
        res = apply(a, &mut pkt, &mut meta);
        if res.is_err() {
            break;
        }
    }
    let modified = pkt.modified;
    (res, pkt.data().to_vec(), meta, modified)
}

// ---------------------------------------------------------------------------------------
// Oracles.

/// Outer VLAN tags as (TPID, TCI), read directly from the frame.
fn tags(frame: &[u8]) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    let mut off = 12;
    loop {
        let et = u16::from_be_bytes([frame[off], frame[off + 1]]);
        if et != 0x8100 && et != 0x88a8 {
            return out;
        }
        out.push((et, u16::from_be_bytes([frame[off + 2], frame[off + 3]])));
        off += 4;
    }
}

/// The frame with its VLAN tags removed, for etherparse (which reads at most two).
fn untagged(frame: &[u8]) -> Vec<u8> {
    let n = tags(frame).len();
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&frame[12 + 4 * n..]);
    f
}

/// Everything an action may change, as parsed by etherparse, with checksums zeroed (they
/// are checked separately).
#[derive(Clone, Debug, PartialEq)]
struct Snap {
    dst: [u8; 6],
    src: [u8; 6],
    tags: Vec<(u16, u16)>,
    net: Option<NetHeaders>,
    transport: Option<TransportHeader>,
    payload: Vec<u8>,
}

fn snap(frame: &[u8]) -> Snap {
    let flat = untagged(frame);
    let h = PacketHeaders::from_ethernet_slice(&flat).expect("etherparse rejects the frame");
    let mut net = h.net.clone();
    match &mut net {
        Some(NetHeaders::Ipv4(ip, _)) => ip.header_checksum = 0,
        Some(NetHeaders::Ipv6(..)) | None => {}
    }
    let mut transport = h.transport.clone();
    match &mut transport {
        Some(TransportHeader::Tcp(t)) => t.checksum = 0,
        Some(TransportHeader::Udp(u)) => u.checksum = 0,
        Some(TransportHeader::Icmpv4(i)) => i.checksum = 0,
        Some(TransportHeader::Icmpv6(i)) => i.checksum = 0,
        None => {}
    }
    Snap {
        dst: frame[0..6].try_into().unwrap(),
        src: frame[6..12].try_into().unwrap(),
        tags: tags(frame),
        net,
        transport,
        payload: h.payload.slice().to_vec(),
    }
}

/// Where the headers of `frame` are according to etherparse: the `PacketMeta` the parser
/// should report.
fn layout(frame: &[u8]) -> PacketMeta {
    let n = tags(frame).len();
    let flat = untagged(frame);
    let h = PacketHeaders::from_ethernet_slice(&flat).unwrap();
    let l3 = 14 + 4 * n;
    let l4 = match (&h.net, &h.transport) {
        (Some(net), Some(_)) => l3 + net.header_len(),
        _ => 0,
    };
    PacketMeta {
        l2: 0,
        l3: if h.net.is_some() { l3 as u16 } else { 0 },
        l4: l4 as u16,
        vlans: n as u8,
    }
}

/// What `a` should do to the parsed headers (the spec of each action, restated).
fn model(s: &mut Snap, a: &Action) -> Result<(), RewriteDrop> {
    match (a, &mut s.net) {
        (Action::SetEthSrc(m), _) => s.src = *m,
        (Action::SetEthDst(m), _) => s.dst = *m,
        (Action::SetIpv4Src(x), Some(NetHeaders::Ipv4(ip, _))) => ip.source = *x,
        (Action::SetIpv4Dst(x), Some(NetHeaders::Ipv4(ip, _))) => ip.destination = *x,
        (Action::SetIpv6Src(x), Some(NetHeaders::Ipv6(ip, _))) => ip.source = *x,
        (Action::SetIpv6Dst(x), Some(NetHeaders::Ipv6(ip, _))) => ip.destination = *x,
        (Action::SetNwTos(t), Some(NetHeaders::Ipv4(ip, _))) => {
            ip.dscp = Ipv4Dscp::try_new(t >> 2).unwrap();
        }
        (Action::SetNwTos(t), Some(NetHeaders::Ipv6(ip, _))) => {
            ip.traffic_class = (t & 0xfc) | (ip.traffic_class & 3);
        }
        (Action::SetTpSrc(p), _) => match &mut s.transport {
            Some(TransportHeader::Tcp(t)) => t.source_port = *p,
            Some(TransportHeader::Udp(u)) => u.source_port = *p,
            _ => {}
        },
        (Action::SetTpDst(p), _) => match &mut s.transport {
            Some(TransportHeader::Tcp(t)) => t.destination_port = *p,
            Some(TransportHeader::Udp(u)) => u.destination_port = *p,
            _ => {}
        },
        (Action::PushVlan { .. }, _) if s.tags.len() >= 2 => {
            return Err(RewriteDrop::TooManyVlans);
        }
        (Action::PushVlan { tpid }, _) => {
            let tci = s.tags.first().map_or(0, |t| t.1);
            s.tags.insert(0, (*tpid, tci));
        }
        (Action::PopVlan, _) if !s.tags.is_empty() => {
            s.tags.remove(0);
        }
        (Action::SetVlanVid(v), _) => {
            if s.tags.is_empty() {
                s.tags.push((0x8100, 0));
            }
            s.tags[0].1 = (s.tags[0].1 & 0xf000) | (v & 0x0fff);
        }
        (Action::SetVlanPcp(p), _) => {
            if s.tags.is_empty() {
                s.tags.push((0x8100, 0));
            }
            s.tags[0].1 = (s.tags[0].1 & 0x1fff) | (u16::from(p & 7) << 13);
        }
        (Action::DecTtl, Some(NetHeaders::Ipv4(ip, _))) => {
            if ip.time_to_live <= 1 {
                return Err(RewriteDrop::TtlExpired);
            }
            ip.time_to_live -= 1;
        }
        (Action::DecTtl, Some(NetHeaders::Ipv6(ip, _))) => {
            if ip.hop_limit <= 1 {
                return Err(RewriteDrop::TtlExpired);
            }
            ip.hop_limit -= 1;
        }
        _ => {}
    }
    Ok(())
}

/// Verify every checksum of `frame` by full recomputation, receiver-style (the sum over
/// the covered data, checksum included, must be 0xffff). `udp4_zero`: the IPv4 UDP
/// checksum must still be the "no checksum" zero.
fn verify_checksums(frame: &[u8], udp4_zero: bool) -> Result<(), String> {
    let mut off = 12 + 4 * tags(frame).len();
    let et = u16::from_be_bytes([frame[off], frame[off + 1]]);
    off += 2;
    let l3 = off;
    let (proto, l4, end, pseudo): (u8, usize, usize, Vec<u8>) = match et {
        0x0800 => {
            let ihl = usize::from(frame[l3] & 0x0f) * 4;
            if ones_sum(&[&frame[l3..l3 + ihl]]) != 0xffff {
                return Err("bad IPv4 header checksum".into());
            }
            let total = usize::from(u16::from_be_bytes([frame[l3 + 2], frame[l3 + 3]]));
            let frag_off = u16::from_be_bytes([frame[l3 + 6], frame[l3 + 7]]) & 0x1fff;
            if frag_off != 0 {
                return Ok(());
            }
            let proto = frame[l3 + 9];
            let seg_len = (total - ihl) as u16;
            let mut pseudo = frame[l3 + 12..l3 + 20].to_vec();
            pseudo.extend_from_slice(&[0, proto]);
            pseudo.extend_from_slice(&seg_len.to_be_bytes());
            (proto, l3 + ihl, l3 + total, pseudo)
        }
        0x86dd => {
            let plen = usize::from(u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]));
            let mut nh = frame[l3 + 6];
            let mut l4 = l3 + 40;
            while matches!(nh, 0 | 43 | 60 | 44) {
                let len = if nh == 44 {
                    8
                } else {
                    (usize::from(frame[l4 + 1]) + 1) * 8
                };
                nh = frame[l4];
                l4 += len;
            }
            let end = l3 + 40 + plen;
            let mut pseudo = frame[l3 + 8..l3 + 40].to_vec();
            pseudo.extend_from_slice(&((end - l4) as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, nh]);
            (nh, l4, end, pseudo)
        }
        _ => return Ok(()),
    };
    let seg = &frame[l4..end];
    let ok = match proto {
        6 => ones_sum(&[&pseudo, seg]) == 0xffff,
        17 => {
            let c = u16::from_be_bytes([seg[6], seg[7]]);
            if et == 0x0800 && udp4_zero {
                c == 0
            } else {
                c != 0 && ones_sum(&[&pseudo, seg]) == 0xffff
            }
        }
        1 => ones_sum(&[seg]) == 0xffff,
        58 => ones_sum(&[&pseudo, seg]) == 0xffff,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("bad L4 checksum (proto {proto})"))
    }
}

/// The checksums in `frame` are exactly what etherparse computes for its headers (a second,
/// independent implementation; for non-degenerate data the one's-complement zero is always
/// represented the same way by both).
fn etherparse_checksums_match(frame: &[u8]) -> Result<(), String> {
    let flat = untagged(frame);
    let h = PacketHeaders::from_ethernet_slice(&flat).unwrap();
    let payload = h.payload.slice();
    match (&h.net, &h.transport) {
        (Some(NetHeaders::Ipv4(ip, _)), t) => {
            if ip.calc_header_checksum() != ip.header_checksum {
                return Err("etherparse: IPv4 header checksum".into());
            }
            let ok = match t {
                Some(TransportHeader::Tcp(tcp)) => {
                    tcp.calc_checksum_ipv4(ip, payload).unwrap() == tcp.checksum
                }
                Some(TransportHeader::Udp(u)) => {
                    u.checksum == 0 || u.calc_checksum_ipv4(ip, payload).unwrap() == u.checksum
                }
                Some(TransportHeader::Icmpv4(i)) => {
                    i.icmp_type.calc_checksum(payload) == i.checksum
                }
                _ => true,
            };
            if !ok {
                return Err("etherparse: IPv4 L4 checksum".into());
            }
        }
        (Some(NetHeaders::Ipv6(ip, _)), t) => {
            let ok = match t {
                Some(TransportHeader::Tcp(tcp)) => {
                    tcp.calc_checksum_ipv6(ip, payload).unwrap() == tcp.checksum
                }
                Some(TransportHeader::Udp(u)) => {
                    u.calc_checksum_ipv6(ip, payload).unwrap() == u.checksum
                }
                Some(TransportHeader::Icmpv6(i)) => {
                    i.icmp_type
                        .calc_checksum(ip.source, ip.destination, payload)
                        .unwrap()
                        == i.checksum
                }
                _ => true,
            };
            if !ok {
                return Err("etherparse: IPv6 L4 checksum".into());
            }
        }
        (None, _) => {}
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Every rewrite on every kind of frame.

fn sample_actions() -> Vec<Action> {
    vec![
        Action::Output(3),
        Action::InPort,
        Action::controller(128),
        Action::Normal,
        Action::Flood,
        Action::All,
        Action::Table,
        Action::SetEthSrc([0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0xff]),
        Action::SetEthDst([0xff, 0xee, 0xdd, 0xcc, 0xbb, 0x0a]),
        Action::SetIpv4Src([172, 16, 254, 3]),
        Action::SetIpv4Dst([8, 8, 4, 4]),
        Action::SetIpv4Src([255, 255, 255, 255]),
        Action::SetIpv4Dst([0, 0, 0, 0]),
        Action::SetIpv6Src([0xff; 16]),
        Action::SetIpv6Dst([
            0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0x88,
        ]),
        Action::SetIpv6Dst([0; 16]),
        Action::SetNwTos(0xb9),
        Action::SetNwTos(0x00),
        Action::SetNwTos(0xff),
        Action::SetTpSrc(1),
        Action::SetTpDst(65535),
        Action::SetTpSrc(0),
        Action::PushVlan { tpid: 0x8100 },
        Action::PushVlan { tpid: 0x88a8 },
        Action::PopVlan,
        Action::SetVlanVid(0x0123),
        Action::SetVlanVid(0xffff),
        Action::SetVlanPcp(5),
        Action::SetVlanPcp(0xff),
        Action::DecTtl,
    ]
}

#[test]
fn each_rewrite_on_each_kind_of_frame() {
    let p = params();
    for kind in KINDS {
        let (frame, meta) = build(kind, &p);
        assert_eq!(layout(&frame), meta, "{kind:?}: test frame layout");
        verify_checksums(&frame, kind == Kind::V4UdpNoCsum).unwrap();
        etherparse_checksums_match(&frame).unwrap();
        let before = snap(&frame);
        for a in sample_actions() {
            let ctx = format!("{kind:?} {a:?}");
            let (res, out, meta2, modified) = run(&frame, meta, &[a]);
            let mut want = before.clone();
            let want_res = model(&mut want, &a);
            assert_eq!(res, want_res, "{ctx}: result");
            if res.is_err() {
                // Only a third tag is refused here; the packet is then untouched.
                assert_eq!(res, Err(RewriteDrop::TooManyVlans), "{ctx}");
                assert_eq!((&out, meta2, modified), (&frame, meta, false), "{ctx}");
                continue;
            }
            assert_eq!(snap(&out), want, "{ctx}: headers");
            assert_eq!(layout(&out), meta2, "{ctx}: meta");
            verify_checksums(&out, kind == Kind::V4UdpNoCsum)
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            etherparse_checksums_match(&out).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            if want == before {
                // Not applicable to this frame: not a byte may change, and the packet must
                // not be marked modified.
                assert_eq!(out, frame, "{ctx}: no-op changed bytes");
                assert!(!modified, "{ctx}: no-op marked the packet modified");
            } else {
                assert!(modified, "{ctx}: rewrite did not mark the packet modified");
            }
        }
    }
}

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

#[test]
fn non_ip_frames_are_left_alone() {
    let (f, m) = arp_frame();
    for a in sample_actions() {
        let (res, out, m2, modified) = run(&f, m, &[a]);
        res.unwrap();
        match a {
            Action::SetEthSrc(mac) => assert_eq!(&out[6..12], &mac),
            Action::SetEthDst(mac) => assert_eq!(&out[0..6], &mac),
            Action::PushVlan { .. } | Action::SetVlanVid(_) | Action::SetVlanPcp(_) => {
                assert_eq!(m2.vlans, 1);
                assert_eq!(m2.l3, 18);
                assert_eq!(&out[18..], &f[14..]);
            }
            _ => {
                assert_eq!(out, f, "{a:?}");
                assert_eq!(m2, m);
                assert!(!modified, "{a:?}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// VLAN push/pop.

#[test]
fn push_then_pop_round_trips() {
    let p = params();
    for kind in KINDS {
        let (f, m) = build(kind, &p);
        if m.vlans == 2 {
            continue; // no room for a third tag (tested below)
        }
        let (res, out, m2, _) = run(
            &f,
            m,
            &[
                Action::PushVlan { tpid: 0x88a8 },
                Action::SetVlanVid(42),
                Action::PopVlan,
            ],
        );
        res.unwrap();
        assert_eq!(out, f, "{kind:?}");
        assert_eq!(m2, m);
    }
}

#[test]
fn push_copies_outer_tci_and_vid_pushes_8021q() {
    let p = params();
    let (f, m) = build(Kind::V4TcpVlan, &p);
    let (_, out, m2, _) = run(&f, m, &[Action::PushVlan { tpid: 0x88a8 }]);
    assert_eq!(tags(&out), vec![(0x88a8, p.tci), (0x8100, p.tci)]);
    assert_eq!(m2.vlans, 2);
    assert_eq!(layout(&out), m2);

    let (f, m) = build(Kind::V4Tcp, &p);
    let (_, out, m2, _) = run(&f, m, &[Action::SetVlanPcp(6)]);
    assert_eq!(tags(&out), vec![(0x8100, 6 << 13)]);
    assert_eq!(layout(&out), m2);
    let (_, out, _, _) = run(&f, m, &[Action::SetVlanVid(0xf123)]);
    assert_eq!(tags(&out), vec![(0x8100, 0x123)]);
    let (_, out, _, _) = run(&f, m, &[Action::PushVlan { tpid: 0x8100 }]);
    assert_eq!(tags(&out), vec![(0x8100, 0)]);
    assert_eq!(&out[0..6], &MAC_DST);
    assert_eq!(&out[6..12], &MAC_SRC);

    // Pop on an untagged frame: nothing.
    let (_, out, m2, modified) = run(&f, m, &[Action::PopVlan]);
    assert_eq!((out, m2, modified), (f.clone(), m, false));

    // A third tag is refused (the parser reads at most two), before looking for room,
    // and the packet is left as it was.
    let (f, m) = build(Kind::V6UdpQinQ, &p);
    for a in [
        Action::PushVlan { tpid: 0x8100 },
        Action::PushVlan { tpid: 0x88a8 },
    ] {
        let (res, out, m2, modified) = run(&f, m, &[a]);
        assert_eq!(res, Err(RewriteDrop::TooManyVlans));
        assert_eq!((out, m2, modified), (f.clone(), m, false));
        let mut buf = f.clone();
        let mut pkt = Packet::whole(&mut buf);
        let mut meta = m;
        assert_eq!(
            apply(&a, &mut pkt, &mut meta),
            Err(RewriteDrop::TooManyVlans)
        );
    }
    // Setting VID/PCP on a double-tagged packet modifies the outer tag, no push.
    let (res, out, m2, _) = run(&f, m, &[Action::SetVlanVid(9), Action::SetVlanPcp(1)]);
    res.unwrap();
    assert_eq!(m2, m);
    assert_eq!(
        tags(&out)[0],
        (tags(&f)[0].0, (1 << 13) | (p.tci & 0x1000) | 9)
    );
    assert_eq!(tags(&out)[1], tags(&f)[1]);
}

#[test]
fn push_without_headroom_uses_tailroom_else_drops() {
    let p = params();
    let (f, m) = build(Kind::V4Udp, &p);

    // No headroom, 4 bytes of tailroom.
    let mut buf = f.clone();
    buf.extend_from_slice(&[0; 4]);
    let mut pkt = Packet::new(&mut buf, 0, f.len());
    let mut meta = m;
    assert_eq!(
        apply(&Action::PushVlan { tpid: 0x8100 }, &mut pkt, &mut meta),
        Ok(())
    );
    let out = pkt.data().to_vec();
    assert_eq!(out.len(), f.len() + 4);
    assert_eq!(tags(&out), vec![(0x8100, 0)]);
    assert_eq!(&out[16..], &f[12..]);
    assert_eq!(layout(&out), meta);
    verify_checksums(&out, false).unwrap();

    // Neither.
    let mut buf = f.clone();
    let mut pkt = Packet::whole(&mut buf);
    let mut meta = m;
    for a in [
        Action::PushVlan { tpid: 0x8100 },
        Action::SetVlanVid(1),
        Action::SetVlanPcp(1),
    ] {
        assert_eq!(apply(&a, &mut pkt, &mut meta), Err(RewriteDrop::NoRoom));
        assert_eq!(pkt.data(), &f[..]);
        assert_eq!(meta, m);
        assert!(!pkt.modified);
    }
}

// ---------------------------------------------------------------------------------------
// Properties.

fn arb_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        any::<[u8; 6]>().prop_map(Action::SetEthSrc),
        any::<[u8; 6]>().prop_map(Action::SetEthDst),
        any::<[u8; 4]>().prop_map(Action::SetIpv4Src),
        any::<[u8; 4]>().prop_map(Action::SetIpv4Dst),
        any::<[u8; 16]>().prop_map(Action::SetIpv6Src),
        any::<[u8; 16]>().prop_map(Action::SetIpv6Dst),
        any::<u8>().prop_map(Action::SetNwTos),
        any::<u16>().prop_map(Action::SetTpSrc),
        any::<u16>().prop_map(Action::SetTpDst),
        prop_oneof![Just(0x8100u16), Just(0x88a8)].prop_map(|tpid| Action::PushVlan { tpid }),
        Just(Action::PopVlan),
        any::<u16>().prop_map(Action::SetVlanVid),
        any::<u8>().prop_map(Action::SetVlanPcp),
        Just(Action::DecTtl),
        Just(Action::Output(1)),
    ]
}

fn arb_params() -> impl Strategy<Value = Params> {
    (
        (any::<[u8; 4]>(), any::<[u8; 4]>()),
        (any::<[u8; 16]>(), any::<[u8; 16]>()),
        (
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
        ),
        prop::collection::vec(any::<u8>(), 0..80),
    )
        .prop_map(
            |((src4, dst4), (src6, dst6), (sport, dport, tos, ttl, tci), payload)| Params {
                src4,
                dst4,
                src6,
                dst6,
                sport,
                dport,
                tos,
                ttl,
                tci,
                payload,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random frames and random action sequences: after every step the headers are what
    /// the model says, every checksum verifies, and `meta` still describes the frame.
    #[test]
    fn random_rewrite_sequences(
        kind in prop::sample::select(KINDS.to_vec()),
        p in arb_params(),
        actions in prop::collection::vec(arb_action(), 1..=6),
    ) {
        let (frame, meta0) = build(kind, &p);
        let mut buf = buffer(&frame, 0);
        let mut pkt = Packet::new(&mut buf, HEADROOM, frame.len());
        let mut meta = meta0;
        let mut want = snap(&frame);
        for a in &actions {
            let before = pkt.data().to_vec();
            let before_meta = meta;
            let res = apply(a, &mut pkt, &mut meta);
            let want_res = model(&mut want, a);
            prop_assert_eq!(res, want_res, "{:?}", a);
            if res.is_err() {
                prop_assert_eq!(pkt.data(), &before[..]);
                prop_assert_eq!(meta, before_meta);
                break;
            }
            let out = pkt.data();
            prop_assert_eq!(&snap(out), &want, "{:?}", a);
            prop_assert_eq!(layout(out), meta, "{:?}", a);
            if let Err(e) = verify_checksums(out, kind == Kind::V4UdpNoCsum) {
                prop_assert!(false, "{:?}: {}", a, e);
            }
            if let Err(e) = etherparse_checksums_match(out) {
                prop_assert!(false, "{:?}: {}", a, e);
            }
        }
    }

    /// VLAN push/pop sequences never disturb anything after the tags, and `meta` follows.
    #[test]
    fn vlan_sequences_keep_payload(
        kind in prop::sample::select(KINDS.to_vec()),
        p in arb_params(),
        ops in prop::collection::vec(
            prop_oneof![
                prop_oneof![Just(0x8100u16), Just(0x88a8)].prop_map(|tpid| Action::PushVlan { tpid }),
                Just(Action::PopVlan),
                any::<u16>().prop_map(Action::SetVlanVid),
                any::<u8>().prop_map(Action::SetVlanPcp),
            ],
            1..=12,
        ),
    ) {
        let (frame, meta0) = build(kind, &p);
        let inner = frame[usize::from(meta0.l3) - 2..].to_vec();
        let mut buf = buffer(&frame, 0);
        let mut pkt = Packet::new(&mut buf, HEADROOM, frame.len());
        let mut meta = meta0;
        for a in &ops {
            let before = pkt.data().to_vec();
            let full = meta.vlans == 2;
            let res = apply(a, &mut pkt, &mut meta);
            if matches!(a, Action::PushVlan { .. }) && full {
                prop_assert_eq!(res, Err(RewriteDrop::TooManyVlans));
                prop_assert_eq!(pkt.data(), &before[..]);
                continue;
            }
            prop_assert_eq!(res, Ok(()));
            let out = pkt.data();
            prop_assert_eq!(&out[..6], &MAC_DST[..]);
            prop_assert_eq!(&out[6..12], &MAC_SRC[..]);
            prop_assert_eq!(usize::from(meta.vlans), tags(out).len());
            prop_assert_eq!(usize::from(meta.l3), 14 + 4 * usize::from(meta.vlans));
            prop_assert_eq!(&out[usize::from(meta.l3) - 2..], &inner[..]);
            prop_assert_eq!(layout(out), meta);
            prop_assert_eq!(
                usize::from(meta.l4 - meta.l3),
                usize::from(meta0.l4 - meta0.l3)
            );
        }
    }

    /// Arbitrary bytes with arbitrary (even inconsistent) offsets: never a panic.
    #[test]
    fn garbage_never_panics(
        data in prop::collection::vec(any::<u8>(), 0..120),
        l3 in 0u16..140,
        l4 in 0u16..160,
        vlans in 0u8..4,
        et in prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x8100), any::<u16>()],
        version in 0u8..16,
        headroom in 0usize..8,
        actions in prop::collection::vec(arb_action(), 1..=6),
    ) {
        let mut data = data;
        // Steer the frame towards the IP paths often enough to matter.
        let et_off = 12 + 4 * usize::from(vlans);
        if data.len() >= et_off + 2 {
            data[et_off..et_off + 2].copy_from_slice(&et.to_be_bytes());
        }
        if let Some(b) = data.get_mut(usize::from(l3)) {
            *b = (version << 4) | (*b & 0x0f);
        }
        let mut buf = vec![0u8; headroom];
        buf.extend_from_slice(&data);
        let mut pkt = Packet::new(&mut buf, headroom, data.len());
        let mut meta = PacketMeta { l2: 0, l3, l4, vlans };
        for a in &actions {
            let _ = apply(a, &mut pkt, &mut meta);
        }
    }

    /// Valid frames whose IPv6 extension chain is garbage or whose offsets are off by a
    /// few bytes: no panic, and the fixed part of the frame stays an Ethernet frame.
    #[test]
    fn perturbed_offsets_never_panic(
        kind in prop::sample::select(KINDS.to_vec()),
        p in arb_params(),
        dl3 in -8i32..8,
        dl4 in -40i32..40,
        truncate in 0usize..60,
        actions in prop::collection::vec(arb_action(), 1..=6),
    ) {
        let (mut frame, meta0) = build(kind, &p);
        let keep = frame.len().saturating_sub(truncate).max(14);
        frame.truncate(keep);
        let l3 = (i32::from(meta0.l3) + dl3).max(0) as u16;
        let l4 = (i32::from(meta0.l4) + dl4).max(0) as u16;
        let mut buf = buffer(&frame, 0);
        let mut pkt = Packet::new(&mut buf, HEADROOM, frame.len());
        let mut meta = PacketMeta { l2: 0, l3, l4, vlans: meta0.vlans };
        for a in &actions {
            let _ = apply(a, &mut pkt, &mut meta);
        }
    }
}
