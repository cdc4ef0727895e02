//! What `flowpath bench openflow` runs ([`OpenFlowBenchConfig`]) and what it found: the
//! flow_mod rate rows with their spreads, the packet side's figures, what failed.

use super::packets::{RoundTrip, Storm, Traffic};
pub use flowpath_bench::suite::Spread;
use flowpath_bench::Machine;
use serde::Serialize;
use std::time::Duration;

/// What to run.
#[derive(Clone, Debug)]
pub struct OpenFlowBenchConfig {
    pub runs: usize,
    /// flow_mods per run over one connection (barrier at the end).
    pub flow_mods: u32,
    /// flow_mods per `ovs-ofctl add-flows` run (barrier after each).
    pub ofctl_flow_mods: u32,
    pub ofctl_runs: usize,
    /// flows per `ovs-ofctl add-flows` run against flowpath with a state file: every
    /// barrier saves the whole rule set (two fsyncs), so this is quadratic; kept smaller.
    pub ofctl_state_flow_mods: u32,
    pub round_trips: u32,
    pub storm_misses: u32,
    pub storm_seconds: f64,
    pub traffic_flows: u32,
    pub traffic_flow_mods: u32,
    /// Time between rounds of one frame per established flow.
    pub traffic_gap: Duration,
    /// Run the OVS side when it is installed.
    pub ovs: bool,
}

impl Default for OpenFlowBenchConfig {
    fn default() -> Self {
        OpenFlowBenchConfig {
            runs: 5,
            flow_mods: 100_000,
            ofctl_flow_mods: 10_000,
            ofctl_runs: 3,
            ofctl_state_flow_mods: 1_000,
            round_trips: 2_000,
            storm_misses: 50_000,
            storm_seconds: 1.0,
            traffic_flows: 64,
            traffic_flow_mods: 10_000,
            traffic_gap: Duration::from_millis(1),
            ovs: true,
        }
    }
}

/// One system's flow_mod rate by one method.
#[derive(Clone, Debug, Serialize)]
pub struct RateRow {
    pub system: String,
    /// "one connection, barrier at end" or "ovs-ofctl add-flows".
    pub method: String,
    pub flow_mods: u32,
    pub runs: usize,
    pub flow_mods_per_s: Spread,
    pub seconds: Spread,
    /// Errors that came back, over all runs.
    pub errors: u64,
    pub first_error: Option<String>,
    /// Rules in the switch after each run (must be flow_mods).
    pub rules_after: Vec<u64>,
    /// This row's median rate over OVS's by the same method.
    pub ratio_to_ovs: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct OpenFlowResults {
    pub flow_mod: Vec<RateRow>,
    /// Why OVS did not run, if it did not.
    pub ovs_skipped: Option<String>,
    pub ovs_version: Option<String>,
    pub round_trip: Vec<RoundTrip>,
    pub storm: Option<Storm>,
    pub traffic: Option<Traffic>,
    /// Parts that failed, with why.
    pub failures: Vec<String>,
    pub machine: Machine,
}
