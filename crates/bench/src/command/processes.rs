//! `flowpath bench --runs N` with N > 1: each run of the cost cases in a fresh child
//! process (this binary, `--runs 1 --json`), pooled into one row per case. A process on
//! a VM can run at one of two speeds throughout, so N runs in one process are one sample
//! of that lottery; `--in-process` keeps them in one (for perf and callgrind).

use super::against::{child_rows, forwarded_args};
use crate::runner::{pool, Case, CaseResult};
use flowpath_base::progress;
use std::ffi::OsString;

/// `runs` child processes of this binary, each running every case in `cases` once; one
/// pooled result per case, in `cases`' order.
pub fn run(cases: &[Case], runs: usize) -> Result<Vec<CaseResult>, String> {
    let names: Vec<String> = cases.iter().map(|c| c.name()).collect();
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let fwd = forwarded_args(&args, &names);
    let this = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let mut parts: Vec<Vec<CaseResult>> = vec![Vec::new(); names.len()];
    for run in 0..runs {
        progress::line(&format!("run {}/{runs} (a process each)", run + 1));
        for row in child_rows(&this, &fwd)? {
            let r: CaseResult = serde_json::from_value(row)
                .map_err(|e| format!("a child's row is not a cost case's result ({e})"))?;
            let i = names
                .iter()
                .position(|n| *n == r.case)
                .ok_or_else(|| format!("a child reported case {}, not asked for", r.case))?;
            parts[i].push(r);
        }
    }
    names
        .iter()
        .zip(&parts)
        .map(|(n, p)| pool(p).ok_or_else(|| format!("no child reported case {n}")))
        .collect()
}
