//! Parsing `ovs-appctl dpif-netdev/pmd-perf-show`: Open vSwitch's own account of its
//! poll-mode threads (TSC cycles, packets, cycles per packet, cache hits, upcalls).

/// One PMD thread's figures from `pmd-perf-show`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct PmdPerf {
    pub core_id: Option<u32>,
    pub used_tsc_cycles: u64,
    /// Share of the used cycles spent in idle iterations (%).
    pub idle_pct: f64,
    pub rx_packets: u64,
    pub kpps: f64,
    /// OVS's own cycles per packet: used TSC cycles / rx packets.
    pub cycles_per_packet: f64,
    pub emc_hits: u64,
    pub smc_hits: u64,
    pub megaflow_hits: u64,
    pub upcalls: u64,
    pub us_per_upcall: f64,
    pub lost_upcalls: u64,
    pub tx_packets: u64,
}

/// The whole report: the measurement duration and each PMD thread.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct PerfShow {
    pub duration_s: Option<f64>,
    pub pmds: Vec<PmdPerf>,
}

impl PerfShow {
    /// Cycles per packet over all PMD threads (total cycles / total packets).
    pub fn cycles_per_packet(&self) -> Option<f64> {
        let pkts: u64 = self.pmds.iter().map(|p| p.rx_packets).sum();
        let cyc: u64 = self.pmds.iter().map(|p| p.used_tsc_cycles).sum();
        (pkts > 0).then(|| cyc as f64 / pkts as f64)
    }

    /// Upcalls over all PMD threads.
    pub fn upcalls(&self) -> u64 {
        self.pmds.iter().map(|p| p.upcalls).sum()
    }

    /// Rx packets over all PMD threads.
    pub fn rx_packets(&self) -> u64 {
        self.pmds.iter().map(|p| p.rx_packets).sum()
    }
}

/// The first number in `s` (digits, '.', leading '-').
fn first_num(s: &str) -> Option<f64> {
    let start = s.find(|c: char| c.is_ascii_digit())?;
    let rest = &s[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The number in the parentheses of a line, just before `unit` (e.g. "Kpps").
fn paren_num_before(line: &str, unit: &str) -> Option<f64> {
    let (_, inner) = line.split_once('(')?;
    let idx = inner.find(unit)?;
    let before = inner[..idx].trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or(0, |i| i + 1);
    before[start..].parse().ok()
}

/// Parse the text of `pmd-perf-show`.
pub fn parse(text: &str) -> PerfShow {
    let mut out = PerfShow::default();
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("Measurement duration:") {
            out.duration_s = first_num(rest);
            continue;
        }
        if line.starts_with("pmd thread") {
            let core_id = line
                .split_once("core_id")
                .and_then(|(_, r)| first_num(r))
                .map(|v| v as u32);
            out.pmds.push(PmdPerf {
                core_id,
                ..PmdPerf::default()
            });
            continue;
        }
        let Some(p) = out.pmds.last_mut() else {
            continue;
        };
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim_start_matches('-').trim();
        let n = first_num(value).unwrap_or(0.0) as u64;
        match key {
            "Used TSC cycles" => p.used_tsc_cycles = n,
            "idle iterations" => p.idle_pct = paren_num_before(value, "%").unwrap_or(0.0),
            "Rx packets" => {
                p.rx_packets = n;
                p.kpps = paren_num_before(value, "Kpps").unwrap_or(0.0);
                p.cycles_per_packet = paren_num_before(value, "cycles/pkt").unwrap_or(0.0);
            }
            "EMC hits" => p.emc_hits = n,
            "SMC hits" => p.smc_hits = n,
            "Megaflow hits" => p.megaflow_hits = n,
            "Upcalls" => {
                p.upcalls = n;
                p.us_per_upcall = paren_num_before(value, "us/upcall").unwrap_or(0.0);
            }
            "Lost upcalls" => p.lost_upcalls = n,
            "Tx packets" => p.tx_packets = n,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_captured_hit_sample() {
        let text = include_str!("../tests/data/pmd-perf-show-hit.txt");
        let s = parse(text);
        assert_eq!(s.duration_s, Some(5.755));
        assert_eq!(s.pmds.len(), 1);
        let p = &s.pmds[0];
        assert_eq!(p.core_id, Some(1));
        assert_eq!(p.used_tsc_cycles, 14_073_138_716);
        assert_eq!(p.idle_pct, 21.5);
        assert_eq!(p.rx_packets, 906_880);
        assert_eq!(p.kpps, 158.0);
        assert_eq!(p.cycles_per_packet, 12189.0);
        assert_eq!(p.emc_hits, 903_158);
        assert_eq!(p.megaflow_hits, 3721);
        assert_eq!(p.upcalls, 0);
        assert_eq!(p.tx_packets, 906_879);
        let cpp = s.cycles_per_packet().unwrap();
        assert!((cpp - 14_073_138_716.0 / 906_880.0).abs() < 1e-6);
    }

    #[test]
    fn parses_a_captured_miss_sample() {
        let text = include_str!("../tests/data/pmd-perf-show-miss.txt");
        let s = parse(text);
        assert_eq!(s.pmds.len(), 1);
        let p = &s.pmds[0];
        assert_eq!(p.rx_packets, 618_887);
        assert_eq!(p.emc_hits, 0);
        assert_eq!(p.megaflow_hits, 9);
        assert_eq!(p.upcalls, 118_668);
        assert_eq!(p.lost_upcalls, 500_178);
        assert_eq!(p.cycles_per_packet, 14527.0);
        assert_eq!(s.upcalls(), 118_668);
    }

    #[test]
    fn two_threads_sum_and_an_idle_thread_gives_no_ratio() {
        let text = "Time: 1\nMeasurement duration: 1.000 s\n\n\
pmd thread numa_id 0 core_id 1:\n  - Used TSC cycles:   1000  (99 % of total cycles)\n  Rx packets:   10  (1 Kpps, 100 cycles/pkt)\n\n\
pmd thread numa_id 0 core_id 2:\n  - Used TSC cycles:   3000  (99 % of total cycles)\n  Rx packets:   10  (1 Kpps, 300 cycles/pkt)\n";
        let s = parse(text);
        assert_eq!(s.pmds.len(), 2);
        assert_eq!(s.pmds[1].core_id, Some(2));
        assert_eq!(s.cycles_per_packet(), Some(200.0));
        assert_eq!(
            parse("pmd thread numa_id 0 core_id 1:\n  Rx packets: 0\n").cycles_per_packet(),
            None
        );
        assert_eq!(parse("").pmds.len(), 0);
    }
}
