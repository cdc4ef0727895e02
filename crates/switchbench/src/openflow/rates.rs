//! The flow_mod rate experiment: each system's runs by each method, interleaved (a slow
//! spell of the machine falls on all of them), as one row per system and method with its
//! rate against OVS's.

use super::client;
use super::flowmod::{self, Sample};
use super::ovs::PrivateOvs;
use super::results::{OpenFlowBenchConfig, RateRow, Spread};
use flowpath_report::grouped;
use std::path::{Path, PathBuf};

const BLAST: &str = "one connection, barrier at end";
const OFCTL: &str = "ovs-ofctl add-flows";

/// Every system's runs by both methods as rows, `ratio_to_ovs` set where OVS ran; a run
/// that failed is left out and named in `failures`. `tmp` holds the flows files and the
/// state files' directories.
pub fn rates(
    cfg: &OpenFlowBenchConfig,
    ovs: Option<&PrivateOvs>,
    tmp: &Path,
    progress: &mut impl FnMut(&str),
    failures: &mut Vec<String>,
) -> Vec<RateRow> {
    let mut runs = Runs {
        cfg,
        ovs,
        tmp,
        progress,
        failures,
    };
    let [mem, st, ov] = runs.blast();
    let [omem, ost, oov] = runs.ofctl();
    let n_state = cfg.ofctl_state_flow_mods.min(cfg.ofctl_flow_mods);
    let mut flow_mod = Vec::new();
    let groups: [(&str, &str, u32, &Vec<Sample>); 6] = [
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
    flow_mod
}

/// The runs' settings, where they keep their files, and where they report.
struct Runs<'a, P> {
    cfg: &'a OpenFlowBenchConfig,
    ovs: Option<&'a PrivateOvs>,
    tmp: &'a Path,
    progress: &'a mut P,
    failures: &'a mut Vec<String>,
}

impl<P: FnMut(&str)> Runs<'_, P> {
    /// A run's sample into `into`, or its failure into `failures`.
    fn note(&mut self, what: &str, r: Result<Sample, String>, into: &mut Vec<Sample>) {
        match r {
            Ok(s) => into.push(s),
            Err(e) => self.failures.push(format!("{what}: {e}")),
        }
    }

    /// One connection, a barrier at the end: flowpath without and with a state file, OVS;
    /// runs interleaved.
    fn blast(&mut self) -> [Vec<Sample>; 3] {
        let cfg = self.cfg;
        let bytes = client::encode_flow_mods(cfg.flow_mods, client::bench_flow_mod);
        let (mut mem, mut st, mut ov) = (Vec::new(), Vec::new(), Vec::new());
        for run in 1..=cfg.runs {
            (self.progress)(&format!(
                "flow_mod rate, {} flow_mods, run {run}/{}",
                grouped(u64::from(cfg.flow_mods)),
                cfg.runs
            ));
            let r = flowmod::flowpath_blast(&bytes, None);
            self.note("flowpath (no state file)", r, &mut mem);
            let d = state_dir(self.tmp, run);
            let r = flowmod::flowpath_blast(&bytes, Some(&d));
            self.note("flowpath (state file)", r, &mut st);
            let _ = std::fs::remove_dir_all(&d);
            if let Some(o) = self.ovs {
                let r = flowmod::ovs_blast(o, &bytes);
                self.note("ovs-vswitchd", r, &mut ov);
            }
        }
        [mem, st, ov]
    }

    /// `ovs-ofctl add-flows`, a barrier after each flow_mod: into flowpath without and
    /// with a state file (fewer flows: every barrier saves the whole set), and into OVS.
    /// Nothing when `ovs-ofctl` is not installed.
    fn ofctl(&mut self) -> [Vec<Sample>; 3] {
        let cfg = self.cfg;
        let file = self.tmp.join("flows.txt");
        let state_file = self.tmp.join("flows-state.txt");
        let n_state = cfg.ofctl_state_flow_mods.min(cfg.ofctl_flow_mods);
        let (mut omem, mut ost, mut oov) = (Vec::new(), Vec::new(), Vec::new());
        if !which_ofctl() || cfg.ofctl_flow_mods == 0 {
            return [omem, ost, oov];
        }
        if let Err(e) = flowmod::write_flows_file(&file, cfg.ofctl_flow_mods)
            .and_then(|_| flowmod::write_flows_file(&state_file, n_state))
        {
            self.failures.push(e);
            return [omem, ost, oov];
        }
        for run in 1..=cfg.ofctl_runs {
            (self.progress)(&format!(
                "ovs-ofctl add-flows, {} flows, run {run}/{}",
                grouped(u64::from(cfg.ofctl_flow_mods)),
                cfg.ofctl_runs
            ));
            let r = flowmod::flowpath_ofctl(&file, None);
            self.note("ovs-ofctl → flowpath (no state file)", r, &mut omem);
            let d = state_dir(self.tmp, 100 + run);
            if n_state > 0 {
                let r = flowmod::flowpath_ofctl(&state_file, Some(&d));
                self.note("ovs-ofctl → flowpath (state file)", r, &mut ost);
            }
            let _ = std::fs::remove_dir_all(&d);
            if let Some(o) = self.ovs {
                let r = flowmod::ovs_ofctl(o, &file);
                self.note("ovs-ofctl → ovs-vswitchd", r, &mut oov);
            }
        }
        [omem, ost, oov]
    }
}

fn row(system: &str, method: &str, n: u32, samples: &[Sample]) -> RateRow {
    let secs: Vec<f64> = samples.iter().map(|s| s.secs).collect();
    RateRow {
        system: system.into(),
        method: method.into(),
        flow_mods: n,
        runs: samples.len(),
        flow_mods_per_s: Spread::of(&secs.iter().map(|s| f64::from(n) / s).collect::<Vec<_>>()),
        seconds: Spread::of(&secs),
        errors: samples.iter().map(|s| s.errors).sum(),
        first_error: samples.iter().find_map(|s| s.first_error.clone()),
        rules_after: samples.iter().map(|s| s.rules).collect(),
        ratio_to_ovs: None,
    }
}

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
