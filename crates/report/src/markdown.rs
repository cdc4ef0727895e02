//! Result tables as Markdown, for the `--markdown` output of the measuring commands:
//! a caption that says what ran where and when, then the table. `scripts/results.py`
//! pastes that output into README.md and docs/, so the tables there are never typed.

/// What a figure was measured on, as the caption prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub cpu: String,
    pub cpus: usize,
    pub kernel: String,
}

impl Host {
    /// This machine: the CPU model from /proc/cpuinfo, the CPUs this process may use, the
    /// kernel release.
    pub fn probe() -> Host {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|s| s.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Host {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel,
        }
    }
}

/// The command as a user would type it: `flowpath` and this process's arguments, without
/// `--markdown` (which only chose the format).
pub fn command_line() -> String {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--markdown")
        .collect();
    let mut s = String::from("flowpath");
    for a in args {
        s.push(' ');
        s.push_str(&a);
    }
    s
}

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The line above a table: the command in backticks, then the machine and the date, then
/// `what` (how to read the figures). `tsc_ghz` is the rate the cycles were counted at.
pub fn caption(what: &str, tsc_ghz: f64) -> String {
    let h = Host::probe();
    format!(
        "`{}` on {} ({} CPUs, TSC {:.3} GHz, Linux {}), {}. {}\n",
        command_line(),
        h.cpu,
        h.cpus,
        tsc_ghz,
        h.kernel,
        today(),
        what
    )
}

/// A Markdown [`table`] under its [`caption`] (`what`, and the TSC rate), a blank line
/// between.
pub fn captioned<S: AsRef<str>>(
    what: &str,
    tsc_ghz: f64,
    head: &[&str],
    rows: &[Vec<S>],
) -> String {
    format!("{}\n{}", caption(what, tsc_ghz), table(head, rows))
}

/// A Markdown table; `|` inside a cell is escaped.
pub fn table<S: AsRef<str>>(head: &[&str], rows: &[Vec<S>]) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::new();
    out.push_str(&format!("| {} |\n", head.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(head.len())));
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| cell(c.as_ref())).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_794), (2026, 12, 7));
        assert_eq!(today().len(), 10);
    }

    #[test]
    fn tables_escape_bars_and_have_a_rule_per_column() {
        let t = table(&["a", "b"], &[vec!["1", "x|y"]]);
        assert_eq!(t, "| a | b |\n|---|---|\n| 1 | x\\|y |\n");
    }
}
