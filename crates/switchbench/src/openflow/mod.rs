//! `flowpath bench openflow`: the OpenFlow channel measured over TCP loopback, with the
//! bench as the client (a tool or a controller), side by side with a private
//! ovs-vswitchd where it is installed (issue 17's measurements):
//!
//! 1. flow_mod rate: N distinct ADDs pre-encoded and written as fast as the socket takes
//!    them, one barrier at the end (flowpath without and with a state file, OVS); and
//!    `ovs-ofctl add-flows` (a barrier after every flow_mod) for both;
//! 2. packet_in → packet_out round trip through an in-process worker, and a miss storm
//!    against the default packet-in rate limit;
//! 3. established traffic while 10,000 flow_mods arrive: nothing lost.

pub mod client;
pub mod flowmod;
pub mod ovs;
pub mod packets;

use flowpath_bench::Machine;
use flowpath_report::grouped;
use flowpath_switch::openflow::{
    ChannelCounters, NoPacketIo, NoPorts, OpenFlowChannel, OpenFlowConfig, PacketIo, Target,
};
use flowpath_switch::{Switch, SwitchConfig};
use serde::Serialize;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// flowpath in this process: a switch and its OpenFlow channel on ptcp:127.0.0.1:0.
pub struct InProcess {
    pub sw: Arc<Switch>,
    ch: Option<OpenFlowChannel>,
    stop: Arc<AtomicBool>,
    pub addr: SocketAddr,
}

impl InProcess {
    /// A fresh switch (its state file `state_dir/flows.state` if given), no ports,
    /// no packet I/O.
    pub fn start(state_dir: Option<&Path>, _: Option<()>) -> Result<InProcess, String> {
        let sw = Switch::open(SwitchConfig {
            state: state_dir.map(|d| d.join("flows.state")),
            ..SwitchConfig::default()
        })?;
        InProcess::start_with(sw, Arc::new(NoPacketIo), OpenFlowConfig::default())
    }

    pub fn start_with(
        sw: Arc<Switch>,
        io: Arc<dyn PacketIo>,
        cfg: OpenFlowConfig,
    ) -> Result<InProcess, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let cfg = OpenFlowConfig {
            targets: vec![Target::Listen(SocketAddr::from(([127, 0, 0, 1], 0)))],
            ..cfg
        };
        let ch = OpenFlowChannel::start(sw.clone(), Arc::new(NoPorts), io, cfg, stop.clone())?;
        let addr = ch.listening[0];
        Ok(InProcess {
            sw,
            ch: Some(ch),
            stop,
            addr,
        })
    }

    pub fn counters(&self) -> ChannelCounters {
        self.ch.as_ref().map(|c| c.counters()).unwrap_or_default()
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(c) = self.ch.take() {
            c.join();
        }
    }
}

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

/// Median, min and max of a set of runs, and every run.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub samples: Vec<f64>,
}

impl Spread {
    pub fn of(mut v: Vec<f64>) -> Spread {
        let samples = v.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v.first().copied().unwrap_or(0.0),
            max: v.last().copied().unwrap_or(0.0),
            samples,
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
    pub round_trip: Vec<packets::RoundTrip>,
    pub storm: Option<packets::Storm>,
    pub traffic: Option<packets::Traffic>,
    /// Parts that failed, with why.
    pub failures: Vec<String>,
    pub machine: Machine,
}

const BLAST: &str = "one connection, barrier at end";
const OFCTL: &str = "ovs-ofctl add-flows";

fn row(system: &str, method: &str, n: u32, samples: &[flowmod::Sample]) -> RateRow {
    let secs: Vec<f64> = samples.iter().map(|s| s.secs).collect();
    RateRow {
        system: system.into(),
        method: method.into(),
        flow_mods: n,
        runs: samples.len(),
        flow_mods_per_s: Spread::of(secs.iter().map(|s| f64::from(n) / s).collect()),
        seconds: Spread::of(secs),
        errors: samples.iter().map(|s| s.errors).sum(),
        first_error: samples.iter().find_map(|s| s.first_error.clone()),
        rules_after: samples.iter().map(|s| s.rules).collect(),
        ratio_to_ovs: None,
    }
}

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

    // 1. flow_mod rate, one connection, barrier at the end; runs interleaved.
    let bytes = client::encode_flow_mods(cfg.flow_mods, client::bench_flow_mod);
    let (mut mem, mut st, mut ov) = (Vec::new(), Vec::new(), Vec::new());
    let mut note = |what: &str, r: Result<flowmod::Sample, String>, into: &mut Vec<_>| match r {
        Ok(s) => into.push(s),
        Err(e) => failures.push(format!("{what}: {e}")),
    };
    for run in 1..=cfg.runs {
        progress(&format!(
            "flow_mod rate, {} flow_mods, run {run}/{}",
            grouped(u64::from(cfg.flow_mods)),
            cfg.runs
        ));
        note(
            "flowpath (no state file)",
            flowmod::flowpath_blast(&bytes, None),
            &mut mem,
        );
        let d = state_dir(&tmp, run);
        note(
            "flowpath (state file)",
            flowmod::flowpath_blast(&bytes, Some(&d)),
            &mut st,
        );
        let _ = std::fs::remove_dir_all(&d);
        if let Some(o) = &ovs {
            note("ovs-vswitchd", flowmod::ovs_blast(o, &bytes), &mut ov);
        }
    }
    drop(bytes);
    // ovs-ofctl add-flows, a barrier after each flow_mod.
    let file = tmp.join("flows.txt");
    let state_file = tmp.join("flows-state.txt");
    let n_state = cfg.ofctl_state_flow_mods.min(cfg.ofctl_flow_mods);
    let (mut omem, mut ost, mut oov) = (Vec::new(), Vec::new(), Vec::new());
    let ofctl_ok = which_ofctl();
    if ofctl_ok && cfg.ofctl_flow_mods > 0 {
        if let Err(e) = flowmod::write_flows_file(&file, cfg.ofctl_flow_mods)
            .and_then(|_| flowmod::write_flows_file(&state_file, n_state))
        {
            failures.push(e);
        } else {
            for run in 1..=cfg.ofctl_runs {
                progress(&format!(
                    "ovs-ofctl add-flows, {} flows, run {run}/{}",
                    grouped(u64::from(cfg.ofctl_flow_mods)),
                    cfg.ofctl_runs
                ));
                note(
                    "ovs-ofctl → flowpath (no state file)",
                    flowmod::flowpath_ofctl(&file, None),
                    &mut omem,
                );
                let d = state_dir(&tmp, 100 + run);
                if n_state > 0 {
                    note(
                        "ovs-ofctl → flowpath (state file)",
                        flowmod::flowpath_ofctl(&state_file, Some(&d)),
                        &mut ost,
                    );
                }
                let _ = std::fs::remove_dir_all(&d);
                if let Some(o) = &ovs {
                    note(
                        "ovs-ofctl → ovs-vswitchd",
                        flowmod::ovs_ofctl(o, &file),
                        &mut oov,
                    );
                }
            }
        }
    }
    let ovs_version = ovs.as_ref().map(|o| o.version.clone());
    drop(ovs);
    let mut flow_mod = Vec::new();
    let groups: [(&str, &str, u32, &Vec<flowmod::Sample>); 6] = [
        ("flowpath (no state file)", BLAST, cfg.flow_mods, &mem),
        ("flowpath (state file)", BLAST, cfg.flow_mods, &st),
        ("ovs-vswitchd", BLAST, cfg.flow_mods, &ov),
        (
            "flowpath (no state file)",
            OFCTL,
            cfg.ofctl_flow_mods,
            &omem,
        ),
        ("flowpath (state file)", OFCTL, n_state, &ost),
        ("ovs-vswitchd", OFCTL, cfg.ofctl_flow_mods, &oov),
    ];
    for (sys, method, n, s) in groups {
        if !s.is_empty() {
            flow_mod.push(row(sys, method, n, s));
        }
    }
    for method in [BLAST, OFCTL] {
        let base = flow_mod
            .iter()
            .find(|r| r.method == method && r.system == "ovs-vswitchd")
            .map(|r| r.flow_mods_per_s.median);
        if let Some(b) = base {
            for r in flow_mod.iter_mut().filter(|r| r.method == method) {
                r.ratio_to_ovs = Some(r.flow_mods_per_s.median / b);
            }
        }
    }

    // 2. packet_in → packet_out.
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

    // 3. established traffic during a flow_mod storm.
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

fn state_dir(tmp: &Path, run: usize) -> PathBuf {
    let d = tmp.join(format!("state-{run}"));
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::create_dir_all(&d);
    d
}

fn which_ofctl() -> bool {
    std::process::Command::new("ovs-ofctl")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn rate(x: f64) -> String {
    grouped(x.round() as u64)
}

/// The terminal report.
pub fn table(r: &OpenFlowResults) -> String {
    let m = &r.machine;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "flowpath bench openflow — OpenFlow 1.3 over TCP loopback, the bench as the client"
    );
    let _ = writeln!(
        s,
        "machine: {} | {} cores | Linux {} | rev {}",
        m.cpu, m.cores, m.kernel, m.git_rev
    );
    let _ = writeln!(s, "command: {}", m.command);
    match (&r.ovs_skipped, &r.ovs_version) {
        (Some(why), _) => {
            let _ = writeln!(s, "ovs-vswitchd: skipped — {why}");
        }
        (None, Some(v)) => {
            let _ = writeln!(
                s,
                "ovs-vswitchd: {v}, private ovsdb/run dirs, netdev bridge, no ports, ptcp listener"
            );
        }
        _ => {}
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "1. flow_mod rate (distinct ADDs: table 0, priority 100, ip, nw_dst exact, output:1..4)"
    );
    let head = [
        "system",
        "method",
        "flow_mods",
        "runs",
        "flow_mods/s",
        "(min–max)",
        "seconds",
        "vs OVS",
        "errors",
        "rules after",
    ]
    .map(String::from);
    let rows: Vec<[String; 10]> = r
        .flow_mod
        .iter()
        .map(|x| {
            let ok = x.rules_after.iter().all(|&n| n == u64::from(x.flow_mods));
            [
                x.system.clone(),
                x.method.clone(),
                grouped(u64::from(x.flow_mods)),
                x.runs.to_string(),
                rate(x.flow_mods_per_s.median),
                format!(
                    "({}–{})",
                    rate(x.flow_mods_per_s.min),
                    rate(x.flow_mods_per_s.max)
                ),
                format!("{:.3}", x.seconds.median),
                x.ratio_to_ovs.map_or("-".into(), |q| format!("{q:.2}×")),
                x.errors.to_string(),
                if ok {
                    format!("{} each", grouped(u64::from(x.flow_mods)))
                } else {
                    format!("{:?} (WRONG)", x.rules_after)
                },
            ]
        })
        .collect();
    s.push_str(&flowpath_report::columns(&head, &rows));
    let _ = writeln!(
        s,
        "   Wall time from the first byte written to BARRIER_REPLY read (pre-encoded flow_mods, a\n   \
         writer and a reader thread), or of the whole ovs-ofctl process (file parsing included;\n   \
         it waits for a barrier after every flow_mod). flowpath runs in this process (channel\n   \
         threads beside the bench's); \"state file\" is what a real switch does: the barrier\n   \
         saves the rule set. vs OVS: median rate over ovs-vswitchd's by the same method."
    );
    for f in r
        .flow_mod
        .iter()
        .filter_map(|x| x.first_error.as_ref().map(|e| (x, e)))
    {
        let _ = writeln!(
            s,
            "   first error from {} ({}): {}",
            f.0.system, f.0.method, f.1
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "2. packet_in → packet_out round trip (in-process worker, ports 1 and 2 in memory)"
    );
    let head = [
        "worker",
        "frames",
        "median µs",
        "p99 µs",
        "(min–max) µs",
        "packet-ins/s",
        "data mismatches",
    ]
    .map(String::from);
    let rows: Vec<[String; 7]> = r
        .round_trip
        .iter()
        .map(|x| {
            [
                x.worker.clone(),
                grouped(u64::from(x.frames)),
                format!("{:.0}", x.median_us),
                format!("{:.0}", x.p99_us),
                format!("({:.0}–{:.0})", x.min_us, x.max_us),
                rate(x.packet_ins_per_s),
                x.data_mismatches.to_string(),
            ]
        })
        .collect();
    s.push_str(&flowpath_report::columns(&head, &rows));
    if let Some(x) = r.round_trip.first() {
        let _ = writeln!(
            s,
            "   One frame at a time: inject on port 1 → table-miss flow CONTROLLER:65535 → PACKET_IN\n   \
             read by the bench → PACKET_OUT(in_port=1, output:2) → the frame sent on port 2.\n   \
             packet-ins/s = 1 / mean round trip. The packet-in rate limit was raised to {}/s for\n   \
             this (default: {}/s per port, burst {}).",
            grouped(u64::from(x.packet_in_rate)),
            OpenFlowConfig::default().packet_in_rate,
            OpenFlowConfig::default().packet_in_burst
        );
    }
    if let Some(x) = &r.storm {
        let _ = writeln!(
            s,
            "   Miss storm with the default limit ({}/s per port, burst {}): {} distinct misses\n   \
             offered over {:.2} s → {} packet-ins delivered (bound rate×s+burst = {:.0}: {}),\n   \
             {} dropped by the rate limit (packet_ins_rate_dropped), {} before the channel\n   \
             (controller queue full or miss budget; of them miss budget: {}).",
            x.packet_in_rate,
            x.packet_in_burst,
            grouped(x.offered),
            x.seconds,
            grouped(x.delivered),
            x.bound,
            if x.delivered as f64 <= x.bound { "within" } else { "EXCEEDED" },
            grouped(x.packet_ins_rate_dropped),
            grouped(x.dropped_before_channel),
            grouped(x.miss_budget_drops),
        );
    }
    let _ = writeln!(s);
    if let Some(t) = &r.traffic {
        let _ = writeln!(s, "3. established flows while flow_mods arrive");
        let _ = writeln!(
            s,
            "   {} flows port 1 → 2 at {} pps offered; {} unrelated flow_mods + barrier in {:.3} s\n   \
             ({} errors). Injected {} ({} during the storm), transmitted {}: {}.\n   \
             Misses during the storm: {}, upcalls: {}; worker drops over the run: {}.",
            t.flows,
            rate(t.offered_pps),
            grouped(u64::from(t.flow_mods)),
            t.storm_seconds,
            t.flow_mod_errors,
            grouped(t.injected),
            grouped(t.injected_during_storm),
            grouped(t.transmitted),
            if t.lost == 0 {
                "nothing lost".to_string()
            } else {
                format!("{} LOST", t.lost)
            },
            grouped(t.misses_during_storm),
            grouped(t.upcalls_during_storm),
            grouped(t.worker_drops),
        );
    }
    for f in &r.failures {
        let _ = writeln!(s, "FAILED: {f}");
    }
    let _ = writeln!(
        s,
        "\nAll figures are wall-clock times on a shared machine (other processes' load shows as\n\
         spread): compare systems within one run."
    );
    s
}

/// The `--json` output: one object.
pub fn json(r: &OpenFlowResults) -> String {
    serde_json::to_string_pretty(r).expect("results serialise")
}
