//! The match: a value/mask pair over the flow key, plus the port ranges no single mask
//! can express; how one is built (exact, prefix, range), tested against a key, and
//! compared with another (covers, overlaps).

use super::ports::{key_ports, next_masked, port_slot, PortRange};
use flowpath_packet::{Field, FlowKey};
use std::fmt;

/// A match: the packet's key, ANDed with `mask`, must equal `value` (kept pre-masked), and
/// its transport ports must lie in `ports` (source, destination). A range that is one
/// prefix block is kept as a mask instead ([`Match::port_range`]), so `ports` holds only
/// ranges no single mask can express; a port field with a range has no mask bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Match {
    pub value: FlowKey,
    pub mask: FlowKey,
    pub ports: [PortRange; 2],
}

impl Match {
    /// Matches every packet.
    pub fn any() -> Match {
        Match::default()
    }

    /// Add a condition: `(key.field & mask) == value & mask`.
    pub fn with(mut self, field: Field, value: u128, mask: u128) -> Match {
        let mask = mask & field.full_mask();
        let mut m = self.mask.get(field) | mask;
        m &= field.full_mask();
        self.mask.set(field, m);
        let old = self.value.get(field) & !mask;
        self.value.set(field, old | (value & mask));
        self
    }

    /// Add an exact-match condition on `field`.
    pub fn exact(self, field: Field, value: u128) -> Match {
        self.with(field, value, field.full_mask())
    }

    /// Add a prefix condition (IP addresses): the top `len` bits of `field` equal `value`'s.
    pub fn prefix(self, field: Field, value: u128, len: u32) -> Match {
        let bits = field.bits();
        let len = len.min(bits);
        let mask = if len == 0 {
            0
        } else {
            (field.full_mask() >> (bits - len)) << (bits - len)
        };
        self.with(field, value, mask)
    }

    /// Add a port range condition on `TpSrc` or `TpDst`: kept as a mask when the range is
    /// one prefix block (`1024-2047` is `0x400/0xfc00`), as a range otherwise. The field
    /// must not already have mask bits or a range (the flow syntax refuses duplicates).
    pub fn port_range(mut self, field: Field, range: PortRange) -> Match {
        let slot = port_slot(field).expect("port_range is for TpSrc and TpDst");
        match range.as_prefix() {
            Some((v, len)) => self.prefix(field, v as u128, len),
            None => {
                self.ports[slot] = range;
                self
            }
        }
    }

    /// Does the match carry a port range (not expressible as one mask)?
    #[inline(always)]
    pub fn has_ranges(&self) -> bool {
        !(self.ports[0].is_any() && self.ports[1].is_any())
    }

    /// Does `key` satisfy this match?
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.matches(&self.mask, &self.value) && self.ports_match(key)
    }

    /// Do `key`'s ports lie in this match's port ranges?
    #[inline(always)]
    pub fn ports_match(&self, key: &FlowKey) -> bool {
        if !self.has_ranges() {
            return true;
        }
        let p = key_ports(key);
        self.ports[0].contains(p[0]) && self.ports[1].contains(p[1])
    }

    /// The set of values field `f` may take, as an interval, when it is one (no mask bits
    /// and a range, or a prefix mask); `None` for a non-prefix mask.
    pub fn interval(&self, f: Field) -> Option<(u128, u128)> {
        let m = self.mask.get(f);
        let full = f.full_mask();
        if let Some(slot) = port_slot(f) {
            if m == 0 {
                let r = self.ports[slot];
                return Some((r.lo as u128, r.hi as u128));
            }
        }
        // A prefix mask: ones then zeros.
        let inv = !m & full;
        if inv & inv.wrapping_add(1) != 0 {
            return None;
        }
        let v = self.value.get(f);
        Some((v, v | inv))
    }

    /// The smallest interval holding every value field `f` may take (its leading-ones
    /// mask block, cut to its port range if any).
    pub fn hull(&self, f: Field) -> (u128, u128) {
        let w = f.bits();
        let m = self.mask.get(f);
        let lead = (m << (128 - w)).leading_ones().min(w);
        let keep = prefix_mask(w, lead);
        let lo = self.value.get(f) & keep;
        let hi = lo | (f.full_mask() & !keep);
        match port_slot(f) {
            Some(slot) => (
                lo.max(self.ports[slot].lo as u128),
                hi.min(self.ports[slot].hi as u128),
            ),
            None => (lo, hi),
        }
    }

    /// Is `self` at least as general as `other` (every packet `other` matches, `self`
    /// matches too)? OpenFlow's non-strict selection for modify and delete.
    pub fn covers(&self, other: &Match) -> bool {
        if !self.has_ranges() && !other.has_ranges() {
            return self.mask.is_subset_of(&other.mask)
                && other.value.and(&self.mask) == self.value;
        }
        // Port fields compare as intervals; a non-prefix mask there is compared exactly.
        for f in [Field::TpSrc, Field::TpDst] {
            let same = self.mask.get(f) == other.mask.get(f)
                && self.value.get(f) == other.value.get(f)
                && self.ports == other.ports;
            let wider = match (self.interval(f), other.hull(f)) {
                (Some((a, b)), (c, d)) => a <= c && d <= b,
                _ => false,
            };
            if !same && !wider {
                return false;
            }
        }
        let mut sm = self.mask;
        let mut om = other.mask;
        for f in [Field::TpSrc, Field::TpDst] {
            sm.set(f, 0);
            om.set(f, 0);
        }
        sm.is_subset_of(&om) && other.value.and(&sm) == self.value.and(&sm)
    }
}

impl Match {
    /// Could one packet match both `self` and `other`? Where both masks have a bit, the
    /// values must agree; on the transport ports, some port must lie in both ranges and
    /// satisfy both masks there (OpenFlow's CHECK_OVERLAP test, exact: two matches that
    /// overlap by this test do share a packet, as far as the key's bits go).
    pub fn overlaps(&self, other: &Match) -> bool {
        let both = self.mask.and(&other.mask);
        if self.value.and(&both) != other.value.and(&both) {
            return false;
        }
        if !self.has_ranges() && !other.has_ranges() {
            return true;
        }
        for (slot, f) in [Field::TpSrc, Field::TpDst].into_iter().enumerate() {
            let (a, b) = (self.ports[slot], other.ports[slot]);
            let (lo, hi) = (a.lo.max(b.lo), a.hi.min(b.hi));
            if lo > hi {
                return false;
            }
            let m = (self.mask.get(f) | other.mask.get(f)) as u16;
            let v = (self.value.get(f) | other.value.get(f)) as u16;
            if next_masked(lo, m, v).is_none_or(|p| p > hi) {
                return false;
            }
        }
        true
    }
}

impl fmt::Debug for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Match{{")?;
        let mut first = true;
        for field in Field::ALL {
            if matches!(field, Field::Ipv4Src | Field::Ipv4Dst) {
                continue;
            }
            let m = self.mask.get(field);
            if m != 0 {
                if !first {
                    write!(f, ",")?;
                }
                first = false;
                if m == field.full_mask() {
                    write!(f, "{}={:#x}", field, self.value.get(field))?;
                } else {
                    write!(f, "{}={:#x}/{:#x}", field, self.value.get(field), m)?;
                }
            }
        }
        for (name, r) in ["tp_src", "tp_dst"].iter().zip(self.ports) {
            if !r.is_any() {
                write!(
                    f,
                    "{}{name}={}-{}",
                    if first { "" } else { "," },
                    r.lo,
                    r.hi
                )?;
                first = false;
            }
        }
        write!(f, "}}")
    }
}

/// The mask of the top `len` bits of a field of `w` bits.
#[inline]
pub(crate) fn prefix_mask(w: u32, len: u32) -> u128 {
    let full = if w >= 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    };
    if len == 0 {
        0
    } else if len >= w {
        full
    } else {
        full ^ (full >> len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_masks_top_bits() {
        let m = Match::any().prefix(Field::Ipv4Dst, 0x0a01_0203, 16);
        assert_eq!(m.mask.get(Field::Ipv4Dst), 0xffff_0000);
        assert_eq!(m.value.get(Field::Ipv4Dst), 0x0a01_0000);
        let mut k = FlowKey::ZERO;
        k.set(Field::Ipv4Dst, 0x0a01_ffff);
        assert!(m.matches(&k));
        k.set(Field::Ipv4Dst, 0x0a02_0000);
        assert!(!m.matches(&k));
        assert_eq!(Match::any().prefix(Field::Ipv4Dst, 1, 0), Match::any());
    }

    /// The overlap test against brute force over the ports (the other fields: masks).
    #[test]
    fn overlap_is_exact_on_masks_and_port_ranges() {
        let tp = |m: Match, f: Field, v: u128, mask: u128| m.with(f, v, mask);
        let ranged = |f, lo, hi| Match::any().port_range(f, PortRange { lo, hi });
        let matches = [
            Match::any(),
            tp(Match::any(), Field::TpDst, 80, 0xffff),
            tp(Match::any(), Field::TpDst, 0x50, 0xfff0),
            tp(Match::any(), Field::TpDst, 0x1, 0x1),
            tp(Match::any(), Field::TpDst, 0x0, 0x8001),
            ranged(Field::TpDst, 81, 1000),
            ranged(Field::TpDst, 3, 77),
            ranged(Field::TpDst, 1001, 65000),
            tp(ranged(Field::TpSrc, 5, 9), Field::TpDst, 443, 0xffff),
            ranged(Field::TpSrc, 10, 20),
            Match::any().prefix(Field::Ipv4Dst, 0x0a00_0000, 8),
            Match::any()
                .prefix(Field::Ipv4Dst, 0x0a01_0000, 16)
                .exact(Field::NwProto, 6),
            Match::any().prefix(Field::Ipv4Dst, 0x0b00_0000, 8),
            Match::any().exact(Field::NwProto, 17),
        ];
        let mut k = FlowKey::ZERO;
        for a in &matches {
            for b in &matches {
                // Brute force: the non-port bits by masks, the ports by trying all.
                let mut am = a.mask;
                let mut bm = b.mask;
                for f in [Field::TpSrc, Field::TpDst] {
                    am.set(f, 0);
                    bm.set(f, 0);
                }
                let both = am.and(&bm);
                let bits = a.value.and(&both) == b.value.and(&both);
                let mut port_ok = |slot: usize, f: Field| {
                    (0..=u16::MAX).any(|p| {
                        k.set(f, p as u128);
                        let inm = |m: &Match| {
                            k.and(&m.mask).get(f) == m.value.get(f) && m.ports[slot].contains(p)
                        };
                        inm(a) && inm(b)
                    })
                };
                let want = bits && port_ok(0, Field::TpSrc) && port_ok(1, Field::TpDst);
                assert_eq!(a.overlaps(b), want, "{a:?} vs {b:?}");
                assert_eq!(b.overlaps(a), want);
            }
        }
    }
}
