//! The one measurement harness: a datapath fed by generated traffic through the worker
//! loop (the same `Worker::poll` the switch's threads run), outputs counted, timed with the
//! TSC. `flowpath bench`, the suite, the planner's check and rule-change timing all
//! measure through it.

use crate::workload::IN_PORT;
use flowpath_base::clock::rdtsc;
use flowpath_base::{PacketBatch, Port, BATCH};
use flowpath_datapath::{
    CountingSink, Datapath, DatapathConfig, DatapathStats, OutputSink, Worker, WorkerPort,
};
use flowpath_gen::{GeneratedPort, InMemorySource};
use flowpath_pipeline::RuleStore;
use std::sync::Arc;

/// A datapath, its generated input port and a counting output.
pub struct Harness {
    worker: Worker<GeneratedPort, CountingSink>,
    frame_bytes: f64,
}

impl Harness {
    pub fn new(store: Arc<RuleStore>, cfg: DatapathConfig, source: InMemorySource) -> Harness {
        let n = source.template_count();
        let frame_bytes = (0..n)
            .map(|i| source.template(i).len() as f64 + 4.0)
            .sum::<f64>()
            / n as f64;
        let port = WorkerPort::new(IN_PORT, 0, GeneratedPort::new("gen", source));
        let dp = Datapath::new(store, cfg);
        Harness {
            worker: Worker::new(dp, vec![port], CountingSink::default(), "bench"),
            frame_bytes,
        }
    }

    /// Mean frame size of the source's templates, FCS included.
    pub fn frame_bytes(&self) -> f64 {
        self.frame_bytes
    }

    pub fn datapath(&self) -> &Datapath {
        self.worker.datapath()
    }

    pub fn datapath_mut(&mut self) -> &mut Datapath {
        self.worker.datapath_mut()
    }

    pub fn source_mut(&mut self) -> &mut InMemorySource {
        self.worker.ports_mut()[0].port.source_mut()
    }

    /// Share of packets stamped as new flows from now on.
    pub fn set_new_flow_share(&mut self, m: f64) {
        self.source_mut().set_new_flow_share(m);
    }

    /// Push exactly `packets` packets through, in full batches but the last.
    #[inline(never)]
    pub fn pump(&mut self, packets: u64) {
        let mut left = packets;
        while left > 0 {
            let n = self.worker.poll_up_to((left as usize).min(BATCH));
            debug_assert!(n > 0, "a generated port always has packets");
            left -= n as u64;
        }
    }

    /// One timed run: TSC cycles for `packets` packets, and the datapath's counters for
    /// just that run.
    pub fn timed(&mut self, packets: u64) -> (u64, DatapathStats) {
        self.datapath_mut().reset_stats();
        let t0 = rdtsc();
        self.pump(packets);
        let dt = rdtsc() - t0;
        (dt.max(1), self.datapath().stats().clone())
    }

    /// Push `packets` packets through batch by batch, and return each batch's TSC cycles.
    pub fn pump_timed_batches(&mut self, packets: u64) -> Vec<u64> {
        let mut left = packets;
        let mut cycles = Vec::with_capacity(packets.div_ceil(BATCH as u64) as usize);
        while left > 0 {
            let t0 = rdtsc();
            let n = self.worker.poll_up_to((left as usize).min(BATCH));
            cycles.push(rdtsc() - t0);
            debug_assert!(n > 0, "a generated port always has packets");
            left -= n as u64;
        }
        cycles
    }

    /// Fill the megaflow cache with new flows (`prefill` packets, so from then on every
    /// install evicts), then warm up with `warm` packets at new-flow share `m`.
    pub fn settle(&mut self, prefill: u64, m: f64, warm: u64) {
        self.set_new_flow_share(1.0);
        self.pump(prefill);
        self.set_new_flow_share(m);
        self.pump(warm);
    }
}

/// The floor under every case: the same generated port and counting sink with no
/// datapath between them (receive a batch, hand each frame to the sink). What a case costs
/// above this is what the datapath costs.
pub struct FloorHarness {
    port: GeneratedPort,
    rx: PacketBatch,
    out: CountingSink,
}

impl FloorHarness {
    pub fn new(source: InMemorySource) -> FloorHarness {
        FloorHarness {
            port: GeneratedPort::new("gen", source),
            rx: PacketBatch::new(),
            out: CountingSink::default(),
        }
    }

    /// Push exactly `packets` packets from the port to the sink.
    #[inline(never)]
    pub fn pump(&mut self, packets: u64) {
        let mut left = packets;
        while left > 0 {
            self.rx.clear();
            self.rx.limit((left as usize).min(BATCH));
            let n = self.port.recv(&mut self.rx).unwrap_or(0);
            debug_assert!(n > 0, "a generated port always has packets");
            let out = &mut self.out;
            self.rx.with_packets(|pkts| {
                for p in pkts.iter() {
                    out.output(2, p.data());
                }
            });
            left -= n as u64;
        }
    }

    /// One timed run: TSC cycles for `packets` packets.
    pub fn timed(&mut self, packets: u64) -> u64 {
        let t0 = rdtsc();
        self.pump(packets);
        (rdtsc() - t0).max(1)
    }

    /// Packets the sink received.
    pub fn delivered(&self) -> u64 {
        self.out.packets
    }
}
