//! `ct_synflood`: established TCP connections on port A, measured alone and then while
//! port B sends SYNs of never-seen connections as fast as the worker takes them, on the
//! attack cases' rig (paced A, unpaced B, the switch's default defences). The pipeline
//! commits new connections from B too (a security group open to inbound connections), so
//! every SYN makes a tracker entry.

use super::conns::segment;
use super::frames::{tcp4, Endpoints};
use super::rig::{tracker_for, Timed};
use super::rules::{ct_rules, CtPipeline};
use super::{result, CtCase, CtFigures, CtSizes};
use crate::attack::rig::{set_rates, spin, window, worker, AttackWorker, Scenario};
use crate::attack::{AttackConfig, PORT_ATTACK, PORT_ESTABLISHED};
use crate::runner::{BenchConfig, CaseResult};
use flowpath_base::clock::tsc_hz;
use flowpath_base::rng::SplitMix64;
use flowpath_base::{PacketBatch, Summary, BATCH};
use flowpath_datapath::CountingSink;

/// One TCP connection's handshake (SYN, SYN-ACK, ACK) as frames, with the ACK the
/// established traffic repeats (a duplicate ACK is in window).
struct Handshake {
    syn: Vec<u8>,
    syn_ack: Vec<u8>,
    ack: Vec<u8>,
}

fn handshakes(n: usize, seed: u64) -> Vec<Handshake> {
    let mut rng = SplitMix64::new(seed);
    let mut buf = [0u8; 128];
    (0..n as u64)
        .map(|i| {
            let e = Endpoints::nth(i, 80);
            let r = rng.next();
            let (c, s) = (r as u32, (r >> 32) as u32);
            let mut frame = |step: usize, reply: bool| {
                let len = tcp4(&mut buf, &e, reply, &segment(step, c, s, 0));
                buf[..len].to_vec()
            };
            Handshake {
                syn: frame(0, false),
                syn_ack: frame(1, true),
                ack: frame(2, false),
            }
        })
        .collect()
}

/// Process `frames` on the worker's datapath as arriving on `in_port`, a batch at a time.
fn send(w: &mut AttackWorker, in_port: u32, frames: impl Iterator<Item = Vec<u8>>) {
    let mut sink = CountingSink::default();
    let mut b = PacketBatch::new();
    let frames: Vec<Vec<u8>> = frames.collect();
    for chunk in frames.chunks(BATCH) {
        b.clear();
        for f in chunk {
            b.push(f);
        }
        let dp = w.datapath_mut();
        b.with_packets(|pkts| dp.process(in_port, pkts, &mut sink));
    }
}

/// One run's three windows: A alone unpaced, A at its offered load, A with the flood.
struct Run {
    alone: Timed,
    retained: f64,
    flood_pps: f64,
    tracked: u64,
    cache: (usize, usize),
}

fn one_run(sc: &Scenario, hs: &[Handshake], acfg: &AttackConfig) -> Run {
    let mut w = worker(sc, acfg, acfg.datapath.clone());
    let tracker = tracker_for(0);
    w.datapath_mut().set_tracker(tracker.clone());
    send(&mut w, PORT_ESTABLISHED, hs.iter().map(|h| h.syn.clone()));
    send(&mut w, PORT_ATTACK, hs.iter().map(|h| h.syn_ack.clone()));
    send(&mut w, PORT_ESTABLISHED, hs.iter().map(|h| h.ack.clone()));
    let ms = acfg.window_ms;
    set_rates(&mut w, f64::INFINITY, 0.0);
    spin(&mut w, ms.max(100));
    let d0 = w.outputs().packets;
    let sat = window(&mut w, ms);
    let alone = Timed {
        cycles: (sat.secs * tsc_hz()) as u64,
        packets: sat.a_delivered.max(1),
        stats: w.datapath().stats().clone(),
        delivered: w.outputs().packets - d0,
    };
    let offered = sat.a_delivered as f64 / sat.secs * acfg.established_load;
    set_rates(&mut w, offered, 0.0);
    spin(&mut w, ms.max(100));
    let quiet = window(&mut w, ms);
    set_rates(&mut w, offered, acfg.attack_pps.unwrap_or(f64::INFINITY));
    spin(&mut w, ms.max(100));
    let loud = window(&mut w, ms);
    let quiet_pps = quiet.a_delivered as f64 / quiet.secs;
    let mf = w.datapath().megaflows();
    Run {
        alone,
        retained: loud.a_delivered as f64 / loud.secs / quiet_pps.max(1.0),
        flood_pps: loud.b_packets as f64 / loud.secs,
        tracked: tracker.len() as u64,
        cache: (mf.subtables(), mf.len()),
    }
}

pub(super) fn ct_synflood(
    cfg: &BenchConfig,
    sizes: &CtSizes,
    mut progress: impl FnMut(usize, usize),
) -> CaseResult {
    let n = sizes.conns.max(1);
    let acfg = AttackConfig {
        runs: cfg.runs,
        window_ms: sizes.window_ms,
        frame_size: cfg.frame_size,
        backend: cfg.backend,
        seed: cfg.seed,
        ..AttackConfig::default()
    };
    let mut p = CtPipeline::new(PORT_ESTABLISHED, PORT_ATTACK);
    p.commit_from_b = true;
    let hs = handshakes(n, cfg.seed);
    // The flood: one SYN from outside, stamped with a never-seen source per packet.
    let mut buf = [0u8; 128];
    let far = Endpoints {
        client: [198, 51, 100, 1],
        server: [10, 200, 0, 1],
        cport: 40_000,
        sport: 80,
    };
    let syn_len = tcp4(&mut buf, &far, false, &segment(0, 7, 0, 0));
    let sc = Scenario {
        rules: ct_rules(&p),
        established: hs.iter().map(|h| h.ack.clone()).collect(),
        attack: vec![buf[..syn_len].to_vec()],
        attack_new_flows: true,
    };
    let runs: Vec<Run> = (0..cfg.runs.max(1))
        .map(|r| {
            let run = one_run(&sc, &hs, &acfg);
            progress(r + 1, cfg.runs);
            run
        })
        .collect();
    let kept: Vec<f64> = runs.iter().map(|r| r.retained).collect();
    let k = Summary::of(&kept).expect("at least one run");
    let flood: Vec<f64> = runs.iter().map(|r| r.flood_pps).collect();
    let alone: Vec<Timed> = runs.iter().map(|r| r.alone.clone()).collect();
    let last = runs.last().expect("at least one run");
    let figures = CtFigures {
        tracked: last.tracked,
        retained: Some(k.median),
        retained_min: Some(k.min),
        retained_max: Some(k.max),
        flood_pps: flowpath_base::median(&flood),
        ..CtFigures::default()
    };
    let mut r = result(CtCase::SynFlood, cfg, &alone, last.cache, figures);
    if let Some(ct) = r.ct.as_mut() {
        ct.established_mpps = Some(r.mpps);
    }
    r
}
