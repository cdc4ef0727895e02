//! Reading XDP programs straight through the bpf(2) system call, so the lab needs no
//! bpftool: the sink's counter (`sink_vxlan` in bpf/xdp_sink.c: frames that are VXLAN over
//! IPv4; the program attached to an interface, its id from `ip -j link show`, its first
//! map, the per-CPU values of key 0 summed), and a program's run-time statistics (its
//! runs and the nanoseconds they took, which the kernel keeps while BPF_ENABLE_STATS is on).

use crate::sh;

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_MAP_GET_FD_BY_ID: libc::c_long = 14;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_ENABLE_STATS: libc::c_long = 32;
/// `enum bpf_stats_type`: run time and run count of every program.
const BPF_STATS_RUN_TIME: u32 = 0;

/// `struct bpf_prog_info` as of Linux 6.x (232 bytes); the offsets used are checked
/// against `<linux/bpf.h>` with offsetof: nr_map_ids 52, map_ids 56, name 64 (16 bytes),
/// run_time_ns 192, run_cnt 200. Fields the kernel does not have stay zero.
const PROG_INFO_LEN: usize = 232;

/// `union bpf_attr`, large enough for every command used here (the kernel reads only the
/// size passed, zeroes beyond the fields matter).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32_at(mut self, off: usize, v: u32) -> Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64_at(mut self, off: usize, v: u64) -> Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

/// An fd that is closed on drop.
struct Fd(i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the fd is ours (returned by bpf(2)) and closed once.
        unsafe { libc::close(self.0) };
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> Result<i64, String> {
    // SAFETY: attr points to 128 initialised bytes that live across the call; every
    // pointer inside it points to a live buffer of the size given next to it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            std::mem::size_of::<Attr>() as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(format!("bpf({cmd}): {}", std::io::Error::last_os_error()));
    }
    Ok(r)
}

/// CPUs the kernel may have (per-CPU map values come one per possible CPU).
fn possible_cpus() -> usize {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    parse_cpu_list(s.trim()).unwrap_or(1)
}

/// The count of a CPU list like `0-1` or `0,2-5` (the highest CPU + 1).
pub fn parse_cpu_list(s: &str) -> Option<usize> {
    let mut max = None;
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let hi = part.rsplit('-').next()?.trim().parse::<usize>().ok()?;
        max = Some(max.map_or(hi, |m: usize| m.max(hi)));
    }
    max.map(|m| m + 1)
}

/// The id of the XDP program attached to `ifname` in `ns`.
fn prog_id(ns: &str, ifname: &str) -> Result<u32, String> {
    let j = sh::ip(&["-n", ns, "-j", "link", "show", "dev", ifname])?;
    let v: serde_json::Value = serde_json::from_str(&j).map_err(|e| e.to_string())?;
    v[0]["xdp"]["prog"]["id"]
        .as_u64()
        .map(|id| id as u32)
        .ok_or_else(|| format!("no XDP program on {ifname}"))
}

/// `struct bpf_prog_info` of the XDP program on `ifname` in `ns`, its first
/// `map_ids.len()` map ids written to `map_ids`.
fn prog_info(ns: &str, ifname: &str, map_ids: &mut [u32]) -> Result<[u8; PROG_INFO_LEN], String> {
    let id = prog_id(ns, ifname)?;
    let prog = Fd(bpf(BPF_PROG_GET_FD_BY_ID, &mut Attr::new().u32_at(0, id))? as i32);
    let mut info = [0u8; PROG_INFO_LEN];
    info[52..56].copy_from_slice(&(map_ids.len() as u32).to_ne_bytes());
    info[56..64].copy_from_slice(&(map_ids.as_mut_ptr() as u64).to_ne_bytes());
    bpf(
        BPF_OBJ_GET_INFO_BY_FD,
        &mut Attr::new()
            .u32_at(0, prog.0 as u32)
            .u32_at(4, info.len() as u32)
            .u64_at(8, info.as_mut_ptr() as u64),
    )?;
    Ok(info)
}

fn u64_at(info: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(info[off..off + 8].try_into().expect("8 bytes"))
}

/// The sum over CPUs of key 0 of the first map of the XDP program on `ifname` in `ns`.
pub fn xdp_counter(ns: &str, ifname: &str) -> Result<u64, String> {
    let mut map_ids = [0u32; 4];
    let info = prog_info(ns, ifname, &mut map_ids)?;
    let nr = u32::from_ne_bytes(info[52..56].try_into().unwrap());
    if nr == 0 {
        return Err(format!("the XDP program on {ifname} has no map"));
    }
    let map = Fd(bpf(BPF_MAP_GET_FD_BY_ID, &mut Attr::new().u32_at(0, map_ids[0]))? as i32);
    let key = 0u32;
    let mut values = vec![0u64; possible_cpus()];
    bpf(
        BPF_MAP_LOOKUP_ELEM,
        &mut Attr::new()
            .u32_at(0, map.0 as u32)
            .u64_at(8, &key as *const u32 as u64)
            .u64_at(16, values.as_mut_ptr() as u64),
    )?;
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
    let info = prog_info(ns, ifname, &mut [])?;
    let name = &info[64..80];
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(ProgRuns {
        name: String::from_utf8_lossy(&name[..len]).into_owned(),
        run_time_ns: u64_at(&info, 192),
        run_cnt: u64_at(&info, 200),
    })
}

/// The kernel's run-time statistics of BPF programs, on while this lives (BPF_ENABLE_STATS:
/// an fd, so they go off again when the lab ends however it ends, and no sysctl is left
/// changed). Every program reads the clock twice a run while they are on.
pub struct RunTimeStats {
    _fd: Fd,
}

/// Turn the run-time statistics on (root; Linux 5.8 and later).
pub fn enable_run_time_stats() -> Result<RunTimeStats, String> {
    let fd = bpf(
        BPF_ENABLE_STATS,
        &mut Attr::new().u32_at(0, BPF_STATS_RUN_TIME),
    )?;
    Ok(RunTimeStats { _fd: Fd(fd as i32) })
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

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1"), Some(2));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0,2-5"), Some(6));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
