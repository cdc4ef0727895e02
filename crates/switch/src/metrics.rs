//! What the daemon reports: `flowpath stats` text, and the Prometheus text exposition
//! served over HTTP.

use crate::control::Response;
use crate::pmd::WorkerSnapshot;
use std::fmt::Write as _;
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

/// A worker counter: name, help text, how to read it.
type WorkerGet = fn(&WorkerSnapshot) -> f64;
/// A port counter: name, help text, how to read it.
type PortGet = fn(&flowpath_ports::PortStats) -> u64;

static WORKER_METRICS: [(&str, &str, WorkerGet); 19] = [
    (
        "miss_budget_drops_total",
        "Misses dropped over their port's miss budget.",
        |w| w.guard.miss_budget_drops as f64,
    ),
    (
        "uncached_total",
        "Packets forwarded without caching their megaflow (mask rate or mask limit).",
        |w| w.guard.uncached as f64,
    ),
    (
        "megaflow_evictions_total",
        "Megaflows evicted (CLOCK).",
        |w| w.guard.evictions as f64,
    ),
    (
        "megaflow_subtables_evicted_total",
        "Subtables removed whole for a new mask at the mask limit.",
        |w| w.guard.subtables_evicted as f64,
    ),
    (
        "megaflow_mask_limit_refusals_total",
        "Megaflows not cached because every subtable was busy at the mask limit.",
        |w| w.guard.mask_limit_refusals as f64,
    ),
    (
        "megaflow_flow_limit_shrinks_total",
        "Times a slow revalidation shrank the flow limit.",
        |w| w.guard.flow_limit_shrinks as f64,
    ),
    ("packets_total", "Packets received by the worker.", |w| {
        w.packets as f64
    }),
    ("batches_total", "Receive batches processed.", |w| {
        w.batches as f64
    }),
    (
        "emc_hits_total",
        "Packets answered by the exact-match cache.",
        |w| w.emc_hits as f64,
    ),
    (
        "megaflow_hits_total",
        "Packets answered by the megaflow cache.",
        |w| w.megaflow_hits as f64,
    ),
    (
        "smc_hits_total",
        "Megaflow hits found by the signature-match cache (no subtable search).",
        |w| w.smc_hits as f64,
    ),
    ("misses_total", "Packets that missed both caches.", |w| {
        w.misses as f64
    }),
    (
        "upcalls_total",
        "Packets classified by the slow path.",
        |w| w.upcalls as f64,
    ),
    (
        "drops_total",
        "Packets dropped by the datapath, all reasons.",
        |w| w.drops as f64,
    ),
    (
        "tx_packets_total",
        "Packets queued for transmission.",
        |w| w.tx_packets as f64,
    ),
    (
        "busy_cycles_total",
        "TSC cycles in iterations that received packets.",
        |w| w.busy_cycles as f64,
    ),
    (
        "idle_cycles_total",
        "TSC cycles in empty iterations and naps.",
        |w| w.idle_cycles as f64,
    ),
    ("iterations_total", "Poll loop iterations.", |w| {
        w.iterations as f64
    }),
    ("sleeps_total", "Idle naps taken.", |w| w.sleeps as f64),
];

static PORT_METRICS: [(&str, &str, PortGet); 7] = [
    ("rx_packets_total", "Frames received.", |s| s.rx_packets),
    ("rx_bytes_total", "Bytes received.", |s| s.rx_bytes),
    (
        "rx_dropped_total",
        "Frames received but not delivered.",
        |s| s.rx_dropped,
    ),
    ("tx_packets_total", "Frames sent.", |s| s.tx_packets),
    ("tx_bytes_total", "Bytes sent.", |s| s.tx_bytes),
    ("tx_dropped_total", "Frames that could not be sent.", |s| {
        s.tx_dropped
    }),
    ("errors_total", "Failed system calls.", |s| s.errors),
];

/// The miss-storm defence's levels and limits (gauges).
static GUARD_GAUGES: [(&str, &str, WorkerGet); 6] = [
    ("megaflows", "Megaflows held.", |w| w.guard.megaflows as f64),
    (
        "megaflow_flow_limit",
        "The dynamic flow limit now (shrinks when revalidation is slow).",
        |w| w.guard.flow_limit as f64,
    ),
    ("megaflow_max", "The configured most megaflows.", |w| {
        w.guard.megaflow_max as f64
    }),
    (
        "megaflow_masks",
        "Megaflow subtables (masks) in use.",
        |w| w.guard.subtables as f64,
    ),
    ("megaflow_max_masks", "The most megaflow subtables.", |w| {
        w.guard.max_masks as f64
    }),
    (
        "xdp_candidates",
        "Megaflows waiting to prove themselves before the XDP tier takes them.",
        |w| w.xdp_candidates as f64,
    ),
];

/// A port's miss-guard counter.
type PortMissGet = fn(&flowpath_datapath::PortMissStats) -> u64;

static PORT_MISS_METRICS: [(&str, &str, PortMissGet); 5] = [
    (
        "upcalls_total",
        "Misses of this port classified by the slow path.",
        |m| m.upcalls,
    ),
    (
        "miss_budget_drops_total",
        "Misses of this port dropped over its share of the slow path.",
        |m| m.budget_drops,
    ),
    (
        "uncached_total",
        "Packets of this port forwarded without caching their megaflow.",
        |m| m.uncached,
    ),
    (
        "mask_rate_refusals_total",
        "New masks this port was refused by the per-port new-mask rate.",
        |m| m.mask_rate_refusals,
    ),
    (
        "masks_created_total",
        "Megaflow masks this port's misses created.",
        |m| m.masks_created,
    ),
];

/// The Prometheus text exposition of the workers' counters.
///
/// Written by hand: the format is a few lines of text per metric, and the switch has no
/// other use for a metrics library.
pub fn prometheus_text(snaps: &[WorkerSnapshot]) -> String {
    let mut o = String::new();
    for (name, help, get) in &WORKER_METRICS {
        family(&mut o, "worker", name, help);
        for w in snaps {
            let core = w.core.map(|c| c.to_string()).unwrap_or_default();
            let _ = writeln!(
                o,
                "flowpath_worker_{name}{{worker=\"{}\",core=\"{core}\"}} {}",
                w.id,
                get(w)
            );
        }
    }
    for (name, help, get) in &GUARD_GAUGES {
        let _ = writeln!(o, "# HELP flowpath_worker_{name} {help}");
        let _ = writeln!(o, "# TYPE flowpath_worker_{name} gauge");
        for w in snaps {
            let core = w.core.map(|c| c.to_string()).unwrap_or_default();
            let _ = writeln!(
                o,
                "flowpath_worker_{name}{{worker=\"{}\",core=\"{core}\"}} {}",
                w.id,
                get(w)
            );
        }
    }
    for (name, help, get) in &PORT_MISS_METRICS {
        family(&mut o, "port", name, help);
        for w in snaps {
            for p in &w.ports {
                let _ = writeln!(
                    o,
                    "flowpath_port_{name}{{port=\"{}\",number=\"{}\",queue=\"{}\",worker=\"{}\"}} {}",
                    escape_label(&p.name),
                    p.number,
                    p.queue,
                    w.id,
                    get(&p.miss)
                );
            }
        }
    }
    for (name, help, get) in &PORT_METRICS {
        family(&mut o, "port", name, help);
        for w in snaps {
            for p in &w.ports {
                let _ = writeln!(
                    o,
                    "flowpath_port_{name}{{port=\"{}\",number=\"{}\",queue=\"{}\",worker=\"{}\"}} {}",
                    escape_label(&p.name),
                    p.number,
                    p.queue,
                    w.id,
                    get(&p.stats)
                );
            }
        }
    }
    o
}

/// The HELP and TYPE lines of one counter family.
fn family(o: &mut String, of: &str, name: &str, help: &str) {
    let _ = writeln!(o, "# HELP flowpath_{of}_{name} {help}");
    let _ = writeln!(o, "# TYPE flowpath_{of}_{name} counter");
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub(crate) fn spawn_metrics(
    l: TcpListener,
    snaps: Vec<Arc<Mutex<WorkerSnapshot>>>,
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
                let body = prometheus_text(&collect(&snaps));
                let _ = write!(
                    s,
                    "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
        })
        .expect("spawn the metrics thread")
}
