//! Port ranges: an inclusive range of transport ports, the prefix blocks that cover one,
//! and where a key keeps its ports. A range that is one prefix block is kept as a mask
//! (see [`crate::Match::port_range`]); the others ride beside the mask in a match.

use flowpath_packet::{Field, FlowKey};

/// An inclusive range of transport ports (`lo..=hi`); `0..=65535` is "any".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub const ANY: PortRange = PortRange { lo: 0, hi: 0xffff };

    pub fn is_any(&self) -> bool {
        *self == PortRange::ANY
    }

    #[inline(always)]
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }

    /// `Some((value, prefix length))` when the range is exactly one prefix block.
    pub fn as_prefix(&self) -> Option<(u16, u32)> {
        if self.lo > self.hi {
            return None;
        }
        let span = (self.hi - self.lo) as u32 + 1;
        if !span.is_power_of_two() || self.lo as u32 % span != 0 {
            return None;
        }
        Some((self.lo, 16 - span.trailing_zeros()))
    }
}

/// The prefix blocks (value, prefix length) that exactly cover `lo..=hi`, fewest first
/// (at most 30 for 16 bits): how tuple-space search stores a range.
pub fn range_prefixes(lo: u16, hi: u16) -> Vec<(u16, u32)> {
    let mut out = Vec::new();
    let (mut lo, hi) = (lo as u32, hi as u32);
    while lo <= hi {
        // The largest aligned block starting at `lo` that ends at or before `hi`.
        let mut size = if lo == 0 {
            1 << 16
        } else {
            1 << lo.trailing_zeros()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u16, 16 - size.trailing_zeros()));
        lo += size;
    }
    out
}

impl Default for PortRange {
    fn default() -> Self {
        PortRange::ANY
    }
}

/// The position in [`crate::Match::ports`] of a port field (`TpSrc` 0, `TpDst` 1).
pub fn port_slot(f: Field) -> Option<usize> {
    match f {
        Field::TpSrc => Some(0),
        Field::TpDst => Some(1),
        _ => None,
    }
}

/// The transport ports of a key (source, destination), read straight from its bytes.
#[inline(always)]
pub fn key_ports(key: &FlowKey) -> [u16; 2] {
    let b = key.bytes();
    [
        u16::from_be_bytes([b[28], b[29]]),
        u16::from_be_bytes([b[30], b[31]]),
    ]
}

/// The smallest `p >= lo` with `p & m == v` (`v` within `m`), if any.
pub(super) fn next_masked(lo: u16, m: u16, v: u16) -> Option<u16> {
    if lo & m == v {
        return Some(lo);
    }
    // Else `p` agrees with `lo` above some bit `i`, has 1 at `i` where `lo` has 0, and
    // below `i` is as small as the mask allows (`v`'s bits); the lowest such `i` is the
    // smallest `p`. Bits above `i` must be compatible with the mask.
    for i in 0..16u32 {
        let bit = 1u16 << i;
        if lo & bit != 0 || (m & bit != 0 && v & bit == 0) {
            continue;
        }
        let above = if i == 15 { 0 } else { !((bit << 1) - 1) };
        if (lo & above & m) != (v & above) {
            continue;
        }
        let below = bit - 1;
        return Some((lo & above) | bit | (v & below));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_masked_is_the_smallest_port_at_or_above() {
        let cases = [
            0u16, 1, 0x00ff, 0x0f0f, 0xff00, 0x8001, 0xfff0, 0xffff, 0x1234,
        ];
        for m in cases {
            for v0 in cases {
                let v = v0 & m;
                for lo in [0u16, 1, 79, 80, 1023, 1024, 0x7fff, 0x8000, 0xfffe, 0xffff] {
                    let want = (lo..=u16::MAX).find(|p| p & m == v);
                    assert_eq!(next_masked(lo, m, v), want, "lo {lo:#x} m {m:#x} v {v:#x}");
                }
            }
        }
    }
}
