//! The VXLAN test topology: hosts A and B, the middle (flowpath, or a reference VTEP)
//! and the remote VTEP, each in its own namespace, and flowpath's config and start as
//! the middle.

use super::observe::flowpath_stats_text;
use super::*;
use crate::common::harness::{
    disable_ipv6, in_ns, ping, run_ok, serial, tail, Netns, Proc, Scratch,
};
use crate::common::BIN;
use std::path::PathBuf;

// ---- the topology -----------------------------------------------------------------------

/// How flowpath finds its underlay next hop.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NextHop {
    /// `underlay_port`, `next_hop_mac`, `local_mac` in the tunnel port's config.
    Static,
    /// None of those: the kernel's routing and neighbour tables (netlink).
    Kernel,
}

pub struct Topo {
    // Dropped first: what runs inside the namespaces.
    _fp: Option<Proc>,
    _ovs: Vec<Ovs>,
    _sink: Vec<std::net::UdpSocket>,
    pub a: Netns,
    pub m: Netns,
    pub r: Netns,
    pub b: Netns,
    pub ul: Underlay,
    pub mid: Vtep,
    pub dir: PathBuf,
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
    pub fn new(tag: &str, remote: Vtep, ul: Underlay, hop: NextHop) -> Topo {
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

    pub fn control(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }

    /// Everything that may say why a check failed.
    pub fn diag(&self) -> String {
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
    pub fn ping(&self, from_a: bool, v6: bool, count: u32) -> u32 {
        let (ns, to) = match (from_a, v6) {
            (true, false) => (&self.a, B4),
            (true, true) => (&self.a, B6),
            (false, false) => (&self.b, A4),
            (false, true) => (&self.b, A6),
        };
        ping(&ns.0, v6, to, count)
    }

    /// A first ping (ARP/ND and learning on the way), a few tries; then `n` of `n`.
    pub fn ping_both_ways(&self, v6: bool, n: u32) {
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
