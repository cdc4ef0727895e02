//! Real OpenFlow 1.3 clients against the switch: `ovs-ofctl`, os-ken running a
//! learning-switch app, and Faucet, each in the way people run them.
//!
//! By default the switch under test is flowpath (`flowpath run --openflow ptcp:...` for
//! ovs-ofctl, `flowpath switch --config` with `[switch] openflow = [...]` for the
//! controllers). `FLOWPATH_OPENFLOW_PEER=ovs` runs the very same scenarios against Open
//! vSwitch (`ovs-vswitchd`, netdev datapath, private run directory) to validate the harness
//! and the expectations: every scenario passes against OVS.
//!
//! Each test says it skips, naming what is missing (root, network namespaces, ovs-ofctl,
//! Open vSwitch, os-ken or Faucet from `scripts/setup-openflow-peers.sh`), unless
//! `FLOWPATH_OPENFLOW_REQUIRED=1` (CI as root, after that script), where a missing peer fails.
//!
//! Everything runs in network namespaces named `fpof<scenario>-<pid>[-h1|-h2]`: the switch,
//! its controller and ovs-ofctl inside the first (OpenFlow over its loopback), one host in
//! each of the others, attached by veth pairs p1/p2 (OpenFlow ports 1 and 2). Namespaces and
//! processes go on drop, also when a test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::harness::{
    in_ns, ipn, need, need_root_netns, out_text, ping, run_ok, serial, tail, wait_for, which,
    Harness, Netns, Ovs, Proc,
};
use common::BIN;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/openflow");
/// OpenFlow port of the controllers (inside the switch's namespace).
const CONTROLLER_PORT: u16 = 6653;
/// The switch's passive listener for ovs-ofctl (inside the switch's namespace).
const LISTEN_PORT: u16 = 16653;
/// The datapath id of the switch (Faucet's config names it).
const DPID_HEX: &str = "0000000000000001";

/// Skips unless FLOWPATH_OPENFLOW_REQUIRED=1; FLOWPATH_OPENFLOW_KEEP keeps scratch directories.
const H: Harness = Harness {
    required_var: "FLOWPATH_OPENFLOW_REQUIRED",
    setup_script: "scripts/setup-openflow-peers.sh",
    keep_var: "FLOWPATH_OPENFLOW_KEEP",
};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Peer {
    Flowpath,
    Ovs,
}

fn peer() -> Peer {
    match std::env::var("FLOWPATH_OPENFLOW_PEER").as_deref() {
        Ok("ovs") => Peer::Ovs,
        Ok("") | Ok("flowpath") | Err(_) => Peer::Flowpath,
        Ok(other) => panic!("FLOWPATH_OPENFLOW_PEER={other}: use ovs or flowpath"),
    }
}

// ---- what is there ----------------------------------------------------------------------

/// The Python environment holding os-ken and Faucet: $FLOWPATH_OPENFLOW_VENV, else
/// /opt/flowpath-venv (what scripts/setup-openflow-peers.sh makes).
fn venv() -> PathBuf {
    std::env::var_os("FLOWPATH_OPENFLOW_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/flowpath-venv"))
}

fn venv_bin(prog: &str) -> Result<PathBuf, String> {
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
fn need_peer() -> Result<(), String> {
    match peer() {
        Peer::Flowpath => Ok(()),
        Peer::Ovs => H
            .need_tools(&["ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl"])
            .map_err(|e| format!("FLOWPATH_OPENFLOW_PEER=ovs {e}")),
    }
}

// ---- processes --------------------------------------------------------------------------

/// Wait until something in `ns` listens on TCP 127.0.0.1:`port`.
fn wait_listening(ns: &str, port: u16, who: &mut Proc, log: &Path) {
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
struct Sut {
    ns: String,
    /// flowpath's control socket.
    control: Option<PathBuf>,
    log: PathBuf,
    _ovs: Option<Ovs>,
    fp: Option<Proc>,
}

impl Sut {
    /// The switch with no ports: `flowpath run --openflow ptcp:...`, or an OVS bridge.
    fn no_ports(ns: &str, dir: &Path) -> Sut {
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
    fn with_controller(ns: &str, dir: &Path) -> Sut {
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
    fn ofctl_opts(&self, opts: &[&str], cmd: &str, args: &[&str]) -> Output {
        in_ns(&self.ns, "ovs-ofctl")
            .args(["-O", "OpenFlow13", "--timeout=20"])
            .args(opts)
            .arg(cmd)
            .arg(self.target())
            .args(args)
            .output()
            .unwrap()
    }

    fn ofctl(&self, cmd: &str, args: &[&str]) -> Output {
        self.ofctl_opts(&[], cmd, args)
    }

    /// The same, which must succeed; its standard output.
    fn ofctl_ok(&self, cmd: &str, args: &[&str]) -> String {
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

    fn dump(&self) -> Vec<Flow> {
        parse_dump(&self.ofctl_ok("dump-flows", &[]))
    }

    fn log_text(&self) -> String {
        tail(&self.log, 40)
    }

    /// flowpath's own control socket: `flowpath flows CMD --control SOCK [flow]`.
    fn flows_cli(&self, cmd: &str, flow: Option<&str>) -> String {
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
struct Flow {
    fields: BTreeSet<String>,
    actions: String,
    n_packets: u64,
}

impl Flow {
    fn key(&self) -> String {
        format!(
            "{} actions={}",
            self.fields.iter().cloned().collect::<Vec<_>>().join(","),
            self.actions
        )
    }

    fn has(&self, field: &str) -> bool {
        self.fields.contains(field)
    }
}

fn parse_dump(text: &str) -> Vec<Flow> {
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
fn assert_same_flows(got: &[Flow], want: &[Flow], what: &str) {
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
fn parse_tables(text: &str) -> BTreeMap<u8, u64> {
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
struct Topo {
    sw: Netns,
    h: [Netns; 2],
}

impl Topo {
    fn new(tag: &str) -> Topo {
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
    fn ping(&self, from: usize, count: u32) -> u32 {
        let to = format!("10.0.0.{}", 2 - from);
        ping(&self.h[from].0, false, &to, count)
    }

    /// The first ping after the controller took over: ARP and the first packets go through
    /// the controller, which may still be installing its pipeline; a few tries.
    fn first_ping(&self, sut: &Sut, controller_log: &Path) {
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

// ---- (a) ovs-ofctl ----------------------------------------------------------------------

fn golden_flows() -> Vec<Flow> {
    parse_dump(&std::fs::read_to_string(format!("{DATA}/flows.dump")).unwrap())
}

fn single_flow() -> Flow {
    parse_dump(
        " cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=5,ip,nw_dst=10.0.0.0/8 actions=output:1",
    )
    .remove(0)
}

#[test]
fn ovs_ofctl_programs_and_dumps_the_switch() {
    need!(H, H.need_tools(&["ovs-ofctl"]));
    need!(H, need_root_netns());
    need!(H, need_peer());
    let _serial = serial();
    let tmp = H.scratch(&format!("fpofa-{}", std::process::id()));
    let ns = Netns::new(format!("fpofa-{}", std::process::id()), false);
    let sut = Sut::no_ports(&ns.0, &tmp.0);

    // OVS starts with a NORMAL flow; del-flows without a match empties every table.
    sut.ofctl_ok("del-flows", &[]);
    assert_eq!(sut.dump(), vec![], "no flows after del-flows");

    // add-flow, then add-flows of a file (each flow_mod is followed by a barrier).
    sut.ofctl_ok(
        "add-flow",
        &["table=0,priority=5,ip,nw_dst=10.0.0.0/8,actions=output:1"],
    );
    assert_same_flows(&sut.dump(), &[single_flow()], "after add-flow");
    sut.ofctl_ok("add-flows", &[&format!("{DATA}/flows.txt")]);
    let mut want = golden_flows();
    assert!(want.len() >= 20, "flows.dump holds the file's flows");
    want.push(single_flow());
    let got = sut.dump();
    assert_same_flows(
        &got,
        &want,
        "dump-flows after add-flows (fields as OVS dumps them)",
    );
    assert!(
        got.iter().all(|f| f.n_packets == 0),
        "no traffic: every counter 0"
    );

    let agg = sut.ofctl_ok("dump-aggregate", &[]);
    assert!(
        agg.contains(&format!("flow_count={}", want.len())),
        "dump-aggregate: {agg}"
    );

    let tables = parse_tables(&sut.ofctl_ok("dump-tables", &[]));
    for t in 0..=2u8 {
        let n = want.iter().filter(|f| f.has(&format!("table={t}"))).count() as u64;
        assert_eq!(
            tables.get(&t),
            Some(&n),
            "dump-tables: active flows of table {t}: {tables:?}"
        );
    }
    let pd = sut.ofctl_ok("dump-ports-desc", &[]);
    assert!(pd.contains("OFPST_PORT_DESC reply (OF1.3)"), "{pd}");
    let ps = sut.ofctl_ok("dump-ports", &[]);
    assert!(ps.contains("OFPST_PORT reply (OF1.3)"), "{ps}");

    // Groups: add one, dump it back.
    sut.ofctl_ok(
        "add-group",
        &["group_id=1,type=all,bucket=output:1,bucket=output:2"],
    );
    let g = sut.ofctl_ok("dump-groups", &[]);
    assert!(
        g.contains("group_id=1,type=all,bucket=actions=output:1,bucket=actions=output:2"),
        "dump-groups: {g}"
    );

    // Refused flows: the switch answers with an OpenFlow error and installs nothing.
    // ovs-ofctl checks prerequisites itself, so a bad prerequisite goes in raw.
    let o = sut.ofctl("add-flow", &["table=0,priority=9,actions=group:99"]);
    let t = out_text(&o);
    assert!(
        !o.status.success() && t.contains("OFPT_ERROR") && t.contains("OFPBAC_BAD_OUT_GROUP"),
        "a flow to a missing group is refused with OFPBAC_BAD_OUT_GROUP, which ovs-ofctl prints: {t}"
    );
    let o = run_ok(in_ns(&ns.0, "python3").args([
        &format!("{DATA}/raw_flow_mod.py"),
        "127.0.0.1",
        &LISTEN_PORT.to_string(),
        "bad_prereq",
    ]));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("error xid=2 type=4 code=9") && t.contains("barrier"),
        "tcp_dst without ip_proto=6 is refused with OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ (4/9): {t}"
    );
    assert_same_flows(&sut.dump(), &want, "refused flows left nothing behind");

    // del-flows with a match (non-strict: every flow at least as specific), then strict.
    sut.ofctl_ok("del-flows", &["table=1,tcp"]);
    want.retain(|f| !(f.has("table=1") && f.has("tcp")));
    assert_same_flows(&sut.dump(), &want, "after del-flows table=1,tcp");
    let o = sut.ofctl_opts(&["--strict"], "del-flows", &["table=2,priority=5"]);
    assert!(o.status.success(), "del-flows --strict: {}", out_text(&o));
    want.retain(|f| !(f.has("table=2") && f.has("priority=5")));
    assert_same_flows(
        &sut.dump(),
        &want,
        "after del-flows --strict table=2,priority=5",
    );

    // One rule store: flowpath's control socket and OpenFlow see the same flows.
    if peer() == Peer::Flowpath {
        sut.flows_cli(
            "add",
            Some("table=3,priority=9,udp,tp_dst=4789 actions=output:1"),
        );
        let d = sut.dump();
        assert!(
            d.iter().any(|f| f.has("table=3")
                && f.has("priority=9")
                && f.has("udp")
                && f.has("tp_dst=4789")
                && f.actions == "output:1"),
            "a flow added over the control socket shows in ovs-ofctl dump-flows: {d:?}"
        );
        sut.ofctl_ok(
            "add-flow",
            &["table=4,priority=8,ip,nw_src=10.9.0.0/16,actions=output:2"],
        );
        let cli = sut.flows_cli("dump", None);
        assert!(
            cli.lines()
                .any(|l| l.contains("table=4") && l.contains("10.9.0.0/16")),
            "a flow added by ovs-ofctl shows in `flowpath flows dump`:\n{cli}"
        );
    }

    sut.ofctl_ok("del-flows", &[]);
    assert_eq!(sut.dump(), vec![], "del-flows empties every table");
    let agg = sut.ofctl_ok("dump-aggregate", &[]);
    assert!(agg.contains("flow_count=0"), "{agg}");
}

// ---- (b) os-ken -------------------------------------------------------------------------

fn packet_ins(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("packet in "))
        .count()
}

#[test]
fn os_ken_learning_switch_connects_two_hosts() {
    need!(H, need_root_netns());
    need!(H, H.need_tools(&["ovs-ofctl", "ping", "ss"]));
    need!(H, need_peer());
    need!(H, venv_bin("osken-manager"));
    let manager = venv_bin("osken-manager").unwrap();
    let _serial = serial();
    let tmp = H.scratch(&format!("fpofb-{}", std::process::id()));
    let topo = Topo::new("b");

    let log = tmp.0.join("osken.log");
    let mut c = in_ns(&topo.sw.0, &manager);
    c.args([
        "--ofp-listen-host",
        "127.0.0.1",
        "--ofp-tcp-listen-port",
        &CONTROLLER_PORT.to_string(),
        &format!("{DATA}/simple_switch_13.py"),
    ]);
    let mut osken = Proc::spawn(c, "osken-manager", &log);
    wait_listening(&topo.sw.0, CONTROLLER_PORT, &mut osken, &log);
    let sut = Sut::with_controller(&topo.sw.0, &tmp.0);

    // The app's table-miss flow: everything to the controller, unbuffered.
    wait_for(
        "os-ken installs its table-miss flow",
        Duration::from_secs(30),
        || {
            sut.dump()
                .iter()
                .any(|f| f.has("priority=0") && f.actions == "CONTROLLER:65535")
        },
    );
    topo.first_ping(&sut, &log);
    assert_eq!(topo.ping(0, 3), 3, "h1 -> h2");
    assert_eq!(topo.ping(1, 3), 3, "h2 -> h1");

    let flows = sut.dump();
    let learned = |from: u8, to: u8| {
        flows.iter().find(|f| {
            f.has("table=0")
                && f.has("priority=1")
                && f.has(&format!("in_port={from}"))
                && f.has(&format!("dl_src=02:00:00:00:00:0{from}"))
                && f.has(&format!("dl_dst=02:00:00:00:00:0{to}"))
                && f.actions == format!("output:{to}")
        })
    };
    assert!(
        learned(1, 2).is_some() && learned(2, 1).is_some(),
        "the app's flows show in dump-flows: {flows:#?}"
    );

    // Established: the next ping goes through the datapath, with no packet_in.
    let before = packet_ins(&log);
    let n_before = learned(1, 2).unwrap().n_packets;
    assert_eq!(topo.ping(0, 3), 3, "h1 -> h2 again");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        packet_ins(&log),
        before,
        "the second ping caused packet_ins:\n{}",
        tail(&log, 20)
    );
    wait_for(
        "the learned flow counts the second ping",
        Duration::from_secs(5),
        || {
            let d = sut.dump();
            let n = d
                .iter()
                .find(|f| f.has("priority=1") && f.has("in_port=1") && f.actions == "output:2")
                .map(|f| f.n_packets)
                .unwrap_or(0);
            n >= n_before + 3
        },
    );
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("Traceback"),
        "os-ken raised:\n{}",
        tail(&log, 40)
    );
}

// ---- (c) Faucet -------------------------------------------------------------------------

const FAUCET_YAML: &str = "\
vlans:
  office:
    vid: 100
dps:
  sw1:
    dp_id: 0x1
    hardware: \"Open vSwitch\"
    interfaces:
      1:
        name: \"h1\"
        native_vlan: office
      2:
        name: \"h2\"
        native_vlan: office
";

#[test]
fn faucet_vlan_pipeline_connects_two_hosts() {
    need!(H, need_root_netns());
    need!(H, H.need_tools(&["ovs-ofctl", "ping", "ss"]));
    need!(H, need_peer());
    need!(H, venv_bin("faucet"));
    let faucet = venv_bin("faucet").unwrap();
    let _serial = serial();
    let tmp = H.scratch(&format!("fpofc-{}", std::process::id()));
    let topo = Topo::new("c");

    let d = &tmp.0;
    std::fs::write(d.join("faucet.yaml"), FAUCET_YAML).unwrap();
    let flog = d.join("faucet.log");
    let exlog = d.join("faucet_exception.log");
    let out = d.join("faucet.out");
    let mut c = in_ns(&topo.sw.0, &faucet);
    // faucet execs osken-manager from PATH.
    let path = format!(
        "{}:{}",
        faucet.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    c.env("PATH", path)
        .env("FAUCET_CONFIG", d.join("faucet.yaml"))
        .env("FAUCET_LOG", &flog)
        .env("FAUCET_EXCEPTION_LOG", &exlog)
        .env("FAUCET_PROMETHEUS_ADDR", "127.0.0.1")
        .env("FAUCET_PROMETHEUS_PORT", "9302")
        .args([
            "--ryu-ofp-listen-host",
            "127.0.0.1",
            "--ryu-ofp-tcp-listen-port",
            &CONTROLLER_PORT.to_string(),
        ]);
    let mut fc = Proc::spawn(c, "faucet", &out);
    wait_listening(&topo.sw.0, CONTROLLER_PORT, &mut fc, &out);
    let sut = Sut::with_controller(&topo.sw.0, &tmp.0);

    // Faucet's pipeline: vlan (0), eth_src (1), eth_dst (2), flood (3).
    wait_for(
        "Faucet installs its pipeline (tables 0-3)",
        Duration::from_secs(40),
        || {
            let f = sut.dump();
            let tables: BTreeSet<&str> = ["table=0", "table=1", "table=2", "table=3"]
                .into_iter()
                .filter(|t| f.iter().any(|x| x.has(t)))
                .collect();
            tables.len() == 4 && f.len() >= 15
        },
    );
    topo.first_ping(&sut, &flog);
    assert_eq!(topo.ping(0, 3), 3, "h1 -> h2");
    assert_eq!(topo.ping(1, 3), 3, "h2 -> h1");

    let flows = sut.dump();
    let show = || flows.iter().map(Flow::key).collect::<Vec<_>>().join("\n  ");
    for port in [1, 2] {
        assert!(
            flows.iter().any(|f| f.has("table=0")
                && f.has(&format!("in_port={port}"))
                && f.actions == "push_vlan:0x8100,set_field:4196->vlan_vid,goto_table:1"),
            "port {port}'s untagged frames get VLAN 100 in table 0:\n  {}",
            show()
        );
        assert!(
            flows.iter().any(|f| f.has("table=1")
                && f.has(&format!("dl_src=02:00:00:00:00:0{port}"))
                && f.has("dl_vlan=100")),
            "h{port}'s MAC learned in table 1:\n  {}",
            show()
        );
        assert!(
            flows.iter().any(|f| f.has("table=2")
                && f.has(&format!("dl_dst=02:00:00:00:00:0{port}"))
                && f.actions == format!("pop_vlan,output:{port}")),
            "h{port}'s MAC forwarded in table 2:\n  {}",
            show()
        );
    }
    assert!(
        flows.iter().any(|f| f.has("table=3")
            && f.has("dl_vlan=100")
            && f.actions == "pop_vlan,output:1,output:2"),
        "VLAN 100 floods in table 3:\n  {}",
        show()
    );

    // No OpenFlow error came back (Faucet logs each as "OFError type: ... code: ..."), and
    // nothing else went wrong. "send_flow_msgs: DP not up" is Faucet's own start-up race
    // (logged against OVS too).
    let log = std::fs::read_to_string(&flog).unwrap_or_default();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("OFError") || (l.contains("ERROR") && !l.contains("DP not up")))
        .collect();
    assert!(bad.is_empty(), "Faucet logged errors:\n{}", bad.join("\n"));
    let ex = std::fs::read_to_string(&exlog).unwrap_or_default();
    assert!(ex.trim().is_empty(), "Faucet's exception log:\n{ex}");
}
