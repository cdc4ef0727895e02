//! Test frames: one of each `Kind` the rewrites meet (IPv4/IPv6, TCP/UDP/ICMP, VLAN
//! tags, IPv6 extension headers), built from `Params` with etherparse, plus the buffer
//! and the loop that run actions on a copy of a frame.

use etherparse::{PacketBuilder, VlanId};
use flowpath_packet::action::Action;
use flowpath_packet::packet::{Packet, HEADROOM};
use flowpath_packet::parse::PacketMeta;
use flowpath_packet::rewrite::{apply, RewriteDrop};
use proptest::prelude::*;

pub const MAC_SRC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
pub const MAC_DST: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
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

pub const KINDS: [Kind; 11] = [
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
pub struct Params {
    pub src4: [u8; 4],
    pub dst4: [u8; 4],
    pub src6: [u8; 16],
    pub dst6: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub tos: u8,
    pub ttl: u8,
    pub tci: u16,
    pub payload: Vec<u8>,
}

pub fn params() -> Params {
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

pub fn arb_params() -> impl Strategy<Value = Params> {
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

/// Full one's-complement sum of `data` as 16-bit big-endian words (odd tail padded),
/// folded to 16 bits. A correct checksum makes the sum over the covered data 0xffff.
pub fn ones_sum(parts: &[&[u8]]) -> u16 {
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

pub fn fix_ipv4_header_csum(frame: &mut [u8], l3: usize) {
    let ihl = usize::from(frame[l3] & 0x0f) * 4;
    frame[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
    let c = !ones_sum(&[&frame[l3..l3 + ihl]]);
    frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
}

/// Build a frame of `kind` and the `PacketMeta` the parser would produce for it.
pub fn build(kind: Kind, p: &Params) -> (Vec<u8>, PacketMeta) {
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
pub fn arp_frame() -> (Vec<u8>, PacketMeta) {
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
pub fn buffer(frame: &[u8], tail: usize) -> Vec<u8> {
    let mut buf = vec![0u8; HEADROOM];
    buf.extend_from_slice(frame);
    buf.resize(buf.len() + tail, 0);
    buf
}

/// Run `actions` on a copy of `frame` with 128 bytes of headroom; stop at the first drop.
pub fn run(
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
