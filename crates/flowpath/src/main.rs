//! The `flowpath` command: a software switch that knows what every packet costs.
//! One binary; each subcommand is one job (`flowpath --help`).
fn main() {}
