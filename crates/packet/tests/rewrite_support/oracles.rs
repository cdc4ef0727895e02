//! The oracles rewritten frames are checked against: the headers as etherparse reads
//! them (`snap`, `layout`), what each action should do to them (`model`), and every
//! checksum recomputed two independent ways.

use super::frames::ones_sum;
use etherparse::{Ipv4Dscp, NetHeaders, PacketHeaders, TransportHeader};
use flowpath_packet::action::Action;
use flowpath_packet::parse::PacketMeta;
use flowpath_packet::rewrite::RewriteDrop;

/// Outer VLAN tags as (TPID, TCI), read directly from the frame.
pub fn tags(frame: &[u8]) -> Vec<(u16, u16)> {
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
pub fn untagged(frame: &[u8]) -> Vec<u8> {
    let n = tags(frame).len();
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&frame[12 + 4 * n..]);
    f
}

/// Everything an action may change, as parsed by etherparse, with checksums zeroed (they
/// are checked separately).
#[derive(Clone, Debug, PartialEq)]
pub struct Snap {
    dst: [u8; 6],
    src: [u8; 6],
    tags: Vec<(u16, u16)>,
    net: Option<NetHeaders>,
    transport: Option<TransportHeader>,
    payload: Vec<u8>,
}

pub fn snap(frame: &[u8]) -> Snap {
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
pub fn layout(frame: &[u8]) -> PacketMeta {
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
pub fn model(s: &mut Snap, a: &Action) -> Result<(), RewriteDrop> {
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
pub fn verify_checksums(frame: &[u8], udp4_zero: bool) -> Result<(), String> {
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
pub fn etherparse_checksums_match(frame: &[u8]) -> Result<(), String> {
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
