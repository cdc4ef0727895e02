//! `flowpath flows` and `flowpath run`: flow programming over the control socket.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct FlowsArgs {}

pub fn run(_args: FlowsArgs) -> ExitCode {
    eprintln!("not built yet");
    ExitCode::from(2)
}

#[derive(clap::Args)]
pub struct RunArgs {}

pub fn run_switch(_args: RunArgs) -> ExitCode {
    eprintln!("not built yet");
    ExitCode::from(2)
}
