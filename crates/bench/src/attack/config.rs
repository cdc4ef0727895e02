//! What an attack case is and how it runs: the two attacks, the defence settings a case
//! compares, the run settings, and the ports both sides use.

use flowpath_datapath::{DatapathConfig, MissLimits};
use flowpath_pipeline::{Backend, RuleSpec};
use serde::Serialize;

/// Port numbers of the established traffic and the attacker.
pub const PORT_ESTABLISHED: u32 = 1;
pub const PORT_ATTACK: u32 = 100;
/// Receive ring of each paced port (packets).
pub(crate) const RING: usize = 4096;

/// Which attack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attack {
    /// Port B sends 100 % new flows (every packet a never-seen source address) through
    /// the bench's miss pipeline, as fast as the worker takes them.
    Flood,
    /// Port B sends tuple-space-explosion packets against the ACL.
    Tse,
}

impl Attack {
    pub fn name(self) -> &'static str {
        match self {
            Attack::Flood => "flood",
            Attack::Tse => "tse",
        }
    }

    pub fn parse(s: &str) -> Option<Attack> {
        match s {
            "flood" => Some(Attack::Flood),
            "tse" => Some(Attack::Tse),
            _ => None,
        }
    }
}

/// The defence settings a case compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Defence {
    /// Nothing: no miss budget, no mask rate, no mask limit, subtables never re-ranked
    /// (every defence off); the tiers' reviews (SMC, EMC, flow limit) as always.
    None,
    /// Only subtables ranked by hits (established masks are searched first).
    Ranking,
    /// The defaults: ranking, the per-port miss budget, the new-mask rate, the mask limit.
    Default,
}

impl Defence {
    pub fn name(self) -> &'static str {
        match self {
            Defence::None => "none",
            Defence::Ranking => "ranking",
            Defence::Default => "default",
        }
    }

    /// `base` with this defence.
    pub fn config(self, base: &DatapathConfig) -> DatapathConfig {
        // Only the defences go: the tiers' own reviews (the SMC and EMC switched by what
        // pays, the flow limit) run in every row, so all three start from the same A
        // without an attack. Freezing them with the ranking (as an infinite review
        // interval did) left the SMC off for A's 10,000 flows: a third of A's rate
        // before any attack, which made "retained" compare different baselines.
        let off = DatapathConfig {
            miss: MissLimits::off(),
            max_masks: u16::MAX as usize,
            rank_subtables: false,
            ..base.clone()
        };
        match self {
            Defence::None => off,
            Defence::Ranking => DatapathConfig {
                rank_subtables: base.rank_subtables,
                ..off
            },
            Defence::Default => base.clone(),
        }
    }
}

/// How to run an attack case.
#[derive(Clone, Debug)]
pub struct AttackConfig {
    pub runs: usize,
    /// Length of each measured window (ms).
    pub window_ms: u64,
    /// Established flows on port A (1,000 for flood; 10,000 for tse, more than the
    /// exact-match cache holds, so they are megaflow lookups a TSE attack can slow down).
    pub established_flows: Option<usize>,
    /// A's offered rate as a share of what A alone reaches unpaced.
    pub established_load: f64,
    /// The attacker's rate in packets per second; `None`: as fast as the worker takes.
    pub attack_pps: Option<f64>,
    /// The ACL (tse, and the rules both ports' traffic meets); `None`: the built-in
    /// 1,000-rule ClassBench acl2 set.
    pub rules: Option<Vec<RuleSpec>>,
    pub backend: Backend,
    /// The datapath configuration the `default` defence uses.
    pub datapath: DatapathConfig,
    pub frame_size: usize,
    pub seed: u64,
}

impl Default for AttackConfig {
    fn default() -> Self {
        AttackConfig {
            runs: 5,
            window_ms: 200,
            established_flows: None,
            established_load: 0.5,
            attack_pps: None,
            rules: None,
            backend: Backend::TupleSpace,
            datapath: DatapathConfig::default(),
            frame_size: 64,
            seed: 1,
        }
    }
}
