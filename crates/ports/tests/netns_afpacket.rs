//! AF_PACKET and TAP ports on real interfaces: a veth pair and a tap device inside a
//! throwaway network namespace. Needs root and `ip netns`; skipped (passing) otherwise.
//!
//! Each test creates its own namespace `fpt-ap-<pid>-<tag>`, creates the interfaces inside
//! it (so deleting the namespace removes them), and runs the port code on a thread that
//! has entered the namespace with `setns(CLONE_NEWNET)`. A guard deletes the namespace on
//! drop, also when the test panics.

use flowpath_ports::afpacket::AfPacketPort;
use flowpath_ports::tap::TapPort;
use flowpath_ports::{PacketBatch, Port};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

/// Whether these tests can run here; prints why not when they cannot.
fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !root || !ip {
        eprintln!("skipping: needs root and ip netns (root: {root}, `ip netns list` works: {ip})");
        return false;
    }
    true
}

/// A network namespace, deleted (with every interface in it) on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("fpt-ap-{}-{tag}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        // Fewer stray frames (router solicitations, MLD) on the test links.
        let _ = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sysctl", "-qw"])
            .arg("net.ipv6.conf.all.disable_ipv6=1")
            .output();
        let _ = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sysctl", "-qw"])
            .arg("net.ipv6.conf.default.disable_ipv6=1")
            .output();
        ns
    }

    /// `ip -n <ns> args...`, which must succeed.
    fn ip(&self, args: &[&str]) {
        let mut v = vec!["ip", "-n", &self.name];
        v.extend_from_slice(args);
        run(&v);
    }

    /// Run `f` on a thread inside the namespace; its panic becomes ours (after which the
    /// guard still deletes the namespace).
    fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.name);
        let t = std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: a namespace file descriptor; affects only this thread.
            let r = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        });
        match t.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A veth pair `a` <-> `b`, both up, in a fresh namespace.
fn veth_ns(tag: &str) -> Netns {
    let ns = Netns::new(tag);
    ns.ip(&["link", "add", "va", "type", "veth", "peer", "name", "vb"]);
    ns.ip(&["link", "set", "va", "up"]);
    ns.ip(&["link", "set", "vb", "up"]);
    ns
}

const MAGIC: [u8; 2] = [0x88, 0xb5];

/// Test frame `i` of stream `tag`: local experimental ethertype, sequence number and
/// stream tag after the header, varied lengths 60..=1514.
fn frame(tag: u8, i: u32) -> Vec<u8> {
    let len = 60 + (i as usize * 53) % (1514 - 60 + 1);
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, tag, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, tag, 0x01]);
    f[12..14].copy_from_slice(&MAGIC);
    f[14] = tag;
    f[15..19].copy_from_slice(&i.to_be_bytes());
    for (j, b) in f[19..].iter_mut().enumerate() {
        *b = (i as usize * 31 + j * 7) as u8;
    }
    f
}

/// The (tag, sequence) of one of our test frames; None for anything else on the link.
fn ident(f: &[u8]) -> Option<(u8, u32)> {
    (f.len() >= 19 && f[12..14] == MAGIC)
        .then(|| (f[14], u32::from_be_bytes(f[15..19].try_into().unwrap())))
}

/// Send `frames` through `port`, flushing every `chunk`; asserts the queue took them all.
fn send_all(port: &mut impl Port, frames: &[Vec<u8>], chunk: usize) {
    for c in frames.chunks(chunk) {
        for f in c {
            assert!(port.send(f), "send refused a frame");
        }
        port.flush().unwrap();
    }
}

/// Receive our test frames of stream `tag` until `want` arrived or `limit` passed (a
/// safety net so a broken port fails instead of hanging, not a performance threshold).
fn recv_tagged(port: &mut impl Port, tag: u8, want: usize, limit: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut b = PacketBatch::new();
    let start = Instant::now();
    while out.len() < want && start.elapsed() < limit {
        b.clear();
        let n = port.recv(&mut b).unwrap();
        for i in 0..n {
            let f = b.frame(i);
            if ident(f).is_some_and(|(t, _)| t == tag) {
                out.push(f.to_vec());
            }
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    out
}

const N: u32 = 1000;

#[test]
fn afpacket_veth_delivers_every_frame_byte_exact() {
    if !can_run() {
        return;
    }
    let ns = veth_ns("veth");
    ns.run_in(|| {
        let mut a = AfPacketPort::open("a", "va", false).unwrap();
        let mut b = AfPacketPort::open("b", "vb", false).unwrap();
        // A second socket on the sending side: the kernel would show it a's transmissions
        // as PACKET_OUTGOING frames (a itself never sees its own).
        let mut a2 = AfPacketPort::open("a2", "va", false).unwrap();
        assert_eq!(a.info().kind, "afpacket");
        let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(1, i)).collect();
        // Flush in chunks smaller than the queue; the receiver's 4 MiB ring holds them all.
        send_all(&mut a, &sent, 100);
        let got = recv_tagged(&mut b, 1, sent.len(), Duration::from_secs(10));
        assert_eq!(got.len(), sent.len(), "every frame arrives");
        assert_eq!(got, sent, "byte-exact, in order on veth");

        let sa = a.stats();
        assert_eq!(sa.tx_packets, N as u64);
        assert_eq!(
            sa.tx_bytes,
            sent.iter().map(|f| f.len() as u64).sum::<u64>()
        );
        assert_eq!(sa.tx_dropped, 0);
        let sb = b.stats();
        assert!(sb.rx_packets >= N as u64);
        assert_eq!(sb.rx_dropped, 0);

        // Ports do not receive what leaves their interface (PACKET_IGNORE_OUTGOING, and
        // the PACKET_OUTGOING check behind it).
        let out = recv_tagged(&mut a2, 1, 1, Duration::from_millis(50));
        assert!(out.is_empty(), "{} outgoing frames received", out.len());

        // And the other way round, with frames spanning several ring blocks per call.
        let back: Vec<Vec<u8>> = (0..N).map(|i| frame(2, i)).collect();
        send_all(&mut b, &back, 256);
        let got = recv_tagged(&mut a, 2, back.len(), Duration::from_secs(10));
        assert_eq!(got, back);
    });
}

#[test]
fn afpacket_fanout_shares_without_duplicates() {
    if !can_run() {
        return;
    }
    let ns = veth_ns("fanout");
    ns.run_in(|| {
        let mut tx = AfPacketPort::open("tx", "va", false).unwrap();
        let mut q0 = AfPacketPort::open("q0", "vb", true).unwrap();
        let mut q1 = AfPacketPort::open("q1", "vb", true).unwrap();
        assert!(q0.info().detail.contains("fanout"));
        // 1000 distinct UDP flows, so the flow hash spreads them; frames are recognised
        // by their bytes (each is unique).
        let src = flowpath_gen::InMemorySource::udp4_flows(N as usize, 64);
        let sent: Vec<Vec<u8>> = (0..N as usize).map(|i| src.template(i).to_vec()).collect();
        send_all(&mut tx, &sent, 200);
        let want: HashMap<&[u8], usize> =
            sent.iter().enumerate().map(|(i, f)| (&f[..], i)).collect();
        let mut seen = vec![0u32; sent.len()];
        let mut per_queue = [0usize; 2];
        let mut b = PacketBatch::new();
        let start = Instant::now();
        while per_queue.iter().sum::<usize>() < sent.len()
            && start.elapsed() < Duration::from_secs(10)
        {
            let mut idle = true;
            for (q, port) in [&mut q0, &mut q1].into_iter().enumerate() {
                b.clear();
                let n = port.recv(&mut b).unwrap();
                idle &= n == 0;
                for i in 0..n {
                    if let Some(&ix) = want.get(b.frame(i)) {
                        seen[ix] += 1;
                        per_queue[q] += 1;
                    }
                }
            }
            if idle {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        assert!(
            seen.iter().all(|&c| c == 1),
            "every frame exactly once across the group"
        );
        assert!(
            per_queue[0] > 0 && per_queue[1] > 0,
            "both members get traffic: {per_queue:?}"
        );
    });
}

#[test]
fn tap_port_and_afpacket_exchange_frames() {
    if !can_run() {
        return;
    }
    let ns = Netns::new("tap");
    ns.run_in(|| {
        // The tap is created by the port (and vanishes with it) and set up.
        let mut tap = TapPort::open("tap", "fptap0").unwrap();
        assert_eq!(tap.info().kind, "tap");
        let mut pkt = AfPacketPort::open("pkt", "fptap0", false).unwrap();

        // Written to the tap fd = received by the kernel on fptap0 = seen by AF_PACKET.
        let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(3, i)).collect();
        for f in &sent {
            assert!(tap.send(f));
        }
        tap.flush().unwrap();
        let got = recv_tagged(&mut pkt, 3, sent.len(), Duration::from_secs(10));
        assert_eq!(got, sent);
        assert_eq!(tap.stats().tx_packets, N as u64);

        // Sent on fptap0 through AF_PACKET = transmitted by the tap = read from its fd.
        let back: Vec<Vec<u8>> = (0..N).map(|i| frame(4, i)).collect();
        // The tap's transmit queue (txqueuelen 1000) fills if the reader lags: flush in
        // chunks and read in between.
        let mut got = Vec::new();
        for c in back.chunks(100) {
            send_all(&mut pkt, c, 100);
            got.extend(recv_tagged(&mut tap, 4, c.len(), Duration::from_secs(10)));
        }
        assert_eq!(got, back);
        assert_eq!(pkt.stats().tx_dropped, 0);
    });
}

/// Observed on Linux 6.18: after the veth is deleted, `flush` of queued frames fails with
/// ENXIO (the socket's device index is gone) and `recv` reports ENETDOWN (the socket's
/// pending error, checked when the ring is idle); both stay errors afterwards.
#[test]
fn afpacket_reports_deleted_veth() {
    if !can_run() {
        return;
    }
    let ns = veth_ns("gone");
    let name = ns.name.clone();
    ns.run_in(move || {
        let mut a = AfPacketPort::open("a", "va", false).unwrap();
        let mut b = AfPacketPort::open("b", "vb", false).unwrap();
        let sent: Vec<Vec<u8>> = (0..10).map(|i| frame(5, i)).collect();
        send_all(&mut a, &sent, 10);
        assert_eq!(recv_tagged(&mut b, 5, 10, Duration::from_secs(10)), sent);

        run(&["ip", "-n", &name, "link", "del", "va"]);

        // recv: polls until the idle ring's socket error is checked.
        let mut batch = PacketBatch::new();
        let mut recv_err = None;
        for _ in 0..1000 {
            batch.clear();
            match b.recv(&mut batch) {
                Ok(_) => {}
                Err(e) => {
                    recv_err = Some(e);
                    break;
                }
            }
        }
        let recv_err = recv_err.expect("recv reports the deleted device");
        eprintln!("recv after delete: {recv_err}");
        assert!(recv_err.to_string().contains("vb"), "{recv_err}");

        // flush: the queued frame cannot go anywhere.
        a.send(&frame(5, 99));
        let flush_err = a.flush().expect_err("flush reports the deleted device");
        eprintln!("flush after delete: {flush_err}");
        assert!(flush_err.to_string().contains("va"), "{flush_err}");
        // Sticky: later calls fail too, without panicking.
        assert!(a.flush().is_err());
        assert!(a.recv(&mut batch).is_err());
        assert!(b.recv(&mut batch).is_err());
        assert!(!a.send(&frame(5, 100)), "a dead port refuses frames");
    });
}
