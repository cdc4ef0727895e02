//! `flowpath bench openflow`: the OpenFlow channel measured over TCP loopback, with the
//! bench as the client (a tool or a controller), side by side with a private
//! ovs-vswitchd where it is installed:
//!
//! 1. flow_mod rate: N distinct ADDs pre-encoded and written as fast as the socket takes
//!    them, one barrier at the end (flowpath without and with a state file, OVS); and
//!    `ovs-ofctl add-flows` (a barrier after every flow_mod) for both;
//! 2. packet_in → packet_out round trip through an in-process worker, and a miss storm
//!    against the default packet-in rate limit;
//! 3. established traffic while 10,000 flow_mods arrive: nothing lost.

pub mod client;
pub mod flowmod;
mod inprocess;
mod markdown;
pub mod ovs;
pub mod packets;
mod rates;
mod results;
mod table;

pub use inprocess::InProcess;
pub use markdown::markdown;
pub use results::{OpenFlowBenchConfig, OpenFlowResults, RateRow, Spread};
pub use table::table;

use flowpath_bench::Machine;
use flowpath_report::grouped;
use std::time::Duration;

/// Run everything; `progress` hears what is running.
pub fn run(cfg: &OpenFlowBenchConfig, mut progress: impl FnMut(&str)) -> OpenFlowResults {
    let machine = Machine::probe();
    let mut failures = Vec::new();
    let tmp = std::env::temp_dir().join(format!("flowpath-bench-openflow-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&tmp);

    let (ovs, ovs_skipped) = if !cfg.ovs {
        (None, Some("--no-ovs".to_string()))
    } else {
        progress("starting a private ovs-vswitchd");
        match ovs::PrivateOvs::start() {
            Ok(o) => (Some(o), None),
            Err(e) => (None, Some(e)),
        }
    };
    // 1. flow_mod rate.
    let flow_mod = rates::rates(cfg, ovs.as_ref(), &tmp, &mut progress, &mut failures);
    let ovs_version = ovs.as_ref().map(|o| o.version.clone());
    drop(ovs);
    // 2. packet_in → packet_out, and 3. established traffic during a flow_mod storm.
    let (round_trip, storm, traffic) = packet_side(cfg, &mut progress, &mut failures);
    let _ = std::fs::remove_dir_all(&tmp);
    OpenFlowResults {
        flow_mod,
        ovs_skipped,
        ovs_version,
        round_trip,
        storm,
        traffic,
        failures,
        machine,
    }
}

/// The worker's default longest idle nap.
const WORKER_NAP: Duration = Duration::from_micros(500);

/// The packet side through an in-process worker: round trips with the default naps and
/// busy polling, the miss storm, established traffic while flow_mods arrive. What is
/// skipped (a count of 0) or failed (into `failures`) is missing.
fn packet_side(
    cfg: &OpenFlowBenchConfig,
    progress: &mut impl FnMut(&str),
    failures: &mut Vec<String>,
) -> (
    Vec<packets::RoundTrip>,
    Option<packets::Storm>,
    Option<packets::Traffic>,
) {
    let mut round_trip = Vec::new();
    for sleep in [WORKER_NAP, Duration::ZERO] {
        progress(&format!(
            "packet_in → packet_out, {} round trips ({})",
            grouped(u64::from(cfg.round_trips)),
            if sleep.is_zero() {
                "busy polling"
            } else {
                "default naps"
            }
        ));
        if cfg.round_trips > 0 {
            match packets::round_trip(cfg.round_trips, sleep) {
                Ok(r) => round_trip.push(r),
                Err(e) => failures.push(format!("round trip: {e}")),
            }
        }
    }
    let storm = (cfg.storm_misses > 0)
        .then(|| {
            progress(&format!(
                "miss storm, {} misses, default packet-in limit",
                grouped(u64::from(cfg.storm_misses))
            ));
            packets::storm(cfg.storm_misses, cfg.storm_seconds)
                .map_err(|e| failures.push(format!("miss storm: {e}")))
                .ok()
        })
        .flatten();
    let traffic = (cfg.traffic_flow_mods > 0)
        .then(|| {
            progress(&format!(
                "{} established flows while {} flow_mods arrive",
                cfg.traffic_flows,
                grouped(u64::from(cfg.traffic_flow_mods))
            ));
            packets::traffic(cfg.traffic_flows, cfg.traffic_flow_mods, cfg.traffic_gap)
                .map_err(|e| failures.push(format!("traffic: {e}")))
                .ok()
        })
        .flatten();
    (round_trip, storm, traffic)
}

/// The `--json` output: one object.
pub fn json(r: &OpenFlowResults) -> String {
    serde_json::to_string_pretty(r).expect("results serialise")
}
