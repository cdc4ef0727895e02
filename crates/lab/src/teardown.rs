//! Tearing the lab down: undoing everything the [`registry`](crate::registry) holds, on
//! drop of the topology, on SIGINT/SIGTERM/SIGHUP, and `flowpath lab --cleanup` for what
//! runs that died left behind (found by the namespace names: the prefix and the run's pid).

use crate::registry::{self, set_interrupted};
use crate::sh;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// Every namespace the lab makes starts with this, then the pid of the run.
pub const PREFIX: &str = "fpl";

static CLEANUP: Mutex<()> = Mutex::new(());

/// The id of this run's namespaces: the prefix and our pid.
pub fn run_id() -> String {
    format!("{PREFIX}{}", std::process::id())
}

/// Undo everything registered: stop processes (SIGTERM, then SIGKILL), kill whatever
/// still runs in the namespaces, delete them, unmount, remove directories, restore the
/// huge-page count. Idempotent; safe from the signal thread.
pub fn cleanup_all() {
    // Held for the whole teardown: a second caller (the main thread dropping the topology
    // while the signal thread tears down) waits until it is done instead of exiting early.
    let _busy = CLEANUP.lock().unwrap_or_else(|e| e.into_inner());
    let Some(reg) = registry::take() else { return };
    for &p in &reg.pids {
        sh::signal_group(p, libc::SIGTERM);
    }
    if !reg.pids.is_empty() {
        let alive = |p: &u32| Path::new(&format!("/proc/{p}")).exists() && !is_zombie(*p);
        sh::wait_for(Duration::from_millis(1500), || {
            (!reg.pids.iter().any(alive)).then_some(())
        });
        for &p in &reg.pids {
            sh::signal_group(p, libc::SIGKILL);
        }
    }
    for ns in &reg.namespaces {
        delete_namespace(ns);
    }
    for m in &reg.mounts {
        let _ = sh::run(None, "umount", &[&m.to_string_lossy()]);
        let _ = std::fs::remove_dir(m);
    }
    for d in &reg.dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    for (p, v) in &reg.restore_files {
        let _ = std::fs::write(p, v);
    }
    if let Some(n) = reg.hugepages_restore {
        let _ = std::fs::write("/proc/sys/vm/nr_hugepages", n.to_string());
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Kill every process still running in `ns` (all of them the lab's); how many there were.
pub fn kill_namespace_processes(ns: &str) -> usize {
    let Ok(pids) = sh::ip(&["netns", "pids", ns]) else {
        return 0;
    };
    let pids: Vec<u32> = pids
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    for &p in &pids {
        sh::signal(p, libc::SIGKILL);
    }
    if !pids.is_empty() {
        std::thread::sleep(Duration::from_millis(100));
    }
    pids.len()
}

/// Kill every process left in `ns`, then delete it.
fn delete_namespace(ns: &str) {
    kill_namespace_processes(ns);
    let _ = sh::ip(&["netns", "del", ns]);
}

/// On SIGINT, SIGTERM or SIGHUP: clean up, then exit 130. Install once, early.
pub fn install_signal_handler() -> Result<(), String> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| format!("signal handler: {e}"))?;
    std::thread::Builder::new()
        .name("lab-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                set_interrupted();
                eprintln!("\nflowpath lab: signal {sig}: tearing down the topology...");
                cleanup_all();
                eprintln!("flowpath lab: cleaned up");
                std::process::exit(130);
            }
        })
        .map_err(|e| format!("signal thread: {e}"))?;
    Ok(())
}

/// The pid in a lab namespace name `fpl<pid>-<role>`.
pub fn pid_of_namespace(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, role) = rest.split_once('-')?;
    if !["gen", "sw", "sink"].contains(&role) {
        return None;
    }
    pid.parse().ok()
}

/// Remove what dead lab runs left behind: namespaces named `fpl<pid>-*` whose pid is
/// gone (with any process still in them), their temp directories and huge-page mounts.
/// Returns one line per thing removed or kept.
pub fn cleanup_leftovers() -> Vec<String> {
    let mut report = Vec::new();
    let list = sh::ip(&["netns", "list"]).unwrap_or_default();
    let me = std::process::id();
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(pid) = pid_of_namespace(name) else {
            continue;
        };
        if pid != me && Path::new(&format!("/proc/{pid}")).exists() {
            report.push(format!("kept {name}: run {pid} is still alive"));
            continue;
        }
        delete_namespace(name);
        report.push(format!("removed namespace {name}"));
    }
    if let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix(PREFIX)
                .and_then(|r| r.strip_suffix("-lab").or_else(|| r.strip_suffix("-xdp")))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if pid != me && Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            let huge = e.path().join("huge");
            if huge.exists() {
                let _ = sh::run(None, "umount", &[&huge.to_string_lossy()]);
            }
            if std::fs::remove_dir_all(e.path()).is_ok() {
                report.push(format!("removed {}", e.path().display()));
            }
        }
    }
    if report.is_empty() {
        report.push("nothing to clean up".into());
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_carry_the_pid() {
        assert_eq!(pid_of_namespace("fpl1234-gen"), Some(1234));
        assert_eq!(pid_of_namespace("fpl1234-sink"), Some(1234));
        assert_eq!(pid_of_namespace("fpl1234-other"), None);
        assert_eq!(pid_of_namespace("fplx-gen"), None);
        assert_eq!(pid_of_namespace("other-gen"), None);
    }
}
