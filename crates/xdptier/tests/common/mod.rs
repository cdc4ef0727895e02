//! Shared helpers: loading the tier (or skipping), frames, and flowpath's own result.
#![allow(dead_code)]

use flowpath_gen::{build, FrameSpec, Vxlan, L3, L4};
use flowpath_packet::packet::HEADROOM;
use flowpath_packet::rewrite::apply;
use flowpath_packet::{parse, Action, FlowKey, Packet, ParseOptions};
use flowpath_xdptier::{bpf_available, FlowTier};
use std::net::{Ipv4Addr, Ipv6Addr};

/// `lo`: BPF_PROG_TEST_RUN wants an existing ingress interface.
pub const LO: u32 = 1;
/// The flowpath port number the tests give `lo`.
pub const IN_PORT: u32 = 7;

/// A loaded tier with `lo` as port IN_PORT and debug records on, or None (and why) when
/// this test cannot run here.
pub fn tier() -> Option<FlowTier> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: loading XDP programs needs root");
        return None;
    }
    if !bpf_available() {
        eprintln!("skipping: flowpath-xdptier was built without clang (no XDP object)");
        return None;
    }
    if !std::path::Path::new("/sys/fs/bpf").exists() {
        eprintln!("skipping: no BPF support (/sys/fs/bpf missing)");
        return None;
    }
    // Root, a kernel with BPF and a compiled object: a load failure is a real failure
    // (the verifier rejected the program), not a reason to skip.
    let mut t = FlowTier::load().expect("load flow_tier");
    // A non-zero xsk base: the in_port half of the fp_inport value must still be read right.
    t.set_in_port(LO, IN_PORT, 5).unwrap();
    t.set_debug(true).unwrap();
    Some(t)
}

pub fn v4(a: u8, b: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, a, b)
}

pub fn v6(a: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 1, a)
}

/// IPv4/IPv6 x UDP/TCP/ICMP x 0/1/2 tags x two sizes.
pub fn base_specs() -> Vec<FrameSpec> {
    let mut out = Vec::new();
    let l3s = [
        L3::V4 {
            src: v4(1, 2),
            dst: v4(3, 4),
            ttl: 64,
            tos: 0x2d,
        },
        L3::V6 {
            src: v6(1),
            dst: v6(2),
            hop_limit: 17,
            tclass: 0xb9,
        },
    ];
    let l4s = [
        L4::Udp {
            sport: 1234,
            dport: 53,
        },
        L4::Tcp {
            sport: 40000,
            dport: 443,
            flags: 0x12,
        },
        L4::Icmp { ty: 8, code: 3 },
    ];
    let tags: [&[(u16, u16)]; 3] = [
        &[],
        &[(0x8100, 0x2005)],
        &[(0x88a8, 0x0064), (0x8100, 0xe0c8)],
    ];
    for l3 in l3s {
        for l4 in l4s {
            for t in tags {
                for size in [64, 200] {
                    let mut s = FrameSpec::new(l3, l4, size);
                    for &(tpid, tci) in t {
                        s = s.with_vlan(tpid, tci);
                    }
                    out.push(s);
                }
            }
        }
    }
    out
}

/// Where the IPv4 header starts in a built frame (after its tags).
pub fn l3_off(f: &[u8]) -> usize {
    let mut off = 12;
    while matches!(u16::from_be_bytes([f[off], f[off + 1]]), 0x8100 | 0x88a8) {
        off += 4;
    }
    off + 2
}

/// Set the IPv4 fragment field (flags + offset) of a built IPv4 frame.
pub fn with_frag(mut f: Vec<u8>, frag: u16) -> Vec<u8> {
    let ip = l3_off(&f);
    f[ip + 6..ip + 8].copy_from_slice(&frag.to_be_bytes());
    fix_ipv4_csum(&mut f, ip);
    f
}

pub fn fix_ipv4_csum(f: &mut [u8], ip: usize) {
    let hlen = usize::from(f[ip] & 0xf) * 4;
    f[ip + 10] = 0;
    f[ip + 11] = 0;
    let mut s = 0u32;
    for w in f[ip..ip + hlen].chunks(2) {
        s += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    f[ip + 10..ip + 12].copy_from_slice(&(!(s as u16)).to_be_bytes());
}

/// Insert `n` bytes of IPv4 options (NOPs, then an end-of-list) into a built IPv4 frame.
pub fn with_ipv4_options(mut f: Vec<u8>, n: usize) -> Vec<u8> {
    let ip = l3_off(&f);
    let mut opts = vec![1u8; n];
    opts[n - 1] = 0;
    f.splice(ip + 20..ip + 20, opts);
    f[ip] = 0x40 | ((20 + n) / 4) as u8;
    let total = u16::from_be_bytes([f[ip + 2], f[ip + 3]]) + n as u16;
    f[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
    fix_ipv4_csum(&mut f, ip);
    f
}

/// Insert an 8-byte hop-by-hop header into a built IPv6 frame.
pub fn with_hop_by_hop(mut f: Vec<u8>) -> Vec<u8> {
    let ip = l3_off(&f);
    let nh = f[ip + 6];
    f.splice(ip + 40..ip + 40, [nh, 0, 1, 4, 0, 0, 0, 0]);
    f[ip + 6] = 0;
    let plen = u16::from_be_bytes([f[ip + 4], f[ip + 5]]) + 8;
    f[ip + 4..ip + 6].copy_from_slice(&plen.to_be_bytes());
    f
}

pub fn arp_frame(vlan: bool) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 9]);
    if vlan {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x2a]);
    }
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 9, 10, 0, 0, 9]);
    f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 0, 1]);
    f.resize(60, 0);
    f
}

/// The hand-picked frames: everything in `base_specs`, fragments, IPv4 options, ARP,
/// other ethertypes, VXLAN, IPv6 extension headers and some malformed ones.
pub fn frames() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = base_specs().iter().map(build).collect();
    let udp4 = build(&FrameSpec::udp4(v4(1, 1), v4(2, 2), 5000, 6000, 128));
    let tcp4 = build(&FrameSpec::tcp4(v4(1, 1), v4(2, 2), 5000, 80, 0x02, 128));
    for f in [&udp4, &tcp4] {
        out.push(with_frag(f.clone(), 0x2000)); // first fragment (MF)
        out.push(with_frag(f.clone(), 0x2010)); // middle
        out.push(with_frag(f.clone(), 0x0010)); // last
        out.push(with_frag(f.clone(), 0x4000)); // DF only: not a fragment
        out.push(with_ipv4_options(f.clone(), 4));
        out.push(with_ipv4_options(f.clone(), 40));
    }
    let vl = build(&FrameSpec::udp4(v4(1, 1), v4(2, 2), 5000, 6000, 128).with_vlan(0x8100, 3));
    out.push(with_ipv4_options(vl, 12));
    out.push(arp_frame(false));
    out.push(arp_frame(true));
    let mut lldp = udp4.clone();
    lldp[12..14].copy_from_slice(&[0x88, 0xcc]);
    out.push(lldp);
    let mut short_len = udp4.clone(); // 802.3 length field
    short_len[12..14].copy_from_slice(&[0x00, 0x40]);
    out.push(short_len);
    // VXLAN (to user space) and an inner-looking UDP to 4789 in a fragment (not VXLAN).
    let inner = FrameSpec::udp4(v4(9, 1), v4(9, 2), 1, 2, 200);
    out.push(build(&inner.clone().with_vxlan(Vxlan::v4(
        77,
        v4(5, 5),
        v4(6, 6),
    ))));
    out.push(build(&inner.with_vxlan(Vxlan::v6(78, v6(5), v6(6)))));
    out.push(with_frag(
        build(&FrameSpec::udp4(v4(1, 1), v4(2, 2), 5000, 4789, 128)),
        0x2000,
    ));
    // IPv6 extension headers.
    out.push(with_hop_by_hop(build(&FrameSpec::udp6(
        v6(1),
        v6(2),
        1,
        2,
        128,
    ))));
    // Malformed: three tags, truncations, bad versions and lengths.
    let three = FrameSpec::udp4(v4(1, 1), v4(2, 2), 1, 2, 128)
        .with_vlan(0x88a8, 1)
        .with_vlan(0x8100, 2)
        .with_vlan(0x8100, 3);
    out.push(build(&three));
    for cut in [14, 15, 20, 33, 34, 37, 41, 42, 53] {
        out.push(udp4[..cut].to_vec());
        out.push(tcp4[..cut.min(tcp4.len())].to_vec());
    }
    let udp6 = build(&FrameSpec::udp6(v6(1), v6(2), 1, 2, 128));
    for cut in [14, 40, 53, 54, 61, 62] {
        out.push(udp6[..cut].to_vec());
    }
    let mut badver = udp4.clone();
    badver[14] = 0x65;
    out.push(badver);
    let mut badihl = udp4.clone();
    badihl[14] = 0x44;
    out.push(badihl.clone());
    // IHL 4 where nothing after the header would catch it (ICMP, an unparsed protocol).
    badihl[23] = 1;
    out.push(badihl.clone());
    badihl[23] = 47;
    out.push(badihl);
    let mut badlen = udp4.clone();
    badlen[16..18].copy_from_slice(&2000u16.to_be_bytes());
    out.push(badlen);
    let mut badudp = udp4.clone();
    badudp[38..40].copy_from_slice(&3u16.to_be_bytes());
    out.push(badudp);
    let mut badtcp = tcp4.clone();
    badtcp[46] = 0x30;
    out.push(badtcp);
    out
}

/// What flowpath's user-space datapath does with `frame` under `actions`.
#[derive(Debug, PartialEq, Eq)]
pub enum Expect {
    Output(Vec<u8>),
    Drop,
    /// A rewrite refused the packet (TTL expired, third tag): the XDP tier hands these
    /// to user space.
    RewriteDrop,
}

pub fn flowpath_result(frame: &[u8], actions: &[Action]) -> Expect {
    let mut buf = vec![0u8; HEADROOM + frame.len() + 64];
    buf[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
    let mut pkt = Packet::new(&mut buf, HEADROOM, frame.len());
    let mut key = FlowKey::ZERO;
    let mut meta = parse(pkt.data(), IN_PORT, &ParseOptions::default(), &mut key).unwrap();
    for a in actions {
        match *a {
            Action::Output(p) if p != IN_PORT => return Expect::Output(pkt.data().to_vec()),
            Action::Output(_) => {}
            _ => {
                if apply(a, &mut pkt, &mut meta).is_err() {
                    return Expect::RewriteDrop;
                }
            }
        }
    }
    Expect::Drop
}

pub fn key_of(frame: &[u8]) -> FlowKey {
    let mut key = FlowKey::ZERO;
    parse(frame, IN_PORT, &ParseOptions::default(), &mut key).unwrap();
    key
}
