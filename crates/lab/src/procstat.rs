//! CPU time from `/proc/stat` (read by the `procfs` crate): how many ticks one CPU spent
//! busy (user, nice, system, irq, softirq, steal) — the same measure for poll-mode
//! switches and for softirq work.

use procfs::{CurrentSI, KernelStats};

/// One CPU's `/proc/stat` line, in USER_HZ ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Non-idle ticks (guest time is already inside user and nice).
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }

    /// All ticks.
    pub fn total(&self) -> u64 {
        self.busy() + self.idle + self.iowait
    }

    /// Field-wise `self - earlier` (saturating: counters only grow).
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        self.zip(earlier, u64::saturating_sub)
    }

    /// Field-wise `f(self, other)`.
    fn zip(&self, other: &CpuTimes, f: impl Fn(u64, u64) -> u64) -> CpuTimes {
        CpuTimes {
            user: f(self.user, other.user),
            nice: f(self.nice, other.nice),
            system: f(self.system, other.system),
            idle: f(self.idle, other.idle),
            iowait: f(self.iowait, other.iowait),
            irq: f(self.irq, other.irq),
            softirq: f(self.softirq, other.softirq),
            steal: f(self.steal, other.steal),
        }
    }
}

impl From<&procfs::CpuTime> for CpuTimes {
    /// Fields an old kernel does not have count as zero.
    fn from(c: &procfs::CpuTime) -> CpuTimes {
        CpuTimes {
            user: c.user,
            nice: c.nice,
            system: c.system,
            idle: c.idle,
            iowait: c.iowait.unwrap_or(0),
            irq: c.irq.unwrap_or(0),
            softirq: c.softirq.unwrap_or(0),
            steal: c.steal.unwrap_or(0),
        }
    }
}

/// Is the `cpu`-th `cpuN` line of `/proc/stat` CPU `cpu`'s? procfs gives the lines in
/// order without their numbers, and the kernel leaves offline CPUs out, so it is while
/// CPUs 0 to `cpu` are all online: the first range of `online` (the kernel's list,
/// `/sys/devices/system/cpu/online`: "0-3", "0", "0-1,3") starts at 0 and reaches `cpu`.
fn numbered_by_position(online: &str, cpu: usize) -> bool {
    let first = online.trim().split(',').next().unwrap_or_default();
    let (lo, hi) = first.split_once('-').unwrap_or((first, first));
    lo.parse::<usize>() == Ok(0) && hi.parse::<usize>().is_ok_and(|hi| hi >= cpu)
}

/// CPU `cpu`'s times in a reading of `/proc/stat`, given the kernel's list of online CPUs
/// (None: not known, taken as all of them).
fn cpu_in(stat: &KernelStats, cpu: usize, online: Option<&str>) -> Result<CpuTimes, String> {
    if let Some(o) = online.filter(|o| !numbered_by_position(o, cpu)) {
        return Err(format!(
            "cpu{cpu}: a CPU up to it is offline (online: {}), so /proc/stat's lines are \
             not in CPU order",
            o.trim()
        ));
    }
    stat.cpu_time
        .get(cpu)
        .map(CpuTimes::from)
        .ok_or_else(|| format!("/proc/stat has no cpu{cpu} line"))
}

/// Read CPU `cpu`'s times now.
pub fn read_cpu(cpu: usize) -> Result<CpuTimes, String> {
    read_cpus(&[cpu])
}

/// Read the times of `cpus` now, summed field by field (one reading of `/proc/stat`).
pub fn read_cpus(cpus: &[usize]) -> Result<CpuTimes, String> {
    let stat = KernelStats::current().map_err(|e| format!("/proc/stat: {e}"))?;
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").ok();
    let mut t = CpuTimes::default();
    for &cpu in cpus {
        t = t.zip(&cpu_in(&stat, cpu, online.as_deref())?, |a, b| a + b);
    }
    Ok(t)
}

/// USER_HZ: the unit of `/proc/stat`.
pub fn ticks_per_second() -> f64 {
    procfs::ticks_per_second() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use procfs::{ExplicitSystemInfo, FromBufReadSI};

    const SAMPLE: &str = "cpu  759534 128 109404 497310 5092 0 1164 422 0 0
cpu0 379767 64 54702 248655 2546 0 582 211 0 0
cpu1 380120 64 54825 248655 2546 3 658 211 7 0
intr 123 0 0
ctxt 999
btime 1700000000
processes 4242
";

    /// `/proc/stat` text as procfs reads it.
    fn stat(text: &str) -> Result<KernelStats, String> {
        let si = ExplicitSystemInfo {
            boot_time_secs: 1_700_000_000,
            ticks_per_second: 100,
            page_size: 4096,
            is_little_endian: cfg!(target_endian = "little"),
        };
        KernelStats::from_buf_read(text.as_bytes(), &si).map_err(|e| e.to_string())
    }

    fn parse_cpu(text: &str, cpu: usize) -> Option<CpuTimes> {
        cpu_in(&stat(text).ok()?, cpu, None).ok()
    }

    #[test]
    fn parses_one_cpu_line_not_the_total() {
        let c = parse_cpu(SAMPLE, 1).unwrap();
        assert_eq!(c.user, 380120);
        assert_eq!(c.irq, 3);
        assert_eq!(c.softirq, 658);
        assert_eq!(c.steal, 211);
        assert_eq!(c.busy(), 380120 + 64 + 54825 + 3 + 658 + 211);
        assert_eq!(parse_cpu(SAMPLE, 0).unwrap().user, 379767);
        assert_eq!(parse_cpu(SAMPLE, 2), None);
    }

    #[test]
    fn old_kernels_with_fewer_fields_parse() {
        let text = "cpu  10 20 30 40\ncpu0 10 20 30 40\nctxt 1\nbtime 1\nprocesses 1\n";
        let c = parse_cpu(text, 0).unwrap();
        assert_eq!((c.busy(), c.total()), (60, 100));
    }

    #[test]
    fn deltas_are_fieldwise_and_never_negative() {
        let at = |user, system, softirq| CpuTimes {
            user,
            system,
            idle: 100,
            softirq,
            ..CpuTimes::default()
        };
        let (a, b) = (at(10, 5, 1), at(60, 25, 6));
        let d = b.since(&a);
        assert_eq!(d.busy(), 50 + 20 + 5);
        assert_eq!(d.idle, 0);
        assert_eq!(a.since(&b).busy(), 0);
    }

    #[test]
    fn garbage_is_rejected() {
        let with = |line: &str| format!("cpu  1 2 3 4\n{line}\nctxt 1\nbtime 1\nprocesses 1\n");
        assert_eq!(parse_cpu(&with("cpu1 a b c d"), 1), None);
        assert_eq!(parse_cpu(&with("cpu1 1 2"), 1), None);
        assert_eq!(parse_cpu("", 1), None);
    }

    #[test]
    fn this_machine_s_first_cpu_reads() {
        let c = read_cpu(0).expect("cpu0 in /proc/stat");
        assert!(c.total() > 0 && c.busy() <= c.total(), "{c:?}");
        assert!(ticks_per_second() > 0.0);
    }

    #[test]
    fn lines_are_cpus_only_while_the_cpus_before_are_online() {
        assert!(numbered_by_position("0-3\n", 3));
        assert!(numbered_by_position("0", 0));
        assert!(numbered_by_position("0-1,3", 1));
        assert!(
            !numbered_by_position("0-1,3", 3),
            "cpu2 is offline: cpu3 is the third line"
        );
        assert!(!numbered_by_position("1-3", 1));
        assert!(!numbered_by_position("0-3", 4));
        let s = stat(SAMPLE).unwrap();
        assert!(cpu_in(&s, 1, Some("0-1")).is_ok());
        assert!(cpu_in(&s, 1, Some("0,2")).is_err());
    }
}
