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
        // The revision of the working directory's repository, else of the source tree
        // this binary was built from (if it is still there); "-dirty" when tracked files
        // differ from it.
        let git = |dir: Option<&str>, args: &[&str]| {
            let mut cmd = std::process::Command::new("git");
            if let Some(d) = dir {
                cmd.args(["-C", d]);
            }
            cmd.args(args)
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
        };
        let git_rev = [None, Some(env!("CARGO_MANIFEST_DIR"))]
            .into_iter()
            .find_map(|dir| {
                let out =
                    git(dir, &["rev-parse", "--short", "HEAD"]).filter(|o| o.status.success())?;
                let rev = String::from_utf8_lossy(&out.stdout).trim().to_string();
                let dirty = git(dir, &["diff", "--quiet", "HEAD"])
                    .is_some_and(|o| o.status.code() == Some(1));
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
