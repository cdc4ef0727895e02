//! What the AF_XDP test files share: a throw-away network namespace with veth pairs (it
//! skips, with a message, without root, `ip` or BPF), an AF_XDP port on one end, and
//! frame templates, flow and checksum checks for the live-frame transmitter.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use flowpath_ports::afxdp::{AfXdpOptions, AfXdpPort};
use flowpath_ports::xdpgen::{LiveFrameTx, Vary};
use flowpath_ports::{PacketBatch, Port, XdpMode};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

/// A network namespace with IPv6 off (no stray router solicitations), deleted on drop; the
/// test thread is moved into it and back out on drop.
pub struct Netns {
    pub name: String,
    home: std::fs::File,
}

pub fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn setns(f: &std::fs::File) -> std::io::Result<()> {
    // SAFETY: setns on an open namespace file; affects only this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Netns {
    /// `None` (after printing why) when this machine cannot run the test.
    pub fn new(tag: &str) -> Option<Netns> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: needs root (network namespaces, BPF)");
            return None;
        }
        if sh(&["ip", "-V"]).is_err() {
            eprintln!("skipping: needs the `ip` command (iproute2)");
            return None;
        }
        if !flowpath_ports::xdp::bpf_available() {
            eprintln!("skipping: flowpath-ports was built without clang (no XDP objects)");
            return None;
        }
        let name = format!("fpt-xs-{}-{tag}", std::process::id());
        let _ = sh(&["ip", "netns", "del", &name]);
        if let Err(e) = sh(&["ip", "netns", "add", &name]) {
            eprintln!("skipping: cannot create a network namespace: {e}");
            return None;
        }
        let home = std::fs::File::open("/proc/thread-self/ns/net").expect("own netns");
        let ns = Netns { name, home };
        for k in ["all", "default"] {
            let _ = ns.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{k}.disable_ipv6=1"),
            ]);
        }
        let f = std::fs::File::open(format!("/var/run/netns/{}", ns.name)).expect("netns file");
        setns(&f).expect("setns into the test namespace");
        Some(ns)
    }

    pub fn exec(&self, args: &[&str]) -> Result<String, String> {
        let mut v = vec!["ip", "netns", "exec", &self.name];
        v.extend_from_slice(args);
        sh(&v)
    }

    pub fn ip(&self, args: &[&str]) -> String {
        let mut v = vec!["ip", "-n", &self.name];
        v.extend_from_slice(args);
        sh(&v).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn veth(&self, a: &str, b: &str) {
        self.ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
        self.ip(&["link", "set", a, "up"]);
        self.ip(&["link", "set", b, "up"]);
    }

    /// The interface's received-packet counter (from `ip -s link`).
    pub fn rx_packets(&self, ifname: &str) -> u64 {
        self.link_counter(ifname, "RX:", "packets")
    }

    /// One of the interface's counters from `ip -s link`: `dir` is "RX:" or "TX:", `name`
    /// a column ("packets", "dropped", ...).
    pub fn link_counter(&self, ifname: &str, dir: &str, name: &str) -> u64 {
        let out = self.ip(&["-s", "link", "show", "dev", ifname]);
        let mut lines = out.lines();
        while let Some(l) = lines.next() {
            let l = l.trim();
            if l.starts_with(dir) {
                let col = l
                    .split_whitespace()
                    .position(|w| w == name)
                    .unwrap_or_else(|| panic!("no {name} column in {out}"))
                    - 1; // "RX:" is a header word without a value
                let vals: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
                return vals[col].parse().unwrap();
            }
        }
        panic!("no {dir} counters in {out}");
    }

    /// Frames `a` sent to its veth peer `b` so far, as (received by `b`, dropped on the way:
    /// `b`'s receive drops, e.g. its XDP ring full, plus `a`'s transmit drops).
    pub fn veth_delivery(&self, a: &str, b: &str) -> (u64, u64) {
        (
            self.rx_packets(b),
            self.link_counter(b, "RX:", "dropped") + self.link_counter(a, "TX:", "dropped"),
        )
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = setns(&self.home);
        let _ = sh(&["ip", "netns", "del", &self.name]);
    }
}

pub fn open_port(ifname: &str) -> AfXdpPort {
    AfXdpPort::open(
        "p",
        ifname,
        0,
        &AfXdpOptions {
            mode: XdpMode::Auto,
            zero_copy: true,
            hugepages: true,
        },
    )
    .unwrap_or_else(|e| panic!("AfXdpPort::open({ifname}): {e}"))
}

/// Receive from `port` until `want` frames matching `keep` arrived or `wait` passed.
pub fn drain(
    port: &mut AfXdpPort,
    want: usize,
    wait: Duration,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut b = PacketBatch::new();
    let end = Instant::now() + wait;
    while got.len() < want && Instant::now() < end {
        b.clear();
        let n = port.recv(&mut b).expect("recv");
        for i in 0..n {
            if keep(b.frame(i)) {
                got.push(b.frame(i).to_vec());
            }
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    got
}

/// Parse the flow of an IPv4/IPv6 UDP frame: (source address bits, source port).
pub fn flow_of(f: &[u8]) -> Option<(Vec<u8>, u16)> {
    match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 => Some((f[26..30].to_vec(), u16::from_be_bytes([f[34], f[35]]))),
        0x86dd => Some((f[22..38].to_vec(), u16::from_be_bytes([f[54], f[55]]))),
        _ => None,
    }
}

pub fn ipv4_header_ok(f: &[u8]) -> bool {
    let mut s = 0u32;
    for c in f[14..34].chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff
}

/// Whether the UDP/TCP checksum of an IPv4/IPv6 frame (no VLAN, no options) verifies.
pub fn l4_checksum_ok(f: &[u8]) -> bool {
    let sum = |b: &[u8]| -> u32 {
        b.chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum()
    };
    let (pseudo, l4, len, proto) = match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 => {
            let len = usize::from(u16::from_be_bytes([f[16], f[17]])) - 20;
            (sum(&f[26..34]), 34, len, f[23])
        }
        _ => {
            let len = usize::from(u16::from_be_bytes([f[18], f[19]]));
            (sum(&f[22..54]), 54, len, f[20])
        }
    };
    if proto == 17 && f[14] >> 4 == 4 && f[l4 + 6..l4 + 8] == [0, 0] {
        return true; // IPv4 UDP without a checksum
    }
    let mut s = pseudo + u32::from(proto) + len as u32 + sum(&f[l4..l4 + len]);
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff
}

pub fn template(encap: &str, proto: &str) -> Vec<u8> {
    let spec = flowpath_gen::TrafficSpec {
        flows: flowpath_gen::spec::Flows {
            count: 1,
            proto: proto.parse().unwrap(),
            ..Default::default()
        },
        encap: encap.parse().unwrap(),
        ..Default::default()
    };
    spec.source().unwrap().template(0).to_vec()
}

pub fn udp_template() -> Vec<u8> {
    template("ipv4", "udp")
}

/// A namespace for tag `t` with the veth pair `x{t}0`–`x{t}1` and live frames sent on
/// `x{t}0`; `None` (after printing why) where either cannot be had. Tags are unique per
/// test across every file using this module: the namespace's name and the pair's come
/// from them.
pub fn live_pair(t: &str) -> Option<(Netns, LiveFrameTx)> {
    let ns = Netns::new(t)?;
    ns.veth(&format!("x{t}0"), &format!("x{t}1"));
    let tx = live_tx(&format!("x{t}0"))?;
    Some((ns, tx))
}

/// The live-frame transmitter on `ifname`, or None (after printing why) where the kernel
/// refuses live frames to this process (EPERM on some Linux 6.18 VMs; `flowpath gen
/// --tx` then uses the packet socket, tested in netns_xdpgen.rs). Probed with one frame,
/// so call it before anything listens on the peer (without XDP there the veth drops it).
pub fn live_tx(ifname: &str) -> Option<LiveFrameTx> {
    let mut tx = LiveFrameTx::open(ifname).unwrap();
    match tx.send(&udp_template(), 1, &Vary::AsIs) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            eprintln!("skipping the live-frame part: this kernel refuses live frames here: {e}");
            None
        }
        r => {
            r.unwrap();
            Some(tx)
        }
    }
}
