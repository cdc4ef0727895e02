//! What the parse case tests share: builders of hand-made frames, layer by layer
//! (checksums are irrelevant to the parser and left zero), and the expected key and
//! header offsets the cases are compared with.

// Each parse test binary includes this module and uses a part of it.
#![allow(dead_code)]

use flowpath_packet::key::{Field, FlowKey};
use flowpath_packet::{parse, DropReason, PacketMeta, ParseOptions};

pub const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
pub const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
pub const IN_PORT: u32 = 0x0102_0304;
pub const V4_SRC: [u8; 4] = [10, 1, 0, 1];
pub const V4_DST: [u8; 4] = [192, 168, 7, 9];
pub const V6_SRC: [u8; 16] = [
    0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0x01,
];
pub const V6_DST: [u8; 16] = [
    0xfd, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0x02,
];

// ---- frame builders (checksums are irrelevant to the parser and left zero) ----

pub fn eth(tags: &[(u16, u16)], etype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = [DST, SRC].concat();
    for &(tpid, tci) in tags {
        f.extend(tpid.to_be_bytes());
        f.extend(tci.to_be_bytes());
    }
    f.extend(etype.to_be_bytes());
    f.extend(payload);
    f
}
pub struct V4 {
    pub proto: u8,
    pub tos: u8,
    pub ttl: u8,
    /// Flags and fragment offset field (MF = 0x2000, offset in 8-byte units).
    pub frag: u16,
    pub options: Vec<u8>,
}

impl V4 {
    pub fn new(proto: u8) -> V4 {
        V4 {
            proto,
            tos: 0xb9,
            ttl: 61,
            frag: 0x4000, // DF: not a fragment
            options: Vec::new(),
        }
    }
    pub fn build(&self, payload: &[u8]) -> Vec<u8> {
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

pub fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    V4::new(proto).build(payload)
}

/// IPv6 with traffic class 0xa5 and hop limit 33.
pub fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x6a, 0x5c, 0xde, 0xf0];
    h.extend((payload.len() as u16).to_be_bytes());
    h.extend([next, 33]);
    h.extend(V6_SRC);
    h.extend(V6_DST);
    h.extend(payload);
    h
}

/// Hop-by-hop / routing / destination-options style header of `(units + 1) * 8` bytes.
pub fn ext(next: u8, units: u8, rest: &[u8]) -> Vec<u8> {
    let mut h = vec![next, units];
    h.resize((usize::from(units) + 1) * 8, 0x01);
    h.extend(rest);
    h
}

pub fn frag6(next: u8, offset_units: u16, more: bool, rest: &[u8]) -> Vec<u8> {
    let mut h = vec![next, 0];
    h.extend(((offset_units << 3) | u16::from(more)).to_be_bytes());
    h.extend([0xde, 0xad, 0xbe, 0xef]);
    h.extend(rest);
    h
}

pub fn udp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = sp.to_be_bytes().to_vec();
    h.extend(dp.to_be_bytes());
    h.extend(((8 + payload.len()) as u16).to_be_bytes());
    h.extend([0, 0]);
    h.extend(payload);
    h
}

/// TCP with the 12-bit `flags` and `opts` (a multiple of 4 bytes) of options.
pub fn tcp(sp: u16, dp: u16, flags: u16, opts: &[u8], payload: &[u8]) -> Vec<u8> {
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

pub fn icmp(ty: u8, code: u8) -> Vec<u8> {
    vec![ty, code, 0, 0, 0, 1, 0, 1, b'p', b'i', b'n', b'g']
}

pub fn vxlan(vni: u32, inner: &[u8]) -> Vec<u8> {
    let v = vni.to_be_bytes();
    let mut h = vec![0x08, 0, 0, 0, v[1], v[2], v[3], 0];
    h.extend(inner);
    h
}

pub fn arp(op: u16) -> Vec<u8> {
    let mut a = vec![0, 1, 0x08, 0x00, 6, 4];
    a.extend(op.to_be_bytes());
    a.extend(SRC);
    a.extend(V4_SRC);
    a.extend([0; 6]);
    a.extend(V4_DST);
    a
}

// ---- checking helpers ----

pub fn run(frame: &[u8], opts: &ParseOptions) -> Result<(FlowKey, PacketMeta), DropReason> {
    let mut k = FlowKey::ONES; // the parser must clear what it does not set
    parse(frame, IN_PORT, opts, &mut k).map(|m| (k, m))
}

pub fn ok(frame: &[u8]) -> (FlowKey, PacketMeta) {
    run(frame, &ParseOptions::default()).unwrap_or_else(|r| panic!("dropped: {r}"))
}

pub fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0, |a, &b| (a << 8) | u128::from(b))
}

pub fn addr<const N: usize>(a: [u8; N]) -> u128 {
    a.iter().fold(0, |acc, &b| (acc << 8) | u128::from(b))
}

/// The expected key: in_port and the Ethernet addresses of [`eth`] plus `fields`; every
/// other field zero. Compared as a whole, so a stray byte anywhere fails.
pub fn key(fields: &[(Field, u128)]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, IN_PORT.into());
    k.set(Field::EthDst, mac(DST));
    k.set(Field::EthSrc, mac(SRC));
    for &(f, v) in fields {
        k.set(f, v);
    }
    k
}

pub fn meta(l2: u16, l3: u16, l4: u16, vlans: u8) -> PacketMeta {
    PacketMeta { l2, l3, l4, vlans }
}

pub fn v4_fields(proto: u8) -> Vec<(Field, u128)> {
    vec![
        (Field::EthType, 0x0800),
        (Field::NwProto, proto.into()),
        (Field::NwTos, 0xb9),
        (Field::NwTtl, 61),
        (Field::Ipv4Src, addr(V4_SRC)),
        (Field::Ipv4Dst, addr(V4_DST)),
    ]
}

pub fn v6_fields(proto: u8) -> Vec<(Field, u128)> {
    vec![
        (Field::EthType, 0x86dd),
        (Field::NwProto, proto.into()),
        (Field::NwTos, 0xa5),
        (Field::NwTtl, 33),
        (Field::Ipv6Src, addr(V6_SRC)),
        (Field::Ipv6Dst, addr(V6_DST)),
    ]
}

pub fn with(mut base: Vec<(Field, u128)>, more: &[(Field, u128)]) -> Vec<(Field, u128)> {
    base.extend_from_slice(more);
    base
}
