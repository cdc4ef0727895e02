//! Reading values: numbers, addresses, masks and TCP flags, with errors that name the
//! field, the column and what was expected.

use super::*;

/// `value` and the text after `/`, if any.
pub(super) fn split_mask(v: &str) -> (&str, Option<&str>) {
    match v.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (v, None),
    }
}

/// `tcp_flags` values: `V/M` numbers, `+syn-ack`, or `syn|ack` / a number (exact).
pub(super) fn parse_tcp_flags(s: &str) -> Option<(u128, u128)> {
    let b = s.as_bytes();
    if b.is_empty() {
        return None;
    }
    if let Some((v, m)) = s.split_once('/') {
        return Some((parse_max(v, 0xfff)? as u128, parse_max(m, 0xfff)? as u128));
    }
    let bit_of = |name: &str| TCP_FLAG_NAMES.iter().position(|n| *n == name);
    if b[0] == b'+' || b[0] == b'-' {
        let (mut flags, mut mask) = (0u128, 0u128);
        let mut i = 0;
        while i < b.len() {
            let set = match b[i] {
                b'+' => true,
                b'-' => false,
                _ => return None,
            };
            i += 1;
            let rest = &s[i..];
            let len = rest.find(['+', '-']).unwrap_or(rest.len());
            let bit = 1u128 << bit_of(&rest[..len])?;
            if mask & bit != 0 {
                return None;
            }
            mask |= bit;
            if set {
                flags |= bit;
            }
            i += len;
        }
        return Some((flags, mask));
    }
    let mut flags = 0u128;
    for part in s.split('|') {
        flags |= match parse_max(part, 0xfff) {
            Some(n) => n as u128,
            None => 1u128 << bit_of(part)?,
        };
    }
    Some((flags, 0xfff))
}

impl<'a> Parser<'a> {
    pub(super) fn bad_value(&self, k: &Key, v: &str, expected: &str) -> SyntaxError {
        let v = shown(v);
        self.err(k.at, |c| {
            format!(
                "bad value '{v}' for {} at column {c}: expected {expected}",
                k.name
            )
        })
    }

    pub(super) fn bad_mask(&self, k: &Key, m: &str, expected: &str) -> SyntaxError {
        let m = shown(m);
        self.err(k.at, |c| {
            format!(
                "bad mask '{m}' for {} at column {c}: expected {expected}",
                k.name
            )
        })
    }

    /// An unmaskable number no larger than `max`.
    pub(super) fn exact(
        &self,
        k: &Key,
        v: &str,
        max: u64,
        expected: &str,
    ) -> Result<u128, SyntaxError> {
        if v.contains('/') {
            let v = shown(v);
            return Err(self.err(k.at, |c| {
                format!(
                    "bad value '{v}' for {} at column {c}: {} takes no mask",
                    k.name, k.name
                )
            }));
        }
        parse_max(v, max)
            .map(|n| n as u128)
            .ok_or_else(|| self.bad_value(k, v, expected))
    }

    /// `value[/mask]`, both no larger than `max`; no mask means `max`.
    pub(super) fn masked(
        &self,
        k: &Key,
        v: &str,
        max: u64,
        expected: &str,
    ) -> Result<(u128, u128), SyntaxError> {
        let (a, m) = split_mask(v);
        let val = parse_max(a, max).ok_or_else(|| self.bad_value(k, a, expected))?;
        let mask = match m {
            None => max,
            Some(m) => parse_max(m, max).ok_or_else(|| self.bad_mask(k, m, expected))?,
        };
        Ok((val as u128, mask as u128))
    }

    /// `LOW-HIGH` (decimal, inclusive, `LOW <= HIGH`): a port range; `None` when `v` has no
    /// `-` (a plain `value[/mask]`).
    pub(super) fn port_range(&self, k: &Key, v: &str) -> Result<Option<PortRange>, SyntaxError> {
        let Some((lo, hi)) = v.split_once('-') else {
            return Ok(None);
        };
        const RANGE: &str = "a port range LOW-HIGH with 0 <= LOW <= HIGH <= 65535";
        let port = |p: &str| p.parse::<u16>().ok().filter(|_| !p.starts_with('+'));
        match (port(lo), port(hi)) {
            (Some(lo), Some(hi)) if lo <= hi => Ok(Some(PortRange { lo, hi })),
            _ => Err(self.bad_value(k, v, RANGE)),
        }
    }

    pub(super) fn ipv4(&self, k: &Key, v: &str) -> Result<(u128, u128), SyntaxError> {
        const MASK: &str = "a netmask a.b.c.d or a prefix length 0..32";
        let (a, m) = split_mask(v);
        let addr = parse_ipv4(a).ok_or_else(|| {
            self.bad_value(k, a, "an IPv4 address a.b.c.d, optionally /len or /mask")
        })?;
        let mask = match m {
            None => u32::MAX as u128,
            Some(m) if m.contains('.') => {
                parse_ipv4(m).ok_or_else(|| self.bad_mask(k, m, MASK))? as u128
            }
            Some(m) => self.prefix_len_mask(k, m, 32, MASK)?,
        };
        Ok((addr as u128, mask))
    }

    pub(super) fn ipv6(&self, k: &Key, v: &str) -> Result<(u128, u128), SyntaxError> {
        const MASK: &str = "an IPv6 mask address or a prefix length 0..128";
        let (a, m) = split_mask(v);
        let addr = parse_ipv6(a)
            .ok_or_else(|| self.bad_value(k, a, "an IPv6 address, optionally /len or /mask"))?;
        let mask = match m {
            None => u128::MAX,
            Some(m) if m.contains(':') => parse_ipv6(m).ok_or_else(|| self.bad_mask(k, m, MASK))?,
            Some(m) => self.prefix_len_mask(k, m, 128, MASK)?,
        };
        Ok((addr, mask))
    }

    /// The mask a prefix length `m` (after the `/`) gives a `bits`-wide address; `what`
    /// says what the mask may be, for the error when `m` is not a number.
    fn prefix_len_mask(
        &self,
        k: &Key,
        m: &str,
        bits: u32,
        what: &str,
    ) -> Result<u128, SyntaxError> {
        match parse_u64(m) {
            Some(len) if len <= u64::from(bits) => Ok(prefix_mask(bits, len as u32)),
            Some(_) => Err(self.err(k.at, |c| {
                format!("bad prefix length /{m} for {} at column {c}", k.name)
            })),
            None => Err(self.bad_mask(k, m, what)),
        }
    }

    pub(super) fn mac(&self, k: &Key, v: &str) -> Result<(u128, u128), SyntaxError> {
        const WHAT: &str = "a MAC address xx:xx:xx:xx:xx:xx, optionally /mask";
        let (a, m) = split_mask(v);
        let addr = parse_mac(a).ok_or_else(|| self.bad_value(k, a, WHAT))?;
        let mask = match m {
            None => [0xff; 6],
            Some(m) => parse_mac(m).ok_or_else(|| self.bad_mask(k, m, WHAT))?,
        };
        Ok((mac_u128(addr), mac_u128(mask)))
    }
}
