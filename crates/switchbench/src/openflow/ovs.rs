//! A private Open vSwitch for the side-by-side flow_mod measurement: ovsdb-server and
//! ovs-vswitchd with every file in a temporary directory (the lab's approach: OVS_RUNDIR
//! and friends, own unixctl/pid/log paths; a system OVS is never touched), one netdev
//! bridge with no ports, OpenFlow 1.3 only, and a passive OpenFlow listener
//! (`set-controller BR ptcp:PORT:127.0.0.1`) the bench and `ovs-ofctl` connect to.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PrivateOvs {
    dir: PathBuf,
    pub bridge: String,
    pub addr: SocketAddr,
    pub version: String,
    children: Vec<Child>,
}

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

fn which(p: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| d.join(p).is_file())
            || ["/usr/sbin", "/sbin"]
                .iter()
                .any(|d| Path::new(d).join(p).is_file())
    })
}

/// Why OVS cannot run here, or `None` when it can.
pub fn unavailable() -> Option<String> {
    for p in [
        "ovsdb-tool",
        "ovsdb-server",
        "ovs-vswitchd",
        "ovs-vsctl",
        "ovs-ofctl",
    ] {
        if !which(p) {
            return Some(format!("{p} not found (Debian/Ubuntu: openvswitch-switch)"));
        }
    }
    if !Path::new(SCHEMA).exists() {
        return Some(format!("{SCHEMA} not found (openvswitch-common)"));
    }
    // SAFETY: geteuid has no preconditions.
    #[cfg(target_os = "linux")]
    if unsafe { libc::geteuid() } != 0 {
        return Some("ovs-vswitchd needs root for its bridge's tap device".into());
    }
    None
}

fn prog(p: &str) -> PathBuf {
    for d in ["/usr/sbin", "/sbin"] {
        let f = Path::new(d).join(p);
        if f.is_file() {
            return f;
        }
    }
    PathBuf::from(p)
}

impl PrivateOvs {
    fn env(&self, c: &mut Command) {
        for v in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            c.env(v, &self.dir);
        }
        c.env("OVS_PKGDATADIR", "/usr/share/openvswitch");
    }

    fn path(&self, f: &str) -> String {
        self.dir.join(f).to_string_lossy().into_owned()
    }

    fn run(&self, p: &str, args: &[&str]) -> Result<String, String> {
        let mut c = Command::new(prog(p));
        c.args(args).stdin(Stdio::null());
        self.env(&mut c);
        let o = c.output().map_err(|e| format!("{p}: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "{p} {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim(),
                self.log_tail()
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let db = format!("--db=unix:{}", self.path("db.sock"));
        let mut a = vec![db.as_str(), "--timeout=30"];
        a.extend_from_slice(args);
        self.run("ovs-vsctl", &a)
    }

    fn spawn(&mut self, daemon: &str, args: &[String]) -> Result<(), String> {
        let mut c = Command::new(prog(daemon));
        c.args(args)
            .arg(format!("--unixctl={}", self.path(&format!("{daemon}.ctl"))))
            .arg(format!("--pidfile={}", self.path(&format!("{daemon}.pid"))))
            .arg(format!(
                "--log-file={}",
                self.path(&format!("{daemon}.log"))
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.env(&mut c);
        let child = c.spawn().map_err(|e| format!("{daemon}: {e}"))?;
        self.children.push(child);
        Ok(())
    }

    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default();
        let errs: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("|ERR|") || l.contains("|EMER|"))
            .collect();
        if errs.is_empty() {
            String::new()
        } else {
            format!(
                " (ovs-vswitchd.log: {})",
                errs[errs.len().saturating_sub(2)..].join(" | ")
            )
        }
    }

    /// Start both daemons and the bridge; wait until the OpenFlow listener answers.
    pub fn start() -> Result<PrivateOvs, String> {
        if let Some(why) = unavailable() {
            return Err(why);
        }
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("flowpath-bench-ovs-{pid}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // A free port for OVS's listener (released just before OVS binds it).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let mut ovs = PrivateOvs {
            dir,
            bridge: format!("fpof{}", pid % 100_000),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            version: String::new(),
            children: Vec::new(),
        };
        let db = ovs.path("conf.db");
        ovs.run("ovsdb-tool", &["create", &db, SCHEMA])?;
        ovs.spawn(
            "ovsdb-server",
            &[
                db.clone(),
                format!("--remote=punix:{}", ovs.path("db.sock")),
            ],
        )?;
        let sock = ovs.dir.join("db.sock");
        wait(Duration::from_secs(10), || sock.exists())
            .then_some(())
            .ok_or("ovsdb-server did not create its socket in 10 s")?;
        ovs.vsctl(&["--no-wait", "init"])?;
        ovs.spawn("ovs-vswitchd", &[format!("unix:{}", ovs.path("db.sock"))])?;
        let ctl = ovs.dir.join("ovs-vswitchd.ctl");
        if !wait(Duration::from_secs(15), || ctl.exists()) {
            return Err(format!("ovs-vswitchd did not start{}", ovs.log_tail()));
        }
        let br = ovs.bridge.clone();
        ovs.vsctl(&[
            "add-br",
            &br,
            "--",
            "set",
            "bridge",
            &br,
            "datapath_type=netdev",
            "protocols=OpenFlow13",
            "other-config:disable-in-band=true",
            "--",
            "set-fail-mode",
            &br,
            "secure",
            "--",
            "set-controller",
            &br,
            &format!("ptcp:{port}:127.0.0.1"),
        ])?;
        let addr = ovs.addr;
        if !wait(Duration::from_secs(20), || {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        }) {
            return Err(format!(
                "ovs-vswitchd does not listen on {addr}{}",
                ovs.log_tail()
            ));
        }
        ovs.version = ovs
            .run("ovs-vswitchd", &["--version"])
            .ok()
            .and_then(|v| v.lines().next().map(|l| l.trim().to_string()))
            .unwrap_or_default();
        Ok(ovs)
    }

    /// `ovs-ofctl -O OpenFlow13 ARGS... tcp:ADDR [more]`.
    pub fn ofctl(&self, cmd: &str, more: &[&str]) -> Result<String, String> {
        let target = format!("tcp:{}", self.addr);
        let mut a = vec!["-O", "OpenFlow13", cmd, target.as_str()];
        a.extend_from_slice(more);
        self.run("ovs-ofctl", &a)
    }

    /// Flows in the bridge (dump-aggregate's flow_count).
    pub fn flow_count(&self) -> Result<u64, String> {
        flow_count_of(&self.ofctl("dump-aggregate", &[])?)
    }

    pub fn del_flows(&self) -> Result<(), String> {
        self.ofctl("del-flows", &[]).map(|_| ())
    }
}

/// The flow_count of `ovs-ofctl dump-aggregate` output.
pub fn flow_count_of(out: &str) -> Result<u64, String> {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix("flow_count="))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("no flow_count in {out:?}"))
}

fn wait(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

impl Drop for PrivateOvs {
    fn drop(&mut self) {
        let br = self.bridge.clone();
        let _ = self.vsctl(&["--if-exists", "del-br", &br]);
        let ctl = self.path("ovs-vswitchd.ctl");
        let _ = self.run("ovs-appctl", &["-t", &ctl, "exit", "--cleanup"]);
        let ctl = self.path("ovsdb-server.ctl");
        let _ = self.run("ovs-appctl", &["-t", &ctl, "exit"]);
        for c in self.children.iter_mut().rev() {
            if !wait(Duration::from_secs(5), || {
                matches!(c.try_wait(), Ok(Some(_)))
            }) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
