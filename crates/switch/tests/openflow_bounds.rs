//! The OpenFlow channel's bounds, in process: a controller that stops reading is closed
//! once what is queued for it passes the bound (packet-ins, or replies to requests it
//! keeps sending) while the packet-in loop and other connections carry on; listeners
//! refuse connections over `max_connections`; a broken length prefix closes only its own
//! connection, a garbage message of the largest length is answered with an error.

mod common;
use common::openflow::{add, start_with, stop, Client};
use flowpath_openflow::consts::*;
use flowpath_openflow::{FlowStatsRequest, Message, MultipartRequest, OfAction, Oxm, OxmField};
use flowpath_switch::openflow::{OpenFlowChannel, OpenFlowConfig, PacketInItem, PacketIo, Target};
use flowpath_switch::{Switch, SwitchConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Packet-ins on demand: once `go` is set, `left` of them, 1,000 bytes each.
struct Flood {
    go: AtomicBool,
    left: AtomicUsize,
}

impl PacketIo for Flood {
    fn poll_packet_ins(&self, out: &mut Vec<PacketInItem>, max: usize) {
        if !self.go.load(Ordering::Relaxed) {
            return;
        }
        for _ in 0..max {
            if self
                .left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_err()
            {
                return;
            }
            out.push(PacketInItem {
                in_port: 1,
                reason: OFPR_NO_MATCH,
                table_id: 0,
                cookie: 0,
                total_len: 1000,
                data: vec![0x5a; 1000],
            });
        }
    }
    fn packet_out(
        &self,
        _: u32,
        _: Vec<flowpath_packet::Action>,
        _: Vec<u8>,
    ) -> Result<(), flowpath_openflow::OfError> {
        Err(flowpath_openflow::OfError::new(et::BAD_REQUEST, 0))
    }
    fn has_port(&self, _: u32) -> bool {
        false
    }
}

fn listen_cfg() -> OpenFlowConfig {
    OpenFlowConfig {
        targets: vec![Target::Listen("127.0.0.1:0".parse().unwrap())],
        ..OpenFlowConfig::default()
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(30), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Read until the switch closes the connection; the bytes read.
fn read_to_close(s: &mut TcpStream) -> usize {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut total = 0;
    let mut b = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut b) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return total,
            Err(e) => panic!("the switch did not close the connection: {e}"),
        }
    }
}

fn barrier_works(addr: SocketAddr) {
    let mut c = Client::connect(addr);
    c.barrier();
}

#[test]
fn a_controller_that_stops_reading_packet_ins_is_closed_at_the_bound() {
    const N: usize = 40_000; // 40 MB of packet-ins: far more than queue and socket hold
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let flood = Arc::new(Flood {
        go: AtomicBool::new(false),
        left: AtomicUsize::new(N),
    });
    let cfg = OpenFlowConfig {
        packet_in_rate: u32::MAX,
        packet_in_burst: u32::MAX,
        max_output_bytes: 1 << 20,
        ..listen_cfg()
    };
    let stop_flag = Arc::new(AtomicBool::new(false));
    let ch = OpenFlowChannel::start(
        sw.clone(),
        Arc::new(flowpath_switch::openflow::NoPorts),
        flood.clone(),
        cfg,
        stop_flag.clone(),
    )
    .unwrap();
    let addr = ch.listening[0];
    let mut slow = Client::connect(addr);
    flood.go.store(true, Ordering::Relaxed);
    // The packet-in loop takes every packet-in: it never waits for the slow reader.
    wait_until("the packet-in loop drained the flood", || {
        flood.left.load(Ordering::Relaxed) == 0
    });
    wait_until("the slow reader was closed", || {
        ch.counters().output_overflows == 1
    });
    let got = read_to_close(&mut slow.s);
    assert!(
        got < N * 1000,
        "the slow reader got {got} bytes, not all the packet-ins"
    );
    let c = ch.counters();
    assert!(c.packet_ins_sent < N as u64, "{c:?}");
    barrier_works(addr);
    stop(ch, stop_flag);
}

#[test]
fn a_client_that_requests_dumps_and_never_reads_them_is_closed() {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let cfg = OpenFlowConfig {
        probe_interval: Duration::from_millis(500),
        ..listen_cfg()
    };
    let (ch, st) = start_with(&sw, cfg);
    let addr = ch.listening[0];
    let mut c = Client::connect(addr);
    for i in 0..3000u128 {
        c.send(&add(
            0,
            1,
            vec![Oxm::exact(OxmField::InPort, i + 1)],
            vec![OfAction::Output {
                port: 1,
                max_len: 0,
            }],
        ));
    }
    c.barrier();
    assert_eq!(c.flow_stats().len(), 3000);
    // 200 dumps of 3,000 flows (tens of MB) asked for, none read.
    let mut slow = Client::connect(addr);
    let req = Message::MultipartRequest {
        flags: 0,
        body: MultipartRequest::Flow(FlowStatsRequest::default()),
    };
    let mut reqs = Vec::new();
    for x in 0..200 {
        reqs.extend(req.encode(1000 + x));
    }
    slow.s.write_all(&reqs).unwrap();
    // Meanwhile another connection is served as usual.
    c.barrier();
    assert_eq!(c.flow_stats().len(), 3000);
    wait_until("the client that does not read was closed", || {
        ch.counters().output_overflows == 1
    });
    read_to_close(&mut slow.s);
    barrier_works(addr);
    stop(ch, st);
}

#[test]
fn listeners_refuse_connections_over_the_limit() {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let cfg = OpenFlowConfig {
        max_connections: 8,
        ..listen_cfg()
    };
    let (ch, st) = start_with(&sw, cfg);
    let addr = ch.listening[0];
    let held: Vec<Client> = (0..8).map(|_| Client::connect(addr)).collect();
    // 1,000 more attempts, 100 at a time: each is closed without a HELLO.
    for _ in 0..10 {
        let batch: Vec<TcpStream> = (0..100)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        for mut s in batch {
            assert_eq!(
                read_to_close(&mut s),
                0,
                "a connection over the limit is served"
            );
        }
    }
    assert_eq!(ch.counters().connections_refused, 1000);
    assert_eq!(ch.connections(), 8);
    // The held ones still work; once they go, a new client is served.
    for mut c in held {
        c.barrier();
    }
    wait_until("the held connections closed", || ch.connections() == 0);
    barrier_works(addr);
    stop(ch, st);
}

#[test]
fn broken_and_garbage_length_prefixes_are_handled() {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let (ch, st) = start_with(&sw, listen_cfg());
    let addr = ch.listening[0];
    // A length below the header's 8 bytes: the stream cannot be framed; error, close.
    let mut c = Client::connect(addr);
    c.s.write_all(&[OFP_VERSION, msg::ECHO_REQUEST, 0, 4, 0, 0, 0, 9])
        .unwrap();
    match c.recv() {
        (_, Message::Error { type_, .. }) => assert_eq!(type_, et::BAD_REQUEST),
        other => panic!("expected an error, got {other:?}"),
    }
    read_to_close(&mut c.s);
    // The largest length there is, full of garbage: an error, and the connection goes on.
    let mut c = Client::connect(addr);
    let mut m = vec![OFP_VERSION, 0xee, 0xff, 0xff, 0, 0, 0, 7];
    m.resize(65535, 0xab);
    c.s.write_all(&m).unwrap();
    match c.recv() {
        (7, Message::Error { type_, .. }) => assert_eq!(type_, et::BAD_REQUEST),
        other => panic!("expected an error for xid 7, got {other:?}"),
    }
    c.barrier();
    assert_eq!(ch.counters().connections, 1);
    stop(ch, st);
}
