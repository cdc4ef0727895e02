//! What the VXLAN interop tests share (`vxlan_interop.rs`: pings; `vxlan_traffic.rs`:
//! a captured burst and refused input): the peers and the topology, built on
//! `common::harness`. VXLAN tunnel ports against real VTEPs:
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
#![allow(dead_code)] // each test file uses its own part of it

pub mod observe;
pub mod topo;

use crate::common::harness::{ipn, need_root_netns, out_text, wait_for, Harness, Ovs};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub const TOOL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/vxlan/vxtool.py");

pub const VNI: u32 = 42;
pub const A_MAC: &str = "02:00:00:00:0a:01";
pub const B_MAC: &str = "02:00:00:00:0b:01";
pub const A4: &str = "10.200.0.1";
pub const B4: &str = "10.200.0.2";
pub const A6: &str = "fd00:200::1";
pub const B6: &str = "fd00:200::2";
/// The middle's underlay MAC (flowpath's `local_mac`; OVS's br-ul), and the remote's.
pub const MID_UL_MAC: &str = "02:00:00:00:01:01";
pub const REM_UL_MAC: &str = "02:00:00:00:02:01";
/// The veth under an OVS br-ul (the bridge itself has the MAC above).
pub const MID_VETH_MAC_OVS: &str = "02:00:00:00:01:02";
pub const REM_VETH_MAC_OVS: &str = "02:00:00:00:02:02";
pub const UL_MTU: &str = "1600";

/// Skips unless FLOWPATH_VXLAN_REQUIRED=1; FLOWPATH_VXLAN_KEEP keeps scratch directories.
pub const H: Harness = Harness {
    required_var: "FLOWPATH_VXLAN_REQUIRED",
    setup_script: "scripts/setup-vxlan-peers.sh",
    keep_var: "FLOWPATH_VXLAN_KEEP",
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Vtep {
    Flowpath,
    Linux,
    Ovs,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Underlay {
    V4,
    V6,
}

impl Underlay {
    pub fn mid(self) -> &'static str {
        match self {
            Underlay::V4 => "10.9.0.1",
            Underlay::V6 => "fd00:9::1",
        }
    }
    pub fn remote(self) -> &'static str {
        match self {
            Underlay::V4 => "10.9.0.2",
            Underlay::V6 => "fd00:9::2",
        }
    }
    /// A VTEP nobody configured.
    pub fn stranger(self) -> &'static str {
        match self {
            Underlay::V4 => "10.9.0.77",
            Underlay::V6 => "fd00:9::77",
        }
    }
    pub fn plen(self) -> &'static str {
        match self {
            Underlay::V4 => "24",
            Underlay::V6 => "64",
        }
    }
}

/// What sits in flowpath's place: `FLOWPATH_VXLAN_PEER` = flowpath (default), linux, ovs.
pub fn middle() -> Vtep {
    match std::env::var("FLOWPATH_VXLAN_PEER").as_deref() {
        Ok("") | Ok("flowpath") | Err(_) => Vtep::Flowpath,
        Ok("linux") => Vtep::Linux,
        Ok("ovs") => Vtep::Ovs,
        Ok(other) => panic!("FLOWPATH_VXLAN_PEER={other}: use flowpath, linux or ovs"),
    }
}

// ---- what is there ----------------------------------------------------------------------

pub fn need_scapy() -> Result<(), String> {
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

pub fn need_vtep(v: Vtep) -> Result<(), String> {
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
pub fn need_all(remote: Vtep) -> Result<(), String> {
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
    pub fn vtep(
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
