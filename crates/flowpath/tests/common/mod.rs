//! What the netns tests of `flowpath switch` share: the skip check, a namespace with three
//! veth pairs a0-a1, b0-b1, c0-c1 (the switch gets a1, b1, c1), the switch process, the
//! test frames, what the datapath itself makes of them, and paced sending.
#![allow(dead_code)] // each test file uses its own part of it

pub mod harness;

use flowpath_datapath::{CaptureSink, Datapath, DatapathConfig};
use flowpath_gen::{build, FrameSpec};
use flowpath_switch::{Op, Request, Switch, SwitchConfig};
use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

/// Why the netns tests cannot run here (not root, no namespaces), or `None`.
pub fn netns_skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces, AF_PACKET, XDP)".into());
    }
    // Being root is not enough in some containers: try the real thing. One name per call:
    // the tests of a file run in parallel.
    static PROBES: AtomicU32 = AtomicU32::new(0);
    let n = PROBES.fetch_add(1, Ordering::Relaxed);
    let probe = format!("fpt-probe-{}-{n}", std::process::id());
    match Command::new("ip").args(["netns", "add", &probe]).output() {
        Ok(o) if o.status.success() => {
            let _ = Command::new("ip").args(["netns", "del", &probe]).output();
            None
        }
        Ok(o) => Some(format!(
            "cannot create a network namespace: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("needs `ip` from iproute2: {e}")),
    }
}

/// Run a command; panic with its stderr if it fails.
pub fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespace `<prefix>-<pid>` with veth pairs a0-a1, b0-b1, c0-c1 and a scratch
/// directory; both go on drop.
pub struct Lab {
    pub ns: String,
    pub dir: PathBuf,
    /// One lab at a time per test binary: each runs a switch (an AF_XDP one busy-polls a
    /// core) and traffic, and on a 2-CPU machine two at once can starve an AF_PACKET
    /// worker long enough for its receive ring to overflow.
    _serial: std::sync::MutexGuard<'static, ()>,
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Lab {
    pub fn new(prefix: &str) -> Lab {
        // A test that panicked while holding it leaves nothing inconsistent behind.
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let ns = format!("{prefix}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        sh(&["ip", "netns", "add", &ns]);
        let lab = Lab {
            dir: std::env::temp_dir().join(&ns),
            ns,
            _serial: serial,
        };
        let _ = std::fs::remove_dir_all(&lab.dir);
        std::fs::create_dir_all(&lab.dir).unwrap();
        // No IPv6 autoconfiguration chatter on the test links.
        lab.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        lab.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
        for p in ["a", "b", "c"] {
            let (x, y) = (format!("{p}0"), format!("{p}1"));
            sh(&[
                "ip", "-n", &lab.ns, "link", "add", &x, "type", "veth", "peer", "name", &y,
            ]);
            sh(&["ip", "-n", &lab.ns, "link", "set", &x, "up"]);
            sh(&["ip", "-n", &lab.ns, "link", "set", &y, "up"]);
        }
        lab
    }

    /// Run a command inside the namespace.
    pub fn exec(&self, args: &[&str]) {
        let mut a = vec!["ip", "netns", "exec", &self.ns];
        a.extend_from_slice(args);
        sh(&a);
    }

    pub fn control(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }

    /// Start `flowpath switch` inside the namespace with `flows` (first start: no state
    /// file), ports a1, b1, c1 (numbers 1, 2, 3) of type `kind`, `datapath_extra` lines
    /// in `[datapath]`; wait for its `ready`.
    pub fn start_switch(&self, flows: &str, kind: &str, datapath_extra: &str) -> SwitchProc {
        let d = self.dir.display();
        let _ = std::fs::remove_file(self.dir.join("state"));
        std::fs::write(self.dir.join("flows.txt"), flows).unwrap();
        let mut c = format!(
            "[switch]\nstate = \"{d}/state\"\ncontrol = \"{d}/ctl.sock\"\nflows = \"{d}/flows.txt\"\n\
             [datapath]\nidle_sleep_max_us = 200\n{datapath_extra}"
        );
        for (i, p) in ["a1", "b1", "c1"].iter().enumerate() {
            c.push_str(&format!(
                "[[port]]\nname = \"{p}\"\nnumber = {}\ntype = \"{kind}\"\ninterface = \"{p}\"\n",
                i + 1
            ));
        }
        let cfg = self.dir.join("switch.toml");
        std::fs::write(&cfg, c).unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns, BIN, "switch", "--config"])
            .arg(&cfg)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        if line.trim() != "ready" {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
            let _ = child.kill();
            panic!("flowpath switch did not start: {err}");
        }
        SwitchProc(child)
    }

    /// A request to the switch's control socket; panics on an error answer.
    pub fn ask(&self, op: flowpath_switch::Op, text: &str) -> flowpath_switch::Response {
        let r = flowpath_switch::call(
            &self.control(),
            &flowpath_switch::Request {
                op,
                text: text.into(),
            },
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(r.error.is_none(), "{:?}", r.error);
        r
    }

    /// What `ip -d link show` says about `dev`'s XDP program ("" when none).
    pub fn xdp_of(&self, dev: &str) -> String {
        let o = Command::new("ip")
            .args(["-n", &self.ns, "-d", "link", "show", "dev", dev])
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&o.stdout).to_string();
        s.lines()
            .filter(|l| l.contains("prog/xdp"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Run `f` in a thread that has entered the namespace.
    pub fn inside<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.ns);
        std::thread::spawn(move || {
            let fd = std::fs::File::open(&path).unwrap();
            // SAFETY: setns on a namespace file we hold open; it only affects this thread.
            let r =
                unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&fd), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running `flowpath switch`; killed on drop.
pub struct SwitchProc(Child);

impl SwitchProc {
    /// Send `sig`, wait, and return (exit success, stderr).
    pub fn signal(mut self, sig: i32) -> (bool, String) {
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.0.id() as i32, sig) };
        let t = Instant::now();
        loop {
            if let Some(st) = self.0.try_wait().unwrap() {
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(self.0.stderr.as_mut().unwrap(), &mut err);
                return (st.success(), err);
            }
            assert!(t.elapsed() < Duration::from_secs(20), "switch did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, wait, and return (exit success, stderr).
    pub fn stop(self) -> (bool, String) {
        self.signal(libc::SIGTERM)
    }
}

impl Drop for SwitchProc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Only frames from the tests' generator: UDP over IPv4, under any 802.1Q/802.1ad tags.
pub fn is_our_udp(f: &[u8]) -> bool {
    let mut at = 12;
    while at + 4 <= f.len()
        && (f[at] == 0x81 || f[at] == 0x88)
        && (f[at + 1] == 0x00 || f[at + 1] == 0xa8)
    {
        at += 4;
    }
    f.len() >= at + 2 + 20 && f[at] == 0x08 && f[at + 1] == 0x00 && f[at + 2 + 9] == 17
}

/// Test frame number `i`: UDP over IPv4 from 10.0.0.1 + i to `dst`, to port 53 for every
/// 13th frame (the flows' drop rule) else 5001, 64 to 664 bytes, with VLAN 5 when `tagged`.
pub fn test_frame(i: u32, dst: Ipv4Addr, tagged: bool) -> Vec<u8> {
    let src = Ipv4Addr::from(0x0a00_0001 + i);
    let dport = if i % 13 == 0 { 53 } else { 5001 };
    let mut spec = FrameSpec::udp4(
        src,
        dst,
        1024 + (i % 60000) as u16,
        dport,
        64 + (i as usize % 4) * 200,
    );
    if tagged {
        spec.vlans = vec![(0x8100, 5)];
    }
    build(&spec)
}

/// What the datapath itself does with the frames under `flows`: (port, frame) in order,
/// and the switch whose rules now carry the datapath's counters.
pub fn reference(flows: &str, fr: &[Vec<u8>]) -> (Arc<Switch>, Vec<(u32, Vec<u8>)>) {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let r = sw.handle(&Request {
        op: Op::Add,
        text: flows.into(),
    });
    assert!(r.error.is_none(), "{:?}", r.error);
    let mut cap = CaptureSink::default();
    let mut dp = Datapath::new(sw.store().clone(), DatapathConfig::default());
    for f in fr {
        let mut buf = vec![0u8; 256 + f.len()];
        buf[128..128 + f.len()].copy_from_slice(f);
        let mut p = [flowpath_packet::Packet::new(&mut buf, 128, f.len())];
        dp.process(1, &mut p, &mut cap);
    }
    dp.push_rule_stats();
    (sw, cap.packets)
}

/// The frames of `out` that went to `port`, in order.
pub fn on_port(out: &[(u32, Vec<u8>)], port: u32) -> Vec<Vec<u8>> {
    out.iter()
        .filter(|(p, _)| *p == port)
        .map(|(_, f)| f.clone())
        .collect()
}

/// Hand `fr` to `send` a millisecond's worth at a time at about `pps`, one chunk a
/// millisecond.
pub fn paced(fr: &[Vec<u8>], pps: u64, mut send: impl FnMut(&[Vec<u8>])) {
    let per_ms = (pps / 1000).max(1) as usize;
    let t0 = Instant::now();
    for (k, chunk) in fr.chunks(per_ms).enumerate() {
        send(chunk);
        let due = t0 + Duration::from_millis(k as u64 + 1);
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
}
