//! What the OpenFlow client tests share (`openflow_clients.rs`: ovs-ofctl;
//! `openflow_controllers.rs`: os-ken and Faucet): the switch under test (flowpath, or Open
//! vSwitch with `FLOWPATH_OPENFLOW_PEER=ovs`) driven with ovs-ofctl, `dump-flows` parsed,
//! and a switch namespace with two hosts, built on `common::harness`.
//!
//! Everything runs in network namespaces named `fpof<scenario>-<pid>[-h1|-h2]`: the switch,
//! its controller and ovs-ofctl inside the first (OpenFlow over its loopback), one host in
//! each of the others, attached by veth pairs p1/p2 (OpenFlow ports 1 and 2). Namespaces and
//! processes go on drop, also when a test fails.
#![allow(dead_code)] // each test file uses its own part of it

use crate::common::harness::{
    in_ns, ipn, out_text, ping, run_ok, tail, wait_for, which, Harness, Netns, Ovs, Proc,
};
use crate::common::BIN;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/openflow");
/// OpenFlow port of the controllers (inside the switch's namespace).
pub const CONTROLLER_PORT: u16 = 6653;
/// The switch's passive listener for ovs-ofctl (inside the switch's namespace).
pub const LISTEN_PORT: u16 = 16653;
/// The datapath id of the switch (Faucet's config names it).
pub const DPID_HEX: &str = "0000000000000001";

/// Skips unless FLOWPATH_OPENFLOW_REQUIRED=1; FLOWPATH_OPENFLOW_KEEP keeps scratch directories.
pub const H: Harness = Harness {
    required_var: "FLOWPATH_OPENFLOW_REQUIRED",
    setup_script: "scripts/setup-openflow-peers.sh",
    keep_var: "FLOWPATH_OPENFLOW_KEEP",
};

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Peer {
    Flowpath,
    Ovs,
}

pub fn peer() -> Peer {
    match std::env::var("FLOWPATH_OPENFLOW_PEER").as_deref() {
        Ok("ovs") => Peer::Ovs,
        Ok("") | Ok("flowpath") | Err(_) => Peer::Flowpath,
        Ok(other) => panic!("FLOWPATH_OPENFLOW_PEER={other}: use ovs or flowpath"),
    }
}

// ---- what is there ----------------------------------------------------------------------

/// The Python environment holding os-ken and Faucet: $FLOWPATH_OPENFLOW_VENV, else
/// /opt/flowpath-venv (what scripts/setup-openflow-peers.sh makes).
pub fn venv() -> PathBuf {
    std::env::var_os("FLOWPATH_OPENFLOW_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/flowpath-venv"))
}

pub fn venv_bin(prog: &str) -> Result<PathBuf, String> {
    let p = venv().join("bin").join(prog);
    if p.is_file() {
        return Ok(p);
    }
    which(prog).ok_or_else(|| {
        format!(
            "needs {prog} (PyPI; scripts/setup-openflow-peers.sh installs it into {})",
            venv().display()
        )
    })
}

/// What the switch under test needs besides the clients.
pub fn need_peer() -> Result<(), String> {
    match peer() {
        Peer::Flowpath => Ok(()),
        Peer::Ovs => H
            .need_tools(&["ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl"])
            .map_err(|e| format!("FLOWPATH_OPENFLOW_PEER=ovs {e}")),
    }
}

// ---- processes --------------------------------------------------------------------------

/// Wait until something in `ns` listens on TCP 127.0.0.1:`port`.
pub fn wait_listening(ns: &str, port: u16, who: &mut Proc, log: &Path) {
    let t = Instant::now();
    loop {
        let o = in_ns(ns, "ss").args(["-Hltn"]).output().unwrap();
        if String::from_utf8_lossy(&o.stdout).contains(&format!("127.0.0.1:{port} ")) {
            return;
        }
        if let Some(st) = who.exited() {
            panic!(
                "{} exited ({st}) before listening on {port}:\n{}",
                who.what,
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{} does not listen on 127.0.0.1:{port}:\n{}",
            who.what,
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---- Open vSwitch, private --------------------------------------------------------------

impl Ovs {
    /// Bridge br0 (netdev datapath, OpenFlow 1.3 only, datapath id 1) with `ports` as
    /// OpenFlow ports 1, 2, ...; `controllers` in OVS's syntax (ptcp:PORT:IP, tcp:IP:PORT).
    fn bridge(&self, ports: &[&str], controllers: &[String]) {
        let mut a: Vec<String> = [
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
            "protocols=OpenFlow13",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push(format!("other-config:datapath-id={DPID_HEX}"));
        a.push("other-config:disable-in-band=true".into());
        a.extend(["--", "set-fail-mode", "br0", "secure"].map(String::from));
        for (i, p) in ports.iter().enumerate() {
            a.extend(["--", "add-port", "br0", p, "--", "set", "interface", p].map(String::from));
            a.push(format!("ofport_request={}", i + 1));
        }
        a.extend(["--", "set-controller", "br0"].map(String::from));
        a.extend(controllers.iter().cloned());
        let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        self.vsctl(&refs);
    }
}

// ---- the switch under test --------------------------------------------------------------

/// The switch (flowpath or OVS) running in namespace `ns`, listening for ovs-ofctl on
/// 127.0.0.1:LISTEN_PORT there.
pub struct Sut {
    ns: String,
    /// flowpath's control socket.
    control: Option<PathBuf>,
    log: PathBuf,
    _ovs: Option<Ovs>,
    fp: Option<Proc>,
}

impl Sut {
    /// The switch with no ports: `flowpath run --openflow ptcp:...`, or an OVS bridge.
    pub fn no_ports(ns: &str, dir: &Path) -> Sut {
        match peer() {
            Peer::Ovs => Sut::ovs(ns, dir, &[], &[format!("ptcp:{LISTEN_PORT}:127.0.0.1")]),
            Peer::Flowpath => {
                let control = dir.join("ctl.sock");
                let log = dir.join("flowpath.log");
                let mut c = in_ns(ns, BIN);
                c.args(["run", "--no-state", "--control"])
                    .arg(&control)
                    .args(["--openflow", &format!("ptcp:127.0.0.1:{LISTEN_PORT}")]);
                let mut p = Proc::spawn(c, "flowpath run --openflow", &log);
                wait_listening(ns, LISTEN_PORT, &mut p, &log);
                Sut {
                    ns: ns.into(),
                    control: Some(control),
                    log,
                    _ovs: None,
                    fp: Some(p),
                }
            }
        }
    }

    fn ovs(ns: &str, dir: &Path, ports: &[&str], controllers: &[String]) -> Sut {
        let ovs = Ovs::start(&dir.join("ovs"), ns);
        ovs.bridge(ports, controllers);
        let log = ovs.log_file();
        let sut = Sut {
            ns: ns.into(),
            control: None,
            log,
            _ovs: Some(ovs),
            fp: None,
        };
        wait_for(
            "ovs-vswitchd answers ovs-ofctl",
            Duration::from_secs(20),
            || sut.ofctl("dump-flows", &[]).status.success(),
        );
        sut
    }

    /// The switch with ports p1, p2 (OpenFlow 1, 2), connecting to a controller on
    /// 127.0.0.1:CONTROLLER_PORT, fail mode secure, datapath id 1.
    pub fn with_controller(ns: &str, dir: &Path) -> Sut {
        match peer() {
            Peer::Ovs => Sut::ovs(
                ns,
                dir,
                &["p1", "p2"],
                &[
                    format!("tcp:127.0.0.1:{CONTROLLER_PORT}"),
                    format!("ptcp:{LISTEN_PORT}:127.0.0.1"),
                ],
            ),
            Peer::Flowpath => {
                let d = dir.display();
                let mut cfg = format!(
                    "[switch]\nstate = \"{d}/state\"\ncontrol = \"{d}/ctl.sock\"\n\
                     openflow = [\"tcp:127.0.0.1:{CONTROLLER_PORT}\", \"ptcp:127.0.0.1:{LISTEN_PORT}\"]\n\
                     openflow_fail_mode = \"secure\"\ndatapath_id = \"{DPID_HEX}\"\n\
                     [datapath]\nidle_sleep_max_us = 200\n"
                );
                for (i, p) in ["p1", "p2"].iter().enumerate() {
                    cfg.push_str(&format!(
                        "[[port]]\nname = \"{p}\"\nnumber = {}\ntype = \"afpacket\"\ninterface = \"{p}\"\n",
                        i + 1
                    ));
                }
                let path = dir.join("switch.toml");
                std::fs::write(&path, cfg).unwrap();
                let log = dir.join("flowpath.log");
                let mut c = in_ns(ns, BIN);
                c.args(["switch", "--config"]).arg(&path);
                let Some(mut p) = Proc::spawn_ready(c, "flowpath switch", &log) else {
                    panic!(
                        "flowpath switch did not start:\n{}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                };
                wait_listening(ns, LISTEN_PORT, &mut p, &log);
                Sut {
                    ns: ns.into(),
                    control: Some(dir.join("ctl.sock")),
                    log,
                    _ovs: None,
                    fp: Some(p),
                }
            }
        }
    }

    fn target(&self) -> String {
        format!("tcp:127.0.0.1:{LISTEN_PORT}")
    }

    /// `ovs-ofctl -O OpenFlow13 [opts] CMD tcp:127.0.0.1:LISTEN_PORT [args]`
    pub fn ofctl_opts(&self, opts: &[&str], cmd: &str, args: &[&str]) -> Output {
        in_ns(&self.ns, "ovs-ofctl")
            .args(["-O", "OpenFlow13", "--timeout=20"])
            .args(opts)
            .arg(cmd)
            .arg(self.target())
            .args(args)
            .output()
            .unwrap()
    }

    pub fn ofctl(&self, cmd: &str, args: &[&str]) -> Output {
        self.ofctl_opts(&[], cmd, args)
    }

    /// The same, which must succeed; its standard output.
    pub fn ofctl_ok(&self, cmd: &str, args: &[&str]) -> String {
        let o = self.ofctl(cmd, args);
        assert!(
            o.status.success(),
            "ovs-ofctl {cmd} {args:?} failed: {}\n--- switch log ({}):\n{}",
            out_text(&o),
            self.log.display(),
            self.log_text()
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn dump(&self) -> Vec<Flow> {
        parse_dump(&self.ofctl_ok("dump-flows", &[]))
    }

    pub fn log_text(&self) -> String {
        tail(&self.log, 40)
    }

    /// flowpath's own control socket: `flowpath flows CMD --control SOCK [flow]`.
    pub fn flows_cli(&self, cmd: &str, flow: Option<&str>) -> String {
        let mut c = Command::new(BIN);
        c.args(["flows", cmd, "--control"])
            .arg(self.control.as_ref().unwrap());
        if let Some(f) = flow {
            c.arg(f);
        }
        String::from_utf8_lossy(&run_ok(&mut c).stdout).into_owned()
    }
}

impl Drop for Sut {
    fn drop(&mut self) {
        if let Some(p) = &mut self.fp {
            p.stop();
        }
    }
}

// ---- dump-flows, parsed -----------------------------------------------------------------

/// One line of `ovs-ofctl dump-flows`: its fields without duration and counters (cookie,
/// table, timeouts, priority, match fields), its actions, and its packet counter.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Flow {
    pub fields: BTreeSet<String>,
    pub actions: String,
    pub n_packets: u64,
}

impl Flow {
    pub fn key(&self) -> String {
        format!(
            "{} actions={}",
            self.fields.iter().cloned().collect::<Vec<_>>().join(","),
            self.actions
        )
    }

    pub fn has(&self, field: &str) -> bool {
        self.fields.contains(field)
    }
}

pub fn parse_dump(text: &str) -> Vec<Flow> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("OFPST_"))
        .map(|l| {
            let (m, actions) = l
                .split_once(" actions=")
                .unwrap_or_else(|| panic!("dump-flows line without actions: {l}"));
            let mut n_packets = u64::MAX;
            let mut fields = BTreeSet::new();
            for tok in m.replace(", ", ",").split(',').filter(|t| !t.is_empty()) {
                if let Some(n) = tok.strip_prefix("n_packets=") {
                    n_packets = n.parse().unwrap_or_else(|_| panic!("n_packets in {l}"));
                } else if !["duration=", "n_bytes=", "idle_age=", "hard_age="]
                    .iter()
                    .any(|p| tok.starts_with(p))
                {
                    fields.insert(tok.to_string());
                }
            }
            assert!(n_packets != u64::MAX, "no n_packets counter in: {l}");
            Flow {
                fields,
                actions: actions.to_string(),
                n_packets,
            }
        })
        .collect()
}

fn keys(flows: &[Flow]) -> Vec<String> {
    let mut k: Vec<String> = flows.iter().map(Flow::key).collect();
    k.sort();
    k
}

/// Assert two multisets of flows are equal, listing what differs.
pub fn assert_same_flows(got: &[Flow], want: &[Flow], what: &str) {
    let (g, w) = (keys(got), keys(want));
    if g != w {
        let missing: Vec<&String> = w.iter().filter(|k| !g.contains(k)).collect();
        let extra: Vec<&String> = g.iter().filter(|k| !w.contains(k)).collect();
        panic!(
            "{what}: {} flows dumped, {} expected\nmissing:\n  {}\nunexpected:\n  {}",
            g.len(),
            w.len(),
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n  "),
            extra
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n  ")
        );
    }
}

/// `ovs-ofctl dump-tables`: table id -> active flows.
pub fn parse_tables(text: &str) -> BTreeMap<u8, u64> {
    let mut out = BTreeMap::new();
    let mut table = None;
    for l in text.lines().map(str::trim) {
        if let Some(rest) = l.strip_prefix("table ") {
            let id: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            table = id.parse::<u8>().ok();
        } else if let (Some(t), Some(a)) = (table, l.strip_prefix("active=")) {
            let n: String = a.chars().take_while(|c| c.is_ascii_digit()).collect();
            out.insert(t, n.parse().unwrap());
        }
    }
    out
}

// ---- hosts ------------------------------------------------------------------------------

/// The switch's namespace and two hosts: h1 (10.0.0.1, 02:00:00:00:00:01) on p1 and h2
/// (10.0.0.2, 02:00:00:00:00:02) on p2.
pub struct Topo {
    pub sw: Netns,
    pub h: [Netns; 2],
}

impl Topo {
    pub fn new(tag: &str) -> Topo {
        let base = format!("fpof{tag}-{}", std::process::id());
        let sw = Netns::new(base.clone(), false);
        let h = [1, 2].map(|i| Netns::new(format!("{base}-h{i}"), false));
        for (i, hn) in h.iter().enumerate() {
            let n = i + 1;
            let p = format!("p{n}");
            ipn(
                &sw.0,
                &[
                    "link", "add", &p, "type", "veth", "peer", "name", "eth0", "netns", &hn.0,
                ],
            );
            ipn(&sw.0, &["link", "set", &p, "up"]);
            let mac = format!("02:00:00:00:00:0{n}");
            ipn(&hn.0, &["link", "set", "eth0", "address", &mac]);
            let ip = format!("10.0.0.{n}/24");
            ipn(&hn.0, &["addr", "add", &ip, "dev", "eth0"]);
            ipn(&hn.0, &["link", "set", "eth0", "up"]);
        }
        Topo { sw, h }
    }

    /// Ping from host `from` (0 or 1) to the other; the number of replies.
    pub fn ping(&self, from: usize, count: u32) -> u32 {
        let to = format!("10.0.0.{}", 2 - from);
        ping(&self.h[from].0, false, &to, count)
    }

    /// The first ping after the controller took over: ARP and the first packets go through
    /// the controller, which may still be installing its pipeline; a few tries.
    pub fn first_ping(&self, sut: &Sut, controller_log: &Path) {
        for _ in 0..10 {
            if self.ping(0, 1) == 1 {
                return;
            }
        }
        panic!(
            "h1 cannot ping h2 through the switch\n--- flows:\n{}\n--- controller log:\n{}\n--- switch log:\n{}",
            sut.ofctl("dump-flows", &[]).stdout.iter().map(|&b| b as char).collect::<String>(),
            tail(controller_log, 40),
            sut.log_text()
        );
    }
}
