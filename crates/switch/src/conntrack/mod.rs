//! The switch's connection tracker, as the operator sees it: the `[conntrack]` config
//! section, the control operations' requests and answers (`flowpath conntrack dump |
//! flush | stats | limits`), the per-zone and per-state census, and the Prometheus
//! families. The tracker itself is `flowpath_conntrack::Tracker`, one per switch, shared
//! by every worker's datapath.

pub mod census;
pub mod config;
pub mod metrics;
pub mod ops;

pub use census::{state_label, Census, CensusCell, CENSUS_EVERY, MAX_ZONE_LABELS};
pub use config::{CtSection, TimeoutSection};
pub use metrics::CtMetrics;
pub use ops::{
    ConnJson, Limits, LimitsAnswer, LimitsRequest, StatsAnswer, TupleJson, ZoneLimit,
    ZoneLimitCount, ZoneRequest,
};
