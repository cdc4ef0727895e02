//! ClassBench filter files (Taylor & Turner, INFOCOM 2005): one IPv4 5-tuple rule a line,
//! highest priority first, loaded as pipeline rules with port ranges kept as ranges.
//!
//! A line is `@SRC/LEN <TAB> DST/LEN <TAB> SLO : SHI <TAB> DLO : DHI <TAB> PROTO/MASK
//! [<TAB> FLAGS/MASK]`; the flags column is ignored (as DPDK's `dpdk-test-acl` does). Each
//! rule becomes `ip,nw_src=SRC/LEN,nw_dst=DST/LEN,nw_proto=…,tp_src=SLO-SHI,tp_dst=DLO-DHI`
//! in table 0 with priority `n - line index` (so the first line wins) and no actions.

use crate::error::FileError;
use flowpath_packet::key::ethertype;
use flowpath_packet::Field;
use flowpath_pipeline::{Match, PortRange, RuleSpec};

/// Does `text` look like a ClassBench filter file (its first rule line starts with `@`)?
pub fn is_classbench(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with('@'))
}

/// Parse a ClassBench filter file into rules for `table`. Blank lines and `#` comments are
/// skipped. The error names the line and the 1-based column of the bad token.
pub fn parse_classbench(text: &str, table: u8) -> Result<Vec<RuleSpec>, FileError> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    if lines.len() > u16::MAX as usize {
        return Err(FileError {
            line: lines[u16::MAX as usize].0 + 1,
            column: 1,
            message: format!(
                "{} rules: a ClassBench table holds at most {} (one priority each)",
                lines.len(),
                u16::MAX
            ),
        });
    }
    let n = lines.len();
    lines
        .iter()
        .enumerate()
        .map(|(i, &(line_no, line))| {
            let m = parse_line(line).map_err(|(column, message)| FileError {
                line: line_no + 1,
                column,
                // The reason quotes the token: escaped, and cut if long.
                message: format!(
                    "{} at column {column}",
                    flowpath_base::text::shown_within(&message, 160)
                ),
            })?;
            Ok(RuleSpec::new(table, (n - i) as u16, m))
        })
        .collect()
}

/// (1-based column, reason).
type LineError = (usize, String);

/// The tokens of a line with their byte offsets: fields split on tabs, and each port range
/// `LO : HI` as one field.
fn fields(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    for part in line.split('\t') {
        let trimmed = part.trim();
        if !trimmed.is_empty() {
            let lead = part.len() - part.trim_start().len();
            out.push((at + lead, trimmed));
        }
        at += part.len() + 1;
    }
    out
}

fn parse_line(line: &str) -> Result<Match, LineError> {
    let col = |at: usize| line[..at].chars().count() + 1;
    let f = fields(line);
    const NAMES: [&str; 5] = [
        "source prefix",
        "destination prefix",
        "source port range",
        "destination port range",
        "protocol/mask",
    ];
    if f.len() < 5 {
        let end = line.trim_end().chars().count() + 1;
        return Err((
            end,
            format!(
                "missing {} (a ClassBench line has 5 tab-separated columns, this one {})",
                NAMES[f.len()],
                f.len()
            ),
        ));
    }
    let (at, src) = f[0];
    let Some(src) = src.strip_prefix('@') else {
        return Err((col(at), "a rule line starts with '@'".into()));
    };
    let (sv, sl) = prefix(src).map_err(|e| (col(at + 1), format!("source prefix: {e}")))?;
    let (dv, dl) = prefix(f[1].1).map_err(|e| (col(f[1].0), format!("destination prefix: {e}")))?;
    let sp = range(f[2].1).map_err(|e| (col(f[2].0), format!("source port range: {e}")))?;
    let dp = range(f[3].1).map_err(|e| (col(f[3].0), format!("destination port range: {e}")))?;
    let (pv, pm) = proto(f[4].1).map_err(|e| (col(f[4].0), format!("protocol: {e}")))?;
    Ok(Match::any()
        .exact(Field::EthType, ethertype::IPV4 as u128)
        .prefix(Field::Ipv4Src, sv as u128, sl)
        .prefix(Field::Ipv4Dst, dv as u128, dl)
        .with(Field::NwProto, pv as u128, pm as u128)
        .port_range(Field::TpSrc, sp)
        .port_range(Field::TpDst, dp))
}

/// `A.B.C.D/LEN`.
fn prefix(s: &str) -> Result<(u32, u32), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("'{s}' is not ADDRESS/LENGTH"))?;
    let addr: std::net::Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("'{addr}' is not an IPv4 address"))?;
    let len: u32 = len
        .parse()
        .ok()
        .filter(|&l| l <= 32)
        .ok_or_else(|| format!("prefix length '{len}' is not 0..=32"))?;
    Ok((u32::from(addr), len))
}

/// `LO : HI`, inclusive, `LO <= HI`.
fn range(s: &str) -> Result<PortRange, String> {
    let (lo, hi) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}' is not LOW : HIGH"))?;
    let port = |p: &str| {
        p.trim()
            .parse::<u16>()
            .map_err(|_| format!("'{}' is not a port 0..=65535", p.trim()))
    };
    let (lo, hi) = (port(lo)?, port(hi)?);
    if lo > hi {
        return Err(format!("low end {lo} is above high end {hi}"));
    }
    Ok(PortRange { lo, hi })
}

/// `0xVV/0xMM` (hex).
fn proto(s: &str) -> Result<(u8, u8), String> {
    let (v, m) = s
        .split_once('/')
        .ok_or_else(|| format!("'{s}' is not VALUE/MASK"))?;
    let hex = |x: &str| {
        let digits = x.strip_prefix("0x").or_else(|| x.strip_prefix("0X"))?;
        u8::from_str_radix(digits, 16).ok()
    };
    let v = hex(v).ok_or_else(|| format!("'{v}' is not a hex byte like 0x06"))?;
    let m = hex(m).ok_or_else(|| format!("'{m}' is not a hex byte like 0xFF"))?;
    Ok((v & m, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str =
        "@10.0.0.0/8\t192.168.1.0/24\t0 : 65535\t1024 : 65535\t0x06/0xFF\t0x0000/0x0000\n\
                       @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x00/0x00\t0x0000/0x0000\n";

    #[test]
    fn loads_prefixes_ranges_and_priorities() {
        let rules = parse_classbench(TWO, 0).unwrap();
        assert_eq!(rules.len(), 2);
        assert!(rules[0].priority > rules[1].priority);
        let m = &rules[0].matches;
        assert_eq!(m.mask.get(Field::Ipv4Src), 0xff00_0000);
        assert_eq!(m.value.get(Field::Ipv4Dst), 0xc0a8_0100);
        assert_eq!(m.value.get(Field::NwProto), 6);
        // 1024-65535 is not one prefix block: it stays a range.
        assert_eq!(
            m.ports[1],
            PortRange {
                lo: 1024,
                hi: 65535
            }
        );
        assert_eq!(m.mask.get(Field::TpSrc), 0);
        // 80:80 is a prefix block (/16): a mask, not a range.
        let m = &rules[1].matches;
        assert_eq!(m.mask.get(Field::TpDst), 0xffff);
        assert!(!m.has_ranges());
        assert_eq!(m.mask.get(Field::NwProto), 0);
    }

    #[test]
    fn bad_lines_name_line_and_column() {
        let text = "@10.0.0.0/8\t1.2.3.0/24\t0 : 65535\t0 : 65535\t0x06/0xFF\n\
                    @10.0.0.0/8\t1.2.3.0/24\t9 : 5\t0 : 65535\t0x06/0xFF\n";
        let e = parse_classbench(text, 0).unwrap_err();
        assert_eq!((e.line, e.column), (2, 24), "{e}");
        assert!(e.message.contains("low end 9 is above high end 5"), "{e}");
        let e =
            parse_classbench("@10.0.0.0/33\t1.2.3.0/24\t0 : 1\t0 : 1\t0x06/0xFF\n", 0).unwrap_err();
        assert_eq!((e.line, e.column), (1, 2), "{e}");
        let e = parse_classbench("@10.0.0.0/8\t1.2.3.0/24\t0 : 1\n", 0).unwrap_err();
        assert!(e.message.contains("missing destination port range"), "{e}");
        let e =
            parse_classbench("10.0.0.0/8\t1.2.3.0/24\t0 : 1\t0 : 1\t0x06/0xFF\n", 0).unwrap_err();
        assert!(e.message.contains("starts with '@'"), "{e}");
    }

    #[test]
    fn recognises_the_format() {
        assert!(is_classbench(TWO));
        assert!(!is_classbench("priority=5,ip,actions=drop\n"));
    }
}
