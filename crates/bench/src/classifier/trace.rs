//! Lookup traces for classifier benchmarks: generated the way ClassBench's trace generator
//! does (most keys inside a randomly chosen rule, the rest uniform), or read from a
//! ClassBench trace file, so flowpath and `dpdk-test-acl` can look up the same keys.

use flowpath_base::rng::SplitMix64;
use flowpath_packet::key::ethertype;
use flowpath_packet::{Field, FlowKey};
use flowpath_pipeline::{PortRange, RuleSpec};

/// The input port generated keys carry.
pub const TRACE_IN_PORT: u32 = 1;

/// An IPv4 5-tuple: what a ClassBench trace line and `dpdk-test-acl` hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FiveTuple {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

impl FiveTuple {
    pub fn of(k: &FlowKey) -> FiveTuple {
        FiveTuple {
            src: k.get(Field::Ipv4Src) as u32,
            dst: k.get(Field::Ipv4Dst) as u32,
            sport: k.get(Field::TpSrc) as u16,
            dport: k.get(Field::TpDst) as u16,
            proto: k.get(Field::NwProto) as u8,
        }
    }

    pub fn key(&self) -> FlowKey {
        let mut k = base_key();
        k.set(Field::Ipv4Src, self.src as u128);
        k.set(Field::Ipv4Dst, self.dst as u128);
        k.set(Field::TpSrc, self.sport as u128);
        k.set(Field::TpDst, self.dport as u128);
        k.set(Field::NwProto, self.proto as u128);
        k
    }
}

/// An IPv4 packet's key on [`TRACE_IN_PORT`] with TTL 64 and nothing else set.
fn base_key() -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, TRACE_IN_PORT as u128);
    k.set(Field::EthType, ethertype::IPV4 as u128);
    k.set(Field::NwTtl, 64);
    k
}

/// Protocols a uniform key (or a rule with any protocol) gets: mostly TCP and UDP.
fn random_proto(rng: &mut SplitMix64) -> u8 {
    match rng.next() % 8 {
        0..=3 => 6,
        4..=5 => 17,
        6 => 1,
        _ => rng.next() as u8,
    }
}

fn in_range(r: PortRange, rng: &mut SplitMix64) -> u16 {
    (r.lo as u64 + rng.next() % (r.hi as u64 - r.lo as u64 + 1)) as u16
}

/// A key inside `rule`: random bits where the rule has none, its values where it does,
/// ports drawn inside its ranges.
pub fn key_inside(rule: &RuleSpec, rng: &mut SplitMix64) -> FlowKey {
    let m = &rule.matches;
    let mut k = uniform_key(rng);
    if m.mask.get(Field::NwProto) == 0 {
        k.set(Field::NwProto, random_proto(rng) as u128);
    }
    for (w, (mask, value)) in k
        .words
        .iter_mut()
        .zip(m.mask.words.iter().zip(&m.value.words))
    {
        *w = (*w & !mask) | value;
    }
    for (i, f) in [Field::TpSrc, Field::TpDst].into_iter().enumerate() {
        if !m.ports[i].is_any() {
            k.set(f, in_range(m.ports[i], rng) as u128);
        }
    }
    k
}

/// A key with random addresses, ports and protocol.
pub fn uniform_key(rng: &mut SplitMix64) -> FlowKey {
    let r = rng.next();
    FiveTuple {
        src: r as u32,
        dst: (r >> 32) as u32,
        sport: rng.next() as u16,
        dport: rng.next() as u16,
        proto: random_proto(rng),
    }
    .key()
}

/// `n` keys: each inside a rule chosen uniformly with probability `inside`, else uniform.
pub fn generate(rules: &[RuleSpec], n: usize, inside: f64, seed: u64) -> Vec<FlowKey> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            if !rules.is_empty() && rng.chance(inside) {
                let r = &rules[(rng.next() % rules.len() as u64) as usize];
                key_inside(r, &mut rng)
            } else {
                uniform_key(&mut rng)
            }
        })
        .collect()
}

/// Read a ClassBench trace: one key a line, `SRC DST SPORT DPORT PROTO [...]` in decimal
/// (tabs or spaces; extra columns ignored). Errors name the line and column.
pub fn parse_trace(text: &str) -> Result<Vec<FlowKey>, String> {
    let mut out = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut cols = [0u64; 5];
        let mut it = line.split_whitespace();
        const NAMES: [&str; 5] = [
            "source address",
            "destination address",
            "source port",
            "destination port",
            "protocol",
        ];
        const MAX: [u64; 5] = [u32::MAX as u64, u32::MAX as u64, 65535, 65535, 255];
        for (i, c) in cols.iter_mut().enumerate() {
            let tok = it.next().ok_or_else(|| {
                format!(
                    "line {}: missing {} (a trace line is SRC DST SPORT DPORT PROTO)",
                    ln + 1,
                    NAMES[i]
                )
            })?;
            let col = tok.as_ptr() as usize - line.as_ptr() as usize + 1;
            *c = tok
                .parse::<u64>()
                .ok()
                .filter(|&v| v <= MAX[i])
                .ok_or_else(|| {
                    format!(
                        "line {}: {} '{tok}' at column {col} is not 0..={}",
                        ln + 1,
                        NAMES[i],
                        MAX[i]
                    )
                })?;
        }
        out.push(
            FiveTuple {
                src: cols[0] as u32,
                dst: cols[1] as u32,
                sport: cols[2] as u16,
                dport: cols[3] as u16,
                proto: cols[4] as u8,
            }
            .key(),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_flowsyntax::parse_classbench;

    #[test]
    fn keys_inside_a_rule_match_it() {
        let text = "@10.1.0.0/16\t192.168.0.0/24\t0 : 65535\t1024 : 40000\t0x06/0xFF\t0x0/0x0\n\
                    @0.0.0.0/0\t0.0.0.0/0\t5 : 9\t0 : 65535\t0x00/0x00\t0x0/0x0\n";
        let rules = parse_classbench(text, 0).unwrap();
        let mut rng = SplitMix64::new(7);
        for r in &rules {
            for _ in 0..200 {
                assert!(r.matches.matches(&key_inside(r, &mut rng)));
            }
        }
        let keys = generate(&rules, 1000, 0.9, 1);
        let inside = keys
            .iter()
            .filter(|k| rules.iter().any(|r| r.matches.matches(k)))
            .count();
        assert!(inside >= 800, "{inside}");
        assert_eq!(generate(&rules, 50, 0.9, 1), keys[..50].to_vec());
    }

    #[test]
    fn trace_lines_round_trip_and_errors_name_the_column() {
        let t = FiveTuple {
            src: 167772161,
            dst: 3232235777,
            sport: 80,
            dport: 443,
            proto: 6,
        };
        let text = format!(
            "{}\t{}\t{}\t{}\t{}\t0\n",
            t.src, t.dst, t.sport, t.dport, t.proto
        );
        assert_eq!(FiveTuple::of(&parse_trace(&text).unwrap()[0]), t);
        let e = parse_trace("1 2 3 70000 6\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("column 7"), "{e}");
        assert!(parse_trace("1 2 3\n")
            .unwrap_err()
            .contains("missing destination port"));
    }
}
