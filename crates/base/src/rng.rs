//! `SplitMix64`: the small seeded generator behind traffic churn, fault injection and
//! test data (fast, full-period, deterministic for a seed; not cryptographic). Written by
//! hand: it runs once per packet when churn is on, is three multiply/xor-shift rounds, and
//! must not change under us the way a `rand` crate's default generator may.

/// Steele, Lea and Flood's SplitMix64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The golden-ratio increment of the state.
    pub const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    #[inline(always)]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        next(&mut self.0)
    }

    /// A uniform float in [0, 1) from the top 53 bits.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (no draw when `p` is 0, so a zero share changes nothing).
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}

/// SplitMix64 over a bare state word (for structs that keep the state inline).
#[inline(always)]
pub fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(SplitMix64::GAMMA);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_sequence_for_seed_zero() {
        // The reference implementation's first outputs for seed 0.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next(), 0x6e78_9e6a_a1b9_65f4);
    }
}
