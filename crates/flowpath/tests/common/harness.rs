//! The harness of the interop tests that run real peers next to the switch
//! (`openflow_clients.rs`, `openflow_controllers.rs`: ovs-ofctl, os-ken, Faucet;
//! `vxlan_interop.rs`, `vxlan_traffic.rs`: Linux and OVS VTEPs): skip-or-fail when a peer
//! is missing ([`Harness`], [`need!`]), commands inside network namespaces, namespaces and
//! scratch directories that go on drop, processes in their own process group, polling with
//! a deadline, and a private Open vSwitch (ovsdb-server and ovs-vswitchd with every file in
//! a scratch directory).
//!
//! What differs per test file is a [`Harness`] constant: the variable that turns a skip into
//! a failure, the script that installs the peers, the variable that keeps scratch
//! directories.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a test file's skip checks and scratch directories go by.
pub struct Harness {
    /// `<required_var>=1` (CI as root, after the setup script): a missing peer fails the
    /// test instead of skipping it.
    pub required_var: &'static str,
    /// The script that installs the peers, named when a tool is missing.
    pub setup_script: &'static str,
    /// Set: scratch directories (captures, logs) stay after the test.
    pub keep_var: &'static str,
}

impl Harness {
    pub fn required(&self) -> bool {
        std::env::var(self.required_var).as_deref() == Ok("1")
    }

    /// `Err` naming those of `tools` that are not installed.
    pub fn need_tools(&self, tools: &[&str]) -> Result<(), String> {
        let missing: Vec<&str> = tools
            .iter()
            .copied()
            .filter(|t| which(t).is_none())
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "needs {} ({} installs them)",
                missing.join(", "),
                self.setup_script
            ))
        }
    }

    pub fn keep(&self) -> bool {
        std::env::var_os(self.keep_var).is_some()
    }

    /// A scratch directory named `name` in the temporary directory, removed on drop
    /// unless [`Harness::keep`].
    pub fn scratch(&self, name: &str) -> Scratch {
        let d = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d, self.keep_var)
    }
}

/// `need!(HARNESS, check)`: `check` is `Err(why)`: skip the test saying why (return from
/// it), or fail it when the harness's required variable is `1`.
#[allow(unused_macros)] // not every test file that includes `common` uses it
macro_rules! need {
    ($h:expr, $check:expr) => {
        if let Err(why) = $check {
            if $h.required() {
                panic!("{}=1, but {why}", $h.required_var);
            }
            eprintln!("skipping: {why}");
            return;
        }
    };
}
#[allow(unused_imports)]
pub(crate) use need;

/// Root and network namespaces, or why not.
pub fn need_root_netns() -> Result<(), String> {
    match super::netns_skip_reason() {
        None => Ok(()),
        Some(why) => Err(why),
    }
}

/// One scenario at a time per test binary: each runs switches, peers and traffic on a
/// 2-CPU machine. A test that panicked while holding it leaves nothing inconsistent.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `prog` in PATH or the sbin directories.
pub fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"])
        .map(|d| Path::new(d).join(prog))
        .find(|p| p.is_file());
    found
}

// ---- commands ---------------------------------------------------------------------------

/// Standard output, then standard error.
pub fn out_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Run; panic with the output unless it succeeds.
pub fn run_ok(c: &mut Command) -> Output {
    let o = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(o.status.success(), "{c:?} failed: {}", out_text(&o));
    o
}

/// `prog` inside namespace `ns`.
pub fn in_ns(ns: &str, prog: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(prog);
    c
}

/// `ip -n NS ARGS...`, which must succeed.
pub fn ipn(ns: &str, args: &[&str]) {
    run_ok(Command::new("ip").arg("-n").arg(ns).args(args));
}

/// No IPv6 in namespace `ns` (no autoconfiguration chatter; existing and new links).
pub fn disable_ipv6(ns: &str) {
    run_ok(in_ns(ns, "sysctl").args(["-qw", "net.ipv6.conf.all.disable_ipv6=1"]));
    run_ok(in_ns(ns, "sysctl").args(["-qw", "net.ipv6.conf.default.disable_ipv6=1"]));
}

/// The last `n` lines of file `p` ("" when it cannot be read).
pub fn tail(p: &Path, n: usize) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `ping [-6] -n -q -c COUNT -i 0.2 -W 2 TO` in namespace `ns`: the number of replies.
pub fn ping(ns: &str, v6: bool, to: &str, count: u32) -> u32 {
    let mut c = in_ns(ns, "ping");
    if v6 {
        c.arg("-6");
    }
    let o = c
        .args([
            "-n",
            "-q",
            "-c",
            &count.to_string(),
            "-i",
            "0.2",
            "-W",
            "2",
            to,
        ])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    s.split(',')
        .find_map(|p| p.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Call `f` every 100 ms until it is true; panic naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < timeout, "timed out after {timeout:?}: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---- namespaces, directories, processes -------------------------------------------------

/// A network namespace with its loopback up, deleted on drop.
pub struct Netns(pub String);

impl Netns {
    /// `ipv6`: false = [`disable_ipv6`] in it (no router or neighbour solicitations).
    pub fn new(name: String, ipv6: bool) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run_ok(Command::new("ip").args(["netns", "add", &name]));
        let ns = Netns(name);
        ipn(&ns.0, &["link", "set", "lo", "up"]);
        if !ipv6 {
            disable_ipv6(&ns.0);
        }
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A scratch directory (see [`Harness::scratch`]), removed on drop unless the second field
/// (a variable name) is set.
pub struct Scratch(pub PathBuf, &'static str);

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os(self.1).is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A process in its own process group (`ip netns exec` forks; a controller may exec
/// another program): the whole group is stopped on drop.
pub struct Proc {
    child: Child,
    pub what: String,
}

impl Proc {
    /// Spawn `c` with standard output and error into `log`.
    pub fn spawn(mut c: Command, what: &str, log: &Path) -> Proc {
        let f = std::fs::File::create(log).unwrap();
        c.stdout(f.try_clone().unwrap()).stderr(f).process_group(0);
        let child = c.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
        Proc {
            child,
            what: what.into(),
        }
    }

    /// Spawn `c` with standard error into `log` and wait for the first line of its
    /// standard output: `ready` (what `flowpath switch` prints), else stop it and `None`.
    pub fn spawn_ready(c: Command, what: &str, log: &Path) -> Option<Proc> {
        Proc::spawn_ready_line(c, what, log, "ready")
    }

    /// [`Proc::spawn_ready`] waiting for the line `ready`.
    pub fn spawn_ready_line(mut c: Command, what: &str, log: &Path, ready: &str) -> Option<Proc> {
        use std::io::BufRead;
        let f = std::fs::File::create(log).unwrap();
        c.stdout(Stdio::piped()).stderr(f).process_group(0);
        let mut child = c.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
        let mut line = String::new();
        let _ = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let mut p = Proc {
            child,
            what: what.into(),
        };
        if line.trim() == ready {
            Some(p)
        } else {
            p.stop();
            None
        }
    }

    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// SIGTERM to the group; see [`Proc::stop_with`].
    pub fn stop(&mut self) {
        self.stop_with(libc::SIGTERM);
    }

    /// `sig` to the group, up to 10 s for the process to exit, then SIGKILL to whatever
    /// is left of the group. Nothing when it had exited already.
    pub fn stop_with(&mut self, sig: i32) {
        let pg = self.child.id() as i32;
        if self.exited().is_some() {
            return;
        }
        // SAFETY: signals to the process group we created for our own child.
        unsafe { libc::kill(-pg, sig) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if self.exited().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above; whatever is left of the group.
        unsafe { libc::kill(-pg, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

// ---- Open vSwitch, private --------------------------------------------------------------

/// ovsdb-server and ovs-vswitchd (in namespace `ns`) with every file in `dir`: a system
/// OVS is never touched. Stopped on drop. The test files add their own constructors (a
/// bridge for OpenFlow clients, a VXLAN VTEP).
pub struct Ovs {
    pub dir: PathBuf,
    pub ns: String,
}

impl Ovs {
    /// OVS's variables for its run, database, log and config directories: all `dir`.
    pub fn env(&self, c: &mut Command) {
        for v in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            c.env(v, &self.dir);
        }
    }

    /// A fresh database in `dir` (created), ovsdb-server on it, ovs-vswitchd in `ns`.
    pub fn start(dir: &Path, ns: &str) -> Ovs {
        let ovs = Ovs {
            dir: dir.to_path_buf(),
            ns: ns.into(),
        };
        std::fs::create_dir_all(&ovs.dir).unwrap();
        let d = ovs.dir.display().to_string();
        let schema = "/usr/share/openvswitch/vswitch.ovsschema";
        assert!(
            Path::new(schema).is_file(),
            "{schema} missing (package openvswitch-common)"
        );
        let mut c = Command::new("ovsdb-tool");
        c.args(["create", &format!("{d}/conf.db"), schema]);
        ovs.env(&mut c);
        run_ok(&mut c);
        let mut c = Command::new("ovsdb-server");
        c.arg(format!("{d}/conf.db")).args([
            &format!("--remote=punix:{d}/db.sock"),
            &format!("--pidfile={d}/ovsdb-server.pid"),
            &format!("--log-file={d}/ovsdb-server.log"),
            &format!("--unixctl={d}/ovsdb-server.ctl"),
            "--detach",
            "--no-chdir",
        ]);
        ovs.env(&mut c);
        run_ok(&mut c);
        ovs.vsctl(&["--no-wait", "init"]);
        let mut c = in_ns(ns, "ovs-vswitchd");
        c.arg(format!("unix:{d}/db.sock")).args([
            &format!("--pidfile={d}/ovs-vswitchd.pid"),
            &format!("--log-file={d}/ovs-vswitchd.log"),
            &format!("--unixctl={d}/ovs-vswitchd.ctl"),
            "--detach",
            "--no-chdir",
        ]);
        ovs.env(&mut c);
        run_ok(&mut c);
        ovs
    }

    /// `ovs-vsctl ARGS...` on our database, which must succeed within 20 s.
    pub fn vsctl(&self, args: &[&str]) {
        let mut c = Command::new("ovs-vsctl");
        c.arg(format!("--db=unix:{}/db.sock", self.dir.display()))
            .arg("--timeout=20")
            .args(args);
        self.env(&mut c);
        run_ok(&mut c);
    }

    /// `ovs-appctl ARGS...` to our ovs-vswitchd.
    pub fn appctl(&self, args: &[&str]) -> Output {
        let mut c = in_ns(&self.ns, "ovs-appctl");
        c.arg("-t")
            .arg(self.dir.join("ovs-vswitchd.ctl"))
            .args(args);
        self.env(&mut c);
        c.output().unwrap()
    }

    /// `ovs-ofctl ARGS...` (to a bridge by name), which must succeed.
    pub fn ofctl(&self, args: &[&str]) {
        let mut c = in_ns(&self.ns, "ovs-ofctl");
        c.args(args);
        self.env(&mut c);
        run_ok(&mut c);
    }

    pub fn log_file(&self) -> PathBuf {
        self.dir.join("ovs-vswitchd.log")
    }

    /// The end of ovs-vswitchd's log.
    pub fn log(&self) -> String {
        tail(&self.log_file(), 30)
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for p in ["ovs-vswitchd", "ovsdb-server"] {
            let Ok(pid) = std::fs::read_to_string(self.dir.join(format!("{p}.pid"))) else {
                continue;
            };
            let Ok(pid) = pid.trim().parse::<i32>() else {
                continue;
            };
            // SAFETY: the daemon we started (its pidfile is in our private directory).
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let t = Instant::now();
            while Path::new(&format!("/proc/{pid}")).exists()
                && t.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            if Path::new(&format!("/proc/{pid}")).exists() {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}
