//! Established flows lose nothing while flow_mods arrive (issue 17): an in-process worker
//! forwards 64 established flows from port 1 to port 2 (memory ports, paced so the worker
//! is not saturated) while a client sends 10,000 unrelated flow_mods over OpenFlow — half
//! in the established flows' own table at a higher priority, so their megaflows are
//! revalidated — and a barrier. Every frame injected must come out of port 2, and the
//! worker must drop nothing. No timing thresholds: `flowpath bench openflow` measures.

use flowpath_openflow::consts::*;
use flowpath_openflow::{
    decode, message_len, FlowMod, Instruction, Message, OfAction, Oxm, OxmField,
};
use flowpath_ports::MemoryPort;
use flowpath_switch::openflow::{NoPorts, OpenFlowChannel, OpenFlowConfig, Target, WorkerPacketIo};
use flowpath_switch::{spawn_worker, Switch, SwitchConfig, WorkerConfig, WorkerPort};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FLOWS: u32 = 64;
const FLOW_MODS: u32 = 10_000;

fn frame(src: u32, dst: u32, sport: u16) -> Vec<u8> {
    flowpath_gen::build(&flowpath_gen::FrameSpec::udp4(
        Ipv4Addr::from(src),
        Ipv4Addr::from(dst),
        sport,
        9,
        64,
    ))
}

fn established(i: u32) -> Message {
    Message::FlowMod(FlowMod {
        priority: 200,
        match_: vec![
            Oxm::exact(OxmField::InPort, 1),
            Oxm::exact(OxmField::EthType, 0x0800),
            Oxm::exact(OxmField::Ipv4Dst, u128::from(0xc0a8_0000 + i)),
        ],
        instructions: vec![Instruction::ApplyActions(vec![OfAction::output(2)])],
        ..FlowMod::default()
    })
}

/// None matches the established traffic (192.168.0.0/24 from port 1).
fn unrelated(i: u32) -> Message {
    Message::FlowMod(if i % 2 == 0 {
        FlowMod {
            priority: 300,
            match_: vec![
                Oxm::exact(OxmField::EthType, 0x0800),
                Oxm::exact(OxmField::Ipv4Dst, u128::from(0x0a00_0000 + i)),
            ],
            instructions: vec![Instruction::ApplyActions(vec![OfAction::output(1)])],
            ..FlowMod::default()
        }
    } else {
        FlowMod {
            table_id: 1 + (i % 3) as u8,
            priority: 10 + (i % 100) as u16,
            match_: vec![
                Oxm::exact(OxmField::EthType, 0x0800),
                Oxm::exact(OxmField::IpProto, 6),
                Oxm::exact(OxmField::TcpDst, u128::from(i)),
            ],
            instructions: vec![Instruction::ApplyActions(vec![OfAction::output(2)])],
            ..FlowMod::default()
        }
    })
}

/// Read messages until the BARRIER_REPLY with `xid`; the OpenFlow types seen before it.
fn until_barrier(s: &mut TcpStream, buf: &mut Vec<u8>, xid: u32) -> Vec<u8> {
    let mut seen = Vec::new();
    loop {
        while let Ok(Some(n)) = message_len(buf) {
            if buf.len() < n {
                break;
            }
            let raw: Vec<u8> = buf.drain(..n).collect();
            let (h, m) = decode(&raw).expect("the switch sends valid messages");
            if h.xid == xid && matches!(m, Message::BarrierReply) {
                return seen;
            }
            seen.push(raw[1]);
        }
        let mut chunk = [0u8; 65536];
        let n = s.read(&mut chunk).expect("read from the switch");
        assert!(n > 0, "the switch closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(30), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn established_flows_lose_nothing_while_10000_flow_mods_arrive() {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let (a, p1) = MemoryPort::new("p1");
    let (b, p2) = MemoryPort::new("p2");
    let stop_worker = Arc::new(AtomicBool::new(false));
    let w = spawn_worker(
        &sw,
        WorkerConfig::default(),
        vec![
            WorkerPort::new(1, 0, Box::new(a)),
            WorkerPort::new(2, 0, Box::new(b)),
        ],
        stop_worker.clone(),
    )
    .unwrap();
    let io = Arc::new(WorkerPacketIo::new(std::slice::from_ref(&w), vec![1, 2]));
    let stop_ch = Arc::new(AtomicBool::new(false));
    let ch = OpenFlowChannel::start(
        sw.clone(),
        Arc::new(NoPorts),
        io,
        OpenFlowConfig {
            targets: vec![Target::Listen("127.0.0.1:0".parse().unwrap())],
            ..OpenFlowConfig::default()
        },
        stop_ch.clone(),
    )
    .unwrap();
    let mut s = TcpStream::connect(ch.listening[0]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = Vec::new();
    s.write_all(&Message::hello().encode(1)).unwrap();

    // The established flows, then each flow once so its megaflow is cached.
    let mut bytes = Vec::new();
    for i in 0..FLOWS {
        bytes.extend(established(i).encode(10 + i));
    }
    bytes.extend(Message::BarrierRequest.encode(2));
    s.write_all(&bytes).unwrap();
    let seen = until_barrier(&mut s, &mut buf, 2);
    assert!(!seen.contains(&msg::ERROR), "{seen:?}");
    let frames: Vec<Vec<u8>> = (0..FLOWS)
        .map(|i| frame(0x0a09_0000 + i, 0xc0a8_0000 + i, 5000 + i as u16))
        .collect();
    p1.inject_many(&frames);
    wait_until("the warm-up frames leave port 2", || {
        p2.sent_len() == frames.len()
    });
    p2.take_sent();

    // Steady traffic: one frame per flow every millisecond.
    let stop_inj = Arc::new(AtomicBool::new(false));
    let injected = Arc::new(AtomicU64::new(0));
    let injector = {
        let (stop, injected, p1, frames) = (stop_inj.clone(), injected.clone(), p1.clone(), frames);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                p1.inject_many(&frames);
                injected.fetch_add(frames.len() as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(50));

    // The storm: 10,000 unrelated flow_mods and a barrier, from a writer thread while
    // this one reads (so neither TCP buffer can block the other).
    let mut storm = Vec::new();
    for i in 0..FLOW_MODS {
        storm.extend(unrelated(i).encode(1000 + i));
    }
    storm.extend(Message::BarrierRequest.encode(3));
    let mut wr = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || wr.write_all(&storm).unwrap());
    let during = injected.load(Ordering::Relaxed);
    let seen = until_barrier(&mut s, &mut buf, 3);
    writer.join().unwrap();
    assert!(
        !seen.contains(&msg::ERROR),
        "a flow_mod was refused: {seen:?}"
    );
    assert_eq!(
        sw.store().snapshot().rules().count(),
        (FLOWS + FLOW_MODS) as usize
    );
    std::thread::sleep(Duration::from_millis(50));
    stop_inj.store(true, Ordering::Relaxed);
    injector.join().unwrap();
    let total = injected.load(Ordering::Relaxed);
    assert!(
        total > during,
        "traffic kept flowing during the storm ({during} then {total})"
    );

    let mut transmitted = 0u64;
    wait_until("every injected frame leaves port 2", || {
        transmitted += p2.take_sent().len() as u64;
        transmitted >= total
    });
    stop_worker.store(true, Ordering::Relaxed);
    let fin = w.thread.join().unwrap();
    transmitted += p2.take_sent().len() as u64;
    stop_ch.store(true, Ordering::Relaxed);
    ch.join();

    assert_eq!(transmitted, total, "injected vs transmitted on port 2");
    assert_eq!(
        fin.packets,
        total + u64::from(FLOWS),
        "the worker received every frame"
    );
    assert_eq!(fin.tx_packets, fin.packets, "and sent every one");
    assert_eq!(fin.drops, 0, "the worker dropped nothing");
    assert_eq!(fin.guard.miss_budget_drops, 0);
    // The storm's rules are unrelated: the established flows' megaflows survive
    // revalidation, so at most a handful of their packets go to the slow path again.
    eprintln!(
        "{total} frames ({FLOWS} flows), {FLOW_MODS} flow_mods: misses {} (the warm-up's {FLOWS} included), upcalls {}",
        fin.misses, fin.upcalls
    );
}
