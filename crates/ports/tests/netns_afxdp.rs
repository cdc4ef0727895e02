//! AF_XDP port and live-frame transmitter against veth pairs in a throw-away network
//! namespace (needs root, `ip` and BPF; skips with a message otherwise).

use flowpath_ports::afxdp::{AfXdpOptions, AfXdpPort};
use flowpath_ports::xdpgen::{
    attach_xdp_drop, attach_xdp_pass, FlowOrder, LiveFrameTx, PacketSocketTx, TxPlan, TxReport,
    Vary, KERNEL_PACE_FROM,
};
use flowpath_ports::{PacketBatch, Port, XdpMode};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

/// A network namespace with IPv6 off (no stray router solicitations), deleted on drop; the
/// test thread is moved into it and back out on drop.
struct Netns {
    name: String,
    home: std::fs::File,
}

fn sh(args: &[&str]) -> Result<String, String> {
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

fn setns(f: &std::fs::File) -> std::io::Result<()> {
    // SAFETY: setns on an open namespace file; affects only this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Netns {
    /// `None` (after printing why) when this machine cannot run the test.
    fn new(tag: &str) -> Option<Netns> {
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

    fn exec(&self, args: &[&str]) -> Result<String, String> {
        let mut v = vec!["ip", "netns", "exec", &self.name];
        v.extend_from_slice(args);
        sh(&v)
    }

    fn ip(&self, args: &[&str]) -> String {
        let mut v = vec!["ip", "-n", &self.name];
        v.extend_from_slice(args);
        sh(&v).unwrap_or_else(|e| panic!("{e}"))
    }

    fn veth(&self, a: &str, b: &str) {
        self.ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
        self.ip(&["link", "set", a, "up"]);
        self.ip(&["link", "set", b, "up"]);
    }

    /// The interface's received-packet counter (from `ip -s link`).
    fn rx_packets(&self, ifname: &str) -> u64 {
        self.link_counter(ifname, "RX:", "packets")
    }

    /// One of the interface's counters from `ip -s link`: `dir` is "RX:" or "TX:", `name`
    /// a column ("packets", "dropped", ...).
    fn link_counter(&self, ifname: &str, dir: &str, name: &str) -> u64 {
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
    fn veth_delivery(&self, a: &str, b: &str) -> (u64, u64) {
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

/// A raw AF_PACKET socket bound to one interface, for sending and capturing test frames.
struct Raw {
    fd: i32,
    ifindex: i32,
}

impl Raw {
    fn open(ifname: &str) -> Raw {
        let ifindex = flowpath_ports::xdp::ifindex(ifname).unwrap() as i32;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket/bind/setsockopt calls with valid arguments.
        unsafe {
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto));
            assert!(
                fd >= 0,
                "AF_PACKET socket: {}",
                std::io::Error::last_os_error()
            );
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = proto;
            sll.sll_ifindex = ifindex;
            let r = libc::bind(
                fd,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
            let big: i32 = 8 << 20;
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&big as *const i32).cast(),
                4,
            );
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 200_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            );
            Raw { fd, ifindex }
        }
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: sending a buffer on our bound socket.
        let r = unsafe { libc::send(self.fd, frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            r,
            frame.len() as isize,
            "{}",
            std::io::Error::last_os_error()
        );
    }

    /// Frames received (outgoing ones are skipped) until `want` match `keep` or `wait` ends.
    fn capture(&self, want: usize, wait: Duration, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 4096];
        let end = Instant::now() + wait;
        while got.len() < want && Instant::now() < end {
            // SAFETY: receiving into our buffer; sll is a plain out-parameter.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            let n = unsafe {
                libc::recvfrom(
                    self.fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut sll as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n <= 0 || sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            assert_eq!(sll.sll_ifindex, self.ifindex);
            if keep(&buf[..n as usize]) {
                got.push(buf[..n as usize].to_vec());
            }
        }
        got
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: closing our fd.
        unsafe { libc::close(self.fd) };
    }
}

/// Test frame `i`: broadcast, local-experimental ethertype `ty`, sizes vary with `i`.
fn frame(ty: u16, i: u32) -> Vec<u8> {
    let len = 60 + (i as usize * 7) % 900;
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&ty.to_be_bytes());
    f[14..18].copy_from_slice(&i.to_be_bytes());
    for (k, b) in f[18..].iter_mut().enumerate() {
        *b = (k as u32).wrapping_mul(31).wrapping_add(i) as u8;
    }
    f
}

fn is_type(ty: u16) -> impl Fn(&[u8]) -> bool {
    move |f: &[u8]| f.len() >= 14 && u16::from_be_bytes([f[12], f[13]]) == ty
}

fn open_port(ifname: &str) -> AfXdpPort {
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
fn drain(
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

fn has_xdp(ns: &Netns, ifname: &str) -> bool {
    ns.ip(&["link", "show", "dev", ifname]).contains("xdp")
}

#[test]
fn afxdp_port_receives_and_sends_exact_frames_and_detaches() {
    let Some(ns) = Netns::new("a") else { return };
    ns.veth("xa0", "xa1");
    let mut port = open_port("xa1");
    let info = port.info();
    eprintln!("port: {} ({})", info.kind, info.detail);
    assert!(
        info.detail.contains("copy mode"),
        "veth has no zero-copy: {}",
        info.detail
    );
    assert!(
        has_xdp(&ns, "xa1"),
        "an XDP program is attached while the port is open"
    );

    // (a) into the port: N distinct frames from an AF_PACKET socket on the peer.
    const N: u32 = 500;
    let raw = Raw::open("xa0");
    let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(0x88b5, i)).collect();
    for f in &sent {
        raw.send(f);
    }
    let got = drain(
        &mut port,
        N as usize,
        Duration::from_secs(3),
        is_type(0x88b5),
    );
    assert_eq!(
        got.len(),
        N as usize,
        "frames lost on the way into the port"
    );
    assert!(got == sent, "frames arrived altered or out of order");
    let st = port.stats();
    assert!(st.rx_packets >= u64::from(N));

    // (a) out of the port: the peer captures them byte for byte.
    const M: u32 = 300;
    let out: Vec<Vec<u8>> = (0..M).map(|i| frame(0x88b6, i)).collect();
    let mut queued = 0;
    for (i, f) in out.iter().enumerate() {
        if port.send(f) {
            queued += 1;
        }
        if i % 32 == 31 {
            port.flush().unwrap();
        }
    }
    assert_eq!(queued, M, "send refused frames with the ring empty");
    let t0 = Instant::now();
    while port.stats().tx_packets < u64::from(M) || t0.elapsed() < Duration::from_millis(50) {
        port.flush().unwrap();
        if t0.elapsed() > Duration::from_secs(2) {
            break;
        }
    }
    let caught = raw.capture(M as usize, Duration::from_secs(3), is_type(0x88b6));
    assert_eq!(
        caught.len(),
        M as usize,
        "frames sent by the port were lost"
    );
    assert!(
        caught == out,
        "frames sent by the port arrived altered or out of order"
    );
    // Every transmit chunk came back: sending a full ring's worth again works.
    for _ in 0..4 {
        port.flush().unwrap();
    }
    let s = port.stats();
    assert_eq!(s.tx_packets, u64::from(M));
    assert_eq!(s.tx_dropped, 0);

    // (c) the program goes with the port.
    drop(port);
    assert!(
        !has_xdp(&ns, "xa1"),
        "XDP program left on xa1 after the port was dropped"
    );

    // ... and a second open right after the close works (EBUSY retry).
    let port2 = open_port("xa1");
    assert!(has_xdp(&ns, "xa1"));
    drop(port2);
    assert!(!has_xdp(&ns, "xa1"));
}

#[test]
fn stale_program_of_ours_is_replaced() {
    let Some(ns) = Netns::new("c") else { return };
    ns.veth("xc0", "xc1");
    // A legacy (netlink) attachment survives its owner: simulate a dead process's program by
    // attaching through `ip`, which uses netlink.
    let obj = format!("{}/xsk_redirect.bpf.o", env!("OUT_DIR"));
    ns.ip(&[
        "link",
        "set",
        "dev",
        "xc1",
        "xdpgeneric",
        "obj",
        &obj,
        "sec",
        "xdp",
    ]);
    assert!(has_xdp(&ns, "xc1"));
    let before = flowpath_ports::xdp::attached_program("xc1")
        .unwrap()
        .unwrap();
    let port = open_port("xc1");
    let now = flowpath_ports::xdp::attached_program("xc1")
        .unwrap()
        .unwrap();
    assert_ne!(
        now.prog_id, before.prog_id,
        "the stale program was not replaced"
    );
    drop(port);
    assert!(!has_xdp(&ns, "xc1"));
}

/// Parse the flow of an IPv4/IPv6 UDP frame: (source address bits, source port).
fn flow_of(f: &[u8]) -> Option<(Vec<u8>, u16)> {
    match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 => Some((f[26..30].to_vec(), u16::from_be_bytes([f[34], f[35]]))),
        0x86dd => Some((f[22..38].to_vec(), u16::from_be_bytes([f[54], f[55]]))),
        _ => None,
    }
}

fn ipv4_header_ok(f: &[u8]) -> bool {
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
fn l4_checksum_ok(f: &[u8]) -> bool {
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

fn template(encap: &str, proto: &str) -> Vec<u8> {
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

fn udp_template() -> Vec<u8> {
    template("ipv4", "udp")
}

/// The live-frame transmitter on `ifname`, or None (after printing why) where the kernel
/// refuses live frames to this process (EPERM on some Linux 6.18 VMs; `flowpath gen
/// --tx` then uses the packet socket, tested below). Probed with one frame, so call it
/// before anything listens on the peer (without XDP there the veth drops it).
/// A namespace for tag `t` with the veth pair `x{t}0`–`x{t}1` and live frames sent on
/// `x{t}0`; `None` (after printing why) where either cannot be had. Tags are unique per
/// test: the namespace's name and the pair's come from them.
fn live_pair(t: &str) -> Option<(Netns, LiveFrameTx)> {
    let ns = Netns::new(t)?;
    ns.veth(&format!("x{t}0"), &format!("x{t}1"));
    let tx = live_tx(&format!("x{t}0"))?;
    Some((ns, tx))
}

fn live_tx(ifname: &str) -> Option<LiveFrameTx> {
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

/// 20,000 packets over 100 flows with 10 % new flows, sent by `run` (a transmitter's
/// run of a template and a plan) in parts of 1,000 drained from the AF_XDP `port` after
/// each: every one arrives once, whole, with a good IPv4 checksum, on exactly the flows
/// asked for. Then 200 packets, each a new flow, for IPv4/TCP, IPv6/UDP and IPv6/TCP:
/// every one arrives, a new flow with a good L4 checksum.
fn check_exact_flows(port: &mut AfXdpPort, run: &mut dyn FnMut(&[u8], &TxPlan) -> TxReport) {
    let t = udp_template();
    const N: u64 = 20_000;
    let flows = 100u32;
    let plan = TxPlan {
        duration: Duration::from_secs(10),
        packets: Some(1000),
        rate_pps: Some(100_000),
        vary: Vary::Flows {
            flows,
            new_share: 0.1,
            order: FlowOrder::RoundRobin,
        },
    };
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut sent = 0;
    while sent < N {
        sent += run(&t, &plan).packets;
        got.extend(drain(port, 1000, Duration::from_secs(2), |f| {
            flow_of(f).is_some()
        }));
    }
    assert_eq!(sent, N);
    got.extend(drain(port, 0, Duration::from_millis(100), |f| {
        flow_of(f).is_some()
    }));
    assert_eq!(got.len() as u64, N, "frames lost or duplicated");
    assert!(got.iter().all(|f| f.len() == t.len()));
    assert!(
        got.iter().all(|f| ipv4_header_ok(f)),
        "bad IPv4 header checksum"
    );
    let distinct: std::collections::HashSet<_> = got.iter().filter_map(|f| flow_of(f)).collect();
    // 10% of packets are new flows, the rest cycle over 100.
    let expect = u64::from(flows) + N / 10;
    assert!(
        distinct.len() as u64 == expect,
        "distinct flows {} (expected {expect})",
        distinct.len()
    );
    // Every packet a new flow, for each IP version and transport: checksums stay right.
    for (encap, proto) in [("ipv4", "tcp"), ("ipv6", "udp"), ("ipv6", "tcp")] {
        let t = template(encap, proto);
        assert!(l4_checksum_ok(&t), "{encap}/{proto}: template checksum");
        let plan = TxPlan {
            packets: Some(200),
            vary: Vary::churn(),
            ..plan.clone()
        };
        assert_eq!(run(&t, &plan).packets, 200);
        let got = drain(port, 200, Duration::from_secs(2), |f| flow_of(f).is_some());
        assert_eq!(got.len(), 200, "{encap}/{proto}: frames lost");
        assert!(
            got.iter().all(|f| l4_checksum_ok(f)),
            "{encap}/{proto}: bad L4 checksum"
        );
        let distinct: std::collections::HashSet<_> =
            got.iter().filter_map(|f| flow_of(f)).collect();
        assert_eq!(
            distinct.len(),
            200,
            "{encap}/{proto}: not every packet a new flow"
        );
    }
}

/// Where live frames are refused, `flowpath gen --tx` sends through a packet socket: the
/// same frames and flows, none lost at 100k pps into an AF_XDP port, and every packet a new
/// flow with good checksums for each IP version and transport. Runs wherever root can
/// make a namespace, live frames or not.
#[test]
fn packet_socket_frames_arrive_exactly_with_the_flows_asked_for() {
    let Some(ns) = Netns::new("s") else { return };
    ns.veth("xs0", "xs1");
    let mut port = open_port("xs1");
    let mut tx = PacketSocketTx::open("xs0", "test".into()).unwrap();
    check_exact_flows(&mut port, &mut |t, plan| tx.run(&[t], plan).unwrap());
}

#[test]
fn live_frames_arrive_exactly_with_the_flows_asked_for() {
    let Some((ns, mut tx)) = live_pair("b") else {
        return;
    };
    let t = udp_template();

    // (b1) peer served by an AF_XDP port: count and inspect every frame.
    let mut port = open_port("xb1");
    check_exact_flows(&mut port, &mut |t, plan| tx.run(&[t], plan).unwrap());
    drop(port);

    // (b2) peer served by the Linux stack with an xdp_pass program: the interface counts.
    let pass = attach_xdp_pass("xb1").unwrap();
    eprintln!("xdp_pass on xb1: {:?}", pass.mode());
    // Every frame is accounted for: received, or counted as dropped when the peer's XDP
    // ring was full (a loaded CI machine can leave the peer's NAPI behind the burst, and a
    // few percent of the 5,000 then miss it). Counters are read until they settle.
    let (rx0, drop0) = ns.veth_delivery("xb0", "xb1");
    let sent = tx.send(&t, 5000, &Vary::AsIs).unwrap();
    assert_eq!(sent, 5000);
    let end = Instant::now() + Duration::from_secs(3);
    let (mut rx, mut dropped) = (0, 0);
    while Instant::now() < end {
        let (r, d) = ns.veth_delivery("xb0", "xb1");
        (rx, dropped) = (r - rx0, d - drop0);
        if rx + dropped >= 5000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("xdp_pass peer: {rx} received, {dropped} dropped of 5000");
    assert_eq!(
        rx + dropped,
        5000,
        "xb1 received {rx} and the pair dropped {dropped}: frames unaccounted for"
    );
    assert!(
        rx >= 2500,
        "only {rx} of 5000 reached the xdp_pass peer ({dropped} dropped)"
    );
    drop(pass);

    // Without any XDP program on the peer, veth drops live frames (the gotcha).
    let before = ns.rx_packets("xb1");
    tx.send(&t, 1000, &Vary::AsIs).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    eprintln!(
        "without XDP on the peer: {} of 1000 arrived",
        ns.rx_packets("xb1") - before
    );
}

/// The two flow orders, on what arrives: round-robin visits flow i+1 after flow i every
/// time; random visits every flow about equally often (20,000 packets over 100 flows:
/// binomial, mean 200, sd 14; the bounds are seven sd) with hardly any successor steps
/// (1 % expected by chance).
#[test]
fn flow_orders_round_robin_and_random_differ_as_documented() {
    let Some((_ns, mut tx)) = live_pair("o") else {
        return;
    };
    let t = udp_template();
    let mut port = open_port("xo1");
    const FLOWS: usize = 100;
    const N: u64 = 20_000;
    for order in [FlowOrder::RoundRobin, FlowOrder::Random] {
        let plan = TxPlan {
            duration: Duration::from_secs(10),
            packets: Some(1000),
            rate_pps: Some(100_000),
            vary: Vary::for_flows_in(FLOWS as u32, 0.0, order),
        };
        let mut seq = Vec::new();
        for _ in 0..N / 1000 {
            assert_eq!(tx.run(&[&t], &plan).unwrap().packets, 1000);
            seq.extend(
                drain(&mut port, 1000, Duration::from_secs(2), |f| {
                    flow_of(f).is_some()
                })
                .iter()
                .filter_map(|f| flow_of(f)),
            );
        }
        assert_eq!(seq.len() as u64, N, "{order:?}: frames lost");
        // Flows numbered in the order they first came.
        let mut number = std::collections::HashMap::new();
        let idx: Vec<usize> = seq
            .iter()
            .map(|f| {
                let n = number.len();
                *number.entry(f.clone()).or_insert(n)
            })
            .collect();
        assert_eq!(number.len(), FLOWS, "{order:?}: distinct flows");
        let mut count = [0u32; FLOWS];
        idx.iter().for_each(|&i| count[i] += 1);
        let steps = idx
            .windows(2)
            .filter(|w| w[1] == (w[0] + 1) % FLOWS)
            .count() as f64
            / (idx.len() - 1) as f64;
        let (lo, hi) = (count.iter().min().unwrap(), count.iter().max().unwrap());
        eprintln!("{order:?}: per-flow packets {lo}..{hi}, successor steps {steps:.3}");
        match order {
            FlowOrder::RoundRobin => {
                assert_eq!((*lo, *hi), (200, 200), "round-robin shares");
                assert_eq!(steps, 1.0, "round-robin: every packet the next flow");
            }
            FlowOrder::Random => {
                assert!(*lo >= 100 && *hi <= 300, "random: shares {lo}..{hi}");
                assert!(steps < 0.05, "random: {steps:.3} of steps to the next flow");
            }
        }
    }
}

/// From `KERNEL_PACE_FROM` up the program paces itself: it never runs ahead of the rate
/// (a frame is sent only once due by its clock, so by any time T at most 1 + R * T have
/// gone), a packet limit is met exactly with every frame delivered, and a plain send after
/// a paced run is not paced.
#[test]
fn self_paced_live_frames_never_run_ahead_of_the_rate() {
    let Some((_ns, mut tx)) = live_pair("r") else {
        return;
    };
    let t = udp_template();
    let mut port = open_port("xr1");
    let rate = 2 * KERNEL_PACE_FROM;
    let vary = Vary::Flows {
        flows: 100,
        new_share: 0.0,
        order: FlowOrder::RoundRobin,
    };

    // A duration and no limit: sent within what the rate allows over the run's time.
    let plan = TxPlan {
        duration: Duration::from_millis(300),
        packets: None,
        rate_pps: Some(rate),
        vary,
    };
    let r = tx.run(&[&t], &plan).unwrap();
    let allowed = rate as f64 * r.seconds + 2.0;
    eprintln!(
        "self-paced at {rate} pps: {} sent in {:.3} s ({:.3} Mpps), at most {allowed:.0} allowed",
        r.packets, r.seconds, r.mpps
    );
    assert!(r.packets > 0, "a paced run sent nothing");
    assert!(
        r.packets as f64 <= allowed,
        "{} frames in {:.3} s at {rate} pps: ran ahead of the rate",
        r.packets,
        r.seconds
    );
    drain(&mut port, usize::MAX, Duration::from_millis(200), |_| true);

    // A packet limit: exactly that many, every one delivered (in parts the port's ring holds).
    let mut got = 0;
    for _ in 0..4 {
        let part = TxPlan {
            duration: Duration::from_secs(10),
            packets: Some(1000),
            ..plan.clone()
        };
        let r = tx.run(&[&t], &part).unwrap();
        assert_eq!(r.packets, 1000, "a paced run's packet limit");
        got += drain(&mut port, 1000, Duration::from_secs(2), |f| {
            flow_of(f).is_some()
        })
        .len();
    }
    assert_eq!(got, 4000, "paced live frames lost or duplicated");

    // The pacing ends with the run: a plain send runs every packet it is asked for.
    assert_eq!(tx.send(&t, 500, &Vary::AsIs).unwrap(), 500);
}

/// Figures, not a test: `cargo test -p flowpath-ports --test netns_afxdp -- --ignored
/// --nocapture measure`.
#[test]
#[ignore]
fn measure() {
    let Some(ns) = Netns::new("m") else { return };
    ns.veth("xm0", "xm1");
    let t = udp_template();
    let secs = 3;
    let mut tx = LiveFrameTx::open("xm0").unwrap();
    for (what, vary) in [
        ("as is", Vary::AsIs),
        (
            "1000 flows",
            Vary::Flows {
                flows: 1000,
                new_share: 0.0,
                order: FlowOrder::RoundRobin,
            },
        ),
        ("every packet new", Vary::churn()),
    ] {
        for sink in ["drop", "pass"] {
            let g = if sink == "drop" {
                attach_xdp_drop("xm1").unwrap()
            } else {
                attach_xdp_pass("xm1").unwrap()
            };
            let (before, dropped_before) = ns.veth_delivery("xm0", "xm1");
            let plan = TxPlan {
                duration: Duration::from_secs(secs),
                packets: None,
                rate_pps: None,
                vary,
            };
            let r = tx.run(&[&t], &plan).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let (rx, dropped) = ns.veth_delivery("xm0", "xm1");
            let arrived = rx - before;
            eprintln!(
                "LiveFrameTx 64B {what:>17} -> veth, peer native xdp_{sink}: {:.2} Mpps ({} sent, {:.1}% counted by peer, {} counted as dropped)",
                r.mpps,
                r.packets,
                arrived as f64 * 100.0 / r.packets as f64,
                dropped - dropped_before
            );
            drop(g);
        }
    }
    drop(tx);
    // AF_XDP receive rate: the transmitter runs on another thread in the same namespace.
    let mut port = open_port("xm1");
    eprintln!("port: {}", port.info().detail);
    let nsfile = std::fs::File::open(format!("/var/run/netns/{}", ns.name)).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let t2 = t.clone();
    let h = std::thread::spawn(move || {
        setns(&nsfile).unwrap();
        let mut tx = LiveFrameTx::open("xm0").unwrap();
        assert!(tx.fast_calls());
        let mut total = 0;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            total += tx.send(&t2, 256, &Vary::AsIs).unwrap();
        }
        total
    });
    let mut b = PacketBatch::new();
    std::thread::sleep(Duration::from_millis(200));
    let s0 = port.stats();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        b.clear();
        port.recv(&mut b).unwrap();
    }
    let s1 = port.stats();
    let el = t0.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = h.join().unwrap();
    eprintln!(
        "AfXdpPort recv (copy mode, transmitter on the other core): {:.2} Mpps received, {} kernel drops, {} sent in total",
        (s1.rx_packets - s0.rx_packets) as f64 / el / 1e6,
        s1.rx_dropped - s0.rx_dropped,
        sent
    );
}

/// Figures, not a test: the cost of one BPF_PROG_RUN call by packet count and receiver
/// (see the xdpgen module docs on the XDP dispatcher).
#[test]
#[ignore]
fn probe_call_cost() {
    let Some(ns) = Netns::new("p") else { return };
    ns.veth("xp0", "xp1");
    let t = udp_template();
    let mut tx = LiveFrameTx::open("xp0").unwrap();
    let vary = Vary::Flows {
        flows: 100,
        new_share: 0.1,
        order: FlowOrder::RoundRobin,
    };
    for peer in ["drop", "pass", "afxdp"] {
        let g = match peer {
            "drop" => Some(attach_xdp_drop("xp1").unwrap()),
            "pass" => Some(attach_xdp_pass("xp1").unwrap()),
            _ => None,
        };
        let port = if g.is_none() {
            Some(open_port("xp1"))
        } else {
            None
        };
        for n in [1u64, 20, 300, 5000] {
            for v in [Vary::AsIs, vary] {
                let t0 = Instant::now();
                for _ in 0..20 {
                    tx.send(&t, n, &v).unwrap();
                }
                eprintln!("peer {peer} n={n} {v:?}: per call {:?}", t0.elapsed() / 20);
            }
        }
        drop(port);
        drop(g);
    }
}
