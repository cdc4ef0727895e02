//! Which key bits a classification decision needed: the megaflow's mask, built from the
//! geometry of the rules a backend looked at rather than from their whole masks.
//!
//! A megaflow is a region around the classified key (a prefix of each field) that every
//! packet in it must be classified the same way. Given the winning rule, the region must
//! lie inside it ([`include`]) and outside every rule that would have beaten it
//! ([`exclude`]); rules that lose anyway never matter. Excluding a rule takes one field on
//! which the key differs from it, un-wildcarded only down to the highest differing bit (or,
//! for a port range, to the widest block around the port that misses the range) — the
//! field that costs the fewest new bits is chosen. This is what lets one ACL rule cover
//! many connections with one megaflow instead of one per 5-tuple, as OVS's prefix tracking
//! does for addresses.

use crate::rule::{key_ports, prefix_mask, Match, PortRange};
use flowpath_packet::{Field, FlowKey, KEY_BYTES};

/// The fields a region is built from: non-overlapping, covering the whole key (the IPv4
/// address fields are the top 32 bits of the 16-byte address fields, so prefix lengths
/// on those are the same numbers; likewise the connection's addresses). A field missing
/// here could not keep a region apart from a rule that differs from the key only there.
pub(crate) const FIELDS: [Field; 30] = [
    Field::InPort,
    Field::EthType,
    Field::VlanTci,
    Field::EthDst,
    Field::VlanInnerTci,
    Field::EthSrc,
    Field::TcpFlags,
    Field::NwProto,
    Field::NwTos,
    Field::NwTtl,
    Field::NwFrag,
    Field::TpSrc,
    Field::TpDst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::TunId,
    Field::TunFlags,
    Field::TunSrc,
    Field::TunDst,
    Field::Metadata,
    Field::RecircId,
    Field::CtState,
    Field::CtNwProto,
    Field::CtZone,
    Field::CtMark,
    Field::CtTpSrc,
    Field::CtTpDst,
    Field::CtLabel,
    Field::CtIpv6Src,
    Field::CtIpv6Dst,
];

/// Field `f` of `k` as a number: big-endian loads of the field's bytes (the key's own
/// `get` goes byte by byte; this runs for every rule a miss has to be kept apart from).
#[inline(always)]
pub(crate) fn read(k: &FlowKey, f: Field) -> u128 {
    let (off, len) = f.range();
    read_bytes(k.bytes(), off, len)
}

/// The `len`-byte big-endian number at `off` in a key's bytes (`len` is 1..=8 or 16; every
/// field leaves room for the 8- or 16-byte load).
#[inline(always)]
pub(crate) fn read_bytes(b: &[u8; KEY_BYTES], off: usize, len: usize) -> u128 {
    if len <= 8 {
        let x = u64::from_be_bytes(b[off..off + 8].try_into().unwrap());
        (x >> (64 - 8 * len as u32)) as u128
    } else {
        u128::from_be_bytes(b[off..off + 16].try_into().unwrap())
    }
}

/// OR `mask` into field `f` of `k` (a wildcard mask being widened).
#[inline(always)]
pub(crate) fn or_into(k: &mut FlowKey, f: Field, mask: u128) {
    let (off, len) = f.range();
    let bytes = (mask << (128 - 8 * len as u32)).to_be_bytes();
    for (d, s) in k.bytes_mut()[off..off + len].iter_mut().zip(&bytes[..len]) {
        *d |= s;
    }
}

/// The fields of [`FIELDS`] that overlap each key word, computed once.
static WORD_FIELDS: std::sync::LazyLock<Vec<Vec<Field>>> = std::sync::LazyLock::new(|| {
    (0..flowpath_packet::KEY_WORDS)
        .map(|wi| {
            FIELDS
                .iter()
                .copied()
                .filter(|f| {
                    let (off, len) = f.range();
                    off / 8 <= wi && wi <= (off + len - 1) / 8
                })
                .collect()
        })
        .collect()
});

/// How many of the top bits of `m` (a `w`-bit field mask) are ones.
#[inline]
pub(crate) fn leading_ones(m: u128, w: u32) -> u32 {
    (m << (128 - w)).leading_ones().min(w)
}

/// The shortest prefix of `k` (in a `w`-bit field) whose block misses `lo..=hi`; `k` must
/// lie outside it.
#[inline]
fn len_outside(k: u128, lo: u128, hi: u128, w: u32) -> u32 {
    let edge = if k < lo { lo } else { hi };
    // The first bit where `k` and the nearest edge differ splits them into two blocks.
    ((k ^ edge) << (128 - w)).leading_zeros() + 1
}

/// The shortest prefix of `k` whose block lies inside `lo..=hi` (which holds `k`).
#[inline]
fn len_inside(k: u128, lo: u128, hi: u128, w: u32) -> u32 {
    (0..=w)
        .find(|&l| {
            let low = k & prefix_mask(w, l);
            let high = low | (prefix_mask(w, w) & !prefix_mask(w, l));
            lo <= low && high <= hi
        })
        .unwrap_or(w)
}

/// Un-wildcard in `wc` what keeps the region around `key` inside `m` (which matches it):
/// `m`'s mask, and for a port range the widest block around the port inside the range.
pub(crate) fn include(m: &Match, key: &FlowKey, wc: &mut FlowKey) {
    wc.or_assign(&m.mask);
    if m.has_ranges() {
        let ports = key_ports(key);
        for (i, f) in [Field::TpSrc, Field::TpDst].into_iter().enumerate() {
            let r = m.ports[i];
            if !r.is_any() {
                let l = len_inside(ports[i] as u128, r.lo as u128, r.hi as u128, 16);
                or_into(wc, f, prefix_mask(16, l));
            }
        }
    }
}

/// Un-wildcard in `wc` the cheapest prefix of one field that keeps the region around `key`
/// outside `m` (which does not match it). Does nothing when `wc` already separates them.
pub(crate) fn exclude(m: &Match, key: &FlowKey, wc: &mut FlowKey) {
    // Already apart: a bit the region fixes, that the rule looks at, differs. (Most rules
    // a miss meets are, once the cuts and the winner are in the mask: skip the search.)
    let apart = (0..key.words.len())
        .any(|i| ((key.words[i] & m.mask.words[i]) ^ m.value.words[i]) & wc.words[i] != 0);
    if apart {
        return;
    }
    let ports = key_ports(key);
    // (new bits, field, prefix length)
    let mut best: Option<(u32, Field, u32)> = None;
    for (wi, (&kw, (&mw, &vw))) in key
        .words
        .iter()
        .zip(m.mask.words.iter().zip(m.value.words.iter()))
        .enumerate()
    {
        // Only the words where the key differs from the rule hold a separating field
        // (port ranges are looked at below).
        if (kw & mw) ^ vw == 0 {
            continue;
        }
        for &f in &WORD_FIELDS[wi] {
            let d = (read(key, f) & read(&m.mask, f)) ^ read(&m.value, f);
            if d == 0 {
                continue;
            }
            let w = f.bits();
            let l = (d << (128 - w)).leading_zeros() + 1;
            consider(&mut best, wc, f, l);
        }
    }
    for (i, f) in [Field::TpSrc, Field::TpDst].into_iter().enumerate() {
        let r: PortRange = m.ports[i];
        if !r.contains(ports[i]) {
            let l = len_outside(ports[i] as u128, r.lo as u128, r.hi as u128, 16);
            consider(&mut best, wc, f, l);
        }
    }
    if let Some((cost, f, l)) = best {
        if cost > 0 {
            or_into(wc, f, prefix_mask(f.bits(), l));
        }
    }
}

/// Prefix lengths megaflows use on address and port fields are rounded up to multiples of
/// these. Measured on acl2_10k (200,000 keys): exact lengths need 8,528 masks for 92,278
/// megaflows; steps of 8 need 223 masks for 162,040; 16/16 60 for 175,594. Every mask is a
/// subtable a megaflow hit may probe, so 8/8 is the default.
pub(crate) const ADDR_STEP: u32 = 8;
pub(crate) const PORT_STEP: u32 = 8;

/// Round the prefix `wc` holds on each address and port field up to the step: fewer
/// distinct megaflow masks (each is a subtable the megaflow cache probes), at the price of
/// narrower megaflows.
pub(crate) fn quantize(wc: &mut FlowKey) {
    let (addr, port) = (ADDR_STEP, PORT_STEP);
    for (f, step) in [
        (Field::Ipv6Src, addr),
        (Field::Ipv6Dst, addr),
        (Field::TpSrc, port),
        (Field::TpDst, port),
    ] {
        if step <= 1 {
            continue;
        }
        let w = f.bits();
        let m = read(wc, f);
        let lead = leading_ones(m, w);
        if m == prefix_mask(w, lead) && lead % step != 0 {
            or_into(wc, f, prefix_mask(w, (lead / step + 1) * step));
        }
    }
}

/// Keep the candidate that adds the fewest bits; among equals, the one on a field already
/// un-wildcarded (fewer distinct megaflow masks).
#[inline]
fn consider(best: &mut Option<(u32, Field, u32)>, wc: &FlowKey, f: Field, l: u32) {
    let cur = leading_ones(read(wc, f), f.bits());
    let cost = l.saturating_sub(cur);
    let better = match *best {
        None => true,
        Some((c, bf, _)) => {
            cost < c || (cost == c && cur > 0 && leading_ones(read(wc, bf), bf.bits()) == 0)
        }
    };
    if better {
        *best = Some((cost, f, l));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        assert_eq!(prefix_mask(16, 4), 0xf000);
        assert_eq!(prefix_mask(32, 32), 0xffff_ffff);
        assert_eq!(prefix_mask(128, 1), 1u128 << 127);
        assert_eq!(leading_ones(0xff00, 16), 8);
        assert_eq!(leading_ones(0xffff, 16), 16);
        // 80 vs 1024..=65535: 80's /6 block (0..=1023) misses the range.
        assert_eq!(len_outside(80, 1024, 65535, 16), 6);
        // 5000 in 1024..=65535: /4 gives 4096..=8191; /3 would reach down to 0.
        assert_eq!(len_inside(5000, 1024, 65535, 16), 4);
        assert_eq!(len_inside(80, 80, 80, 16), 16);
    }

    #[test]
    fn exclusion_takes_the_cheapest_field() {
        let rule = Match::any()
            .exact(Field::NwProto, 6)
            .prefix(Field::Ipv4Src, 0x0a00_0000, 8);
        let mut key = FlowKey::ZERO;
        key.set(Field::NwProto, 17);
        key.set(Field::Ipv4Src, 0x0a01_0203);
        let mut wc = FlowKey::ZERO;
        exclude(&rule, &key, &mut wc);
        // 17 ^ 6 = 0b10111: the highest differing bit is bit 4, the 4th of 8.
        assert_eq!(wc.get(Field::NwProto), 0xf0);
        assert_eq!(wc.get(Field::Ipv4Src), 0);
        // Already separated: nothing more.
        let before = wc;
        exclude(&rule, &key, &mut wc);
        assert_eq!(wc, before);
    }
}
