//! What `flowpath gen` prints: the summary of packets written (or a capture's contents),
//! the result of a transmit, the one-line heads that say what was generated, and JSON.

use flowpath_gen::pcap::Summary;
use flowpath_gen::TrafficSpec;
use flowpath_ports::xdpgen::{FlowOrder, TxReport};
pub use flowpath_report::{grouped, pct};

/// How the packets of a report came about.
#[derive(Clone, Copy, PartialEq)]
pub enum Verb {
    Wrote,
    WouldWrite,
    Holds,
}

impl Verb {
    /// Packets written to `out`, or only counted without it.
    pub fn of(out: Option<&str>) -> Verb {
        if out.is_some() {
            Verb::Wrote
        } else {
            Verb::WouldWrite
        }
    }
}

/// A JSON value, pretty, with a newline.
pub fn json(v: &serde_json::Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(v).unwrap())
}

/// What a spec generates: flows, protocol, encapsulation, popularity, sizes, churn, seed.
pub fn spec_head(spec: &TrafficSpec, slots: usize) -> String {
    format!(
        "{} flows {}, {}, {}, sizes {}, {} new flows (long run), seed {} ({} slots)",
        spec.flows.count,
        spec.flows.proto,
        spec.encap,
        spec.popularity,
        spec.sizes,
        pct(spec.churn.new_flow_rate()),
        spec.seed,
        slots
    )
}

/// What a capture holds: its format, packets, and those captured truncated.
pub fn capture_head(path: &str, format: &str, count: usize, truncated: u64) -> String {
    let mut head = format!("{path}: {format}, {count} packets");
    if truncated > 0 {
        head += &format!(" ({truncated} captured truncated: replayed as captured)");
    }
    head
}

/// What `--tx` sends from a spec: flows varied in the kernel, new-flow `share`.
pub fn tx_spec_head(spec: &TrafficSpec, share: f64, order: FlowOrder, templates: usize) -> String {
    format!(
        "{} flows {} {}, {}, sizes {}, {} new flows; {} template frames",
        spec.flows.count,
        spec.flows.proto,
        match order {
            FlowOrder::RoundRobin => "round-robin",
            FlowOrder::Random => "in random order",
        },
        spec.encap,
        spec.sizes,
        pct(share),
        templates
    )
}

/// What `--tx` sends from a capture of `frames` frames, of which the first `used`.
pub fn tx_capture_head(path: &str, frames: usize, used: usize) -> String {
    format!(
        "{path}: {frames} frames{}, sent as they are",
        if frames > used {
            format!(" (the first {used} used)")
        } else {
            String::new()
        }
    )
}

/// The result of a transmit on `iface`: packets, seconds, rate (and the pace asked for).
pub fn tx_text(
    head: &str,
    iface: &str,
    fast_calls: bool,
    not_live: Option<&str>,
    r: &TxReport,
    rate: Option<u64>,
) -> String {
    let mut t = format!("{head}\n");
    if let Some(why) = not_live {
        t += &format!(
            "note: sent through a packet socket (slower than XDP live frames, the same \
             frames and flows): {why}\n"
        );
    }
    if !fast_calls {
        t += &format!(
            "note: {iface} already has an XDP program, so every kernel call costs tens of ms: \
             bursts are long and --rate is coarse\n"
        );
    }
    t += &format!(
        "sent {} packets on {iface} in {:.2} s: {:.3} Mpps{}\n",
        grouped(r.packets),
        r.seconds,
        r.mpps,
        rate.map(|p| format!(" (paced to {})", grouped(p)))
            .unwrap_or_default()
    );
    t
}

/// Packets and bytes (written to `out`, would be, or held by a capture), flows, and the
/// frame sizes.
pub fn summary(head: &str, verb: Verb, out: Option<&str>, s: &Summary) -> String {
    let mut t = format!("{head}\n");
    let p = s.packets.max(1) as f64;
    t += &format!(
        "{} {} packets, {} bytes (without FCS){}\n",
        match verb {
            Verb::Wrote => "wrote",
            Verb::WouldWrite => "would write",
            Verb::Holds => "holds",
        },
        grouped(s.packets),
        grouped(s.bytes),
        out.map(|o| format!(" to {o}")).unwrap_or_default()
    );
    t += &format!(
        "distinct flows {}   new flows {} ({} of packets)",
        grouped(s.distinct_flows),
        grouped(s.new_flows),
        pct(s.new_flows as f64 / p)
    );
    if verb == Verb::Holds {
        t = t.replacen("   new flows 0 (0.00% of packets)", "", 1);
    }
    if s.unparsed > 0 {
        t += &format!("   unparsed {}", grouped(s.unparsed));
    }
    t + "\n" + &size_table(s, p)
}

/// The frame sizes of `s` (at most 12: the most frequent ones), with their share of `p`
/// packets.
fn size_table(s: &Summary, p: f64) -> String {
    let mut t = String::from("frame sizes (FCS included):\n");
    const SHOWN: usize = 12;
    let mut sizes: Vec<(usize, u64)> = s.sizes.iter().map(|(&k, &v)| (k, v)).collect();
    if sizes.len() > SHOWN {
        // Many sizes (a capture): the most frequent ones, in size order.
        sizes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        sizes.truncate(SHOWN);
        sizes.sort();
    }
    for (size, n) in &sizes {
        t += &format!(
            "  {size:>5} B  {:>12}  {:>7}\n",
            grouped(*n),
            pct(*n as f64 / p)
        );
    }
    if s.sizes.len() > SHOWN {
        t += &format!("  ({} more sizes)\n", s.sizes.len() - SHOWN);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_groups_digits() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
