//! The DPDK rig: OVS-DPDK on in-memory DPDK devices (a pcap replayed from memory into
//! one port, a null sink on the other) beside flowpath's datapath on the same frames and
//! the same flows, so connection tracking's cost in both is measured in one run. This
//! file owns the traffic (UDP connections seen both ways), the flow sets (stated once, in
//! `ovs-ofctl` syntax, for both switches), the run's order and its report.

mod fpside;
mod ovsdpdk;

use flowpath_gen::{build, replay_source, FrameSpec};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

pub use fpside::measure_flowpath;
pub use ovsdpdk::{missing as ovs_dpdk_missing, OvsDpdk, OVS_DPDK_VSWITCHD};

/// OpenFlow port numbers on both switches: the replayed capture comes in on `RX_PORT`,
/// everything the flows forward goes out of `TX_PORT`.
pub const RX_PORT: u32 = 1;
pub const TX_PORT: u32 = 2;
/// The conntrack zone of the ct flow set.
pub const ZONE: u16 = 1;
/// Clients are `10.0.0.1` up (inside `CLIENT_NET`), the server `SERVER`:`SERVER_PORT`.
pub const CLIENT_NET: &str = "10.0.0.0/16";
pub const SERVER: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
pub const SERVER_PORT: u16 = 5001;
/// Frame size on the wire (FCS included), as the bench's.
pub const FRAME_SIZE: usize = 64;

/// Which flows a switch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowSet {
    /// The security group's matches without tracking: the same directions forwarded.
    Plain,
    /// The two-pass security group: track in table 0, decide on `ct_state` in table 1.
    Ct,
}

impl FlowSet {
    pub const ALL: [FlowSet; 2] = [FlowSet::Plain, FlowSet::Ct];

    pub fn name(self) -> &'static str {
        match self {
            FlowSet::Plain => "plain",
            FlowSet::Ct => "ct",
        }
    }

    pub fn parse(s: &str) -> Result<FlowSet, String> {
        FlowSet::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("'{s}' (plain, ct)"))
    }

    /// The flows in `ovs-ofctl` syntax, one a line: what `ovs-ofctl add-flows` loads into
    /// OVS and what flowpath's flow parser reads for its side. Rules are keyed by address
    /// direction, not by in_port: the rig has one receiving port, so a connection's
    /// original packets (from a client in `CLIENT_NET`) and its replies (to one) are told
    /// apart by their addresses, as a two-port security group tells them by port.
    pub fn flows(self) -> String {
        let (net, out, z) = (CLIENT_NET, TX_PORT, ZONE);
        match self {
            FlowSet::Plain => format!(
                "table=0,priority=200,ip,nw_src={net},actions=output:{out}\n\
                 table=0,priority=100,ip,nw_dst={net},actions=output:{out}\n\
                 table=0,priority=0,actions=drop\n"
            ),
            FlowSet::Ct => format!(
                "table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1,zone={z})\n\
                 table=0,priority=0,actions=drop\n\
                 table=1,priority=300,ip,ct_state=+trk+inv,actions=drop\n\
                 table=1,priority=200,ip,ct_state=+trk+new,nw_src={net},actions=ct(commit,zone={z}),output:{out}\n\
                 table=1,priority=100,ip,ct_state=+trk+est,nw_src={net},actions=output:{out}\n\
                 table=1,priority=100,ip,ct_state=+trk+est,nw_dst={net},actions=output:{out}\n\
                 table=1,priority=0,actions=drop\n"
            ),
        }
    }
}

/// Client `n`'s address: `10.0.0.1 + n` (inside `CLIENT_NET` for `n` < 65,535).
fn client(n: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 1)) + n)
}

/// `conns` UDP connections seen both ways: each connection's original packet (client to
/// the server) then its reply (addresses and ports swapped), connection after connection.
/// Replayed in a loop, the first round opens every connection and every later packet is
/// established, in either direction.
pub fn connection_frames(conns: u32) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(2 * conns as usize);
    for n in 0..conns {
        let (c, cport) = (client(n), 1024 + (n % 60_000) as u16);
        out.push(build(&FrameSpec::udp4(
            c,
            SERVER,
            cport,
            SERVER_PORT,
            FRAME_SIZE,
        )));
        out.push(build(&FrameSpec::udp4(
            SERVER,
            c,
            SERVER_PORT,
            cport,
            FRAME_SIZE,
        )));
    }
    out
}

/// Write `frames` to `path` as a pcap (flowpath's generator's writer), once each in order.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<(), String> {
    let mut src = replay_source(frames.to_vec());
    flowpath_gen::write_pcap_file(path, &mut src, frames.len() as u64)
        .map(|_| ())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// What a rig run is asked to do.
#[derive(Clone, Debug)]
pub struct RigConfig {
    pub sets: Vec<FlowSet>,
    pub conns: u32,
    /// Measurement windows (seconds each) after the warm-up.
    pub runs: usize,
    pub duration: f64,
    pub warmup: f64,
    /// The PMD's CPU (OVS) and the CPU flowpath's side runs on.
    pub pmd_cpu: usize,
    /// Packets per flowpath timed run.
    pub fp_packets: u64,
}

impl Default for RigConfig {
    fn default() -> RigConfig {
        RigConfig {
            sets: FlowSet::ALL.to_vec(),
            conns: 1024,
            runs: 5,
            duration: 2.0,
            warmup: 2.0,
            pmd_cpu: 1,
            fp_packets: 2_000_000,
        }
    }
}

/// One switch's figures for one flow set: cycles a packet and Mpps per window.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Figures {
    pub cycles: Vec<f64>,
    pub mpps: Vec<f64>,
    /// Of the packets received, the share sent out of `TX_PORT`.
    pub forwarded_share: f64,
    /// How the switch's packets were looked up (EMC, megaflow, upcalls), when it says.
    pub note: String,
}

/// One flow set's row: OVS-DPDK's figures (or why there are none) and flowpath's.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RigRow {
    pub set: &'static str,
    pub ovs: Result<Figures, String>,
    pub flowpath: Result<Figures, String>,
}

/// Why the OVS-DPDK side cannot run here (root, the package, huge pages), if it cannot.
pub fn preflight() -> Option<String> {
    if !crate::is_root() {
        return Some("not root (OVS-DPDK needs huge pages and its own daemons)".into());
    }
    ovs_dpdk_missing()
}

/// The rig's scratch directory, removed at cleanup.
fn scratch() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("{}-dpdkrig", crate::topo::run_id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    crate::topo::register_dir(&dir);
    Ok(dir)
}

/// Run the rig: the capture written once, then per flow set OVS-DPDK (when it can run
/// here: `skip` says why not) and flowpath on the same frames and flows. Everything the
/// run starts or changes is registered and undone by [`crate::topo::cleanup_all`].
pub fn run(cfg: &RigConfig, skip: Option<&str>) -> Result<Vec<RigRow>, String> {
    let frames = connection_frames(cfg.conns);
    let dir = scratch()?;
    let pcap = dir.join("conns.pcap");
    write_pcap(&pcap, &frames)?;
    crate::progress(&format!(
        "{} frames ({} UDP connections both ways) in {}",
        frames.len(),
        cfg.conns,
        pcap.display()
    ));
    let mut rows = Vec::new();
    for &set in &cfg.sets {
        let ovs = match skip {
            Some(why) => Err(format!("skipped: {why}")),
            None => OvsDpdk::measure(&dir, &pcap, set, cfg),
        };
        if crate::registry::interrupted() {
            break;
        }
        crate::progress(&format!("flowpath, {} flows", set.name()));
        let fp = measure_flowpath(&frames, set, cfg);
        rows.push(RigRow {
            set: set.name(),
            ovs,
            flowpath: fp,
        });
    }
    Ok(rows)
}

/// Median (min-max) of `v`, `prec` decimals.
fn spread(v: &[f64], prec: usize) -> String {
    let Some(m) = flowpath_base::median(v) else {
        return "-".into();
    };
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    format!("{m:.prec$} ({lo:.prec$}-{hi:.prec$})")
}

/// The table's cells, one row per flow set.
fn cells(rows: &[RigRow]) -> Vec<Vec<String>> {
    let med = |f: &Result<Figures, String>| {
        f.as_ref()
            .ok()
            .and_then(|f| flowpath_base::median(&f.cycles))
    };
    rows.iter()
        .map(|r| {
            let side = |f: &Result<Figures, String>| match f {
                Ok(f) => [
                    spread(&f.cycles, 0),
                    spread(&f.mpps, 2),
                    format!("{:.0} %", 100.0 * f.forwarded_share),
                ],
                Err(e) => [e.clone(), "-".into(), "-".into()],
            };
            let ratio = match (med(&r.ovs), med(&r.flowpath)) {
                (Some(o), Some(f)) if f > 0.0 => format!("{:.2}", o / f),
                _ => "-".into(),
            };
            let mut row = vec![r.set.to_string()];
            row.extend(side(&r.ovs));
            row.extend(side(&r.flowpath));
            row.push(ratio);
            row
        })
        .collect()
}

const HEAD: [&str; 8] = [
    "flows",
    "OVS-DPDK cycles/pkt",
    "OVS Mpps",
    "OVS fwd",
    "flowpath cycles/pkt",
    "flowpath Mpps",
    "flowpath fwd",
    "OVS/flowpath",
];

/// What the figures are, under the table.
fn notes(rows: &[RigRow]) -> String {
    let mut s = String::new();
    if cfg!(debug_assertions) {
        s.push_str(
            "- flowpath's side was built without optimisations: its cycles mean nothing; \
             build with --release\n",
        );
    }
    for r in rows {
        for (who, f) in [("OVS-DPDK", &r.ovs), ("flowpath", &r.flowpath)] {
            if let Ok(f) = f {
                if !f.note.is_empty() {
                    s.push_str(&format!("- {} {}: {}\n", r.set, who, f.note));
                }
            }
        }
    }
    s
}

const WHAT: &str = "Cycles a packet, median (min-max) over the windows: OVS-DPDK's from its \
    PMD's own counters (`dpif-netdev/pmd-perf-show`), flowpath's from the TSC around its \
    datapath on the same frames and flows in memory; fwd is the share of received packets \
    sent out.";

/// The plain-text table.
pub fn table(rows: &[RigRow]) -> String {
    let cells = cells(rows);
    let mut w: Vec<usize> = HEAD.iter().map(|h| h.len()).collect();
    for r in &cells {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |r: &[String]| {
        let v: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<0$}", w[i]))
            .collect();
        v.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&HEAD.map(String::from));
    for r in &cells {
        out.push_str(&line(r));
    }
    out + &notes(rows)
}

/// The table as Markdown under a caption (command, CPU, TSC, kernel, date).
pub fn markdown(rows: &[RigRow]) -> String {
    let ghz = flowpath_base::clock::tsc_hz() / 1e9;
    let md = flowpath_report::markdown::captioned(WHAT, ghz, &HEAD, &cells(rows));
    md + "\n" + &notes(rows)
}

#[cfg(test)]
mod tests;
