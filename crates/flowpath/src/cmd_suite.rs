//! `flowpath bench suite`: the characterisation suite command.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct SuiteArgs {}

pub fn run(_args: SuiteArgs) -> ExitCode {
    eprintln!("not built yet");
    ExitCode::from(2)
}
