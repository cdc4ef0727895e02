//! The Internet checksum: RFC 1071 one's-complement sums over whole headers (to build
//! them) and RFC 1624 incremental updates (to rewrite one field without re-summing).
//!
//! Shared by the header rewrites ([`crate::rewrite`]) and the traffic generator.
//!
//! ```
//! use flowpath_packet::checksum;
//!
//! let mut h = [0x45u8, 0, 0, 20, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
//! let c = checksum::finish(checksum::sum16(&h, 0));
//! h[10..12].copy_from_slice(&c.to_be_bytes());
//! // Rewrite the TTL/protocol word and update the checksum in place of re-summing.
//! let c2 = checksum::update16(c, 0x4011, 0x3f11);
//! h[8] = 63;
//! h[10..12].copy_from_slice(&0u16.to_be_bytes());
//! assert_eq!(c2, checksum::finish(checksum::sum16(&h, 0)));
//! ```

/// Add `data` as big-endian 16-bit words (odd length: padded with a zero byte) to `acc`,
/// the running one's-complement sum; [`finish`] turns it into a checksum. Start with
/// `acc = 0`, or with a pseudo-header's sum.
#[inline]
pub fn sum16(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        acc += (*last as u64) << 8;
    }
    acc
}

/// Fold a one's-complement sum (from [`sum16`]) to 16 bits and complement it: the
/// checksum to write into the header.
#[inline]
pub fn finish(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The one's-complement sum of `data` as big-endian 16-bit words (odd length: padded with
/// a zero byte), folded to 16 bits but not complemented: what [`sum16`] adds, eight bytes
/// at a time. Loads are native-endian: the one's-complement sum commutes with swapping the
/// bytes of every word (RFC 1071, "byte order independence"), so one swap at the end
/// suffices.
#[inline]
pub fn sum_words(data: &[u8]) -> u16 {
    let mut acc = 0u128;
    let mut c = data.chunks_exact(8);
    for w in &mut c {
        acc += u128::from(u64::from_ne_bytes(w.try_into().unwrap()));
    }
    let n = c.remainder().len();
    if n != 0 {
        // The last `n` bytes as a word padded with zeros after them (what loading them
        // into a zeroed 8-byte buffer gives), without the buffer: a store to the stack
        // and a load across it stalls store forwarding on every call.
        let le = if let Some(last) = data.last_chunk::<8>() {
            // Little-endian, the last `n` bytes are the top ones: shift them down.
            u64::from_le_bytes(*last) >> (8 * (8 - n))
        } else {
            let r = c.remainder();
            let mut t = 0u64;
            let mut i = 0;
            if n & 4 != 0 {
                t = u64::from(u32::from_le_bytes([r[0], r[1], r[2], r[3]]));
                i = 4;
            }
            if n & 2 != 0 {
                t |= u64::from(u16::from_le_bytes([r[i], r[i + 1]])) << (8 * i);
                i += 2;
            }
            if n & 1 != 0 {
                t |= u64::from(r[i]) << (8 * i);
            }
            t
        };
        acc += u128::from(u64::from_ne_bytes(le.to_le_bytes()));
    }
    // 128 -> 64 -> 32 -> 16 bits, each with its end-around carry.
    let (s, c) = (acc as u64).overflowing_add((acc >> 64) as u64);
    let s = s + u64::from(c);
    let (s, c) = (s as u32).overflowing_add((s >> 32) as u32);
    let s = s + u32::from(c);
    u16::from_be(fold(s))
}

/// Fold a 32-bit accumulator of 16-bit one's-complement additions back into 16 bits by
/// adding the carries in at the bottom ("end-around carry"). Two rounds suffice for any
/// accumulator below 2^32 - 2^16.
#[inline(always)]
fn fold(mut sum: u32) -> u16 {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// The one's-complement difference `~old + new` of one changed 16-bit word; the deltas of
/// several words add up (keep the total below 2^32 - 2^16) and [`adjust`] applies them.
#[inline(always)]
pub fn word_delta(old: u16, new: u16) -> u32 {
    u32::from(!old) + u32::from(new)
}

/// Apply an accumulated [`word_delta`] sum to checksum `hc`: RFC 1624 equation 3,
/// `HC' = ~(~HC + delta)`.
#[inline(always)]
pub fn adjust(hc: u16, delta: u32) -> u16 {
    !fold(u32::from(!hc) + delta)
}

/// Incrementally update checksum `hc` for a field whose bytes change from `old` to `new`
/// (equal, even lengths; 2, 4 or 16 bytes in practice) without touching the rest of the
/// covered data. RFC 1624 equation 3, applied once per 16-bit word of the field:
///
/// ```text
///     HC' = ~(~HC + ~m + m')
/// ```
///
/// `~m + m'` is the one's-complement difference of each word, so a multi-word field is
/// just the sum of its words' differences. With at most 8 words the accumulator stays far
/// below 2^32 before folding. Any field that starts on an even offset of the checksummed
/// data can be handled this way.
#[inline(always)]
pub fn update(hc: u16, old: &[u8], new: &[u8]) -> u16 {
    let mut sum = u32::from(!hc);
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        sum += u32::from(!u16::from_be_bytes([o[0], o[1]]));
        sum += u32::from(u16::from_be_bytes([n[0], n[1]]));
    }
    !fold(sum)
}

/// [`update`] for one changed 16-bit word.
#[inline(always)]
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    update(hc, &old.to_be_bytes(), &new.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Full RFC 1071 checksum of `data` (even length), the reference for the updates.
    fn full(data: &[u8]) -> u16 {
        let mut sum = 0u32;
        for w in data.chunks_exact(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        !fold(sum)
    }

    #[test]
    fn incremental_update_matches_recompute() {
        // The RFC 1624 example: a word changing from 0x5555 to 0x3285.
        let mut data = [0x00u8, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7, 0x55, 0x55];
        let hc = full(&data);
        data[8..10].copy_from_slice(&[0x32, 0x85]);
        let hc2 = update16(hc, 0x5555, 0x3285);
        // Either representation of a one's-complement value verifies; compare by sum.
        let mut with = data.to_vec();
        with.extend_from_slice(&hc2.to_be_bytes());
        assert_eq!(full(&with), 0);
        assert_eq!(hc2, full(&data));
    }

    #[test]
    fn fold_needs_two_rounds() {
        assert_eq!(fold(0x1_ffff), 1);
        assert_eq!(fold(0x2_fffe), 1);
        // Sum 0xffff (checksum 0); a zero word becomes 1: 0xffff + 1 wraps to 0x0001.
        let data = [0xffu8, 0xff, 0x00, 0x00];
        assert_eq!(full(&data), 0);
        assert_eq!(update(0, &[0, 0], &[0, 1]), full(&[0xff, 0xff, 0x00, 0x01]));
        assert_eq!(update(0, &[0, 0], &[0, 1]), 0xfffe);
    }

    #[test]
    fn multi_word_update() {
        let mut data: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
        let hc = full(&data);
        let new = [0xffu8, 0xfe, 0x00, 0x01, 0x80, 0x00, 0x12, 0x34];
        let old: [u8; 8] = data[10..18].try_into().unwrap();
        data[10..18].copy_from_slice(&new);
        let hc2 = update(hc, &old, &new);
        data.extend_from_slice(&hc2.to_be_bytes());
        assert_eq!(full(&data), 0);
    }

    #[test]
    fn adjust_by_word_deltas_is_update() {
        let (o, n) = ([0x12u8, 0x34, 0xab, 0xcd], [0xfeu8, 0xdc, 0x00, 0x01]);
        let delta = word_delta(0x1234, 0xfedc) + word_delta(0xabcd, 0x0001);
        for hc in [0u16, 1, 0x7fff, 0xfffe, 0xffff] {
            assert_eq!(adjust(hc, delta), update(hc, &o, &n));
        }
    }

    #[test]
    fn sum_words_is_sum16() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..300 {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            for start in 0..2.min(len + 1) {
                let d = &data[start..];
                assert_eq!(
                    finish(u64::from(sum_words(d))),
                    finish(sum16(d, 0)),
                    "len {len} start {start}"
                );
            }
        }
        // All-ones words: the carries must wrap around, never be lost.
        let ones = [0xffu8; 64];
        assert_eq!(finish(u64::from(sum_words(&ones))), finish(sum16(&ones, 0)));
        assert_eq!(sum_words(&[]), 0);
    }

    #[test]
    fn full_sum_pads_odd_lengths_and_finishes() {
        assert_eq!(sum16(&[0x01, 0x02, 0x03], 5), 5 + 0x0102 + 0x0300);
        assert_eq!(finish(0x1_fffe), !0xffffu16);
        let data: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
        assert_eq!(finish(sum16(&data, 0)), full(&data));
    }
}
