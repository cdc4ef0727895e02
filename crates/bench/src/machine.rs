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
    /// This machine: CPU, cores and kernel as [`flowpath_report::markdown::Host::probe`]
    /// reads them, the TSC rate, the revision and this process's command line.
    pub fn probe() -> Machine {
        let host = flowpath_report::markdown::Host::probe();
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
            cpu: host.cpu,
            cores: host.cpus,
            tsc_ghz: flowpath_base::clock::tsc_hz() / 1e9,
            kernel: host.kernel,
            git_rev,
            command: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }

    /// The lines under a report's title: the machine, with `counted` (what the figures are
    /// counted against: the TSC rate, the cores), then the command.
    pub fn lines(&self, counted: &str) -> String {
        format!(
            "machine: {} | {counted} | Linux {} | rev {}\ncommand: {}\n",
            self.cpu, self.kernel, self.git_rev, self.command
        )
    }
}
