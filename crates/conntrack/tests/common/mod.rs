//! Frames for the tracker's tests: IPv4/IPv6 TCP, UDP, ICMP echo and ICMP errors quoting
//! another frame, parsed into a key the way the datapath would.

#![allow(dead_code)]

use flowpath_conntrack::{ConnHint, Tracker};
use flowpath_packet::ct::CtZoneSrc;
use flowpath_packet::{parse, CtSpec, FlowKey, PacketMeta, ParseOptions};
use std::net::IpAddr;

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;

thread_local! {
    /// Hints the tracker returned on this thread, and packets run.
    static HINTS: std::cell::RefCell<(Vec<ConnHint>, usize)> =
        const { std::cell::RefCell::new((Vec::new(), 0)) };
}

/// One test packet: its frame, parse offsets and key.
pub struct Pkt {
    pub frame: Vec<u8>,
    pub meta: PacketMeta,
    pub key: FlowKey,
}

impl Pkt {
    pub fn new(frame: Vec<u8>) -> Pkt {
        let mut key = FlowKey::ZERO;
        let opts = ParseOptions { vxlan_port: None };
        let meta = parse(&frame, 1, &opts, &mut key).expect("test frame parses");
        Pkt { frame, meta, key }
    }

    /// Run through `t` with `spec` at `now`; returns ct_state. Every other packet goes
    /// with a connection hint from earlier packets (of any connection, direction or
    /// tracker of this thread, mostly stale): a hint may save a lookup, never change
    /// what the tracker decides, so every test here checks that too.
    pub fn run(&mut self, t: &Tracker, spec: &CtSpec, now: u64) -> u8 {
        HINTS.with(|h| {
            let mut h = h.borrow_mut();
            h.1 += 1;
            let hint = (h.1 % 2 == 0 && !h.0.is_empty()).then(|| h.0[(h.1 * 7) % h.0.len()]);
            let (st, found) =
                t.execute_hinted(hint, &mut self.frame, &self.meta, &mut self.key, spec, now);
            if let Some(f) = found {
                let n = h.1;
                if h.0.len() < 64 {
                    h.0.push(f);
                } else {
                    h.0[n % 64] = f;
                }
            }
            st
        })
    }
}

pub fn spec(commit: bool, zone: u16) -> CtSpec {
    CtSpec {
        commit,
        zone: CtZoneSrc::Value(zone),
        ..CtSpec::new()
    }
}

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IP packet (no Ethernet) carrying `l4` as protocol `proto` from `src` to `dst`.
pub fn ip(src: IpAddr, dst: IpAddr, proto: u8, l4: &[u8]) -> Vec<u8> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = vec![0x45, 0];
            h.extend_from_slice(&(20 + l4.len() as u16).to_be_bytes());
            h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            h.extend_from_slice(l4);
            h
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut h = vec![0x60, 0, 0, 0];
            h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            h.extend_from_slice(&[proto, 64]);
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            h.extend_from_slice(l4);
            h
        }
        _ => panic!("mixed families"),
    }
}

fn frame_of(ip_pkt: Vec<u8>) -> Vec<u8> {
    let et = if ip_pkt[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
    let mut f = eth(et);
    f.extend_from_slice(&ip_pkt);
    while f.len() < 60 {
        f.push(0);
    }
    f
}

pub fn udp_l4(sp: u16, dp: u16) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sp.to_be_bytes());
    u.extend_from_slice(&dp.to_be_bytes());
    u.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
    u
}

pub fn tcp_l4(sp: u16, dp: u16, seq: u32, ack: u32, flags: u8) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sp.to_be_bytes());
    t.extend_from_slice(&dp.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    t
}

pub fn icmp_l4(v6: bool, ty: u8, id: u16) -> Vec<u8> {
    let _ = v6;
    let mut i = vec![ty, 0, 0, 0];
    i.extend_from_slice(&id.to_be_bytes());
    i.extend_from_slice(&[0, 1, 9, 9, 9, 9]);
    i
}

pub fn addr(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

pub fn udp(src: &str, dst: &str, sp: u16, dp: u16) -> Pkt {
    Pkt::new(frame_of(ip(addr(src), addr(dst), UDP, &udp_l4(sp, dp))))
}

pub fn tcp(src: &str, dst: &str, sp: u16, dp: u16, seq: u32, ack: u32, flags: u8) -> Pkt {
    let l4 = tcp_l4(sp, dp, seq, ack, flags);
    Pkt::new(frame_of(ip(addr(src), addr(dst), TCP, &l4)))
}

pub fn icmp_echo(src: &str, dst: &str, request: bool, id: u16) -> Pkt {
    let (s, d) = (addr(src), addr(dst));
    let v6 = s.is_ipv6();
    let ty = match (v6, request) {
        (false, true) => 8,
        (false, false) => 0,
        (true, true) => 128,
        (true, false) => 129,
    };
    Pkt::new(frame_of(ip(
        s,
        d,
        if v6 { 58 } else { 1 },
        &icmp_l4(v6, ty, id),
    )))
}

/// An ICMP error of `ty`/`code` from `src` to `dst` quoting `quoted` (an IP packet).
pub fn icmp_error(src: &str, dst: &str, ty: u8, code: u8, quoted: &[u8]) -> Pkt {
    let (s, d) = (addr(src), addr(dst));
    let v6 = s.is_ipv6();
    let mut l4 = vec![ty, code, 0, 0, 0, 0, 0, 0];
    l4.extend_from_slice(quoted);
    Pkt::new(frame_of(ip(s, d, if v6 { 58 } else { 1 }, &l4)))
}

/// An IPv4 packet whose header says it is a first fragment (more fragments).
pub fn udp_fragment(src: &str, dst: &str) -> Pkt {
    let mut p = ip(addr(src), addr(dst), UDP, &udp_l4(1, 2));
    p[6] = 0x20; // MF
    Pkt::new(frame_of(p))
}

/// A generic (protocol 47) IPv4 packet.
pub fn gre(src: &str, dst: &str) -> Pkt {
    Pkt::new(frame_of(ip(addr(src), addr(dst), 47, &[0; 8])))
}
