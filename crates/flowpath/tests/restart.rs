//! The switch process end to end: flows programmed over the control socket survive a
//! restart, and a `kill -9` in the middle of a large `replace` leaves, after restart,
//! exactly the old set or exactly the new set. Needs no root (a Unix socket in a temp dir).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("flowpath-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &Path) -> Daemon {
    let sock = dir.join("control.sock");
    let child = Command::new(BIN)
        .args(["run", "--control"])
        .arg(&sock)
        .arg("--state")
        .arg(dir.join("flows.state"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start flowpath run");
    let t0 = Instant::now();
    // Ready when the socket answers.
    loop {
        if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "flowpath run never opened its socket"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Daemon(child)
}

fn flows(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .arg("flows")
        .args(args)
        .arg("--control")
        .arg(dir.join("control.sock"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The flows file of a set: `n` flows, all to `port`.
fn set_file(dir: &Path, name: &str, n: u32, port: u32) -> PathBuf {
    let s = flowpath_switchbench::replace::route_flows(n as usize, port);
    let p = dir.join(name);
    std::fs::write(&p, s).unwrap();
    p
}

/// (flow count, the set of output ports) from a dump.
fn dump_summary(dir: &Path) -> (usize, Vec<String>) {
    let (ok, out, err) = flows(dir, &["dump"]);
    assert!(ok, "dump failed: {err}");
    let mut ports: Vec<String> = out
        .lines()
        .map(|l| l.rsplit("actions=").next().unwrap().to_string())
        .collect();
    let n = ports.len();
    ports.sort();
    ports.dedup();
    (n, ports)
}

#[test]
fn flows_survive_a_restart() {
    let d = Dir::new("restart");
    let mut daemon = start(&d.0);
    let (ok, _, err) = flows(
        &d.0,
        &[
            "add",
            "table=0,priority=10,ip,nw_dst=10.0.0.0/8,idle_timeout=600 actions=output:2",
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = flows(&d.0, &["add", "priority=5 actions=drop"]);
    assert!(ok, "{err}");
    let (_, before, _) = flows(&d.0, &["dump"]);
    assert_eq!(before.lines().count(), 2, "{before}");
    daemon.0.kill().unwrap();
    daemon.0.wait().unwrap();
    drop(daemon);
    let _daemon = start(&d.0);
    let (_, after, _) = flows(&d.0, &["dump"]);
    let strip = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.split(" priority=").nth(1).unwrap().to_string())
            .collect()
    };
    assert_eq!(strip(&before), strip(&after));
    // A bad flow is refused with its column and reason, and changes nothing.
    let (ok, _, err) = flows(&d.0, &["add", "priority=1,nw_sr=1.2.3.4 actions=drop"]);
    assert!(!ok);
    assert!(err.contains("nw_sr") && err.contains("column"), "{err}");
}

#[test]
fn kill_9_during_a_large_replace_leaves_old_or_new() {
    let d = Dir::new("kill9");
    let old = set_file(&d.0, "old.flows", 2_000, 1);
    let new = set_file(&d.0, "new.flows", 100_000, 2);

    // How long a whole replace takes here (this build, this machine), to aim the kills.
    let full = {
        let _daemon = start(&d.0);
        let t0 = Instant::now();
        let (ok, _, err) = flows(&d.0, &["replace", new.to_str().unwrap()]);
        assert!(ok, "{err}");
        t0.elapsed()
    };
    let mut outcomes = Vec::new();
    // Kill at fractions of that time (before, during and around the end of the work),
    // and once after the client has its answer.
    let fractions = [
        0.0,
        0.1,
        0.25,
        0.4,
        0.55,
        0.7,
        0.85,
        1.0,
        1.2,
        f64::INFINITY,
    ];
    for f in fractions {
        let mut daemon = start(&d.0);
        let (ok, _, err) = flows(&d.0, &["replace", old.to_str().unwrap()]);
        assert!(ok, "{err}");
        let mut client = Command::new(BIN)
            .args(["flows", "replace"])
            .arg(&new)
            .arg("--control")
            .arg(d.0.join("control.sock"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let acked = if f.is_finite() {
            std::thread::sleep(full.mul_f64(f));
            false
        } else {
            client.wait().unwrap().success()
        };
        daemon.0.kill().unwrap(); // SIGKILL
        daemon.0.wait().unwrap();
        drop(daemon);
        let acked = acked || client.wait().unwrap().success();

        let _daemon = start(&d.0);
        let (n, ports) = dump_summary(&d.0);
        let outcome = match (n, ports.as_slice()) {
            (2_000, [p]) if p == "output:1" => "old",
            (100_000, [p]) if p == "output:2" => "new",
            _ => panic!("after kill -9 at {f} x {full:?}: {n} flows with actions {ports:?}"),
        };
        if acked {
            assert_eq!(outcome, "new", "an acknowledged replace was lost");
        }
        outcomes.push((f, outcome));
    }
    eprintln!("kill -9 at fractions of a {full:?} replace: {outcomes:?}");
    assert!(outcomes.iter().any(|o| o.1 == "old"), "{outcomes:?}");
    assert!(outcomes.iter().any(|o| o.1 == "new"), "{outcomes:?}");
}
