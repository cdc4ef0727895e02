//! `flowpath switch` and `flowpath stats`: the daemon on real ports, and its counters.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct SwitchArgs {
    /// The TOML config: ports, workers, flows, state file, control socket.
    #[arg(long)]
    config: std::path::PathBuf,
}

#[derive(clap::Args)]
pub struct StatsArgs {}

pub fn run(_args: SwitchArgs) -> ExitCode {
    eprintln!("flowpath switch: not built yet");
    ExitCode::FAILURE
}

pub fn stats(_args: StatsArgs) -> ExitCode {
    eprintln!("flowpath stats: not built yet");
    ExitCode::FAILURE
}
