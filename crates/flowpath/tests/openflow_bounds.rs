//! The OpenFlow channel's bounds, seen from outside `flowpath run`: a client that asks for
//! large flow dumps over and over and never reads them is closed (and logged), the
//! switch's memory stays put meanwhile, and other clients are served throughout. The
//! in-process cases (packet-ins to a controller that stopped reading, 1,000 connections
//! over the limit, broken length prefixes) are in `crates/switch/tests/openflow_bounds.rs`.
//!
//! Needs nothing but the binary: everything is on 127.0.0.1 with a port the system picks.

mod common;
use common::harness::{tail, wait_for};
use common::BIN;
use flowpath_openflow::{decode, message_len, FlowStatsRequest, Message, MultipartRequest};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

/// Resident and peak resident memory of `pid`, in KiB (VmRSS, VmHWM).
fn memory_kib(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A client that did the HELLO exchange.
fn hello(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&Message::hello().encode(1)).unwrap();
    let mut buf = Vec::new();
    loop {
        let mut b = [0u8; 256];
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed before HELLO");
        buf.extend_from_slice(&b[..n]);
        if let Ok(Some(len)) = message_len(&buf) {
            if buf.len() >= len {
                assert!(matches!(decode(&buf[..len]).unwrap().1, Message::Hello(_)));
                return s;
            }
        }
    }
}

/// A barrier answered on a new connection: the switch serves clients.
fn served(port: u16) -> bool {
    let mut s = hello(port);
    s.write_all(&Message::BarrierRequest.encode(77)).unwrap();
    let mut buf = Vec::new();
    loop {
        let mut b = [0u8; 4096];
        match s.read(&mut b) {
            Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
            _ => return false,
        }
        while let Ok(Some(len)) = message_len(&buf) {
            if buf.len() < len {
                break;
            }
            let (h, m) = decode(&buf[..len]).unwrap();
            if h.xid == 77 && matches!(m, Message::BarrierReply) {
                return true;
            }
            buf.drain(..len);
        }
    }
}

fn listening_port(p: &mut Switch, log: &Path) -> u16 {
    let mut port = None;
    wait_for("the switch listens", Duration::from_secs(30), || {
        assert!(
            p.0.try_wait().unwrap().is_none(),
            "the switch exited:\n{}",
            tail(log, 20)
        );
        let text = std::fs::read_to_string(log).unwrap_or_default();
        port = text
            .lines()
            .find_map(|l| l.split("listening on 127.0.0.1:").nth(1))
            .and_then(|p| p.trim().parse().ok());
        port.is_some()
    });
    port.unwrap()
}

#[test]
fn a_client_that_never_reads_its_dumps_is_closed_and_memory_stays_put() {
    let dir = std::env::temp_dir().join(format!("fpofbounds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("flowpath.log");
    let ctl = dir.join("ctl.sock");
    let f = std::fs::File::create(&log).unwrap();
    let child = Command::new(BIN)
        .args(["run", "--no-state", "--control"])
        .arg(&ctl)
        .args(["--openflow", "ptcp:127.0.0.1:0"])
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap();
    let mut sw = Switch(child);
    let port = listening_port(&mut sw, &log);
    // 5,000 flows: a flow dump is about half a megabyte.
    let flows: String = (0..5000)
        .map(|i| {
            format!(
                "table=0,priority=10,ip,nw_src=10.{}.{}.0/24,actions=output:1\n",
                i / 256,
                i % 256
            )
        })
        .collect();
    let file = dir.join("flows.txt");
    std::fs::write(&file, flows).unwrap();
    let o = Command::new(BIN)
        .args(["flows", "add", "--control"])
        .arg(&ctl)
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(served(port));
    let pid = sw.0.id();
    let (rss_before, _) = memory_kib(pid);

    // 1,000 dumps asked for at once (about 500 MB of replies), none read.
    let mut slow = hello(port);
    let req = Message::MultipartRequest {
        flags: 0,
        body: MultipartRequest::Flow(FlowStatsRequest::default()),
    };
    let reqs: Vec<u8> = (0..1000).flat_map(|x| req.encode(1000 + x)).collect();
    slow.write_all(&reqs).unwrap();
    assert!(served(port), "another client is served meanwhile");
    wait_for(
        "the switch closes the client that does not read",
        Duration::from_secs(60),
        || std::fs::read_to_string(&log).is_ok_and(|t| t.contains("stopped reading")),
    );
    let (rss_after, hwm) = memory_kib(pid);
    eprintln!("flowpath run: {rss_before} KiB before, peak {hwm} KiB, {rss_after} KiB after");
    assert!(
        hwm < rss_before + 64 * 1024,
        "peak memory {hwm} KiB, {rss_before} KiB before the dumps ({rss_after} KiB now)"
    );
    assert!(served(port), "served after the slow client was closed");
    drop(sw);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The switch process, killed on drop (also when the test fails).
struct Switch(Child);

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
