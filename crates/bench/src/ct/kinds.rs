//! The names of the connection-tracking cases (what `--case` takes), apart from how they
//! run, and the figures their results carry, so the bench's case list and results can name
//! them.

use serde::{Deserialize, Serialize};

/// One connection-tracking case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtCase {
    /// Whole TCP connections (handshake, data, both FINs), every one new.
    New,
    /// 1,000,000 established UDP connections, traffic over all of them.
    Million,
    /// Source NAT of 1,024 UDP connections to one address and a port range.
    Nat,
    /// Established TCP connections on port A, alone and while port B floods new SYNs.
    SynFlood,
    /// 1,024 established UDP connections per worker, one worker and two sharing one
    /// tracker.
    Established2w,
}

impl CtCase {
    pub const ALL: [CtCase; 5] = [
        CtCase::New,
        CtCase::Million,
        CtCase::Nat,
        CtCase::SynFlood,
        CtCase::Established2w,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CtCase::New => "ct_new",
            CtCase::Million => "ct_1m",
            CtCase::Nat => "ct_nat",
            CtCase::SynFlood => "ct_synflood",
            CtCase::Established2w => "ct_established_2w",
        }
    }

    pub fn parse(s: &str) -> Option<CtCase> {
        CtCase::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// The figures only the ct cases have (`None` where a case does not measure one).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CtFigures {
    /// Connections in the tracker at the end.
    pub tracked: u64,
    /// Of the packets received in the timed runs, the share sent out of a port.
    pub delivered_share: f64,
    /// TSC cycles per packet the ports spend writing the traffic (part of the case's).
    pub generator_cycles: f64,
    /// `ct_new`: cycles per whole connection and connections per second on one core.
    pub cycles_per_connection: Option<f64>,
    pub connections_per_sec: Option<f64>,
    /// `ct_1m`: memory per tracked connection (bytes), and how it was measured.
    pub bytes_per_connection: Option<f64>,
    pub memory_source: Option<String>,
    /// A peer measured in the same process: its name and cycles per packet (`ct_nat`: the
    /// same traffic without NAT; `ct_established_2w`: one worker alone).
    pub peer: Option<String>,
    pub peer_cycles_per_packet: Option<f64>,
    /// `ct_nat`: connections whose reply traffic was addressed to the NATed tuple.
    pub nat_replies: Option<u64>,
    /// `ct_synflood`: A's delivered rate with the flood over without it (median, min,
    /// max over runs), A's rate alone (Mpps), and the flood's packets taken per second.
    pub retained: Option<f64>,
    pub retained_min: Option<f64>,
    pub retained_max: Option<f64>,
    pub established_mpps: Option<f64>,
    pub flood_pps: Option<f64>,
    /// `ct_established_2w`: aggregate Mpps of two workers and of one.
    pub mpps_two_workers: Option<f64>,
    pub mpps_one_worker: Option<f64>,
}

impl CtFigures {
    /// The figures of one case's results from several processes as one, `mid` being the
    /// median process's: `ct_synflood`'s kept share as the median over the processes, and
    /// its range over all their runs; the rest `mid`'s.
    pub fn pooled<'a>(mid: &CtFigures, parts: impl Iterator<Item = &'a CtFigures>) -> CtFigures {
        let parts: Vec<&CtFigures> = parts.collect();
        let kept: Vec<f64> = parts.iter().filter_map(|p| p.retained).collect();
        let lo = parts.iter().filter_map(|p| p.retained_min).reduce(f64::min);
        let hi = parts.iter().filter_map(|p| p.retained_max).reduce(f64::max);
        CtFigures {
            retained: flowpath_base::median(&kept).or(mid.retained),
            retained_min: lo.or(mid.retained_min),
            retained_max: hi.or(mid.retained_max),
            ..mid.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_figures_keep_the_median_process_and_widen_the_kept_range() {
        let run = |k: f64, tracked: u64| CtFigures {
            tracked,
            retained: Some(k),
            retained_min: Some(k - 0.01),
            retained_max: Some(k + 0.01),
            ..CtFigures::default()
        };
        let parts = [run(0.95, 1), run(0.80, 2), run(0.99, 3)];
        let p = CtFigures::pooled(&parts[1], parts.iter());
        assert_eq!(p.tracked, 2, "the median process's own");
        assert_eq!(p.retained, Some(0.95));
        assert_eq!(p.retained_min, Some(0.80 - 0.01));
        assert_eq!(p.retained_max, Some(0.99 + 0.01));
        let none = CtFigures::pooled(&CtFigures::default(), [CtFigures::default()].iter());
        assert_eq!(none.retained, None);
    }
}
