//! Independent checks for generated frames and pcap files: etherparse reads the headers,
//! the checksums and lengths are recomputed here (no code shared with the generator), and
//! pcap files are read by hand.

#![allow(dead_code)]

use std::net::IpAddr;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};

pub const VXLAN_PORT: u16 = 4789;

/// Full one's-complement sum, folded.
pub fn ones_sum(chunks: &[&[u8]]) -> u16 {
    let mut acc: u64 = 0;
    for c in chunks {
        let mut i = 0;
        while i + 1 < c.len() {
            acc += u16::from_be_bytes([c[i], c[i + 1]]) as u64;
            i += 2;
        }
        if i < c.len() {
            acc += (c[i] as u64) << 8;
        }
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Pseudo-header bytes for a transport segment of `len` bytes carried by `net`.
pub fn pseudo_header(net: &NetSlice, proto: u8, len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    match net {
        NetSlice::Ipv4(ip) => {
            p.extend_from_slice(&ip.header().source());
            p.extend_from_slice(&ip.header().destination());
            p.extend_from_slice(&[0, proto]);
            p.extend_from_slice(&(len as u16).to_be_bytes());
        }
        NetSlice::Ipv6(ip) => {
            p.extend_from_slice(&ip.header().source());
            p.extend_from_slice(&ip.header().destination());
            p.extend_from_slice(&(len as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, proto]);
        }
    }
    p
}

/// Does the segment (with its checksum in place) sum to 0xffff with the pseudo-header?
pub fn l4_ok(net: &NetSlice, proto: u8, seg: &[u8]) -> bool {
    ones_sum(&[&pseudo_header(net, proto, seg.len()), seg]) == 0xffff
}

/// What [`check_frame`] found in one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Network layers from the outside in: 4 or 6 (two for VXLAN).
    pub ips: Vec<u8>,
    /// Transport of the innermost frame: "udp", "tcp", "icmp" or "icmpv6".
    pub l4: &'static str,
    pub vni: Option<u32>,
    /// Innermost source address and (for UDP/TCP) source port.
    pub src: IpAddr,
    pub sport: u16,
}

/// Check one Ethernet frame (recursing into VXLAN): etherparse reads it whole, the IPv4
/// header checksum, every L4 checksum (UDP 0 allowed over IPv4 only), IPv4 total length,
/// IPv6 payload length and UDP length agree with the bytes. Panics with `what` on failure.
pub fn check_frame(frame: &[u8], what: &str) -> Seen {
    let p = SlicedPacket::from_ethernet(frame)
        .unwrap_or_else(|e| panic!("{what}: etherparse cannot read the frame: {e:?}"));
    let net = p
        .net
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: no IP layer"));
    // Offset of the IP header = frame length minus everything from it on.
    let (ip_ver, src, seg) = match net {
        NetSlice::Ipv4(ip) => {
            let h = ip.header();
            assert_eq!(
                ones_sum(&[h.slice()]),
                0xffff,
                "{what}: IPv4 header checksum"
            );
            assert_eq!(h.ihl(), 5, "{what}: IPv4 options");
            let seg = ip.payload().payload;
            assert_eq!(
                h.total_len() as usize,
                20 + seg.len(),
                "{what}: IPv4 total length"
            );
            (4, IpAddr::V4(h.source_addr()), seg)
        }
        NetSlice::Ipv6(ip) => {
            let h = ip.header();
            let seg = ip.payload().payload;
            assert_eq!(
                h.payload_length() as usize,
                seg.len(),
                "{what}: IPv6 payload length"
            );
            (6, IpAddr::V6(h.source_addr()), seg)
        }
    };
    // The IP packet ends exactly at the end of the frame (no padding, nothing cut).
    let vlans = match &p.vlan {
        None => 0,
        Some(etherparse::VlanSlice::SingleVlan(_)) => 4,
        Some(etherparse::VlanSlice::DoubleVlan(_)) => 8,
    };
    let ip_hdr = if ip_ver == 4 { 20 } else { 40 };
    assert_eq!(
        frame.len(),
        14 + vlans + ip_hdr + seg.len(),
        "{what}: frame length against IP length"
    );
    let v6 = ip_ver == 6;
    let transport = p
        .transport
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: no transport layer"));
    let seen = |l4, sport| Seen {
        ips: vec![ip_ver],
        l4,
        vni: None,
        src,
        sport,
    };
    match transport {
        TransportSlice::Udp(u) => {
            assert_eq!(u.length() as usize, seg.len(), "{what}: UDP length");
            if u.checksum() == 0 {
                assert!(!v6, "{what}: zero UDP checksum over IPv6");
            } else {
                assert!(l4_ok(net, 17, seg), "{what}: UDP checksum");
            }
            if u.destination_port() == VXLAN_PORT {
                let vx = u.payload();
                assert_eq!(vx[0], 0x08, "{what}: VXLAN flags");
                let vni = u32::from_be_bytes([0, vx[4], vx[5], vx[6]]);
                let mut inner = check_frame(&vx[8..], what);
                inner.ips.insert(0, ip_ver);
                assert_eq!(inner.vni, None, "{what}: VXLAN in VXLAN");
                inner.vni = Some(vni);
                return inner;
            }
            seen("udp", u.source_port())
        }
        TransportSlice::Tcp(t) => {
            assert!(l4_ok(net, 6, seg), "{what}: TCP checksum");
            assert_eq!(t.data_offset(), 5, "{what}: TCP header length");
            seen("tcp", t.source_port())
        }
        TransportSlice::Icmpv4(_) => {
            assert!(!v6, "{what}: ICMPv4 over IPv6");
            assert_eq!(ones_sum(&[seg]), 0xffff, "{what}: ICMPv4 checksum");
            seen("icmp", 0)
        }
        TransportSlice::Icmpv6(_) => {
            assert!(v6, "{what}: ICMPv6 over IPv4");
            assert!(l4_ok(net, 58, seg), "{what}: ICMPv6 checksum");
            seen("icmpv6", 0)
        }
    }
}

/// A pcap file read by hand: (link type, frames). Checks the global header (version 2.4,
/// either byte order, µs or ns) and that every record is captured whole.
pub fn read_pcap_by_hand(bytes: &[u8]) -> (u32, Vec<Vec<u8>>) {
    assert!(bytes.len() >= 24, "pcap global header");
    let magic = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
    let le = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        m => panic!("not a pcap file: magic {m:#x}"),
    };
    let u16_at = |o: usize| {
        let b = [bytes[o], bytes[o + 1]];
        if le {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    let u32_at = |o: usize| {
        let b: [u8; 4] = bytes[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    assert_eq!((u16_at(4), u16_at(6)), (2, 4), "pcap version");
    let snaplen = u32_at(16);
    let link = u32_at(20);
    let mut frames = Vec::new();
    let mut o = 24;
    while o < bytes.len() {
        assert!(o + 16 <= bytes.len(), "truncated record header");
        let incl = u32_at(o + 8) as usize;
        let orig = u32_at(o + 12) as usize;
        assert_eq!(incl, orig, "record {} captured partially", frames.len());
        assert!(incl as u32 <= snaplen, "record longer than the snap length");
        assert!(o + 16 + incl <= bytes.len(), "truncated record");
        frames.push(bytes[o + 16..o + 16 + incl].to_vec());
        o += 16 + incl;
    }
    (link, frames)
}

/// `tshark` on PATH?
pub fn tshark_available() -> bool {
    std::process::Command::new("tshark")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Per frame, tshark's protocol stack, with checksum validation on; panics if tshark
/// reports any expert info (malformed, bad checksum, bad length, ...) for any frame.
pub fn tshark_protocols(path: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            // Repeated segments of one connection are not retransmissions to report.
            "-o",
            "tcp.analyze_sequence_numbers:FALSE",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "frame.protocols",
            "-e",
            "_ws.expert",
            "-e",
            "_ws.malformed",
        ])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("tshark prints UTF-8");
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let mut f = line.split('|');
            let protos = f.next().unwrap_or_default().to_string();
            let expert = f.next().unwrap_or_default();
            let malformed = f.next().unwrap_or_default();
            assert!(
                expert.is_empty() && malformed.is_empty(),
                "{}: tshark flags frame {}: {expert} {malformed}",
                path.display(),
                i + 1
            );
            protos
        })
        .collect()
}
