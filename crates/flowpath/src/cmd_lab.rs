//! `flowpath lab`: a netns topology, the same traffic through flowpath and its peers, one table.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct LabArgs {}

pub fn run(_args: LabArgs) -> ExitCode {
    eprintln!("flowpath lab: not built yet");
    ExitCode::FAILURE
}
