//! Reading XDP programs through aya, so the lab needs no bpftool: the sink's counter
//! (`sink_vxlan` in bpf/xdp_sink.c: frames that are VXLAN over IPv4; the program attached
//! to an interface, its id from `ip -j link show`, its first map, the per-CPU values of key
//! 0 summed), and a program's run-time statistics (its runs and the nanoseconds they took,
//! which the kernel keeps while BPF_ENABLE_STATS is on). aya has no look-up of one
//! program's info by id, so the program is found among `loaded_programs()`; everything else
//! is aya's own call.

use crate::sh;
use aya::maps::{Map, MapData, PerCpuArray};
use aya::programs::{loaded_programs, ProgramInfo};
use aya::sys::{enable_stats, Stats};
use std::os::fd::OwnedFd;

/// The id of the XDP program attached to `ifname` in `ns`.
fn prog_id(ns: &str, ifname: &str) -> Result<u32, String> {
    let j = sh::ip(&["-n", ns, "-j", "link", "show", "dev", ifname])?;
    let v: serde_json::Value = serde_json::from_str(&j).map_err(|e| e.to_string())?;
    v[0]["xdp"]["prog"]["id"]
        .as_u64()
        .map(|id| id as u32)
        .ok_or_else(|| format!("no XDP program on {ifname}"))
}

/// The kernel's info on the XDP program attached to `ifname` in `ns`.
fn prog_info(ns: &str, ifname: &str) -> Result<ProgramInfo, String> {
    let id = prog_id(ns, ifname)?;
    let mut failed = None;
    for p in loaded_programs() {
        match p {
            Ok(p) if p.id() == id => return Ok(p),
            Ok(_) => {}
            // A program unloaded while listing, or no right to list at all.
            Err(e) => failed = Some(e.to_string()),
        }
    }
    Err(match failed {
        Some(e) => format!("XDP program {id} on {ifname}: {e}"),
        None => format!("XDP program {id} on {ifname} is not loaded"),
    })
}

/// The sum over CPUs of key 0 of the first map of the XDP program on `ifname` in `ns`.
pub fn xdp_counter(ns: &str, ifname: &str) -> Result<u64, String> {
    let info = prog_info(ns, ifname)?;
    let map_id = info
        .map_ids()
        .map_err(|e| e.to_string())?
        .and_then(|ids| ids.first().copied())
        .ok_or_else(|| format!("the XDP program on {ifname} has no map"))?;
    let map = MapData::from_id(map_id)
        .and_then(Map::from_map_data)
        .map_err(|e| format!("map {map_id} of the XDP program on {ifname}: {e}"))?;
    let counter: PerCpuArray<MapData, u64> = map
        .try_into()
        .map_err(|e| format!("map {map_id} of the XDP program on {ifname}: {e}"))?;
    let values = counter
        .get(&0, 0)
        .map_err(|e| format!("map {map_id} of the XDP program on {ifname}: {e}"))?;
    Ok(values.iter().sum())
}

/// An XDP program's run-time statistics at one moment: its name, how often it has run and
/// the nanoseconds those runs took in all (both only counted while some process holds
/// [`RunTimeStats`] on, or `kernel.bpf_stats_enabled` is 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgRuns {
    pub name: String,
    pub run_time_ns: u64,
    pub run_cnt: u64,
}

impl ProgRuns {
    /// Nanoseconds a run between `earlier` and this reading of the same program (None
    /// when it did not run, or the readings are of different programs).
    pub fn ns_per_run_since(&self, earlier: &ProgRuns) -> Option<f64> {
        let runs = self.run_cnt.checked_sub(earlier.run_cnt)?;
        let ns = self.run_time_ns.checked_sub(earlier.run_time_ns)?;
        (self.name == earlier.name && runs > 0).then(|| ns as f64 / runs as f64)
    }
}

/// The run-time statistics of the XDP program on `ifname` in `ns`.
pub fn prog_runs(ns: &str, ifname: &str) -> Result<ProgRuns, String> {
    let info = prog_info(ns, ifname)?;
    Ok(ProgRuns {
        name: String::from_utf8_lossy(info.name()).into_owned(),
        run_time_ns: u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX),
        run_cnt: info.run_count(),
    })
}

/// The kernel's run-time statistics of BPF programs, on while this lives (BPF_ENABLE_STATS:
/// an fd, so they go off again when the lab ends however it ends, and no sysctl is left
/// changed). Every program reads the clock twice a run while they are on.
pub struct RunTimeStats {
    _fd: OwnedFd,
}

/// Turn the run-time statistics on (root; Linux 5.8 and later).
pub fn enable_run_time_stats() -> Result<RunTimeStats, String> {
    let fd = enable_stats(Stats::RunTime).map_err(|e| e.to_string())?;
    Ok(RunTimeStats { _fd: fd })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ns_per_run_is_the_difference_of_two_readings_of_one_program() {
        let at = |name: &str, ns, cnt| ProgRuns {
            name: name.into(),
            run_time_ns: ns,
            run_cnt: cnt,
        };
        let a = at("flow_tier", 1_000, 10);
        assert_eq!(at("flow_tier", 3_000, 20).ns_per_run_since(&a), Some(200.0));
        assert_eq!(
            at("flow_tier", 3_000, 10).ns_per_run_since(&a),
            None,
            "no runs"
        );
        assert_eq!(
            at("xdp_fwd_all", 3_000, 20).ns_per_run_since(&a),
            None,
            "another program"
        );
        assert_eq!(
            at("flow_tier", 500, 5).ns_per_run_since(&a),
            None,
            "counts went back"
        );
    }
}
