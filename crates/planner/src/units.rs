//! Reading the operator's units: packet and bit rates, frame sizes, percentages.
//!
//! Errors are one line without the option name; the command prefixes it
//! (`--rate: ...`).

use flowpath_gen::FrameMix;
pub use flowpath_report::pct;

/// Ethernet preamble (7), start-of-frame delimiter (1) and the minimum inter-frame gap
/// (12): bytes a frame occupies on the wire besides itself.
pub const WIRE_OVERHEAD_BYTES: f64 = 20.0;

/// Mean frame size of the simple IMIX the bench sends: 64, 570 and 1518-byte frames
/// 7:4:1, `(7·64 + 4·570 + 1518) / 12 = 353.83` bytes. The talk quotes "358 B average":
/// that is the same 7:4:1 mix defined on IP packet sizes 40/576/1500 B, plus 18 B of
/// Ethernet header and FCS (58/594/1518-byte frames, `4300 / 12 = 358.3`).
pub fn imix_mean_bytes() -> f64 {
    let p = flowpath_gen::IMIX_PATTERN;
    p.iter().sum::<usize>() as f64 / p.len() as f64
}

/// Mean frame size (FCS included) of a mix.
pub fn mean_frame_bytes(mix: FrameMix) -> f64 {
    match mix {
        FrameMix::Fixed(n) => n as f64,
        FrameMix::Imix => imix_mean_bytes(),
    }
}

/// `64`, `imix` or a size in bytes (64..=9018, FCS included).
pub fn parse_size(s: &str) -> Result<FrameMix, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!(
            "'{s}' is negative: a frame size is 64..=9018 bytes or 'imix'"
        ));
    }
    FrameMix::parse(t.trim_end_matches(['B', 'b']).trim())
}

/// A rate as given: packets or bits per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    Pps(f64),
    Bps(f64),
}

impl Rate {
    /// Packets per second for frames of `frame_bytes` (FCS included): a bit rate counts
    /// the preamble, start delimiter and inter-frame gap too (`(frame + 20) · 8` bits a
    /// frame), so 10 Gbps of 64-byte frames is 14.88 Mpps.
    pub fn pps(self, frame_bytes: f64) -> f64 {
        match self {
            Rate::Pps(p) => p,
            Rate::Bps(b) => b / ((frame_bytes + WIRE_OVERHEAD_BYTES) * 8.0),
        }
    }

    pub fn describe(self) -> String {
        match self {
            Rate::Pps(p) => fmt_pps(p),
            Rate::Bps(b) => fmt_bps(b),
        }
    }
}

/// `12.5 Mpps`, `560 kpps`, …
pub fn fmt_pps(p: f64) -> String {
    scaled(p, "pps")
}

/// `25 Gbps`, …
pub fn fmt_bps(b: f64) -> String {
    scaled(b, "bps")
}

fn scaled(x: f64, unit: &str) -> String {
    let (v, p) = if x >= 1e12 {
        (x / 1e12, "T")
    } else if x >= 1e9 {
        (x / 1e9, "G")
    } else if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let s = if v >= 100.0 {
        format!("{v:.1}")
    } else if v >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {p}{unit}")
}

/// `10Mpps`, `560kpps`, `1.5 Mpps`, `14880952pps`, `25Gbps`, `100Mbps`, `10G` (a bare
/// k/M/G/T multiplier means bits per second, as link speeds are written). Case-insensitive
/// except that `m` and `M` both mean mega. A unit is required.
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let split = t
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')
        })
        .unwrap_or(t.len());
    // `1e6pps`: an exponent is part of the number, but `e` cannot start a unit anyway.
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a rate (e.g. 10Mpps, 560kpps, 25Gbps, 10G)"))?;
    if !v.is_finite() {
        return Err(format!("'{s}' is not a finite rate"));
    }
    if v < 0.0 {
        return Err(format!("'{s}' is negative: a rate must be positive"));
    }
    let lower = unit.to_ascii_lowercase();
    let (mult, rest) = match lower.chars().next() {
        Some('k') => (1e3, &lower[1..]),
        Some('m') => (1e6, &lower[1..]),
        Some('g') => (1e9, &lower[1..]),
        Some('t') => (1e12, &lower[1..]),
        _ => (1.0, lower.as_str()),
    };
    if unit.is_empty() {
        return Err(format!(
            "'{s}' has no unit (e.g. 10Mpps, 560kpps, 25Gbps, 10G)"
        ));
    }
    match rest {
        "pps" | "p/s" => Ok(Rate::Pps(v * mult)),
        "bps" | "b/s" | "bit/s" => Ok(Rate::Bps(v * mult)),
        "" if mult > 1.0 => Ok(Rate::Bps(v * mult)),
        _ => Err(format!(
            "'{s}': unknown unit '{unit}' (use pps, kpps, Mpps, Gpps, or bps, Mbps, Gbps, G)"
        )),
    }
}

/// A packet rate, for the flags that take one (`bench --attack-rate`, `lab --gen-rate`):
/// `10000`, `10k`, `2.2M` (a bare k/M/G multiplier counts packets here, not bits) or the
/// planner's packet units, `560kpps`, `1.5 Mpps`. A bit rate (`25Gbps`) is refused: those
/// flags do not know the frame size to turn it into packets. Must be above 0.
pub fn parse_packet_rate(s: &str) -> Result<f64, String> {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let bare = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => Some((&t[..i], 1e3)),
        Some((i, 'm' | 'M')) => Some((&t[..i], 1e6)),
        Some((i, 'g' | 'G')) => Some((&t[..i], 1e9)),
        Some((_, c)) if c.is_ascii_digit() || c == '.' => Some((t.as_str(), 1.0)),
        _ => None,
    };
    let v = match bare {
        Some((num, scale)) => num.parse::<f64>().map(|v| v * scale).map_err(|_| {
            format!("'{s}' is not a packet rate (e.g. 10000, 10k, 1M, 560kpps, 1.5Mpps)")
        })?,
        None => match parse_rate(&t)? {
            Rate::Pps(p) => p,
            Rate::Bps(_) => {
                return Err(format!(
                    "'{s}' is a bit rate; give packets per second (e.g. 10k, 1M, 1.5Mpps)"
                ))
            }
        },
    };
    if !(v > 0.0 && v.is_finite()) {
        return Err(format!("'{s}' must be a finite rate above 0"));
    }
    Ok(v)
}

/// A share: `5%`, `0.05` or `5 %`; must be within 0..=100 %.
pub fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a share (e.g. 5% or 0.05)"))?;
    if !v.is_finite() {
        return Err(format!("'{s}' is not a finite share"));
    }
    let v = v / scale;
    if v < 0.0 {
        return Err(format!("'{s}' is negative: a share is 0..100 %"));
    }
    if v > 1.0 {
        return Err(format!("'{s}' is over 100 %"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imix_mean_is_353_8_and_the_talks_358_is_the_ip_defined_mix() {
        assert!((imix_mean_bytes() - 4246.0 / 12.0).abs() < 1e-9);
        assert!((imix_mean_bytes() - 353.83).abs() < 0.01);
        let ip_defined: f64 = (7.0 * (40.0 + 18.0) + 4.0 * (576.0 + 18.0) + (1500.0 + 18.0)) / 12.0;
        assert_eq!(ip_defined.round(), 358.0);
    }

    #[test]
    fn packet_rates_take_bare_multipliers_and_pps_units_and_refuse_bits() {
        for (text, pps) in [
            ("10000", 1e4),
            ("10k", 1e4),
            ("2.2M", 2.2e6),
            ("1G", 1e9),
            ("560kpps", 5.6e5),
            ("1.5 Mpps", 1.5e6),
            ("14880952pps", 14_880_952.0),
            (" 3m ", 3e6),
        ] {
            let got = parse_packet_rate(text).unwrap();
            assert!((got - pps).abs() < 1e-6 * pps, "{text}: {got}");
        }
        for (text, says) in [
            ("25Gbps", "bit rate"),
            ("0", "above 0"),
            ("-5k", "above 0"),
            ("0pps", "above 0"),
            ("fast", "not a"),
            ("k", "not a packet rate"),
            ("1e999", "finite"),
            ("10 furlongs", "unknown unit"),
        ] {
            let e = parse_packet_rate(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn scaled_formatting() {
        assert_eq!(fmt_pps(14_880_952.4), "14.88 Mpps");
        assert_eq!(fmt_pps(378_457.0), "378.5 kpps");
        assert_eq!(fmt_pps(8_358_982.0), "8.359 Mpps");
        assert_eq!(fmt_pps(560_000.0), "560 kpps");
        assert_eq!(fmt_bps(25e9), "25 Gbps");
        assert_eq!(pct(0.05), "5 %");
        assert_eq!(pct(0.1234), "12.3 %");
        assert_eq!(pct(0.005), "0.50 %");
    }
}
