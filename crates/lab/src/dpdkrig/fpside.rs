//! flowpath's side of the rig: the rig's frames replayed from memory into flowpath's
//! datapath (the worker loop the switch runs, one port, a counting sink), the same flows
//! parsed from the same `ovs-ofctl` text, a tracker of its own; timed with the TSC on the
//! CPU OVS's PMD had.

use super::{Figures, FlowSet, RigConfig, RX_PORT, TX_PORT};
use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_base::BATCH;
use flowpath_conntrack::{CtConfig, Tracker};
use flowpath_datapath::{CountingSink, Datapath, DatapathConfig, Worker, WorkerPort};
use flowpath_flowsyntax::{parse_flows_file, FlowCommand};
use flowpath_gen::{replay_source, GeneratedPort};
use flowpath_pipeline::{Backend, RuleSpec, RuleStore};
use std::sync::Arc;

/// The flow set as flowpath's rules, from the text OVS loads.
pub fn rules(set: FlowSet) -> Result<Vec<RuleSpec>, String> {
    let parsed = parse_flows_file(&set.flows(), FlowCommand::Add)
        .map_err(|e| format!("flowpath cannot read the {} flows: {e}", set.name()))?;
    Ok(parsed.into_iter().map(|f| f.spec).collect())
}

type RigWorker = Worker<GeneratedPort, CountingSink>;

/// A worker over the frames with `set`'s rules and a tracker.
pub(super) fn worker(
    frames: &[Vec<u8>],
    set: FlowSet,
    conns: u32,
) -> Result<(RigWorker, Arc<Tracker>), String> {
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    store
        .add(rules(set)?)
        .map_err(|e| format!("flowpath refuses the {} flows: {e}", set.name()))?;
    let mut dp = Datapath::new(store, DatapathConfig::default());
    let def = CtConfig::default();
    let tracker = Arc::new(Tracker::new(CtConfig {
        max_connections: def.max_connections.max(2 * conns),
        ..def
    }));
    dp.set_tracker(tracker.clone());
    let port = GeneratedPort::new("rig", replay_source(frames.to_vec()));
    let w = Worker::new(
        dp,
        vec![WorkerPort::new(RX_PORT, 0, port)],
        CountingSink::default(),
        "dpdk rig",
    );
    Ok((w, tracker))
}

/// Push exactly `packets` packets through, in full batches but the last.
pub(super) fn pump(w: &mut RigWorker, packets: u64) {
    let mut left = packets;
    while left > 0 {
        let n = w.poll_up_to((left as usize).min(BATCH));
        if n == 0 {
            return;
        }
        left -= n as u64;
    }
}

pub(super) fn forwarded(w: &RigWorker) -> u64 {
    w.outputs()
        .per_port
        .get(TX_PORT as usize)
        .copied()
        .unwrap_or(0)
}

/// Measure flowpath on `frames` with `set`'s flows: a warm-up of four rounds of the
/// frames (every connection opened, every cache filled), then `cfg.runs` timed runs of
/// `cfg.fp_packets` packets, on a thread pinned to `cfg.pmd_cpu`.
pub fn measure_flowpath(
    frames: &[Vec<u8>],
    set: FlowSet,
    cfg: &RigConfig,
) -> Result<Figures, String> {
    let (mut w, tracker) = worker(frames, set, cfg.conns)?;
    let cfg = cfg.clone();
    let warm = 4 * frames.len() as u64;
    let t = std::thread::Builder::new()
        .name("dpdkrig-fp".into())
        .spawn(move || {
            let pinned = flowpath_base::cpu::pin_current_thread(cfg.pmd_cpu).is_ok();
            pump(&mut w, warm);
            let hz = tsc_hz();
            let mut f = Figures::default();
            let out0 = forwarded(&w);
            w.datapath_mut().reset_stats();
            for _ in 0..cfg.runs {
                let t0 = rdtsc();
                pump(&mut w, cfg.fp_packets);
                let dt = (rdtsc() - t0).max(1) as f64;
                f.cycles.push(dt / cfg.fp_packets as f64);
                f.mpps.push(cfg.fp_packets as f64 / (dt / hz) / 1e6);
            }
            let st = w.datapath().stats();
            let rx = st.packets.max(1) as f64;
            f.forwarded_share = (forwarded(&w) - out0) as f64 / rx;
            f.note = format!(
                "EMC hits {:.1} %, megaflow hits {:.1} %, upcalls {}, tracked {}{}",
                100.0 * st.emc_hits as f64 / rx,
                100.0 * st.megaflow_hits as f64 / rx,
                st.upcalls,
                tracker.len(),
                if pinned { "" } else { " (not pinned)" }
            );
            f
        })
        .map_err(|e| e.to_string())?;
    t.join()
        .map_err(|_| "flowpath's measuring thread panicked".to_string())
}
