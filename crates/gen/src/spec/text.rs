//! The text forms of the spec's parts (the command line's syntax): `Display` and
//! `FromStr` for protocols, encapsulations, frame sizes, address and port ranges, and
//! popularity.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use super::{
    from_u128, to_u128, AddrRange, Encap, IpVersion, Popularity, PortRange, Proto, Sizes,
    MAX_FRAME_SIZE, MIN_FRAME_SIZE, RFC2544_SIZES,
};

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Proto::Udp => "udp",
            Proto::Tcp => "tcp",
            Proto::Icmp => "icmp",
        })
    }
}

impl FromStr for Proto {
    type Err = String;
    /// `udp`, `tcp` or `icmp`.
    fn from_str(s: &str) -> Result<Proto, String> {
        match s.to_ascii_lowercase().as_str() {
            "udp" => Ok(Proto::Udp),
            "tcp" => Ok(Proto::Tcp),
            "icmp" => Ok(Proto::Icmp),
            _ => Err(format!("'{s}' is not udp, tcp or icmp")),
        }
    }
}

fn v(x: IpVersion) -> char {
    match x {
        IpVersion::V4 => '4',
        IpVersion::V6 => '6',
    }
}

impl fmt::Display for Encap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Encap::Ipv4 => f.write_str("ipv4"),
            Encap::Ipv6 => f.write_str("ipv6"),
            Encap::Vxlan { outer, inner, .. } => write!(f, "vxlan{}-ipv{}", v(*outer), v(*inner)),
        }
    }
}

impl FromStr for Encap {
    type Err = String;
    /// `ipv4`, `ipv6`, or `vxlanO-ipvI`: VXLAN over IPvO carrying IPvI (`vxlan` alone is
    /// `vxlan4-ipv4`); the VNI is 100 (set [`Encap::Vxlan::vni`] to change it).
    fn from_str(s: &str) -> Result<Encap, String> {
        let ver = |c: &str| match c {
            "4" => Some(IpVersion::V4),
            "6" => Some(IpVersion::V6),
            _ => None,
        };
        let l = s.to_ascii_lowercase();
        let e = match l.as_str() {
            "ipv4" => Some(Encap::Ipv4),
            "ipv6" => Some(Encap::Ipv6),
            "vxlan" => Some(Encap::Vxlan {
                outer: IpVersion::V4,
                inner: IpVersion::V4,
                vni: 100,
            }),
            _ => l
                .strip_prefix("vxlan")
                .and_then(|r| r.split_once("-ipv"))
                .and_then(|(o, i)| {
                    Some(Encap::Vxlan {
                        outer: ver(o)?,
                        inner: ver(i)?,
                        vni: 100,
                    })
                }),
        };
        e.ok_or_else(|| {
            format!("'{s}' is not ipv4, ipv6, vxlan4-ipv4, vxlan4-ipv6, vxlan6-ipv4 or vxlan6-ipv6")
        })
    }
}

impl fmt::Display for Sizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(",");
        match self {
            Sizes::Fixed(n) => write!(f, "{n}"),
            Sizes::Imix => f.write_str("imix"),
            Sizes::Mix(m) => write!(
                f,
                "mix:{}",
                list(&mut m.iter().map(|(s, k)| format!("{s}*{k}")))
            ),
            Sizes::Sweep(v) => write!(f, "sweep:{}", list(&mut v.iter().map(|s| s.to_string()))),
        }
    }
}

impl FromStr for Sizes {
    type Err = String;
    /// `64` (one size), `imix`, `mix:64*7,570*4,1518*1` (sizes with weights) or
    /// `sweep:64,128,256` (`sweep:rfc2544` for 64…1518). Sizes include the FCS.
    fn from_str(s: &str) -> Result<Sizes, String> {
        let size = |t: &str| -> Result<usize, String> {
            let n: usize = t
                .trim()
                .parse()
                .map_err(|_| format!("'{t}' is not a frame size in bytes"))?;
            if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&n) {
                return Err(format!(
                    "{n} is outside {MIN_FRAME_SIZE}..={MAX_FRAME_SIZE} bytes (sizes include \
                     the 4-byte FCS)"
                ));
            }
            Ok(n)
        };
        let l = s.trim().to_ascii_lowercase();
        if l == "imix" {
            return Ok(Sizes::Imix);
        }
        if let Some(rest) = l.strip_prefix("sweep:") {
            if rest == "rfc2544" {
                return Ok(Sizes::Sweep(RFC2544_SIZES.to_vec()));
            }
            return rest
                .split(',')
                .map(size)
                .collect::<Result<_, _>>()
                .map(Sizes::Sweep);
        }
        if let Some(rest) = l.strip_prefix("mix:") {
            return rest
                .split(',')
                .map(|t| {
                    let (s, k) = t.split_once('*').unwrap_or((t, "1"));
                    let k: u32 = k
                        .trim()
                        .parse()
                        .ok()
                        .filter(|&k| k > 0)
                        .ok_or_else(|| format!("'{k}' is not a positive weight"))?;
                    Ok((size(s)?, k))
                })
                .collect::<Result<_, String>>()
                .map(Sizes::Mix);
        }
        if l.chars().all(|c| c.is_ascii_digit()) && !l.is_empty() {
            return size(&l).map(Sizes::Fixed);
        }
        Err(format!(
            "'{s}' is not a size (64), imix, mix:64*7,570*4,1518 or sweep:64,128,..."
        ))
    }
}

impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_range(f, self.first, self.last)
    }
}

impl FromStr for AddrRange {
    type Err = String;
    /// `10.0.0.1` (one address), `10.0.0.1-10.0.3.255`, `10.0.0.0/16` (every address of
    /// the prefix) or `10.0.0.1+1000` (1000 addresses from 10.0.0.1); IPv6 alike.
    fn from_str(s: &str) -> Result<AddrRange, String> {
        let r = if let Some((a, len)) = s.split_once('/') {
            prefix_range(parse_addr(a)?, len)?
        } else if let Some((a, n)) = s.split_once('+') {
            counted_range(parse_addr(a)?, n)?
        } else if let Some((a, b)) = s.split_once('-') {
            AddrRange {
                first: parse_addr(a)?,
                last: parse_addr(b)?,
            }
        } else {
            AddrRange::single(parse_addr(s)?)
        };
        if r.first.is_ipv4() != r.last.is_ipv4() {
            return Err(format!("'{s}' mixes IPv4 and IPv6"));
        }
        if to_u128(r.first) > to_u128(r.last) {
            return Err(format!("'{s}' ends before it starts"));
        }
        Ok(r)
    }
}

/// `first` alone when the range holds one value, else `first-last`.
fn write_range<T: fmt::Display + PartialEq>(
    f: &mut fmt::Formatter<'_>,
    first: T,
    last: T,
) -> fmt::Result {
    if first == last {
        write!(f, "{first}")
    } else {
        write!(f, "{first}-{last}")
    }
}

fn parse_addr(t: &str) -> Result<IpAddr, String> {
    t.trim()
        .parse()
        .map_err(|_| format!("'{t}' is not an IP address"))
}

/// Bits of an address of `a`'s family.
fn addr_bits(a: IpAddr) -> u32 {
    if a.is_ipv4() {
        32
    } else {
        128
    }
}

/// Every address of the prefix of `a` with length `len` (text, e.g. `16`).
fn prefix_range(a: IpAddr, len: &str) -> Result<AddrRange, String> {
    let b = addr_bits(a);
    let len: u32 = len
        .trim()
        .parse()
        .ok()
        .filter(|&l| l <= b)
        .ok_or_else(|| format!("'{len}' is not a prefix length 0..={b}"))?;
    let host = if len == 0 {
        u128::MAX >> (128 - b)
    } else {
        (1u128 << (b - len)) - 1
    };
    let net = to_u128(a) & !host;
    Ok(AddrRange {
        first: from_u128(a, net),
        last: from_u128(a, net | host),
    })
}

/// `n` (text, e.g. `1000`) addresses from `a`.
fn counted_range(a: IpAddr, n: &str) -> Result<AddrRange, String> {
    let n: u128 = n
        .trim()
        .parse()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("'{n}' is not a positive address count"))?;
    let max = u128::MAX >> (128 - addr_bits(a));
    let last = to_u128(a)
        .checked_add(n - 1)
        .filter(|&l| l <= max)
        .ok_or_else(|| format!("{n} addresses from {a} run past the last address"))?;
    Ok(AddrRange {
        first: a,
        last: from_u128(a, last),
    })
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_range(f, self.first, self.last)
    }
}

impl FromStr for PortRange {
    type Err = String;
    /// `5001` or `1024-65535`.
    fn from_str(s: &str) -> Result<PortRange, String> {
        let port = |t: &str| -> Result<u16, String> {
            t.trim()
                .parse()
                .map_err(|_| format!("'{t}' is not a port 0..=65535"))
        };
        let r = match s.split_once('-') {
            Some((a, b)) => PortRange {
                first: port(a)?,
                last: port(b)?,
            },
            None => PortRange::single(port(s)?),
        };
        if r.first > r.last {
            return Err(format!("'{s}' ends before it starts"));
        }
        Ok(r)
    }
}

impl fmt::Display for Popularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Popularity::Uniform => f.write_str("uniform"),
            Popularity::Zipf { skew } => write!(f, "zipf:{skew}"),
        }
    }
}

impl FromStr for Popularity {
    type Err = String;
    /// `uniform` or `zipf:SKEW` (e.g. `zipf:1.1`).
    fn from_str(s: &str) -> Result<Popularity, String> {
        let l = s.trim().to_ascii_lowercase();
        if l == "uniform" {
            return Ok(Popularity::Uniform);
        }
        let skew = l.strip_prefix("zipf:").unwrap_or(&l);
        match skew.parse::<f64>() {
            Ok(k) if k.is_finite() && k >= 0.0 => Ok(Popularity::Zipf { skew: k }),
            _ => Err(format!(
                "'{s}' is not uniform or a Zipf skew (a number ≥ 0, e.g. 1.1)"
            )),
        }
    }
}
