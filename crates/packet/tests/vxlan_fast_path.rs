//! The parser's VXLAN fast path against the general parser: for VXLAN frames, valid and
//! damaged (every outer shape the fast path takes or turns away, truncations, byte flips,
//! wrong lengths and flags), `parse_into` and `parse_into_general` (the general parser
//! alone) give the same result, key and header offsets. Also the fuzz corpus.

use flowpath_packet::{DropReason, ParseOptions};
use proptest::prelude::*;
use std::path::Path;

mod common;
use common::assert_same;

fn be16(v: u16) -> [u8; 2] {
    v.to_be_bytes()
}

/// The inner frame: Ethernet (with 0..=2 tags), then IPv4/UDP, IPv6/TCP, or raw bytes.
fn inner(kind: u8, tags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa];
    for t in 0..tags {
        f.extend_from_slice(&be16(if t == 0 { 0x88a8 } else { 0x8100 }));
        f.extend_from_slice(&be16(0x0123 + u16::from(t)));
    }
    match kind % 3 {
        0 => {
            f.extend_from_slice(&be16(0x0800));
            let total = 28 + payload.len() as u16;
            f.extend_from_slice(&[0x45, 0x10]);
            f.extend_from_slice(&be16(total));
            f.extend_from_slice(&[0, 1, 0x40, 0, 63, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
            f.extend_from_slice(&[0x13, 0x88, 0x12, 0xb5]); // a UDP packet to 4789: not decapsulated again
            f.extend_from_slice(&be16(8 + payload.len() as u16));
            f.extend_from_slice(&[0, 0]);
        }
        1 => {
            f.extend_from_slice(&be16(0x86dd));
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&be16(20 + payload.len() as u16));
            f.extend_from_slice(&[6, 64]);
            f.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            f.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            f.extend_from_slice(&[
                0x04, 0xd2, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x12, 0xff, 0xff,
            ]);
            f.extend_from_slice(&[0, 0, 0, 0]);
        }
        _ => f.extend_from_slice(&be16(0x0806)),
    }
    f.extend_from_slice(payload);
    f
}

/// How the outer headers are shaped.
#[derive(Clone, Debug)]
struct Outer {
    tags: u8,
    v6: bool,
    /// IPv4: 32-bit words of options; IPv6: 8-byte hop-by-hop header present.
    options: u8,
    frag: u16,
    dst_port: u16,
    flags: u8,
    vni: u32,
    /// Extra bytes after the IP packet (Ethernet padding).
    padding: u8,
}

fn outer() -> impl Strategy<Value = Outer> {
    (
        prop_oneof![4 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
        any::<bool>(),
        prop_oneof![6 => Just(0u8), 1 => 1u8..3],
        prop_oneof![6 => Just(0u16), 1 => Just(0x2000u16), 1 => Just(0x0001u16), 1 => Just(0x8000u16), 1 => Just(0x4000u16)],
        prop_oneof![6 => Just(4789u16), 1 => Just(4790u16), 1 => any::<u16>()],
        prop_oneof![6 => Just(0x08u8), 1 => any::<u8>()],
        any::<u32>(),
        prop_oneof![4 => Just(0u8), 1 => 1u8..20],
    )
        .prop_map(
            |(tags, v6, options, frag, dst_port, flags, vni, padding)| Outer {
                tags,
                v6,
                options,
                frag,
                dst_port,
                flags,
                vni,
                padding,
            },
        )
}

fn vxlan_frame(o: &Outer, inner: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    for t in 0..o.tags {
        f.extend_from_slice(&be16(if t % 2 == 0 { 0x8100 } else { 0x88a8 }));
        f.extend_from_slice(&be16(0x0064 + u16::from(t)));
    }
    let mut udp = Vec::new();
    udp.extend_from_slice(&be16(0xc123));
    udp.extend_from_slice(&be16(o.dst_port));
    udp.extend_from_slice(&be16(16 + inner.len() as u16));
    udp.extend_from_slice(&[0, 0, o.flags, 0, 0, 0]);
    udp.extend_from_slice(&(o.vni << 8).to_be_bytes());
    udp.extend_from_slice(inner);
    if o.v6 {
        f.extend_from_slice(&be16(0x86dd));
        let ext = if o.options > 0 { 8 } else { 0 };
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&be16((ext + udp.len()) as u16));
        f.extend_from_slice(&[if ext > 0 { 0 } else { 17 }, 64]);
        f.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        if ext > 0 {
            f.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        }
    } else {
        f.extend_from_slice(&be16(0x0800));
        let hlen = 20 + 4 * usize::from(o.options);
        f.extend_from_slice(&[0x40 | (hlen / 4) as u8, 0]);
        f.extend_from_slice(&be16((hlen + udp.len()) as u16));
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&be16(o.frag));
        f.extend_from_slice(&[64, 17, 0, 0, 192, 0, 2, 2, 192, 0, 2, 1]);
        f.extend(std::iter::repeat_n(1u8, hlen - 20));
    }
    f.extend_from_slice(&udp);
    f.extend(std::iter::repeat_n(0u8, usize::from(o.padding)));
    f
}

/// Ways to damage a frame.
#[derive(Clone, Debug)]
enum Damage {
    None,
    Truncate(usize),
    /// XOR a byte (index taken modulo the length), mostly in the outer headers.
    Flip(usize, u8),
    /// Overwrite a 16-bit field at this offset (lengths, types, ports).
    Set16(usize, u16),
}

fn damage() -> impl Strategy<Value = Vec<Damage>> {
    prop::collection::vec(
        prop_oneof![
            3 => Just(Damage::None),
            2 => (0usize..140).prop_map(Damage::Truncate),
            3 => (0usize..90, 1u8..=255).prop_map(|(i, x)| Damage::Flip(i, x)),
            2 => (0usize..90, prop_oneof![Just(0u16), Just(7), Just(8), Just(16), Just(20), Just(27), Just(28), Just(0xffff), any::<u16>()])
                .prop_map(|(i, v)| Damage::Set16(i, v)),
        ],
        0..3,
    )
}

fn apply(mut f: Vec<u8>, d: &[Damage]) -> Vec<u8> {
    for d in d {
        match *d {
            Damage::None => {}
            Damage::Truncate(n) => f.truncate(n),
            Damage::Flip(i, x) if !f.is_empty() => {
                let i = i % f.len();
                f[i] ^= x;
            }
            Damage::Set16(i, v) if f.len() >= 2 => {
                let i = i % (f.len() - 1);
                f[i..i + 2].copy_from_slice(&v.to_be_bytes());
            }
            _ => {}
        }
    }
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn fast_path_equals_general_parser(
        o in outer(),
        kind in any::<u8>(),
        inner_tags in prop_oneof![4 => Just(0u8), 1 => 1u8..=3],
        payload in prop::collection::vec(any::<u8>(), 0..40),
        d in damage(),
        port in prop_oneof![8 => Just(Some(4789u16)), 1 => Just(None), 1 => Just(Some(4790u16))],
    ) {
        let f = apply(vxlan_frame(&o, &inner(kind, inner_tags, &payload)), &d);
        let _ = assert_same(&f, &ParseOptions { vxlan_port: port });
    }

    #[test]
    fn arbitrary_bytes_after_a_vxlan_prefix(
        v6 in any::<bool>(),
        cut in 0usize..80,
        tail in prop::collection::vec(any::<u8>(), 0..100),
    ) {
        let o = Outer { tags: 0, v6, options: 0, frag: 0, dst_port: 4789, flags: 8, vni: 42, padding: 0 };
        let mut f = vxlan_frame(&o, &inner(0, 0, &[]));
        f.truncate(cut.min(f.len()));
        f.extend_from_slice(&tail);
        let _ = assert_same(&f, &ParseOptions::default());
    }
}

#[test]
fn valid_frames_take_the_fast_path_and_parse() {
    // Every shape the fast path takes parses, to the same key as the general path.
    for v6 in [false, true] {
        for tags in 0..=1 {
            for kind in 0..2 {
                let o = Outer {
                    tags,
                    v6,
                    options: 0,
                    frag: 0x4000,
                    dst_port: 4789,
                    flags: 0x08,
                    vni: 0xabcdef,
                    padding: 4,
                };
                let f = vxlan_frame(&o, &inner(kind, 0, &[1, 2, 3]));
                assert_eq!(assert_same(&f, &ParseOptions::default()), Ok(()));
            }
        }
    }
}

#[test]
fn damaged_outer_headers_keep_their_drop_reasons() {
    let base = |v6| Outer {
        tags: 0,
        v6,
        options: 0,
        frag: 0,
        dst_port: 4789,
        flags: 0x08,
        vni: 42,
        padding: 0,
    };
    let f4 = vxlan_frame(&base(false), &inner(0, 0, &[]));
    let f6 = vxlan_frame(&base(true), &inner(0, 0, &[]));
    let opts = ParseOptions::default();
    let mut seen = std::collections::BTreeSet::new();
    for (f, udp_len_at) in [(&f4, 38), (&f6, 58)] {
        for len in 0..=20u16 {
            let mut g = f.clone();
            g[udp_len_at..udp_len_at + 2].copy_from_slice(&len.to_be_bytes());
            if let Err(r) = assert_same(&g, &opts) {
                seen.insert(r);
            }
        }
        for n in 0..=f.len() {
            if let Err(r) = assert_same(&f[..n], &opts) {
                seen.insert(r);
            }
        }
        for i in 0..f.len() {
            for x in [0x01u8, 0x08, 0x0f, 0x40, 0x80, 0xff] {
                let mut g = f.clone();
                g[i] ^= x;
                if let Err(r) = assert_same(&g, &opts) {
                    seen.insert(r);
                }
            }
        }
    }
    for r in [
        DropReason::Ipv4BadTotalLength,
        DropReason::Ipv6BadPayloadLength,
        DropReason::UdpBadLength,
        DropReason::VxlanTruncated,
        DropReason::VxlanBadFlags,
        DropReason::EthTruncated,
    ] {
        assert!(seen.contains(&r), "{r} never seen: {seen:?}");
    }
}

#[test]
fn fuzz_corpus_parses_alike() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut n = 0;
    for dir in [
        "corpus-seed/packet_parse",
        "corpus/packet_parse",
        "regressions/packet_parse",
    ] {
        let Ok(rd) = std::fs::read_dir(fuzz.join(dir)) else {
            continue;
        };
        for e in rd.flatten() {
            let data = std::fs::read(e.path()).unwrap();
            let _ = assert_same(&data, &ParseOptions::default());
            n += 1;
        }
    }
    assert!(n > 10, "no corpus found ({n} inputs)");
}
