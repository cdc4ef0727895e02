//! What the conntrack interop tests share: two hosts (client C, server S) in their own
//! namespaces joined through a middle namespace M that is either flowpath with the
//! security-group flows (L2: one /16) or a Linux router with an nftables `ct state`
//! firewall (one /24 each side); the same real sockets (`peer.py`) in both; and each
//! middle's connection table as (protocol, source, destination, port, TCP state) rows.
#![allow(dead_code)] // each test file uses its own part of it

use crate::common::harness::{in_ns, ipn, run_ok, serial, Harness, Netns, Proc, Scratch};
use crate::common::BIN;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const H: Harness = Harness {
    required_var: "FLOWPATH_CT_REQUIRED",
    setup_script: "scripts/setup-lab.sh",
    keep_var: "FLOWPATH_CT_KEEP",
};

pub const PEER_PY: &str = include_str!("peer.py");
pub const CLIENT: &str = "10.77.1.1";
pub const SERVER: &str = "10.77.2.1";
pub const SERVER2: &str = "10.77.2.2";
pub const SNAT_ADDR: &str = "10.77.9.9";
pub const VIP: &str = "10.77.5.5";
pub const C_MAC: &str = "02:77:00:00:00:01";
pub const S_MAC: &str = "02:77:00:00:00:02";

/// The security group in flowpath (ports 1 = the client side, 2 = the server side): ARP
/// passes, untracked IP goes through the tracker (zone 1) to table 1, where new
/// connections from the client are committed and established or related packets pass
/// either way. `{commit}` is the new-connection action (`ct(commit,zone=1)` or with NAT),
/// `{first}` the first pass's (`ct(table=1,zone=1)`, with `,nat` for NAT).
const FLOWS: &str = "\
table=0,priority=10,arp,in_port=1,actions=output:2
table=0,priority=10,arp,in_port=2,actions=output:1
table=0,priority=100,ip,ct_state=-trk,actions={first}
table=0,priority=0,actions=drop
table=1,priority=100,ip,in_port=1,ct_state=+trk+new,actions={commit},output:2
table=1,priority=100,ip,in_port=1,ct_state=+trk+est,actions=output:2
table=1,priority=100,ip,in_port=2,ct_state=+trk+est,actions=output:1
table=1,priority=100,ip,in_port=1,ct_state=+trk+rel,actions=output:2
table=1,priority=100,ip,in_port=2,ct_state=+trk+rel,actions=output:1
table=1,priority=0,actions=drop
";

/// The same security group in nftables.
const NFT: &str = "\
table inet fpct {
    chain forward {
        type filter hook forward priority 0; policy drop;
        ct state established,related accept
        iifname \"mc\" ct state new accept
    }
}
";

/// What runs in the middle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Middle {
    /// flowpath with the flows, new connections committed by `commit`, first pass `first`.
    Flowpath {
        commit: &'static str,
        first: &'static str,
    },
    /// A Linux router with the nftables firewall.
    Linux,
}

pub const PLAIN: Middle = Middle::Flowpath {
    commit: "ct(commit,zone=1)",
    first: "ct(table=1,zone=1)",
};

pub struct Topo {
    _switch: Option<Proc>,
    _server: Proc,
    pub c: Netns,
    pub m: Netns,
    pub s: Netns,
    pub dir: PathBuf,
    _scratch: Scratch,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// Tools every scenario needs.
pub fn need_tools(middle: Middle) -> Result<(), String> {
    crate::common::harness::need_root_netns()?;
    match middle {
        Middle::Linux => H.need_tools(&["ip", "python3", "conntrack", "nft"]),
        Middle::Flowpath { .. } => H.need_tools(&["ip", "python3", "ethtool"]),
    }
}

fn no_offload(ns: &str, dev: &str) {
    run_ok(in_ns(ns, "ethtool").args(["-K", dev, "tx", "off", "rx", "off"]));
}

impl Topo {
    pub fn new(tag: &str, middle: Middle) -> Topo {
        let serial = serial();
        let base = format!("fpct{tag}-{}", std::process::id());
        let scratch = H.scratch(&base);
        let dir = scratch.0.clone();
        std::fs::write(dir.join("peer.py"), PEER_PY).unwrap();
        let [c, m, s] = ["c", "m", "s"].map(|x| Netns::new(format!("{base}-{x}"), false));
        for (host, dev, mac) in [(&c, "mc", C_MAC), (&s, "ms", S_MAC)] {
            ipn(
                &m.0,
                &[
                    "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", &host.0,
                ],
            );
            ipn(&host.0, &["link", "set", "eth0", "address", mac]);
            ipn(&host.0, &["link", "set", "eth0", "up"]);
            ipn(&m.0, &["link", "set", dev, "up"]);
        }
        let switch = match middle {
            Middle::Linux => {
                linux_router(&c, &m, &s, &dir);
                None
            }
            Middle::Flowpath { commit, first } => {
                for (ns, dev) in [(&m.0, "mc"), (&m.0, "ms"), (&c.0, "eth0"), (&s.0, "eth0")] {
                    no_offload(ns, dev);
                }
                ipn(
                    &c.0,
                    &["addr", "add", &format!("{CLIENT}/16"), "dev", "eth0"],
                );
                for a in [SERVER, SERVER2] {
                    ipn(&s.0, &["addr", "add", &format!("{a}/16"), "dev", "eth0"]);
                }
                // The translated addresses are nobody's: the hosts know where to send.
                ipn(
                    &s.0,
                    &[
                        "neigh", "replace", SNAT_ADDR, "lladdr", C_MAC, "dev", "eth0",
                    ],
                );
                ipn(
                    &c.0,
                    &["neigh", "replace", VIP, "lladdr", S_MAC, "dev", "eth0"],
                );
                let flows = FLOWS.replace("{commit}", commit).replace("{first}", first);
                Some(start_flowpath(&m.0, &dir, &flows))
            }
        };
        let server = start_server(&s.0, &dir);
        Topo {
            _switch: switch,
            _server: server,
            c,
            m,
            s,
            dir,
            _scratch: scratch,
            _serial: serial,
        }
    }

    /// Run `peer.py ARGS` in namespace `ns`: (success, output).
    pub fn peer(&self, ns: &Netns, args: &[&str]) -> (bool, String) {
        let o = in_ns(&ns.0, "python3")
            .arg(self.dir.join("peer.py"))
            .args(args)
            .output()
            .unwrap();
        let text = crate::common::harness::out_text(&o);
        (o.status.success(), text.trim().to_string())
    }

    /// `peer.py hold` in the background: a connection held open while it runs.
    pub fn hold(&self, host: &str, port: &str, secs: &str) -> Proc {
        let mut c = in_ns(&self.c.0, "python3");
        c.arg(self.dir.join("peer.py"))
            .args(["hold", host, port, secs]);
        Proc::spawn_ready_line(c, "peer hold", &self.dir.join("hold.log"), "open")
            .expect("the held connection opens")
    }

    /// flowpath's connection table (`flowpath conntrack dump`).
    pub fn flowpath_conns(&self) -> BTreeSet<Conn> {
        let o = run_ok(
            Command::new(BIN)
                .args(["conntrack", "dump", "--control"])
                .arg(self.dir.join("ctl.sock")),
        );
        let text = String::from_utf8_lossy(&o.stdout);
        text.lines().filter_map(Conn::from_flowpath).collect()
    }

    /// Linux's connection table in the middle (`conntrack -L`).
    pub fn linux_conns(&self) -> BTreeSet<Conn> {
        let o = in_ns(&self.m.0, "conntrack").arg("-L").output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        text.lines().filter_map(Conn::from_linux).collect()
    }
}

fn linux_router(c: &Netns, m: &Netns, s: &Netns, dir: &Path) {
    ipn(
        &c.0,
        &["addr", "add", &format!("{CLIENT}/24"), "dev", "eth0"],
    );
    ipn(&c.0, &["route", "add", "default", "via", "10.77.1.254"]);
    for a in [SERVER, SERVER2] {
        ipn(&s.0, &["addr", "add", &format!("{a}/24"), "dev", "eth0"]);
    }
    ipn(&s.0, &["route", "add", "default", "via", "10.77.2.254"]);
    ipn(&m.0, &["addr", "add", "10.77.1.254/24", "dev", "mc"]);
    ipn(&m.0, &["addr", "add", "10.77.2.254/24", "dev", "ms"]);
    run_ok(in_ns(&m.0, "sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
    std::fs::write(dir.join("fw.nft"), NFT).unwrap();
    run_ok(in_ns(&m.0, "nft").arg("-f").arg(dir.join("fw.nft")));
}

fn start_flowpath(ns: &str, dir: &Path, flows: &str) -> Proc {
    let d = dir.display();
    std::fs::write(dir.join("flows.txt"), flows).unwrap();
    let cfg = format!(
        "[switch]\nstate = \"{d}/state\"\ncontrol = \"{d}/ctl.sock\"\nflows = \"{d}/flows.txt\"\n\
         [datapath]\nidle_sleep_max_us = 200\n\
         [[port]]\nname = \"mc\"\nnumber = 1\ntype = \"afpacket\"\ninterface = \"mc\"\n\
         [[port]]\nname = \"ms\"\nnumber = 2\ntype = \"afpacket\"\ninterface = \"ms\"\n"
    );
    std::fs::write(dir.join("switch.toml"), cfg).unwrap();
    let mut c = in_ns(ns, BIN);
    c.args(["switch", "--config"]).arg(dir.join("switch.toml"));
    let log = dir.join("flowpath.log");
    Proc::spawn_ready(c, "flowpath switch", &log).unwrap_or_else(|| {
        panic!(
            "flowpath switch did not start: {}",
            crate::common::harness::tail(&log, 20)
        )
    })
}

fn start_server(ns: &str, dir: &Path) -> Proc {
    let mut c = in_ns(ns, "python3");
    c.arg(dir.join("peer.py")).args(["serve", SERVER, SERVER2]);
    Proc::spawn_ready_line(c, "peer serve", &dir.join("serve.log"), "ready")
        .expect("the servers start")
}

/// One connection as both tables can say it: protocol, original source and destination,
/// destination port (0 for ICMP), and the TCP state.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conn {
    pub proto: String,
    pub src: String,
    pub dst: String,
    pub dport: u16,
    pub tcp_state: Option<String>,
}

fn value<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(key)? + key.len();
    let rest = &s[i..];
    let end = rest.find([',', ')', ' ']).unwrap_or(rest.len());
    Some(&rest[..end])
}

impl Conn {
    /// A `dpctl/dump-conntrack` line: `tcp,orig=(src=..,dst=..,sport=..,dport=..),reply=(..),zone=1,protoinfo=(state=..)`.
    pub fn from_flowpath(line: &str) -> Option<Conn> {
        let (proto, rest) = line.trim().split_once(',')?;
        let orig = rest.strip_prefix("orig=(")?;
        Some(Conn {
            proto: proto.into(),
            src: value(orig, "src=")?.into(),
            dst: value(orig, "dst=")?.into(),
            dport: value(orig, "dport=")
                .and_then(|p| p.parse().ok())
                .unwrap_or(0),
            tcp_state: value(line, "state=").map(str::to_string),
        })
    }

    /// A `conntrack -L` line: `tcp 6 117 TIME_WAIT src=.. dst=.. sport=.. dport=.. ...`.
    pub fn from_linux(line: &str) -> Option<Conn> {
        let t: Vec<&str> = line.split_whitespace().collect();
        let proto = *t.first()?;
        if !matches!(proto, "tcp" | "udp" | "icmp") {
            return None;
        }
        let field = |k: &str| t.iter().find_map(|x| x.strip_prefix(k));
        Some(Conn {
            proto: proto.into(),
            src: field("src=")?.into(),
            dst: field("dst=")?.into(),
            dport: field("dport=").and_then(|p| p.parse().ok()).unwrap_or(0),
            tcp_state: (proto == "tcp").then(|| t[3].to_string()),
        })
    }
}
