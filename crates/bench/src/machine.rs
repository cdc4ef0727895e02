//! What the numbers were measured on: CPU, TSC rate, kernel, revision, command line.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub tsc_ghz: f64,
    pub kernel: String,
    pub git_rev: String,
    pub command: String,
}

impl Machine {
    pub fn probe() -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|s| s.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        // The revision this binary was built from (recorded by build.rs); without one (built
        // outside a git checkout), the working directory's repository's, else "unknown".
        let git_rev = Some(env!("FLOWPATH_BUILD_REV"))
            .filter(|r| !r.is_empty())
            .map(str::to_string)
            .or_else(|| {
                let git = |args: &[&str]| {
                    std::process::Command::new("git")
                        .args(args)
                        .stderr(std::process::Stdio::null())
                        .output()
                        .ok()
                };
                let out = git(&["rev-parse", "--short", "HEAD"]).filter(|o| o.status.success())?;
                let rev = String::from_utf8_lossy(&out.stdout).trim().to_string();
                let dirty =
                    git(&["diff", "--quiet", "HEAD"]).is_some_and(|o| o.status.code() == Some(1));
                Some(if dirty { rev + "-dirty" } else { rev })
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            tsc_ghz: flowpath_base::clock::tsc_hz() / 1e9,
            kernel,
            git_rev,
            command: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }
}
