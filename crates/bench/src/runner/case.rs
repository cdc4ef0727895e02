//! The bench cases and how to run them: each case's rules, traffic and datapath
//! configuration ([`setup`]), and the settings every case shares ([`BenchConfig`]).

use crate::ct::kinds::CtCase;
use crate::workload;
use flowpath_datapath::DatapathConfig;
use flowpath_gen::InMemorySource;
use flowpath_pipeline::Backend;
use std::sync::Arc;

/// One bench case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// The floor: the same generated port and counting sink with no datapath between them,
    /// with emc_hit's traffic (1,024 flows), or with many_flows' (1,000,000 flows in a
    /// 1M-slot arena, which does not fit in the cache).
    Floor { many: bool },
    /// (a) every packet hits the exact-match cache.
    EmcHit,
    /// (b) every packet hits the megaflow cache (EMC off), with this many subtables.
    MegaflowHit(usize),
    /// (c) every packet is a new flow: slow path plus megaflow install.
    Miss,
    /// (d) established flows plus the configured share of new flows.
    Mixed,
    /// 1,000,000 established flows over four megaflow subtables (far more than the EMC
    /// holds), popularity uniform or Zipf (skew 1.1).
    ManyFlows { zipf: bool },
    /// VXLAN arriving on the underlay port for a configured tunnel port (IPv4 or IPv6
    /// underlay), decapsulated and forwarded by `in_port=<tunnel>,actions=output:2`:
    /// emc_hit's 1,024 inner flows.
    VxlanDecap { v6: bool },
    /// emc_hit's traffic out to a tunnel port (`output:<tunnel>`), encapsulated with a
    /// static underlay hop (IPv4 or IPv6 underlay).
    VxlanEncap { v6: bool },
    /// A connection-tracking case (`crate::ct`), not in the default set.
    Ct(CtCase),
    /// emc_hit's 1,024 flows as UDP connections seen both ways through the two-pass
    /// security group (`ct_established.rs`): two exact-match hits and a tracker lookup a
    /// packet.
    CtEstablished,
}

impl Case {
    pub fn name(&self) -> String {
        match self {
            Case::EmcHit => "emc_hit".into(),
            Case::MegaflowHit(n) => format!("megaflow_hit_{n}"),
            Case::Miss => "miss".into(),
            Case::Mixed => "mixed".into(),
            Case::Floor { many: false } => "floor".into(),
            Case::Floor { many: true } => "floor_many_flows".into(),
            Case::ManyFlows { zipf: false } => "many_flows".into(),
            Case::ManyFlows { zipf: true } => "many_flows_zipf".into(),
            Case::VxlanDecap { v6: false } => "vxlan_decap".into(),
            Case::VxlanDecap { v6: true } => "vxlan_decap_ipv6".into(),
            Case::VxlanEncap { v6: false } => "vxlan_encap".into(),
            Case::VxlanEncap { v6: true } => "vxlan_encap_ipv6".into(),
            Case::Ct(c) => c.name().into(),
            Case::CtEstablished => "ct_established".into(),
        }
    }

    pub fn parse(s: &str) -> Result<Case, String> {
        match s {
            "emc_hit" => Ok(Case::EmcHit),
            "miss" => Ok(Case::Miss),
            "mixed" => Ok(Case::Mixed),
            "floor" => Ok(Case::Floor { many: false }),
            "floor_many_flows" => Ok(Case::Floor { many: true }),
            "many_flows" => Ok(Case::ManyFlows { zipf: false }),
            "many_flows_zipf" => Ok(Case::ManyFlows { zipf: true }),
            "vxlan_decap" => Ok(Case::VxlanDecap { v6: false }),
            "vxlan_decap_ipv6" => Ok(Case::VxlanDecap { v6: true }),
            "vxlan_encap" => Ok(Case::VxlanEncap { v6: false }),
            "vxlan_encap_ipv6" => Ok(Case::VxlanEncap { v6: true }),
            "ct_established" => Ok(Case::CtEstablished),
            _ => match CtCase::parse(s) {
                Some(c) => Ok(Case::Ct(c)),
                None => s
                .strip_prefix("megaflow_hit_")
                .and_then(|n| n.parse().ok())
                .filter(|n| (1..=16).contains(n))
                .map(Case::MegaflowHit)
                .ok_or_else(|| {
                    format!("unknown case '{s}' (expected floor, floor_many_flows, emc_hit, megaflow_hit_N with N in 1..=16, miss, mixed, many_flows, vxlan_decap, vxlan_encap, vxlan_decap_ipv6, vxlan_encap_ipv6, many_flows_zipf, ct_established, ct_new, ct_1m, ct_nat, ct_synflood, ct_established_2w)")
                }),
            },
        }
    }

    /// The same case over an IPv6 underlay (`--underlay ipv6`): the VXLAN cases change,
    /// the others do not.
    pub fn with_ipv6_underlay(self) -> Case {
        match self {
            Case::VxlanDecap { .. } => Case::VxlanDecap { v6: true },
            Case::VxlanEncap { .. } => Case::VxlanEncap { v6: true },
            c => c,
        }
    }

    /// The default case list: the floor, (a), (b) with 1, 4 and 16 subtables, (c), (d),
    /// and many flows (their floor, uniform and Zipf).
    pub fn defaults() -> Vec<Case> {
        vec![
            Case::Floor { many: false },
            Case::EmcHit,
            Case::MegaflowHit(1),
            Case::MegaflowHit(4),
            Case::MegaflowHit(16),
            Case::Miss,
            Case::Mixed,
            Case::Floor { many: true },
            Case::ManyFlows { zipf: false },
            Case::ManyFlows { zipf: true },
        ]
    }
}

/// How to run the cases.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub runs: usize,
    /// Packets per timed run for hit cases; miss-heavy cases use a tenth (at least 50,000).
    pub packets: u64,
    /// Established flows (EMC and mixed cases).
    pub flows: usize,
    /// Share of new flows in the mixed case (0.0..=1.0).
    pub miss_rate: f64,
    pub frame_size: usize,
    pub backend: Backend,
    /// Exact-match insertion: one flow in N.
    pub emc_insert_inv_prob: u32,
    /// Signature-match cache entries (0 = off).
    pub smc_entries: usize,
    pub megaflow_max: usize,
    pub seed: u64,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            runs: 5,
            packets: 2_000_000,
            flows: 1024,
            miss_rate: 0.10,
            frame_size: 64,
            backend: Backend::TupleSpace,
            emc_insert_inv_prob: 100,
            smc_entries: DatapathConfig::default().smc_entries,
            megaflow_max: 65536,
            seed: 1,
        }
    }
}

/// Flows of the many-flows cases.
pub const MANY_FLOWS: usize = 1_000_000;

/// A case's rules, traffic, datapath configuration, new-flow share and packets per run.
pub(super) type Setup = (
    Vec<flowpath_pipeline::RuleSpec>,
    InMemorySource,
    DatapathConfig,
    f64,
    u64,
);

/// What `case` runs: its workload, datapath configuration, new-flow share and packets per
/// timed run.
pub(super) fn setup(case: Case, cfg: &BenchConfig) -> Setup {
    // The cost cases measure what each tier costs: the miss budget (which would drop
    // the mixed case's misses when they take over half the core) is off.
    let base = DatapathConfig {
        emc_insert_inv_prob: cfg.emc_insert_inv_prob,
        smc_entries: cfg.smc_entries,
        megaflow_max: cfg.megaflow_max,
        miss: flowpath_datapath::MissLimits::unbudgeted(),
        ..DatapathConfig::default()
    };
    let miss_packets = (cfg.packets / 10).max(50_000);
    let (rules, source, dp, share, packets) = match case {
        Case::EmcHit => {
            let (r, s) = workload::emc_hit(cfg.flows, cfg.frame_size);
            (r, s, base, 0.0, cfg.packets)
        }
        Case::MegaflowHit(n) => {
            let (r, s) = workload::megaflow_hit(n, cfg.frame_size);
            (
                r,
                s,
                // The subtable search itself: no exact tier in front of it.
                DatapathConfig {
                    emc: false,
                    smc_entries: 0,
                    ..base
                },
                0.0,
                cfg.packets,
            )
        }
        Case::Miss => {
            let (r, s) = workload::miss_pipeline(cfg.flows, cfg.frame_size);
            (r, s, base, 1.0, miss_packets)
        }
        Case::ManyFlows { zipf } => {
            let (r, s) = workload::many_flows(MANY_FLOWS, zipf, cfg.frame_size, cfg.seed);
            (r, s, base, 0.0, cfg.packets)
        }
        Case::VxlanDecap { v6 } => {
            let (r, s) = workload::vxlan_decap(cfg.flows, cfg.frame_size, v6);
            let dp = DatapathConfig {
                tunnels: Some(Arc::new(workload::vxlan_tunnels(v6))),
                ..base
            };
            (r, s, dp, 0.0, cfg.packets)
        }
        Case::VxlanEncap { v6 } => {
            let (r, s) = workload::vxlan_encap(cfg.flows, cfg.frame_size);
            let dp = DatapathConfig {
                tunnels: Some(Arc::new(workload::vxlan_tunnels(v6))),
                ..base
            };
            (r, s, dp, 0.0, cfg.packets)
        }
        Case::CtEstablished => {
            let (r, s) = super::ct_established(cfg.flows, cfg.frame_size);
            (r, s, base, 0.0, cfg.packets)
        }
        Case::Floor { .. } => unreachable!("the floor runs without a datapath"),
        Case::Ct(_) => unreachable!("the ct cases run through crate::ct::run"),
        Case::Mixed => {
            let (r, s) = workload::miss_pipeline(cfg.flows, cfg.frame_size);
            let p = if cfg.miss_rate > 0.0 {
                (cfg.packets as f64 * (0.1 / cfg.miss_rate).min(1.0)) as u64
            } else {
                cfg.packets
            };
            (r, s, base, cfg.miss_rate, p.max(50_000))
        }
    };
    (rules, source.with_seed(cfg.seed), dp, share, packets)
}
