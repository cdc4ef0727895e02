//! VXLAN tunnel ports against real VTEPs.
//!
//! Topology, one network namespace each (`fpvx<scenario>-<pid>-{a,m,r,b}`):
//!
//! ```text
//!  host A ──veth── [ middle: flowpath | Linux | OVS ] ══ underlay veth ══ [ remote VTEP: Linux | OVS ] ──veth── host B
//!  eth0              ha = port 1   vx0 = port 10   ul = port 2        ul             vxlan 42    hb            eth0
//!  10.200.0.1                                    10.9.0.1 / fd00:9::1    10.9.0.2 / fd00:9::2            10.200.0.2
//!  fd00:200::1                                                                                          fd00:200::2
//! ```
//!
//! The middle is flowpath by default (`flowpath switch` with AF_PACKET ports 1 = `ha`,
//! 2 = `ul` and a `vxlan` port 10, flows `in_port=1 actions=output:10`,
//! `in_port=10 actions=output:1`). `FLOWPATH_VXLAN_PEER=linux` or `=ovs` puts a reference
//! VTEP in its place instead (a Linux vxlan device bridged with `ha`; an OVS netdev bridge
//! with a `type=vxlan` port), which proves the harness: every scenario passes with either
//! reference in the middle. The remote VTEP is a Linux vxlan device or OVS per test, over
//! an IPv4 or IPv6 underlay.
//!
//! Where the middle's underlay address lives: on the kernel's side of its underlay link
//! (`ul` in the middle namespace; for OVS on its `br-ul` bridge port, the way OVS's
//! userspace tunnels want it). That keeps what a real host has: the remote resolves
//! 10.9.0.1 / fd00:9::1 by ARP / neighbour discovery, answered by the middle's kernel, and
//! the middle's routing and neighbour tables hold the route to the remote (what flowpath
//! reads by netlink when its tunnel has no static next hop). flowpath's AF_PACKET socket on
//! `ul` sees every frame; the kernel gets a copy too, and would answer each VXLAN packet with
//! an ICMP port unreachable (noise in the captures, with quoted VXLAN headers). So while
//! flowpath is the middle, the test holds a UDP socket bound to port 4789 in that namespace
//! and never reads it: the kernel's copies fill its buffer and are dropped silently. No
//! firewall is needed (the machine has no nftables/iptables), and the reference VTEPs, which
//! own port 4789 themselves, do not get that socket.
//!
//! Checks: hosts A and B ping each other (inner IPv4 and IPv6) over each remote and each
//! underlay; 100,000 inner frames through the tunnel, captured on the underlay with dumpcap,
//! all dissect in tshark as VXLAN with VNI 42, the right inner addresses, and no malformed
//! or error-severity frame; VXLAN packets with a wrong VNI or from an unknown remote, sent
//! at the middle's underlay with scapy, never reach host A (flowpath: and are counted under
//! a named drop reason in `flowpath stats --json`). A Linux vxlan device accepts a known VNI
//! from any source address, so it is no reference for "unknown remote": that half is
//! checked against OVS and flowpath only.
//!
//! Each test skips saying what is missing (root, namespaces, ethtool, tshark/dumpcap, scapy,
//! Open vSwitch), unless `FLOWPATH_VXLAN_REQUIRED=1` (CI as root, after
//! `scripts/setup-vxlan-peers.sh`), where a missing peer fails. Namespaces, daemons and
//! scratch directories go on drop, also when a test fails. `FLOWPATH_VXLAN_KEEP=1` keeps
//! the scratch directories (captures, logs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::harness::{
    disable_ipv6, in_ns, ipn, need, need_root_netns, out_text, ping, run_ok, serial, tail,
    wait_for, Harness, Netns, Ovs, Proc, Scratch,
};
use common::BIN;

const TOOL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/vxlan/vxtool.py");

const VNI: u32 = 42;
const A_MAC: &str = "02:00:00:00:0a:01";
const B_MAC: &str = "02:00:00:00:0b:01";
const A4: &str = "10.200.0.1";
const B4: &str = "10.200.0.2";
const A6: &str = "fd00:200::1";
const B6: &str = "fd00:200::2";
/// The middle's underlay MAC (flowpath's `local_mac`; OVS's br-ul), and the remote's.
const MID_UL_MAC: &str = "02:00:00:00:01:01";
const REM_UL_MAC: &str = "02:00:00:00:02:01";
/// The veth under an OVS br-ul (the bridge itself has the MAC above).
const MID_VETH_MAC_OVS: &str = "02:00:00:00:01:02";
const REM_VETH_MAC_OVS: &str = "02:00:00:00:02:02";
const UL_MTU: &str = "1600";

/// Skips unless FLOWPATH_VXLAN_REQUIRED=1; FLOWPATH_VXLAN_KEEP keeps scratch directories.
const H: Harness = Harness {
    required_var: "FLOWPATH_VXLAN_REQUIRED",
    setup_script: "scripts/setup-vxlan-peers.sh",
    keep_var: "FLOWPATH_VXLAN_KEEP",
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Vtep {
    Flowpath,
    Linux,
    Ovs,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Underlay {
    V4,
    V6,
}

impl Underlay {
    fn mid(self) -> &'static str {
        match self {
            Underlay::V4 => "10.9.0.1",
            Underlay::V6 => "fd00:9::1",
        }
    }
    fn remote(self) -> &'static str {
        match self {
            Underlay::V4 => "10.9.0.2",
            Underlay::V6 => "fd00:9::2",
        }
    }
    /// A VTEP nobody configured.
    fn stranger(self) -> &'static str {
        match self {
            Underlay::V4 => "10.9.0.77",
            Underlay::V6 => "fd00:9::77",
        }
    }
    fn plen(self) -> &'static str {
        match self {
            Underlay::V4 => "24",
            Underlay::V6 => "64",
        }
    }
}

/// What sits in flowpath's place: `FLOWPATH_VXLAN_PEER` = flowpath (default), linux, ovs.
fn middle() -> Vtep {
    match std::env::var("FLOWPATH_VXLAN_PEER").as_deref() {
        Ok("") | Ok("flowpath") | Err(_) => Vtep::Flowpath,
        Ok("linux") => Vtep::Linux,
        Ok("ovs") => Vtep::Ovs,
        Ok(other) => panic!("FLOWPATH_VXLAN_PEER={other}: use flowpath, linux or ovs"),
    }
}

// ---- what is there ----------------------------------------------------------------------

fn need_scapy() -> Result<(), String> {
    let ok = Command::new("python3")
        .args(["-c", "import scapy.all"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err("needs python3 with scapy (scripts/setup-vxlan-peers.sh installs it)".into())
    }
}

fn need_vtep(v: Vtep) -> Result<(), String> {
    match v {
        Vtep::Flowpath => Ok(()),
        Vtep::Linux => Ok(()),
        Vtep::Ovs => H
            .need_tools(&[
                "ovs-vswitchd",
                "ovsdb-server",
                "ovsdb-tool",
                "ovs-vsctl",
                "ovs-ofctl",
                "ovs-appctl",
            ])
            .map_err(|e| format!("an OVS VTEP {e}")),
    }
}

/// Root, namespaces, the tools every scenario uses, and the VTEPs of this one.
fn need_all(remote: Vtep) -> Result<(), String> {
    need_root_netns()?;
    H.need_tools(&["ip", "ping", "ethtool", "bridge"])?;
    need_vtep(middle())?;
    need_vtep(remote)
}

// ---- Open vSwitch, private --------------------------------------------------------------

impl Ovs {
    /// A VTEP the way OVS's userspace (netdev) datapath wants one: bridge br-ul holds the
    /// underlay veth `ul` and the local underlay address on its own (internal, tap) port,
    /// so the kernel route to the remote names br-ul (ovs-router learns it by netlink) and
    /// ARP/ND for the local address is answered there; br0 holds the host port (OpenFlow 1)
    /// and the vxlan port vx0 (OpenFlow 10). `flows`: None = NORMAL, else the flows of br0.
    #[allow(clippy::too_many_arguments)]
    fn vtep(
        dir: &Path,
        ns: &str,
        host_port: &str,
        ul: Underlay,
        local: &str,
        remote: &str,
        bridge_mac: &str,
        peer_mac: &str,
        flows: Option<&[&str]>,
    ) -> Ovs {
        let ovs = Ovs::start(dir, ns);
        let hw = format!("other-config:hwaddr=\"{bridge_mac}\"");
        let mtu = format!("mtu_request={UL_MTU}");
        let opts = [
            format!("options:remote_ip={remote}"),
            format!("options:local_ip={local}"),
            format!("options:key={VNI}"),
            "options:dst_port=4789".to_string(),
        ];
        let mut a: Vec<String> = [
            "add-br",
            "br-ul",
            "--",
            "set",
            "bridge",
            "br-ul",
            "datapath_type=netdev",
            &hw,
            "--",
            "set",
            "interface",
            "br-ul",
            &mtu,
            "--",
            "add-port",
            "br-ul",
            "ul",
            "--",
            "set",
            "interface",
            "ul",
            &mtu,
            "--",
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
            "--",
            "add-port",
            "br0",
            host_port,
            "--",
            "set",
            "interface",
            host_port,
            "ofport_request=1",
            "--",
            "add-port",
            "br0",
            "vx0",
            "--",
            "set",
            "interface",
            "vx0",
            "type=vxlan",
            "ofport_request=10",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(opts);
        let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        ovs.vsctl(&refs);
        wait_for("OVS creates br-ul", Duration::from_secs(20), || {
            Command::new("ip")
                .args(["-n", ns, "link", "show", "br-ul"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        });
        ipn(ns, &["link", "set", "br-ul", "up"]);
        let mut add = vec!["addr", "add"];
        let cidr = format!("{local}/{}", ul.plen());
        add.push(&cidr);
        add.extend(["dev", "br-ul"]);
        if ul == Underlay::V6 {
            add.push("nodad");
        }
        ipn(ns, &add);
        if let Some(f) = flows {
            let br0 = "br0";
            ovs.ofctl(&["del-flows", br0]);
            for fl in f {
                ovs.ofctl(&["add-flow", br0, fl]);
            }
        }
        // ovs-router learns the route from the kernel; wait for it, then give the tunnel
        // neighbour so the first packets need no ARP/ND round (OVS would resolve it too).
        wait_for(
            "ovs-router has the underlay route on br-ul",
            Duration::from_secs(20),
            || {
                let o = ovs.appctl(&["ovs/route/show"]);
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l.contains("br-ul") && l.contains(local))
            },
        );
        let o = ovs.appctl(&["tnl/neigh/set", "br-ul", remote, peer_mac]);
        assert!(o.status.success(), "tnl/neigh/set: {}", out_text(&o));
        ovs
    }
}

// ---- the topology -----------------------------------------------------------------------

/// How flowpath finds its underlay next hop.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum NextHop {
    /// `underlay_port`, `next_hop_mac`, `local_mac` in the tunnel port's config.
    Static,
    /// None of those: the kernel's routing and neighbour tables (netlink).
    Kernel,
}

struct Topo {
    // Dropped first: what runs inside the namespaces.
    _fp: Option<Proc>,
    _ovs: Vec<Ovs>,
    _sink: Vec<std::net::UdpSocket>,
    a: Netns,
    m: Netns,
    r: Netns,
    b: Netns,
    ul: Underlay,
    mid: Vtep,
    dir: PathBuf,
    _scratch: Scratch,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// Run `f` in a thread that entered namespace `ns`.
fn inside<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path).unwrap();
        // SAFETY: setns on a namespace file we hold open; it only affects this thread.
        let r = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&fd), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap()
}

/// No checksum offload on a veth: every frame carries its real checksums (what AF_PACKET
/// readers, OVS's userspace datapath and tshark see).
fn no_offload(ns: &str, dev: &str) {
    run_ok(in_ns(ns, "ethtool").args(["-K", dev, "tx", "off", "rx", "off"]));
}

impl Topo {
    fn new(tag: &str, remote: Vtep, ul: Underlay, hop: NextHop) -> Topo {
        let serial = serial();
        let base = format!("fpvx{tag}-{}", std::process::id());
        let scratch = H.scratch(&base);
        let dir = scratch.0.clone();
        let [a, m, r, b] = ["a", "m", "r", "b"].map(|s| Netns::new(format!("{base}-{s}"), true));
        let mid = middle();

        // host A -- ha (middle), ul (middle) == ul (remote), hb (remote) -- host B
        for (ns, dev, host, mac) in [(&m, "ha", &a, A_MAC), (&r, "hb", &b, B_MAC)] {
            ipn(
                &ns.0,
                &[
                    "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", &host.0,
                ],
            );
            ipn(&host.0, &["link", "set", "eth0", "address", mac]);
            no_offload(&ns.0, dev);
            no_offload(&host.0, "eth0");
            ipn(&ns.0, &["link", "set", dev, "up"]);
        }
        ipn(
            &m.0,
            &[
                "link", "add", "ul", "type", "veth", "peer", "name", "ul", "netns", &r.0,
            ],
        );
        for ns in [&m, &r] {
            // The middle and the remote speak only the underlay's family there.
            if ul == Underlay::V4 {
                disable_ipv6(&ns.0);
            }
            no_offload(&ns.0, "ul");
            ipn(&ns.0, &["link", "set", "ul", "mtu", UL_MTU]);
        }
        for (host, v4, v6) in [(&a, A4, A6), (&b, B4, B6)] {
            ipn(
                &host.0,
                &["addr", "add", &format!("{v4}/24"), "dev", "eth0"],
            );
            ipn(
                &host.0,
                &["addr", "add", &format!("{v6}/64"), "dev", "eth0", "nodad"],
            );
            ipn(&host.0, &["link", "set", "eth0", "up"]);
        }

        let mut ovs = Vec::new();
        let mut sink = Vec::new();
        let mut fp = None;
        // The remote VTEP first: the middle's first packets find it ready.
        match remote {
            Vtep::Linux => linux_vtep(&r.0, "hb", ul, ul.remote(), ul.mid(), REM_UL_MAC),
            Vtep::Ovs => {
                ipn(
                    &r.0,
                    &["link", "set", "ul", "address", REM_VETH_MAC_OVS, "up"],
                );
                ovs.push(Ovs::vtep(
                    &dir.join("ovs-remote"),
                    &r.0,
                    "hb",
                    ul,
                    ul.remote(),
                    ul.mid(),
                    REM_UL_MAC,
                    MID_UL_MAC,
                    None,
                ));
            }
            Vtep::Flowpath => unreachable!("flowpath is the middle"),
        }
        match mid {
            Vtep::Linux => linux_vtep(&m.0, "ha", ul, ul.mid(), ul.remote(), MID_UL_MAC),
            Vtep::Ovs => {
                ipn(
                    &m.0,
                    &["link", "set", "ul", "address", MID_VETH_MAC_OVS, "up"],
                );
                ovs.push(Ovs::vtep(
                    &dir.join("ovs-middle"),
                    &m.0,
                    "ha",
                    ul,
                    ul.mid(),
                    ul.remote(),
                    MID_UL_MAC,
                    REM_UL_MAC,
                    Some(&["in_port=1,actions=output:10", "in_port=10,actions=output:1"]),
                ));
            }
            Vtep::Flowpath => {
                // The kernel holds the underlay address (ARP/ND, routes), flowpath the
                // ports; the kernel's copies of VXLAN packets go to a socket nobody reads.
                underlay_addr(&m.0, ul, ul.mid(), MID_UL_MAC);
                // (IPv6: one dual-stack socket; a second on 0.0.0.0 would clash with it.)
                let any = match ul {
                    Underlay::V4 => "0.0.0.0:4789",
                    Underlay::V6 => "[::]:4789",
                };
                sink.push(inside(&m.0, move || {
                    let s = std::net::UdpSocket::bind(any).expect("bind the 4789 sink");
                    set_rcvbuf(&s, 4096);
                    s
                }));
                fp = Some(start_flowpath(&m.0, &dir, ul, hop));
            }
        }
        Topo {
            _fp: fp,
            _ovs: ovs,
            _sink: sink,
            a,
            m,
            r,
            b,
            ul,
            mid,
            dir,
            _scratch: scratch,
            _serial: serial,
        }
    }

    fn control(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }

    /// Everything that may say why a check failed.
    fn diag(&self) -> String {
        let mut s = String::new();
        if self.mid == Vtep::Flowpath {
            s.push_str(&format!(
                "--- flowpath log:\n{}\n--- flowpath stats:\n{}\n",
                tail(&self.dir.join("flowpath.log"), 30),
                flowpath_stats_text(&self.control())
            ));
        }
        for o in &self._ovs {
            s.push_str(&format!("--- {} log:\n{}\n", o.dir.display(), o.log()));
        }
        for ns in [&self.m, &self.r] {
            let o = Command::new("ip")
                .args(["-n", &ns.0, "-s", "-d", "link", "show"])
                .output()
                .unwrap();
            let n = Command::new("ip")
                .args(["-n", &ns.0, "neigh", "show"])
                .output()
                .unwrap();
            s.push_str(&format!(
                "--- {} links:\n{}--- neighbours:\n{}",
                ns.0,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&n.stdout)
            ));
        }
        s
    }

    /// Ping from host A (`from_a`) or B to the other over `v6` or IPv4: replies received.
    fn ping(&self, from_a: bool, v6: bool, count: u32) -> u32 {
        let (ns, to) = match (from_a, v6) {
            (true, false) => (&self.a, B4),
            (true, true) => (&self.a, B6),
            (false, false) => (&self.b, A4),
            (false, true) => (&self.b, A6),
        };
        ping(&ns.0, v6, to, count)
    }

    /// A first ping (ARP/ND and learning on the way), a few tries; then `n` of `n`.
    fn ping_both_ways(&self, v6: bool, n: u32) {
        let fam = if v6 { "IPv6" } else { "IPv4" };
        let mut first = false;
        for _ in 0..10 {
            if self.ping(true, v6, 1) == 1 {
                first = true;
                break;
            }
        }
        assert!(
            first,
            "host A cannot ping host B ({fam} inner, {:?} underlay, middle {:?})\n{}",
            self.ul,
            self.mid,
            self.diag()
        );
        let ab = self.ping(true, v6, n);
        let ba = self.ping(false, v6, n);
        assert!(
            ab == n && ba == n,
            "{fam} inner over {:?} underlay: A->B {ab}/{n}, B->A {ba}/{n}\n{}",
            self.ul,
            self.diag()
        );
    }
}

fn set_rcvbuf(s: &std::net::UdpSocket, bytes: i32) {
    // SAFETY: setsockopt on a socket we own, with a pointer to an int of the right size.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &bytes as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as u32,
        );
    }
}

/// The underlay address and MAC on `ul` in `ns`, link up.
fn underlay_addr(ns: &str, ul: Underlay, addr: &str, mac: &str) {
    ipn(ns, &["link", "set", "ul", "address", mac, "up"]);
    let cidr = format!("{addr}/{}", ul.plen());
    let mut a = vec!["addr", "add", cidr.as_str(), "dev", "ul"];
    if ul == Underlay::V6 {
        a.push("nodad");
    }
    ipn(ns, &a);
}

/// A Linux VTEP in `ns`: `ul` with `local`, vxlan42 (`id 42 local .. remote .. dstport
/// 4789 dev ul`) and `host_port` in bridge br0.
fn linux_vtep(ns: &str, host_port: &str, ul: Underlay, local: &str, remote: &str, mac: &str) {
    underlay_addr(ns, ul, local, mac);
    ipn(
        ns,
        &[
            "link", "add", "vxlan42", "type", "vxlan", "id", "42", "local", local, "remote",
            remote, "dstport", "4789", "dev", "ul",
        ],
    );
    ipn(ns, &["link", "add", "br0", "type", "bridge"]);
    for d in ["vxlan42", host_port] {
        ipn(ns, &["link", "set", d, "master", "br0"]);
        ipn(ns, &["link", "set", d, "up"]);
    }
    ipn(ns, &["link", "set", "br0", "up"]);
}

/// flowpath's config for the middle: AF_PACKET ports ha (1) and ul (2), vxlan port vx0 (10).
fn flowpath_config(dir: &Path, ul: Underlay, hop: NextHop) -> String {
    let d = dir.display();
    let mut c = format!(
        "[switch]\nstate = \"{d}/state\"\ncontrol = \"{d}/ctl.sock\"\nflows = \"{d}/flows.txt\"\n\
         [datapath]\nidle_sleep_max_us = 200\n\
         [[port]]\nname = \"ha\"\nnumber = 1\ntype = \"afpacket\"\ninterface = \"ha\"\n\
         [[port]]\nname = \"ul\"\nnumber = 2\ntype = \"afpacket\"\ninterface = \"ul\"\n\
         [[port]]\nname = \"vx0\"\nnumber = 10\ntype = \"vxlan\"\nremote_ip = \"{}\"\n\
         local_ip = \"{}\"\nkey = {VNI}\ndst_port = 4789\n",
        ul.remote(),
        ul.mid()
    );
    if hop == NextHop::Static {
        c.push_str(&format!(
            "underlay_port = 2\nnext_hop_mac = \"{REM_UL_MAC}\"\nlocal_mac = \"{MID_UL_MAC}\"\n"
        ));
    }
    c
}

const FLOWPATH_FLOWS: &str = "in_port=1 actions=output:10\nin_port=10 actions=output:1\n";

fn start_flowpath(ns: &str, dir: &Path, ul: Underlay, hop: NextHop) -> Proc {
    std::fs::write(dir.join("flows.txt"), FLOWPATH_FLOWS).unwrap();
    let cfg = dir.join("switch.toml");
    std::fs::write(&cfg, flowpath_config(dir, ul, hop)).unwrap();
    let log = dir.join("flowpath.log");
    let mut c = in_ns(ns, BIN);
    c.args(["switch", "--config"]).arg(&cfg);
    let Some(p) = Proc::spawn_ready(c, "flowpath switch", &log) else {
        panic!(
            "flowpath is not ready for VXLAN interop (it needs a `type = \"vxlan\"` port with \
             remote_ip/local_ip/key/dst_port{}): `flowpath switch` did not start with this \
             config:\n{}\n--- its output:\n{}",
            if hop == NextHop::Static {
                " and a static underlay hop underlay_port/next_hop_mac/local_mac"
            } else {
                ", next hop from the kernel's tables"
            },
            std::fs::read_to_string(&cfg).unwrap_or_default(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    };
    p
}

fn flowpath_stats_text(control: &Path) -> String {
    Command::new(BIN)
        .args(["stats", "--control"])
        .arg(control)
        .output()
        .map(|o| out_text(&o))
        .unwrap_or_default()
}

/// Every named counter in `flowpath stats --json` whose name says it is about tunnels
/// (vni, remote, tunnel, vxlan, tun_), summed over workers: drop reasons as
/// `"name": n` keys, `["name", n]` pairs or `{"name"|"reason": .., "count"|"packets": n}`.
fn tunnel_counters(control: &Path) -> BTreeMap<String, u64> {
    let o = run_ok(
        Command::new(BIN)
            .args(["stats", "--json", "--control"])
            .arg(control),
    );
    let v: serde_json_lite::Value = serde_json_lite::parse(&String::from_utf8_lossy(&o.stdout));
    let mut out = BTreeMap::new();
    v.walk(&mut |name, n| {
        let l = name.to_ascii_lowercase();
        if ["vni", "remote", "tunnel", "vxlan", "tun_"]
            .iter()
            .any(|w| l.contains(w))
        {
            *out.entry(name.to_string()).or_insert(0) += n;
        }
    });
    out
}

/// A small JSON reader (the test crate has no serde_json): enough to walk named numbers.
mod serde_json_lite {
    #[derive(Debug)]
    pub enum Value {
        Null,
        Bool,
        Num(f64),
        Str(String),
        Arr(Vec<Value>),
        Obj(Vec<(String, Value)>),
    }

    pub fn parse(s: &str) -> Value {
        let b = s.as_bytes();
        let mut i = 0;
        let v = value(b, &mut i);
        v.unwrap_or(Value::Null)
    }

    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }

    fn value(b: &[u8], i: &mut usize) -> Option<Value> {
        ws(b, i);
        match *b.get(*i)? {
            b'{' => {
                *i += 1;
                let mut o = Vec::new();
                loop {
                    ws(b, i);
                    if b.get(*i) == Some(&b'}') {
                        *i += 1;
                        return Some(Value::Obj(o));
                    }
                    let Value::Str(k) = value(b, i)? else {
                        return None;
                    };
                    ws(b, i);
                    *i += 1; // ':'
                    let v = value(b, i)?;
                    o.push((k, v));
                    ws(b, i);
                    if b.get(*i) == Some(&b',') {
                        *i += 1;
                    }
                }
            }
            b'[' => {
                *i += 1;
                let mut a = Vec::new();
                loop {
                    ws(b, i);
                    if b.get(*i) == Some(&b']') {
                        *i += 1;
                        return Some(Value::Arr(a));
                    }
                    a.push(value(b, i)?);
                    ws(b, i);
                    if b.get(*i) == Some(&b',') {
                        *i += 1;
                    }
                }
            }
            b'"' => {
                *i += 1;
                let mut s = String::new();
                while *i < b.len() && b[*i] != b'"' {
                    if b[*i] == b'\\' {
                        *i += 1;
                    }
                    s.push(b[*i] as char);
                    *i += 1;
                }
                *i += 1;
                Some(Value::Str(s))
            }
            b't' | b'f' => {
                while *i < b.len() && b[*i].is_ascii_alphabetic() {
                    *i += 1;
                }
                Some(Value::Bool)
            }
            b'n' => {
                *i += 4;
                Some(Value::Null)
            }
            _ => {
                let st = *i;
                while *i < b.len() && (b"+-.eE".contains(&b[*i]) || b[*i].is_ascii_digit()) {
                    *i += 1;
                }
                std::str::from_utf8(&b[st..*i])
                    .ok()?
                    .parse()
                    .ok()
                    .map(Value::Num)
            }
        }
    }

    impl Value {
        /// Call `f(name, count)` for every number with a name: an object's key, the first
        /// element of a [name, number] pair, or an object's name/reason field.
        pub fn walk(&self, f: &mut dyn FnMut(&str, u64)) {
            match self {
                Value::Obj(o) => {
                    let label = o.iter().find_map(|(k, v)| match v {
                        Value::Str(s) if k == "name" || k == "reason" => Some(s.clone()),
                        _ => None,
                    });
                    for (k, v) in o {
                        match v {
                            Value::Num(n) => {
                                f(k, *n as u64);
                                if let Some(l) = &label {
                                    if k == "count" || k == "packets" || k == "drops" {
                                        f(l, *n as u64);
                                    }
                                }
                            }
                            _ => v.walk(f),
                        }
                    }
                }
                Value::Arr(a) => {
                    if let [Value::Str(name), Value::Num(n)] = a.as_slice() {
                        f(name, *n as u64);
                    } else {
                        for v in a {
                            v.walk(f);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

// ---- traffic and captures ---------------------------------------------------------------

fn tool(ns: &str) -> Command {
    let mut c = in_ns(ns, "python3");
    c.arg(TOOL);
    c
}

/// `vxtool.py listen` on host A's eth0 for at most `secs`, ending early once `until`
/// (marker, count) has been seen; started (it printed "ready").
struct Listener {
    proc: Proc,
    log: PathBuf,
}

impl Listener {
    fn start(ns: &str, dir: &Path, secs: u32, until: (&str, u32)) -> Listener {
        let log = dir.join("listen.out");
        let mut c = tool(ns);
        c.args([
            "listen",
            "eth0",
            &secs.to_string(),
            until.0,
            &until.1.to_string(),
        ]);
        let proc = Proc::spawn(c, "vxtool listen", &log);
        let l = Listener { proc, log };
        wait_for(
            "the listener on host A is ready",
            Duration::from_secs(20),
            || {
                std::fs::read_to_string(&l.log)
                    .unwrap_or_default()
                    .contains("ready")
            },
        );
        l
    }

    /// Wait for it to finish; marker -> frames.
    fn finish(mut self) -> BTreeMap<String, u64> {
        let t = Instant::now();
        while self.proc.exited().is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "listener did not end"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (m, n) = l.split_once(' ')?;
                Some((m.to_string(), n.trim().parse().ok()?))
            })
            .collect()
    }
}

/// dumpcap on the remote's `ul` (UDP 4789 only) into `file`, stopped by `stop`.
struct Capture {
    proc: Proc,
    file: PathBuf,
    log: PathBuf,
}

impl Capture {
    fn start(ns: &str, dir: &Path) -> Capture {
        let file = dir.join("underlay.pcapng");
        let log = dir.join("dumpcap.log");
        let mut c = in_ns(ns, "dumpcap");
        c.args(["-i", "ul", "-f", "udp port 4789", "-B", "64", "-q", "-w"])
            .arg(&file);
        let proc = Proc::spawn(c, "dumpcap", &log);
        let mut cap = Capture { proc, file, log };
        let t = Instant::now();
        loop {
            if std::fs::read_to_string(&cap.log)
                .unwrap_or_default()
                .contains("Capturing on")
            {
                break;
            }
            if let Some(st) = cap.proc.exited() {
                panic!("dumpcap exited ({st}): {}", tail(&cap.log, 10));
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "dumpcap does not start: {}",
                tail(&cap.log, 10)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        cap
    }

    fn stop(mut self) -> PathBuf {
        std::thread::sleep(Duration::from_millis(500));
        self.proc.stop_with(libc::SIGINT);
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        // "Packets received/dropped on interface 'ul': 100077/0 (pcap:0/dumpcap:0/...)"
        let dropped = log
            .lines()
            .find_map(|l| l.split_once("received/dropped on interface"))
            .and_then(|(_, r)| r.split_once(": "))
            .and_then(|(_, r)| r.split_whitespace().next())
            .and_then(|n| n.split_once('/'))
            .map(|(_, d)| d.to_string());
        assert_eq!(
            dropped.as_deref(),
            Some("0"),
            "dumpcap dropped packets (or said nothing): {log}"
        );
        self.file.clone()
    }
}

/// `tshark -r FILE -Y FILTER -T fields -e F...`: one line per frame.
fn tshark_fields(file: &Path, filter: &str, fields: &[&str]) -> Vec<String> {
    let mut c = Command::new("tshark");
    // Checksums checked too (tshark does not by default): a wrong one is an error-severity
    // expert item, counted with the malformed frames.
    c.arg("-n").arg("-r").arg(file).args([
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
        "-Y",
        filter,
        "-T",
        "fields",
    ]);
    for f in fields {
        c.args(["-e", f]);
    }
    c.args(["-E", "occurrence=a", "-E", "aggregator=,"]);
    let o = run_ok(&mut c);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect()
}

// ---- the scenarios ----------------------------------------------------------------------

fn pings(tag: &str, remote: Vtep, ul: Underlay, hop: NextHop) {
    need!(H, need_all(remote));
    let t = Topo::new(tag, remote, ul, hop);
    t.ping_both_ways(false, 5);
    t.ping_both_ways(true, 5);
}

#[test]
fn linux_vtep_ipv4_underlay_pings() {
    pings("l4", Vtep::Linux, Underlay::V4, NextHop::Static);
}

#[test]
fn linux_vtep_ipv6_underlay_pings() {
    pings("l6", Vtep::Linux, Underlay::V6, NextHop::Static);
}

#[test]
fn ovs_vtep_ipv4_underlay_pings() {
    pings("o4", Vtep::Ovs, Underlay::V4, NextHop::Static);
}

#[test]
fn ovs_vtep_ipv6_underlay_pings() {
    pings("o6", Vtep::Ovs, Underlay::V6, NextHop::Static);
}

/// flowpath with no static next hop: route and neighbour from the middle's kernel.
/// (The references always work that way: for them it repeats the IPv4 scenario.)
#[test]
fn kernel_routed_underlay_pings() {
    pings("k4", Vtep::Linux, Underlay::V4, NextHop::Kernel);
    pings("k6", Vtep::Linux, Underlay::V6, NextHop::Kernel);
}

/// The least number of the burst's frames that must be captured encapsulated (and
/// dissect cleanly), and how many it sends for that: 1 % spare for a VTEP that loses a few
/// under load on a 2-CPU machine (OVS's userspace datapath did, once in several runs).
const BURST: u32 = 100_000;
const BURST_SENT: u32 = 101_000;
const BURST_PPS: u32 = 20_000;

fn burst(tag: &str, ul: Underlay) {
    need!(H, need_all(Vtep::Linux));
    need!(H, H.need_tools(&["tshark", "dumpcap"]));
    need!(H, need_scapy());
    let t = Topo::new(tag, Vtep::Linux, ul, NextHop::Static);
    // ARP/ND and the bridges' MAC tables first, in both directions.
    t.ping_both_ways(false, 2);
    t.ping_both_ways(true, 2);
    let cap = Capture::start(&t.r.0, &t.dir);
    let o = run_ok(tool(&t.a.0).args([
        "burst",
        "eth0",
        &BURST_SENT.to_string(),
        &BURST_PPS.to_string(),
        A_MAC,
        B_MAC,
        A4,
        B4,
        A6,
        B6,
    ]));
    eprintln!("{}", String::from_utf8_lossy(&o.stdout).trim());
    let file = cap.stop();

    let outer = match ul {
        Underlay::V4 => format!("ip.src == {}", ul.mid()),
        Underlay::V6 => format!("ipv6.src == {}", ul.mid()),
    };
    // Every UDP 4789 frame the capture holds dissects as VXLAN, VNI 42.
    let all = tshark_fields(&file, "udp.dstport == 4789", &["frame.number", "vxlan.vni"]);
    let not_42: Vec<&String> = all
        .iter()
        .filter(|l| l.split('\t').nth(1) != Some("42"))
        .collect();
    // The burst's frames, from the middle: inner UDP to port 9 from host A.
    let ours = tshark_fields(
        &file,
        &format!(
            "{outer} && vxlan.vni == 42 && eth.src == {A_MAC} && eth.dst == {B_MAC} && \
             (ip.src == {A4} || ipv6.src == {A6}) && udp.dstport == 9"
        ),
        &["frame.number", "udp.srcport"],
    );
    // The outer UDP source port comes from the inner flow (RSS spreads the tunnel): the
    // burst's 1,000 flows get many of them.
    let sports: std::collections::BTreeSet<&str> = ours
        .iter()
        .filter_map(|l| l.split('\t').nth(1)?.split(',').next())
        .collect();
    let bad = tshark_fields(
        &file,
        "_ws.malformed || _ws.expert.severity == error",
        &["frame.number", "_ws.expert.message"],
    );
    eprintln!(
        "tshark ({:?} underlay, middle {:?}): {} VXLAN frames, {} from the burst, {} not VNI 42, \
         {} malformed or error (checksums checked), {} outer UDP source ports",
        ul,
        t.mid,
        all.len(),
        ours.len(),
        not_42.len(),
        bad.len(),
        sports.len()
    );
    if H.keep() {
        eprintln!("capture kept: {}", file.display());
    }
    assert!(
        bad.is_empty(),
        "{} malformed/error frames, first: {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
    assert!(
        not_42.is_empty(),
        "{} UDP 4789 frames are not VXLAN VNI 42, first: {:?}",
        not_42.len(),
        &not_42[..not_42.len().min(5)]
    );
    assert!(
        sports.len() >= 16,
        "the outer UDP source port does not follow the inner flow: {} distinct over the \
         burst's 1,000 flows",
        sports.len()
    );
    assert!(
        ours.len() as u32 >= BURST,
        "{} of the burst's {BURST_SENT} frames captured encapsulated (VNI 42, inner A->B), \
         fewer than {BURST}\n{}",
        ours.len(),
        t.diag()
    );
}

#[test]
fn burst_of_100k_dissects_as_vxlan_ipv4_underlay() {
    burst("t4", Underlay::V4);
}

#[test]
fn burst_of_100k_dissects_as_vxlan_ipv6_underlay() {
    burst("t6", Underlay::V6);
}

const BAD_N: u32 = 20;

/// Wrong VNI and unknown remote at the middle's underlay: never at host A (a good packet
/// sent the same way is, to prove the path), and for flowpath counted by a named drop reason.
fn bad_input(tag: &str, ul: Underlay) {
    need!(H, need_all(Vtep::Linux));
    need!(H, need_scapy());
    let t = Topo::new(tag, Vtep::Linux, ul, NextHop::Static);
    t.ping_both_ways(false, 2);
    // Packets as the remote VTEP sends them: to the middle's underlay MAC and address.
    let inject = |src: &str, vni: u32, marker: &str| {
        run_ok(tool(&t.r.0).args([
            "inject",
            "ul",
            &BAD_N.to_string(),
            REM_UL_MAC,
            MID_UL_MAC,
            src,
            ul.mid(),
            &vni.to_string(),
            marker,
            B_MAC,
            A_MAC,
            B4,
            A4,
        ]));
    };
    let counters = |t: &Topo| {
        if t.mid == Vtep::Flowpath {
            tunnel_counters(&t.control())
        } else {
            BTreeMap::new()
        }
    };
    let c0 = counters(&t);
    // Until the control's packets are in (each `inject` starts Python and scapy: ~2 s on a
    // slow machine, so a fixed 6 s window once closed before they came). The bad ones are
    // sent first, on the same path: any forwarded would be in by then.
    let l = Listener::start(&t.a.0, &t.dir, 45, ("fpvx-good", BAD_N));
    inject(ul.remote(), VNI + 1, "fpvx-bad-vni");
    std::thread::sleep(Duration::from_millis(300));
    let c1 = counters(&t);
    inject(ul.stranger(), VNI, "fpvx-bad-remote");
    std::thread::sleep(Duration::from_millis(300));
    let c2 = counters(&t);
    inject(ul.remote(), VNI, "fpvx-good");
    let got = l.finish();
    eprintln!("host A received (marker -> frames): {got:?}");
    assert_eq!(
        got.get("fpvx-good").copied().unwrap_or(0),
        BAD_N as u64,
        "the well-formed VXLAN packets from the remote reach host A (the check's control)\n{}",
        t.diag()
    );
    assert_eq!(
        got.get("fpvx-bad-vni"),
        None,
        "VXLAN with VNI {} forwarded to host A",
        VNI + 1
    );
    if t.mid == Vtep::Linux {
        eprintln!(
            "middle linux: a Linux vxlan device takes VNI {VNI} from any source address, so \
             it is no reference for the unknown remote (fpvx-bad-remote: {:?})",
            got.get("fpvx-bad-remote")
        );
    } else {
        assert_eq!(
            got.get("fpvx-bad-remote"),
            None,
            "VXLAN from unknown remote {} forwarded to host A",
            ul.stranger()
        );
    }
    if t.mid == Vtep::Flowpath {
        let grew = |a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>| -> Vec<(String, u64)> {
            b.iter()
                .filter_map(|(k, v)| {
                    let d = v.saturating_sub(a.get(k).copied().unwrap_or(0));
                    (d >= BAD_N as u64).then(|| (k.clone(), d))
                })
                .collect()
        };
        let vni = grew(&c0, &c1);
        let remote = grew(&c1, &c2);
        eprintln!("flowpath drop counters: wrong VNI {vni:?}, unknown remote {remote:?}");
        assert!(
            !vni.is_empty(),
            "no named tunnel drop reason (a name with vni/tunnel/vxlan/remote) in `flowpath \
             stats --json` counted the {BAD_N} wrong-VNI packets: before {c0:?}, after {c1:?}\n{}",
            flowpath_stats_text(&t.control())
        );
        assert!(
            !remote.is_empty(),
            "no named tunnel drop reason in `flowpath stats --json` counted the {BAD_N} \
             packets from unknown remote {}: before {c1:?}, after {c2:?}\n{}",
            ul.stranger(),
            flowpath_stats_text(&t.control())
        );
    }
}

#[test]
fn wrong_vni_and_unknown_remote_dropped_ipv4_underlay() {
    bad_input("x4", Underlay::V4);
}

#[test]
fn wrong_vni_and_unknown_remote_dropped_ipv6_underlay() {
    bad_input("x6", Underlay::V6);
}
