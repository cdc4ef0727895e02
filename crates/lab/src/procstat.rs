//! CPU time from `/proc/stat`: how many ticks one CPU spent busy (user, nice, system,
//! irq, softirq, steal) — the same measure for poll-mode switches and for softirq work.

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
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// The `cpuN` line of a `/proc/stat` text.
pub fn parse_cpu(stat: &str, cpu: usize) -> Option<CpuTimes> {
    let tag = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(tag.as_str()))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<Vec<u64>>>()?;
    if v.len() < 4 {
        return None;
    }
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTimes {
        user: at(0),
        nice: at(1),
        system: at(2),
        idle: at(3),
        iowait: at(4),
        irq: at(5),
        softirq: at(6),
        steal: at(7),
    })
}

/// Read CPU `cpu`'s times now.
pub fn read_cpu(cpu: usize) -> Result<CpuTimes, String> {
    let s = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    parse_cpu(&s, cpu).ok_or_else(|| format!("/proc/stat has no cpu{cpu} line"))
}

/// Read the times of `cpus` now, summed field by field (one reading of `/proc/stat`).
pub fn read_cpus(cpus: &[usize]) -> Result<CpuTimes, String> {
    let s = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    let mut t = CpuTimes::default();
    for &cpu in cpus {
        let c = parse_cpu(&s, cpu).ok_or_else(|| format!("/proc/stat has no cpu{cpu} line"))?;
        t = CpuTimes {
            user: t.user + c.user,
            nice: t.nice + c.nice,
            system: t.system + c.system,
            idle: t.idle + c.idle,
            iowait: t.iowait + c.iowait,
            irq: t.irq + c.irq,
            softirq: t.softirq + c.softirq,
            steal: t.steal + c.steal,
        };
    }
    Ok(t)
}

/// USER_HZ: the unit of `/proc/stat`.
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "cpu  759534 128 109404 497310 5092 0 1164 422 0 0
cpu0 379767 64 54702 248655 2546 0 582 211 0 0
cpu1 380120 64 54825 248655 2546 3 658 211 7 0
intr 123 0 0
ctxt 999
";

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
        let c = parse_cpu("cpu1 10 20 30 40\n", 1).unwrap();
        assert_eq!((c.busy(), c.total()), (60, 100));
    }

    #[test]
    fn deltas_are_fieldwise_and_never_negative() {
        let a = parse_cpu("cpu1 10 0 5 100 0 0 1 0\n", 1).unwrap();
        let b = parse_cpu("cpu1 60 0 25 100 0 0 6 0\n", 1).unwrap();
        let d = b.since(&a);
        assert_eq!(d.busy(), 50 + 20 + 5);
        assert_eq!(d.idle, 0);
        assert_eq!(a.since(&b).busy(), 0);
    }

    #[test]
    fn garbage_is_rejected() {
        assert_eq!(parse_cpu("cpu1 a b c d\n", 1), None);
        assert_eq!(parse_cpu("cpu1 1 2\n", 1), None);
        assert_eq!(parse_cpu("", 1), None);
    }
}
