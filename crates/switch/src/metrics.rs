//! What the daemon reports: `flowpath stats` text, and the Prometheus text exposition
//! served over HTTP. The exposition is `prometheus-client`'s: two collectors read the
//! workers' snapshots at scrape time (the workers publish snapshots, not live counters).

use crate::control::Response;
use crate::pmd::{PortQueueSnapshot, WorkerSnapshot};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_text::{encode, CONTENT_TYPE};
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt::{self, Write as _};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub(crate) fn collect(snaps: &[Arc<Mutex<WorkerSnapshot>>]) -> Vec<WorkerSnapshot> {
    snaps
        .iter()
        .map(|s| s.lock().map(|g| g.clone()).unwrap_or_default())
        .collect()
}

pub(crate) fn stats_response(snaps: &[WorkerSnapshot]) -> Response {
    Response {
        lines: format_stats(snaps).lines().map(String::from).collect(),
        data: serde_json::to_value(snaps).ok(),
        ..Response::default()
    }
}

/// `flowpath stats` text, in the spirit of `ovs-appctl dpif-netdev/pmd-perf-show`.
pub fn format_stats(snaps: &[WorkerSnapshot]) -> String {
    let mut o = String::new();
    for w in snaps {
        worker_lines(&mut o, w);
        port_lines(&mut o, w);
    }
    o
}

/// Percent of `n` in `d` (0 when `d` is 0).
fn pct(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        100.0 * n as f64 / d as f64
    }
}

/// One worker's loop, tier and transmit counters.
fn worker_lines(o: &mut String, w: &WorkerSnapshot) {
    let total = (w.busy_cycles + w.idle_cycles).max(1);
    let core = w
        .core
        .map(|c| format!("core {c}"))
        .unwrap_or_else(|| "not pinned".into());
    let _ = writeln!(o, "worker {} ({core}):", w.id);
    let _ = writeln!(
        o,
        "  iterations:        {:>14}  ({:.1} % received packets, {} naps)",
        w.iterations,
        pct(w.busy_iterations, w.iterations),
        w.sleeps
    );
    let _ = writeln!(
        o,
        "  cycles:            {:>14}  ({:.1} % busy; {:.1} s at {:.3} GHz TSC)",
        total,
        pct(w.busy_cycles, total),
        total as f64 / w.tsc_hz.max(1.0),
        w.tsc_hz / 1e9
    );
    let _ = writeln!(o, "  rx packets:        {:>14}", w.packets);
    let _ = writeln!(o, "  avg batch:         {:>14.1}  packets", w.avg_batch());
    let _ = writeln!(
        o,
        "  cycles/packet:     {:>14.0}  (busy cycles / packets)",
        w.cycles_per_packet()
    );
    let _ = writeln!(
        o,
        "  exact-match hits:  {:>14}  ({:.1} %)",
        w.emc_hits,
        pct(w.emc_hits, w.packets)
    );
    let _ = writeln!(
        o,
        "  megaflow hits:     {:>14}  ({:.1} %; {:.1} % by signature, no subtable search)",
        w.megaflow_hits,
        pct(w.megaflow_hits, w.packets),
        pct(w.smc_hits, w.packets)
    );
    let _ = writeln!(
        o,
        "  misses:            {:>14}  ({:.1} %)",
        w.misses,
        pct(w.misses, w.packets)
    );
    let _ = writeln!(o, "  upcalls:           {:>14}", w.upcalls);
    if w.ct_executed + w.recirculations > 0 {
        let _ = writeln!(
            o,
            "  ct executed:       {:>14}  ({} recirculated: {} answered by the ct memo, the rest in {} passes)",
            w.ct_executed, w.recirculations, w.ct_memo_hits, w.recirc_passes
        );
    }
    let _ = writeln!(o, "  drops:             {:>14}", w.drops);
    for (reason, n) in &w.drop_reasons {
        let _ = writeln!(o, "    {reason:<24} {n:>12}");
    }
    if w.xdp_hits + w.xdp_entries + w.xdp_not_offered + w.xdp_candidates + w.xdp_not_proven > 0 {
        let _ = writeln!(
            o,
            "  xdp tier hits:     {:>14}  (in the kernel, not in rx packets; {} entries, {} megaflows not offered)",
            w.xdp_hits, w.xdp_entries, w.xdp_not_offered
        );
        let _ = writeln!(
            o,
            "  xdp tier waiting:  {:>14}  (megaflows not yet hit twice; {} dropped unproven, {} of them offered later)",
            w.xdp_candidates, w.xdp_not_proven, w.xdp_offered_late
        );
    }
    guard_lines(o, w);
    let _ = writeln!(o, "  tx packets:        {:>14}", w.tx_packets);
    if w.no_such_port > 0 {
        let _ = writeln!(o, "  to unknown ports:  {:>14}", w.no_such_port);
    }
}

/// The miss-storm defence: every limit, how full it is, and what it refused.
fn guard_lines(o: &mut String, w: &WorkerSnapshot) {
    let g = &w.guard;
    let _ = writeln!(
        o,
        "  megaflows:         {:>14}  (flow limit {} of max {}; {} evicted, limit shrank {} times)",
        g.megaflows, g.flow_limit, g.megaflow_max, g.evictions, g.flow_limit_shrinks
    );
    let _ = writeln!(
        o,
        "  masks:             {:>14}  (limit {}; {} subtables evicted, {} megaflows refused at the limit)",
        g.subtables, g.max_masks, g.subtables_evicted, g.mask_limit_refusals
    );
    let budget = if g.slow_path_share >= 1.0 {
        "off".to_string()
    } else {
        format!(
            "{:.0} % of the core while hits are served",
            100.0 * g.slow_path_share
        )
    };
    let rate = if g.new_masks_per_sec == 0 {
        "no new-mask rate".to_string()
    } else {
        format!("{} new masks/s per port", g.new_masks_per_sec)
    };
    let _ = writeln!(
        o,
        "  miss budget drops: {:>14}  (budget {budget}; {rate}; {} forwarded uncached)",
        g.miss_budget_drops, g.uncached
    );
}

/// One worker's port queues.
fn port_lines(o: &mut String, w: &WorkerSnapshot) {
    for p in &w.ports {
        let s = &p.stats;
        let _ = writeln!(
            o,
            "  port {} '{}' queue {}: {} {}{}",
            p.number,
            p.name,
            p.queue,
            p.info.kind,
            p.info.detail,
            p.down
                .as_ref()
                .map(|e| format!(" — DOWN: {e}"))
                .unwrap_or_default()
        );
        let _ = writeln!(
            o,
            "      rx {} pkts {} bytes, {} dropped; tx {} pkts {} bytes, {} dropped; {} errors",
            s.rx_packets,
            s.rx_bytes,
            s.rx_dropped,
            s.tx_packets,
            s.tx_bytes,
            s.tx_dropped,
            s.errors
        );
        let m = &p.miss;
        if m.upcalls + m.budget_drops + m.uncached > 0 {
            let _ = writeln!(
                o,
                "      misses: {} upcalls, {} over the miss budget, {} uncached ({} by the new-mask rate), {} masks created",
                m.upcalls, m.budget_drops, m.uncached, m.mask_rate_refusals, m.masks_created
            );
        }
    }
}

/// Reads one figure of a worker (the tables below pair it with its name after
/// `flowpath_worker_` and its help text).
type WorkerGet = fn(&WorkerSnapshot) -> u64;
/// Reads one counter of a port queue (named after `flowpath_port_`).
type PortGet = fn(&flowpath_ports::PortStats) -> u64;
/// Reads one miss-guard counter of a port (named after `flowpath_port_`).
type PortMissGet = fn(&flowpath_datapath::PortMissStats) -> u64;

// Counter names leave out the `_total` the encoder adds (the samples and the HELP and
// TYPE lines read `flowpath_worker_packets_total`).

static WORKER_COUNTERS: [(&str, &str, WorkerGet); 23] = [
    (
        "miss_budget_drops",
        "Misses dropped over their port's miss budget.",
        |w| w.guard.miss_budget_drops,
    ),
    (
        "uncached",
        "Packets forwarded without caching their megaflow (mask rate or mask limit).",
        |w| w.guard.uncached,
    ),
    ("megaflow_evictions", "Megaflows evicted (CLOCK).", |w| {
        w.guard.evictions
    }),
    (
        "megaflow_subtables_evicted",
        "Subtables removed whole for a new mask at the mask limit.",
        |w| w.guard.subtables_evicted,
    ),
    (
        "megaflow_mask_limit_refusals",
        "Megaflows not cached because every subtable was busy at the mask limit.",
        |w| w.guard.mask_limit_refusals,
    ),
    (
        "megaflow_flow_limit_shrinks",
        "Times a slow revalidation shrank the flow limit.",
        |w| w.guard.flow_limit_shrinks,
    ),
    ("packets", "Packets received by the worker.", |w| w.packets),
    ("batches", "Receive batches processed.", |w| w.batches),
    (
        "emc_hits",
        "Packets answered by the exact-match cache.",
        |w| w.emc_hits,
    ),
    (
        "megaflow_hits",
        "Packets answered by the megaflow cache.",
        |w| w.megaflow_hits,
    ),
    (
        "smc_hits",
        "Megaflow hits found by the signature-match cache (no subtable search).",
        |w| w.smc_hits,
    ),
    ("misses", "Packets that missed both caches.", |w| w.misses),
    ("upcalls", "Packets classified by the slow path.", |w| {
        w.upcalls
    }),
    (
        "ct_executed",
        "ct actions run through the connection tracker.",
        |w| w.ct_executed,
    ),
    (
        "recirculations",
        "Packets ct(table=) sent back through the caches.",
        |w| w.recirculations,
    ),
    (
        "ct_memo_hits",
        "Second passes of ct(table=) flows the ct memo answered in their first.",
        |w| w.ct_memo_hits,
    ),
    (
        "recirc_passes",
        "Batches of recirculated packets run through the caches again.",
        |w| w.recirc_passes,
    ),
    (
        "drops",
        "Packets dropped by the datapath, all reasons.",
        |w| w.drops,
    ),
    ("tx_packets", "Packets queued for transmission.", |w| {
        w.tx_packets
    }),
    (
        "busy_cycles",
        "TSC cycles in iterations that received packets.",
        |w| w.busy_cycles,
    ),
    (
        "idle_cycles",
        "TSC cycles in empty iterations and naps.",
        |w| w.idle_cycles,
    ),
    ("iterations", "Poll loop iterations.", |w| w.iterations),
    ("sleeps", "Idle naps taken.", |w| w.sleeps),
];

/// The miss-storm defence's levels and limits (gauges).
static GUARD_GAUGES: [(&str, &str, WorkerGet); 6] = [
    ("megaflows", "Megaflows held.", |w| w.guard.megaflows),
    (
        "megaflow_flow_limit",
        "The dynamic flow limit now (shrinks when revalidation is slow).",
        |w| w.guard.flow_limit,
    ),
    ("megaflow_max", "The configured most megaflows.", |w| {
        w.guard.megaflow_max
    }),
    (
        "megaflow_masks",
        "Megaflow subtables (masks) in use.",
        |w| w.guard.subtables,
    ),
    ("megaflow_max_masks", "The most megaflow subtables.", |w| {
        w.guard.max_masks
    }),
    (
        "xdp_candidates",
        "Megaflows waiting to prove themselves before the XDP tier takes them.",
        |w| w.xdp_candidates,
    ),
];

static PORT_MISS_COUNTERS: [(&str, &str, PortMissGet); 5] = [
    (
        "upcalls",
        "Misses of this port classified by the slow path.",
        |m| m.upcalls,
    ),
    (
        "miss_budget_drops",
        "Misses of this port dropped over its share of the slow path.",
        |m| m.budget_drops,
    ),
    (
        "uncached",
        "Packets of this port forwarded without caching their megaflow.",
        |m| m.uncached,
    ),
    (
        "mask_rate_refusals",
        "New masks this port was refused by the per-port new-mask rate.",
        |m| m.mask_rate_refusals,
    ),
    (
        "masks_created",
        "Megaflow masks this port's misses created.",
        |m| m.masks_created,
    ),
];

static PORT_COUNTERS: [(&str, &str, PortGet); 7] = [
    ("rx_packets", "Frames received.", |s| s.rx_packets),
    ("rx_bytes", "Bytes received.", |s| s.rx_bytes),
    ("rx_dropped", "Frames received but not delivered.", |s| {
        s.rx_dropped
    }),
    ("tx_packets", "Frames sent.", |s| s.tx_packets),
    ("tx_bytes", "Bytes sent.", |s| s.tx_bytes),
    ("tx_dropped", "Frames that could not be sent.", |s| {
        s.tx_dropped
    }),
    ("errors", "Failed system calls.", |s| s.errors),
];

/// More collectors for the exposition, registered at each scrape (the tracker's).
pub type ExtraMetrics = Arc<dyn Fn(&mut Registry) + Send + Sync>;

/// The Prometheus text exposition (format 0.0.4) of the workers' counters.
pub fn prometheus_text(snaps: &[WorkerSnapshot]) -> String {
    exposition(snaps.into(), None)
}

/// [`prometheus_text`] with `extra`'s collectors too.
pub fn prometheus_text_with(snaps: &[WorkerSnapshot], extra: &ExtraMetrics) -> String {
    exposition(snaps.into(), Some(extra))
}

fn exposition(snaps: Arc<[WorkerSnapshot]>, extra: Option<&ExtraMetrics>) -> String {
    let mut registry = Registry::with_prefix("flowpath");
    if let Some(f) = extra {
        f(&mut registry);
    }
    registry
        .sub_registry_with_prefix("worker")
        .register_collector(Box::new(Workers(snaps.clone())));
    registry
        .sub_registry_with_prefix("port")
        .register_collector(Box::new(Ports(snaps)));
    let mut o = String::new();
    encode(&mut o, &registry).expect("writing to a String cannot fail");
    o
}

/// The workers' own figures, read from their snapshots at scrape time.
#[derive(Debug)]
struct Workers(Arc<[WorkerSnapshot]>);

impl Collector for Workers {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let labels = |w: &WorkerSnapshot| ([("worker", w.id)], [("core", w.core)]);
        for (name, help, get) in &WORKER_COUNTERS {
            let samples = self.0.iter().map(|w| (labels(w), get(w)));
            family(&mut enc, name, help, MetricType::Counter, samples)?;
        }
        for (name, help, get) in &GUARD_GAUGES {
            let samples = self.0.iter().map(|w| (labels(w), get(w)));
            family(&mut enc, name, help, MetricType::Gauge, samples)?;
        }
        Ok(())
    }
}

/// Every worker's port queues, read from the workers' snapshots at scrape time.
#[derive(Debug)]
struct Ports(Arc<[WorkerSnapshot]>);

impl Ports {
    /// Each port queue with its labels.
    fn queues(&self) -> impl Iterator<Item = (impl EncodeLabelSet + '_, &PortQueueSnapshot)> {
        self.0.iter().flat_map(|w| {
            w.ports.iter().map(move |p| {
                let port = [("port", p.name.as_str())];
                let queue = [("number", p.number), ("queue", p.queue)];
                (((port, queue), [("worker", w.id)]), p)
            })
        })
    }
}

impl Collector for Ports {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        for (name, help, get) in &PORT_MISS_COUNTERS {
            let samples = self.queues().map(|(l, p)| (l, get(&p.miss)));
            family(&mut enc, name, help, MetricType::Counter, samples)?;
        }
        for (name, help, get) in &PORT_COUNTERS {
            let samples = self.queues().map(|(l, p)| (l, get(&p.stats)));
            family(&mut enc, name, help, MetricType::Counter, samples)?;
        }
        Ok(())
    }
}

/// One metric family: its HELP and TYPE lines, then a sample per label set.
pub(crate) fn family<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: impl Iterator<Item = (L, u64)>,
) -> fmt::Result {
    let mut f = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in samples {
        let m = f.encode_family(&labels)?;
        match kind {
            MetricType::Gauge => ConstGauge::new(value).encode(m)?,
            _ => ConstCounter::new(value).encode(m)?,
        }
    }
    Ok(())
}

/// Serve the exposition until `stop`: every connection is answered with it, whatever it
/// asked (the endpoint has one page), so a few lines of std do what an HTTP server crate
/// would.
pub(crate) fn spawn_metrics(
    l: TcpListener,
    snaps: Vec<Arc<Mutex<WorkerSnapshot>>>,
    extra: Option<ExtraMetrics>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("flowpath-metrics".into())
        .spawn(move || {
            for conn in l.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(mut s) = conn else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let body = exposition(collect(&snaps).into(), extra.as_ref());
                let _ = write!(
                    s,
                    "HTTP/1.0 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
        })
        .expect("spawn the metrics thread")
}
