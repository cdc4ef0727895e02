//! The packet side: an in-process worker (`spawn_worker` on two `MemoryPort`s, OpenFlow
//! ports 1 and 2) with the OpenFlow channel on its queues (`WorkerPacketIo`), and the bench
//! as the controller: packet_in → packet_out round trips, a miss storm against the
//! packet-in rate limit, and established traffic while flow_mods arrive.

use super::client::{blast, encode_flow_mods, errors, Client};
use super::inprocess::InProcess;
use flowpath_openflow::consts::*;
use flowpath_openflow::{FlowMod, Instruction, Message, OfAction, Oxm, OxmField, PacketOut};
use flowpath_ports::{MemoryPort, MemoryPortHandle};
use flowpath_switch::openflow::{OpenFlowConfig, WorkerPacketIo};
use flowpath_switch::pmd::WorkerHandle;
use flowpath_switch::{spawn_worker, WorkerConfig, WorkerPort, WorkerSnapshot};
use serde::Serialize;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A 64-byte UDP/IPv4 frame (60 bytes in memory).
pub fn frame(src: u32, dst: u32, sport: u16) -> Vec<u8> {
    flowpath_gen::build(&flowpath_gen::FrameSpec::udp4(
        Ipv4Addr::from(src),
        Ipv4Addr::from(dst),
        sport,
        9,
        64,
    ))
}

/// The worker, its two ports and the channel.
pub struct Rig {
    pub fp: InProcess,
    worker: Option<WorkerHandle>,
    stop_worker: Arc<AtomicBool>,
    pub p1: MemoryPortHandle,
    pub p2: MemoryPortHandle,
}

impl Rig {
    pub fn start(idle_sleep_max: Duration, of: OpenFlowConfig) -> Result<Rig, String> {
        let sw = flowpath_switch::Switch::open(flowpath_switch::SwitchConfig::default())?;
        let (a, p1) = MemoryPort::new("p1");
        let (b, p2) = MemoryPort::new("p2");
        let stop_worker = Arc::new(AtomicBool::new(false));
        let wcfg = WorkerConfig {
            idle_sleep_max,
            ..WorkerConfig::default()
        };
        let w = spawn_worker(
            &sw,
            wcfg,
            vec![
                WorkerPort::new(1, 0, Box::new(a)),
                WorkerPort::new(2, 0, Box::new(b)),
            ],
            stop_worker.clone(),
        )
        .map_err(|e| format!("spawn a worker: {e}"))?;
        let io = Arc::new(WorkerPacketIo::new(std::slice::from_ref(&w), vec![1, 2]));
        let fp = InProcess::start_with(sw, io, of)?;
        Ok(Rig {
            fp,
            worker: Some(w),
            stop_worker,
            p1,
            p2,
        })
    }

    /// The worker's last published counters.
    pub fn snapshot(&self) -> WorkerSnapshot {
        let w = self.worker.as_ref().expect("running");
        w.snapshot.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stop the worker; its final counters.
    pub fn finish(&mut self) -> WorkerSnapshot {
        self.stop_worker.store(true, Ordering::Relaxed);
        self.worker
            .take()
            .map(|w| w.thread.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Install `priority=0 actions=CONTROLLER:65535` in table 0.
fn table_miss_to_controller(c: &mut Client) -> Result<(), String> {
    c.send(&Message::FlowMod(FlowMod {
        priority: 0,
        instructions: vec![Instruction::ApplyActions(vec![OfAction::Output {
            port: OFPP_CONTROLLER,
            max_len: OFPCML_NO_BUFFER,
        }])],
        ..FlowMod::default()
    }))?;
    let e = errors(&c.barrier()?);
    if e.is_empty() {
        Ok(())
    } else {
        Err(format!("the table-miss flow was refused: {e:?}"))
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct RoundTrip {
    /// How the worker waits when idle.
    pub worker: String,
    pub frames: u32,
    pub median_us: f64,
    pub p99_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// 1 / mean round trip: packet-ins a one-at-a-time controller gets through per second.
    pub packet_ins_per_s: f64,
    /// Packet-ins whose data was not the injected frame.
    pub data_mismatches: u64,
    pub packet_in_rate: u32,
}

/// K round trips, one frame at a time: inject on port 1 → PACKET_IN → PACKET_OUT(in_port
/// 1, output:2) → the frame sent on port 2.
pub fn round_trip(k: u32, idle_sleep_max: Duration) -> Result<RoundTrip, String> {
    let of = OpenFlowConfig {
        packet_in_rate: 10_000_000,
        packet_in_burst: 10_000_000,
        ..OpenFlowConfig::default()
    };
    let rig = Rig::start(idle_sleep_max, of.clone())?;
    let mut c = Client::connect(rig.fp.addr)?;
    table_miss_to_controller(&mut c)?;
    let warm = 50.min(k);
    let mut times = Vec::with_capacity(k as usize);
    let mut mismatches = 0;
    for i in 0..warm + k {
        let f = frame(0x0a01_0000 + i, 0x0a02_0001, 1000 + (i % 50_000) as u16);
        let t0 = Instant::now();
        rig.p1.inject(&f);
        let data = loop {
            match c.recv()? {
                (_, _, Some(Message::PacketIn(p))) => break p.data,
                _ => continue,
            }
        };
        if data != f {
            mismatches += 1;
        }
        c.send(&Message::PacketOut(PacketOut {
            buffer_id: OFP_NO_BUFFER,
            in_port: 1,
            actions: vec![OfAction::output(2)],
            data,
        }))?;
        let give_up = t0 + Duration::from_secs(5);
        while rig.p2.sent_len() == 0 {
            if Instant::now() > give_up {
                let e = errors(&c.barrier()?);
                return Err(format!("packet-out {i} never left port 2 (errors: {e:?})"));
            }
            std::thread::yield_now();
        }
        let dt = t0.elapsed();
        rig.p2.take_sent();
        if i >= warm {
            times.push(dt.as_secs_f64() * 1e6);
        }
    }
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    times.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    Ok(RoundTrip {
        worker: if idle_sleep_max.is_zero() {
            "busy polling".into()
        } else {
            format!("naps up to {} µs (default)", idle_sleep_max.as_micros())
        },
        frames: k,
        median_us: q(0.5),
        p99_us: q(0.99),
        min_us: times[0],
        max_us: times[times.len() - 1],
        packet_ins_per_s: 1e6 / mean,
        data_mismatches: mismatches,
        packet_in_rate: of.packet_in_rate,
    })
}

#[derive(Clone, Debug, Serialize)]
pub struct Storm {
    pub offered: u64,
    /// From the first frame injected to the last packet-in received.
    pub seconds: f64,
    pub packet_in_rate: u32,
    pub packet_in_burst: u32,
    /// rate × seconds + burst.
    pub bound: f64,
    pub delivered: u64,
    pub packet_ins_rate_dropped: u64,
    /// Never reached the channel: the worker's controller queue was full or the miss
    /// budget dropped them.
    pub dropped_before_channel: u64,
    pub miss_budget_drops: u64,
}

/// `n` distinct misses on port 1 over about `secs` seconds with the default packet-in
/// limit; the bench counts the packet-ins it gets.
pub fn storm(n: u32, secs: f64) -> Result<Storm, String> {
    let of = OpenFlowConfig::default();
    let mut rig = Rig::start(WorkerConfig::default().idle_sleep_max, of.clone())?;
    let mut c = Client::connect(rig.fp.addr)?;
    table_miss_to_controller(&mut c)?;
    let got = Arc::new(AtomicU64::new(0));
    let last = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let done = Arc::new(AtomicBool::new(false));
    c.stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let reader = {
        let (got, last, done) = (got.clone(), last.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Ok((_, t, _)) = c.recv() {
                    if t == msg::PACKET_IN {
                        got.fetch_add(1, Ordering::Relaxed);
                        *last.lock().unwrap() = Some(Instant::now());
                    }
                }
            }
        })
    };
    let chunks = 100u32;
    let per = n.div_ceil(chunks);
    let t0 = Instant::now();
    let mut sent = 0u32;
    for j in 0..chunks {
        let batch: Vec<Vec<u8>> = (sent..(sent + per).min(n))
            .map(|i| frame(0x0b00_0000 + i, 0x0a02_0001, 7))
            .collect();
        sent += batch.len() as u32;
        rig.p1.inject_many(&batch);
        let next = t0 + Duration::from_secs_f64(secs * f64::from(j + 1) / f64::from(chunks));
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    // Quiet for a second: everything that will arrive has.
    loop {
        let before = got.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(1));
        if got.load(Ordering::Relaxed) == before && rig.p1.pending() == 0 {
            break;
        }
    }
    done.store(true, Ordering::Relaxed);
    let _ = reader.join();
    let end = last.lock().unwrap().unwrap_or(t0);
    let seconds = (end - t0).as_secs_f64();
    let cc = rig.fp.counters();
    let fin = rig.finish();
    let delivered = got.load(Ordering::Relaxed);
    let popped = cc.packet_ins_sent + cc.packet_ins_rate_dropped;
    Ok(Storm {
        offered: u64::from(n),
        seconds,
        packet_in_rate: of.packet_in_rate,
        packet_in_burst: of.packet_in_burst,
        bound: f64::from(of.packet_in_rate) * seconds + f64::from(of.packet_in_burst),
        delivered,
        packet_ins_rate_dropped: cc.packet_ins_rate_dropped,
        dropped_before_channel: u64::from(n).saturating_sub(popped),
        miss_budget_drops: fin.guard.miss_budget_drops,
    })
}

#[derive(Clone, Debug, Serialize)]
pub struct Traffic {
    pub flows: u32,
    pub flow_mods: u32,
    /// First flow_mod byte to BARRIER_REPLY.
    pub storm_seconds: f64,
    pub flow_mod_errors: u64,
    pub injected: u64,
    pub injected_during_storm: u64,
    pub transmitted: u64,
    pub lost: i64,
    /// The worker's misses and upcalls between the first flow_mod and the barrier reply.
    pub misses_during_storm: u64,
    pub upcalls_during_storm: u64,
    /// Drops the worker counted over the whole run.
    pub worker_drops: u64,
    /// Frames the worker received and sent over the whole run (the warm-up's included),
    /// and its miss-budget drops.
    pub worker_received: u64,
    pub worker_sent: u64,
    pub miss_budget_drops: u64,
    /// Rules in the store after the storm's barrier.
    pub rules_after: usize,
    pub offered_pps: f64,
}

/// The `i`-th of the storm's flow_mods: none matches the established traffic
/// (192.168.0.0/24 from port 1): half in table 0 at priority 300 on 10.0.0.0/8
/// destinations (the established flows' table, so their megaflows are revalidated),
/// half TCP rules in tables 1-3.
pub fn unrelated_flow_mod(i: u32) -> Message {
    let fm = if i % 2 == 0 {
        FlowMod {
            table_id: 0,
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
                Oxm::exact(OxmField::TcpDst, u128::from(i % 65_536)),
            ],
            instructions: vec![Instruction::ApplyActions(vec![OfAction::output(2)])],
            ..FlowMod::default()
        }
    };
    Message::FlowMod(fm)
}

/// The established flows: in_port=1, ip, nw_dst=192.168.0.i → output:2, priority 200.
pub fn established_flow_mod(i: u32) -> Message {
    Message::FlowMod(FlowMod {
        table_id: 0,
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

/// `flows` established flows forwarded port 1 → 2 (a round of one frame per flow every
/// `gap`) while `n` unrelated flow_mods and a barrier arrive; count what came out.
pub fn traffic(flows: u32, n: u32, gap: Duration) -> Result<Traffic, String> {
    let mut rig = Rig::start(
        WorkerConfig::default().idle_sleep_max,
        OpenFlowConfig::default(),
    )?;
    let mut c = Client::connect(rig.fp.addr)?;
    for i in 0..flows {
        c.send(&established_flow_mod(i))?;
    }
    let e = errors(&c.barrier()?);
    if !e.is_empty() {
        return Err(format!("the established flows were refused: {e:?}"));
    }
    let frames: Vec<Vec<u8>> = (0..flows)
        .map(|i| frame(0x0a09_0000 + i, 0xc0a8_0000 + i, 5000 + i as u16))
        .collect();
    warm_up(&rig, &frames)?;
    let stop = Arc::new(AtomicBool::new(false));
    let injected = Arc::new(AtomicU64::new(0));
    let injector = inject_rounds(&rig.p1, frames, gap, &stop, &injected);
    // Traffic alone for a moment, then the storm.
    std::thread::sleep(Duration::from_millis(200));
    let before = rig.snapshot();
    let inj0 = injected.load(Ordering::Relaxed);
    let bytes = encode_flow_mods(n, unrelated_flow_mod);
    let b = blast(c, &bytes)?;
    let inj1 = injected.load(Ordering::Relaxed);
    let rules_after = rig.fp.sw.store().snapshot().rules().count();
    // The snapshot is published every 5 ms.
    std::thread::sleep(Duration::from_millis(10));
    let after = rig.snapshot();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let ran = injector.join().map_err(|_| "injector panicked")?;
    let total = injected.load(Ordering::Relaxed);
    let mut transmitted = drain(&rig, total);
    let fin = rig.finish();
    transmitted += rig.p2.take_sent().len() as u64;
    Ok(Traffic {
        flows,
        flow_mods: n,
        storm_seconds: b.elapsed.as_secs_f64(),
        flow_mod_errors: b.errors,
        injected: total,
        injected_during_storm: inj1 - inj0,
        transmitted,
        lost: total as i64 - transmitted as i64,
        misses_during_storm: after.misses - before.misses,
        upcalls_during_storm: after.upcalls - before.upcalls,
        worker_drops: fin.drops,
        worker_received: fin.packets,
        worker_sent: fin.tx_packets,
        miss_budget_drops: fin.guard.miss_budget_drops,
        rules_after,
        offered_pps: total as f64 / ran.as_secs_f64(),
    })
}

/// Each flow once, so its megaflow is cached before the storm: inject one round and wait
/// (up to 10 s) for all of it on port 2.
fn warm_up(rig: &Rig, frames: &[Vec<u8>]) -> Result<(), String> {
    rig.p1.inject_many(frames);
    let t = Instant::now();
    while rig.p2.sent_len() < frames.len() {
        if t.elapsed() > Duration::from_secs(10) {
            return Err("the warm-up frames did not all come out of port 2".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    rig.p2.take_sent();
    Ok(())
}

/// A thread injecting a round of `frames` on `p1` every `gap` until `stop`, counting them
/// in `injected`; it returns how long it ran.
fn inject_rounds(
    p1: &MemoryPortHandle,
    frames: Vec<Vec<u8>>,
    gap: Duration,
    stop: &Arc<AtomicBool>,
    injected: &Arc<AtomicU64>,
) -> std::thread::JoinHandle<Duration> {
    let (stop, injected, p1) = (stop.clone(), injected.clone(), p1.clone());
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut round = 0u32;
        while !stop.load(Ordering::Relaxed) {
            p1.inject_many(&frames);
            injected.fetch_add(frames.len() as u64, Ordering::Relaxed);
            round += 1;
            let next = t0 + gap * round;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        t0.elapsed()
    })
}

/// Frames taken from port 2 until `total` came out and port 1 is empty (or 5 s passed).
fn drain(rig: &Rig, total: u64) -> u64 {
    let mut transmitted = 0u64;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        transmitted += rig.p2.take_sent().len() as u64;
        if transmitted >= total && rig.p1.pending() == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    transmitted
}
