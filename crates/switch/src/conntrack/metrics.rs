//! The tracker's Prometheus families (`flowpath_conntrack_*`): connections per zone and
//! per state from the latest [`Census`], and the tracker's counters, read at scrape time
//! from [`Tracker::stats`] (one short lock, no walk of the table).

use super::census::{Census, CensusCell};
use crate::metrics::family;
use flowpath_conntrack::{CtStats, InvalidReason, Tracker};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::Arc;

/// What one scrape shows of the tracker.
#[derive(Debug)]
pub struct CtMetrics {
    pub stats: CtStats,
    pub census: Arc<Census>,
}

impl CtMetrics {
    pub fn read(t: &Tracker, census: &CensusCell) -> CtMetrics {
        CtMetrics {
            stats: t.stats(),
            census: census.get(),
        }
    }

    /// Register under `flowpath_conntrack_` in `registry` (the `flowpath` one).
    pub fn register(self, registry: &mut Registry) {
        registry
            .sub_registry_with_prefix("conntrack")
            .register_collector(Box::new(self));
    }
}

type StatGet = fn(&CtStats) -> u64;

static COUNTERS: [(&str, &str, StatGet); 4] = [
    ("created", "Connections committed.", |s| s.created),
    (
        "expired",
        "Connections removed when idle past their timeout.",
        |s| s.expired,
    ),
    (
        "early_drops",
        "Connections removed early to make room for new ones.",
        |s| s.early_drops,
    ),
    (
        "limit_hits",
        "New connections refused by the table's or a zone's limit.",
        |s| s.limit_hits,
    ),
];

impl Collector for CtMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let zones = self.census.zone_labels();
        family(
            &mut enc,
            "connections",
            "Connections per zone (the 64 fullest zones; the rest as zone=\"other\"), \
             counted every 5 s.",
            MetricType::Gauge,
            zones.iter().map(|(z, n)| ([("zone", z.as_str())], *n)),
        )?;
        family(
            &mut enc,
            "connections_by_state",
            "Connections per state (tcp_<state>, udp, icmp, other), counted every 5 s.",
            MetricType::Gauge,
            self.census
                .states
                .iter()
                .map(|(s, n)| ([("state", *s)], *n)),
        )?;
        for (name, help, get) in &COUNTERS {
            let no_labels: [(&str, &str); 0] = [];
            let sample = std::iter::once((no_labels, get(&self.stats)));
            family(&mut enc, name, help, MetricType::Counter, sample)?;
        }
        family(
            &mut enc,
            "invalid",
            "Packets the tracker marked +inv, by reason.",
            MetricType::Counter,
            InvalidReason::ALL
                .iter()
                .zip(self.stats.invalid.iter())
                .map(|(r, n)| ([("reason", r.name())], *n)),
        )
    }
}
