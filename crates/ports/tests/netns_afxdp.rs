//! The AF_XDP port against a veth pair in a throw-away network namespace: exact frames in
//! and out, its XDP program detached on close, a stale program of ours replaced (needs
//! root, `ip` and BPF; skips with a message otherwise).

mod afxdp_common;

use afxdp_common::{drain, open_port, Netns};
use flowpath_ports::Port;
use std::time::{Duration, Instant};

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
