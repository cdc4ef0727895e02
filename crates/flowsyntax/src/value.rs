//! Parsing and printing of the value types the syntax uses: numbers (decimal or `0x` hex),
//! MAC addresses, IPv4 and IPv6 addresses with prefixes or masks.

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A number in decimal or `0x`/`0X` hexadecimal; no sign, no empty digits.
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() > 2 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X') {
        let h = &b[2..];
        if h.len() > 16 && h.iter().take(h.len() - 16).any(|&c| c != b'0') {
            return None;
        }
        let mut v = 0u64;
        for &c in h {
            let d = (c as char).to_digit(16)?;
            v = (v << 4) | d as u64;
        }
        Some(v)
    } else {
        if b.is_empty() {
            return None;
        }
        let mut v = 0u64;
        for &c in b {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
        }
        Some(v)
    }
}

/// A 128-bit number in decimal or `0x`/`0X` hexadecimal (`ct_label`).
pub(crate) fn parse_u128(s: &str) -> Option<u128> {
    let b = s.as_bytes();
    if b.len() > 2 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X') {
        let h = s[2..].trim_start_matches('0');
        if h.len() > 32 || !s[2..].bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        Some(if h.is_empty() {
            0
        } else {
            u128::from_str_radix(h, 16).ok()?
        })
    } else if !b.is_empty() && b.iter().all(u8::is_ascii_digit) {
        s.parse().ok()
    } else {
        None
    }
}

/// A number no larger than `max`.
pub(crate) fn parse_max(s: &str, max: u64) -> Option<u64> {
    parse_u64(s).filter(|&v| v <= max)
}

/// `xx:xx:xx:xx:xx:xx`, one or two hex digits per octet.
pub(crate) fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for o in out.iter_mut() {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *o = u8::from_str_radix(p, 16).ok()?;
        if p.starts_with('+') {
            return None;
        }
    }
    if parts.next().is_some() {
        return None;
    }
    Some(out)
}

pub(crate) fn parse_ipv4(s: &str) -> Option<u32> {
    s.parse::<Ipv4Addr>().ok().map(u32::from)
}

pub(crate) fn parse_ipv6(s: &str) -> Option<u128> {
    s.parse::<Ipv6Addr>().ok().map(u128::from)
}

pub(crate) fn mac_u128(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |acc, &b| (acc << 8) | b as u128)
}

/// Top `len` bits of a `bits`-wide field set.
pub(crate) fn prefix_mask(bits: u32, len: u32) -> u128 {
    if len == 0 {
        0
    } else {
        let full = if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        (full >> (bits - len)) << (bits - len)
    }
}

/// The prefix length of `mask` (a `bits`-wide field) if it is a CIDR mask.
pub(crate) fn cidr_len(mask: u128, bits: u32) -> Option<u32> {
    let len = if bits >= 128 {
        mask.leading_ones()
    } else {
        (mask << (128 - bits)).leading_ones()
    };
    (prefix_mask(bits, len) == mask).then_some(len)
}

/// `printf("%#x")`: `0` for zero, `0x..` otherwise (what OVS prints for `tun_id`,
/// `set_tunnel`, `push_vlan`).
pub(crate) fn write_c_hex(s: &mut String, v: u128) {
    if v == 0 {
        s.push('0');
    } else {
        let _ = write!(s, "{v:#x}");
    }
}

pub(crate) fn write_mac(s: &mut String, v: u128) {
    let b = (v as u64).to_be_bytes();
    let _ = write!(
        s,
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    );
}

pub(crate) fn write_mac_masked(s: &mut String, v: u128, m: u128) {
    write_mac(s, v);
    if m != 0xffff_ffff_ffff {
        s.push('/');
        write_mac(s, m);
    }
}

pub(crate) fn write_ipv4_masked(s: &mut String, v: u32, m: u32) {
    let _ = write!(s, "{}", Ipv4Addr::from(v));
    if m != u32::MAX {
        match cidr_len(m as u128, 32) {
            Some(len) => {
                let _ = write!(s, "/{len}");
            }
            None => {
                let _ = write!(s, "/{}", Ipv4Addr::from(m));
            }
        }
    }
}

pub(crate) fn write_ipv6_masked(s: &mut String, v: u128, m: u128) {
    let _ = write!(s, "{}", Ipv6Addr::from(v));
    if m != u128::MAX {
        match cidr_len(m, 128) {
            Some(len) => {
                let _ = write!(s, "/{len}");
            }
            None => {
                let _ = write!(s, "/{}", Ipv6Addr::from(m));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_u64("0"), Some(0));
        assert_eq!(parse_u64("65535"), Some(65535));
        assert_eq!(parse_u64("0x1f"), Some(31));
        assert_eq!(parse_u64("0XFF"), Some(255));
        assert_eq!(parse_u64("0xffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_u64("0x0000000000000000001"), Some(1));
        assert_eq!(parse_u64("0x10000000000000000"), None);
        assert_eq!(parse_u64("18446744073709551616"), None);
        for bad in ["", "0x", "+5", "-1", "1a", "0x+5", "5 ", "٣"] {
            assert_eq!(parse_u64(bad), None, "{bad:?}");
            assert_eq!(parse_u128(bad), None, "{bad:?}");
        }
        assert_eq!(
            parse_u128("0x0001000000000000000000000000000000"),
            Some(1 << 120)
        );
        assert_eq!(parse_u128(&u128::MAX.to_string()), Some(u128::MAX));
        assert_eq!(parse_u128("0x100000000000000000000000000000000"), None);
    }

    #[test]
    fn macs_and_masks() {
        assert_eq!(parse_mac("0:1:a:ff:10:2"), Some([0, 1, 10, 255, 16, 2]));
        for bad in [
            "0:1:2:3:4",
            "0:1:2:3:4:5:6",
            "0:1:2:3:4:100",
            "0:1:2:3:4:+f",
            "::::::",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
        assert_eq!(cidr_len(0xffff_ff00, 32), Some(24));
        assert_eq!(cidr_len(0, 32), Some(0));
        assert_eq!(cidr_len(0xff00_ff00, 32), None);
        assert_eq!(cidr_len(u128::MAX, 128), Some(128));
        assert_eq!(prefix_mask(32, 8), 0xff00_0000);
        assert_eq!(prefix_mask(128, 128), u128::MAX);
        let mut s = String::new();
        write_ipv4_masked(&mut s, 0x0a00_0000, 0xff00_0000);
        s.push(' ');
        write_ipv4_masked(&mut s, 0x0a00_0001, 0xff00_00ff);
        s.push(' ');
        write_c_hex(&mut s, 0);
        s.push(' ');
        write_c_hex(&mut s, 0x8100);
        assert_eq!(s, "10.0.0.0/8 10.0.0.1/255.0.0.255 0 0x8100");
    }
}
