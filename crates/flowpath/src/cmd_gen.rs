//! `flowpath gen`: the traffic generator command.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct GenArgs {}

pub fn run(_args: GenArgs) -> ExitCode {
    eprintln!("not built yet");
    ExitCode::from(2)
}
