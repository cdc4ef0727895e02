//! Measuring one system on one case: wait for a quiet CPU, start the switch with its
//! receive on the measured CPU, run the generator's windows, read the CPU's and the
//! switch's own counters, and note what could make the numbers lie; with `--interleave`,
//! fold each round's rows into one row per system, class and case.

use crate::generator::{GenJob, Generator};
use crate::report::{Row, Sample};
use crate::systems::{self, Switch};
use crate::{generator, procstat, progress, report, sh, topo, Case, Lab, LabConfig};
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

/// The longest wait for every generator of a multi-worker row to reach its queue.
const QUEUE_WAIT: Duration = Duration::from_secs(20);
/// Packets a queue must have taken to count as fed: more than the odd frame the stack
/// sends on its own (neighbour discovery).
const QUEUE_LIVE: u64 = 1000;

/// Where traffic goes and which CPU's time is the cost.
pub(crate) struct Path3<'a> {
    pub(crate) gen_if: &'a str,
    pub(crate) dst_mac: &'a str,
    pub(crate) src_mac: &'a str,
    pub(crate) sink_if: &'a str,
    pub(crate) cpu: usize,
    /// The CPUs whose busy time is the cost (`cpu` alone, or every worker's CPU).
    pub(crate) cost_cpus: Vec<usize>,
    /// One generator process pinned to each (with its share of the sources).
    pub(crate) gen_cpus: Vec<usize>,
}

impl Path3<'static> {
    /// The generator straight into the sink (`gdir0` -> `sdir0`), no switch: the
    /// generator's CPU is the cost.
    pub(crate) fn direct(cfg: &LabConfig) -> Path3<'static> {
        Path3 {
            gen_if: topo::GDIR_IF,
            dst_mac: topo::SDIR_MAC,
            src_mac: topo::GDIR_MAC,
            sink_if: topo::SDIR_IF,
            cpu: cfg.gen_cpu,
            cost_cpus: vec![cfg.gen_cpu],
            gen_cpus: vec![cfg.gen_cpu],
        }
    }

    /// Through the switch (`gen0` -> `swin` ... `swout` -> `sink0`): the switch CPU is
    /// the cost.
    pub(crate) fn switched(cfg: &LabConfig) -> Path3<'static> {
        Path3 {
            gen_if: topo::GEN_IF,
            dst_mac: topo::SWIN_MAC,
            src_mac: topo::GEN_MAC,
            sink_if: topo::SINK_IF,
            cpu: cfg.switch_cpu,
            cost_cpus: vec![cfg.switch_cpu],
            gen_cpus: vec![cfg.gen_cpu],
        }
    }
}

/// A taskset CPU list: "1", "0,1".
pub(crate) fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl Lab {
    pub(crate) fn measure(
        &mut self,
        sys: &str,
        case: Case,
        g: &Generator,
        path: &Path3,
        mut switch: Option<Box<dyn Switch>>,
    ) -> Row {
        let mut row = Row {
            system: sys.into(),
            case: case.name().into(),
            generator: g.name().into(),
            cpu: path.cpu,
            cpus: if path.cost_cpus.len() > 1 {
                path.cost_cpus.clone()
            } else {
                Vec::new()
            },
            tsc_hz: self.tsc_hz,
            ..Row::default()
        };
        if let Some(n) = &self.topo.sink_xdp_note {
            row.notes.push(n.clone());
        }
        self.wait_quiet(path.cpu, &mut row);
        systems::reset_switch_ports(&self.topo);
        if let Some(s) = switch.as_mut() {
            if let Err(e) = self.start_switch(s.as_mut(), case, path, &mut row) {
                row.error = Some(e);
                return row;
            }
        }
        let result = self.windows(case, g, path, &mut switch, &mut row);
        if let Some(s) = switch.as_mut() {
            s.stop(&self.ctx());
        }
        // Other work on the measured CPU right after the run probably ran during it too.
        if result.is_ok() {
            self.note_busy_after(path.cpu, &mut row);
        }
        if let Err(e) = result {
            row.error = Some(e);
            row.samples.clear();
        }
        row.summarise();
        row
    }

    /// Wait up to 30 s for background load on the measured CPU to go quiet, before
    /// anything of ours runs there; say so in the row when it does not.
    pub(crate) fn wait_quiet(&self, cpu: usize, row: &mut Row) {
        let quiet = sh::wait_for(Duration::from_secs(30), || {
            self.busy_share(cpu, Duration::from_millis(300))
                .filter(|&b| b < 10.0)
        });
        if quiet.is_none() {
            let b = self
                .busy_share(cpu, Duration::from_millis(300))
                .unwrap_or(0.0);
            progress(&format!("  cpu{cpu} is {b:.0}% busy with other work"));
            row.notes
                .push(format!("NOISY: cpu{cpu} was {b:.0}% busy before the run"));
        }
    }

    /// Start the switch under test and put its receive work on the measured CPU.
    pub(crate) fn start_switch(
        &self,
        s: &mut dyn Switch,
        case: Case,
        path: &Path3,
        row: &mut Row,
    ) -> Result<(), String> {
        let ctx = self.ctx();
        if let Err(e) = s.start(&ctx, case) {
            s.stop(&ctx);
            return Err(e);
        }
        row.notes.extend(s.notes());
        if !self.topo.has_native_xdp(&self.topo.sw, topo::SWIN_IF) {
            row.notes.push(self.let_swin_take_xdp_frames());
        }
        if self.cfg.napi_on_switch_cpu {
            let cpus = cpu_list(&path.cost_cpus);
            row.notes.push(
                match self.topo.napi_on_cpu(&self.topo.sw, topo::SWIN_IF, &cpus) {
                    Ok(_) => {
                        format!("swin's receive (threaded NAPI, XDP included) pinned to cpu{cpus}")
                    }
                    Err(e) => {
                        format!("NOT per-core: swin's receive stays on the sender's CPU ({e})")
                    }
                },
            );
        }
        Ok(())
    }

    /// Other work on the measured CPU right after the run: note it.
    pub(crate) fn note_busy_after(&self, cpu: usize, row: &mut Row) {
        if let Some(b) = self.busy_share(cpu, Duration::from_millis(300)) {
            if b > 10.0 {
                progress(&format!("  cpu{cpu} is {b:.0}% busy right after the run"));
                row.notes.push(format!(
                    "NOISY: cpu{cpu} was {b:.0}% busy with other work right after the run"
                ));
            }
        }
    }

    /// The generators' traffic on `path` for the warm-up and `cfg.runs` windows, each
    /// window's sample (with the switch's own counters) into `row`; then every generator
    /// stopped, whatever happened.
    pub(crate) fn windows(
        &mut self,
        case: Case,
        g: &Generator,
        path: &Path3,
        switch: &mut Option<Box<dyn Switch>>,
        row: &mut Row,
    ) -> Result<(), String> {
        let mut gens = self.start_generators(case, g, path)?;
        let result = self
            .wait_for_every_queue(g, path, &mut gens)
            .and_then(|()| self.take_windows(g, path, switch, &mut gens, row));
        stop_generators(&mut gens);
        // Nothing but generators runs in the gen namespace: no straggler may load CPU 0
        // during the next system.
        let left = topo::kill_namespace_processes(&self.topo.gen);
        if left > 0 {
            progress(&format!("  killed {left} leftover generator process(es)"));
        }
        if let Some(n) = upcall_note(row) {
            row.notes.push(n);
        }
        result
    }

    /// With a generator per switch queue (the multi-worker rows): wait until each rx queue
    /// of `swin` has taken [`QUEUE_LIVE`] packets, so the warm-up starts with every
    /// generator sending to its queue. A generator process needs a while to start (more on
    /// a loaded machine): without the wait, a window could begin before one sends, and its
    /// worker would count nothing though the queues are set up right. At most
    /// [`QUEUE_WAIT`]; an error then names the silent queue.
    fn wait_for_every_queue(
        &self,
        g: &Generator,
        path: &Path3,
        gens: &mut [Running],
    ) -> Result<(), String> {
        let n = gens.len();
        if n < 2 || path.gen_if != topo::GEN_IF {
            return Ok(());
        }
        let (ns, ifname) = (&self.topo.sw, topo::SWIN_IF);
        let start = self.topo.rx_queue_packets(ns, ifname)?;
        let t0 = Instant::now();
        loop {
            let now = self.topo.rx_queue_packets(ns, ifname)?;
            let got: Vec<u64> = (0..n)
                .map(|q| {
                    let at = |v: &[u64]| v.get(q).copied().unwrap_or(0);
                    at(&now).saturating_sub(at(&start))
                })
                .collect();
            if got.iter().all(|&p| p >= QUEUE_LIVE) {
                progress(&format!(
                    "  every generator sending: {} after {:.1} s",
                    got.iter()
                        .enumerate()
                        .map(|(q, p)| format!("queue {q} {p}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    t0.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
            generators_running(g, gens)?;
            if t0.elapsed() > QUEUE_WAIT {
                let q = got.iter().position(|&p| p < QUEUE_LIVE).unwrap_or(0);
                return Err(format!(
                    "{ifname}'s rx queue {q} took {} packets in {} s (generator on CPU {}): \
                     its worker would have nothing to forward",
                    got[q],
                    QUEUE_WAIT.as_secs(),
                    path.gen_cpus.get(q).copied().unwrap_or(q)
                ));
            }
            if !sh::sleep(Duration::from_millis(100)) {
                return Err("interrupted".to_string());
            }
        }
    }

    /// `swin`'s per-queue packet counters where `n` generators feed its queues, else None.
    fn swin_queues(&self, n: usize, path: &Path3) -> Option<Vec<u64>> {
        (n > 1 && path.gen_if == topo::GEN_IF)
            .then(|| {
                self.topo
                    .rx_queue_packets(&self.topo.sw, topo::SWIN_IF)
                    .ok()
            })
            .flatten()
    }

    /// One generator process per CPU of `path.gen_cpus`, each with its share of the
    /// sources and of the rate, running long enough for the warm-up and every window.
    fn start_generators(
        &self,
        case: Case,
        g: &Generator,
        path: &Path3,
    ) -> Result<Vec<Running>, String> {
        let total = self.cfg.warmup
            + self.cfg.runs as f64 * (self.cfg.duration + 1.0)
            + 10.0
            + QUEUE_WAIT.as_secs_f64();
        let n = path.gen_cpus.len() as u32;
        let mut gens = Vec::new();
        for (k, &cpu) in path.gen_cpus.iter().enumerate() {
            let job = GenJob {
                ns: &self.topo.gen,
                iface: path.gen_if,
                src_mac: path.src_mac,
                dst_mac: path.dst_mac,
                dst_ip: topo::SINK_IP,
                case,
                class: self.class,
                flows: self.cfg.flows,
                secs: total.ceil() as u64,
                cpu,
                part: (k as u32, n),
                rate: self.cfg.gen_rate.map(|r| r / f64::from(n.max(1))),
                random_order: self.cfg.random_order,
                dir: &self.topo.dir,
            };
            match g.spawn(&job) {
                Ok(c) => gens.push(c),
                Err(e) => {
                    stop_generators(&mut gens);
                    return Err(e);
                }
            }
        }
        Ok(gens)
    }

    /// The warm-up, then `cfg.runs` windows while the generators run; stops at the first
    /// generator that exited or switch that failed.
    fn take_windows(
        &mut self,
        g: &Generator,
        path: &Path3,
        switch: &mut Option<Box<dyn Switch>>,
        gens: &mut [Running],
        row: &mut Row,
    ) -> Result<(), String> {
        if !sh::sleep(Duration::from_secs_f64(self.cfg.warmup)) {
            return Err("interrupted".to_string());
        }
        for run in 0..self.cfg.runs {
            generators_running(g, gens)?;
            if let Some(s) = switch.as_mut() {
                s.check()?;
                s.before_window(&self.ctx());
            }
            let queues0 = self.swin_queues(gens.len(), path);
            let mut sample = self.window(path)?;
            sample.queue_packets = queues0
                .zip(self.swin_queues(gens.len(), path))
                .map(|(a, b)| {
                    b.iter()
                        .zip(a.iter().chain(std::iter::repeat(&0)))
                        .map(|(b, a)| b.saturating_sub(*a))
                        .collect()
                });
            if let Some(s) = switch.as_mut() {
                if let Some(own) = s.after_window(&self.ctx()) {
                    sample.own_cycles_per_packet = own.cycles_per_packet;
                    sample.own_packets = Some(own.packets);
                    sample.upcalls = Some(own.upcalls);
                    sample.lost_upcalls = Some(own.lost_upcalls);
                    sample.worker_packets =
                        (!own.worker_packets.is_empty()).then_some(own.worker_packets);
                }
                s.check()?;
            }
            progress(&window_line(run + 1, self.cfg.runs, &sample, path));
            row.samples.push(sample);
        }
        Ok(())
    }

    /// One measurement window on `path`.
    pub(crate) fn window(&self, path: &Path3) -> Result<Sample, String> {
        let t = &self.topo;
        let vx0 = crate::bpfmap::xdp_counter(&t.sink, path.sink_if).ok();
        let sink0 = t.link_stats(&t.sink, path.sink_if)?;
        let gen0 = t.link_stats(&t.gen, path.gen_if)?;
        // The program on swin, when asked to time it and there is one (no error: a system
        // without an XDP program there has no figure).
        let prog = || {
            self.run_time_stats
                .as_ref()
                .and_then(|_| crate::bpfmap::prog_runs(&t.sw, topo::SWIN_IF).ok())
        };
        let p0 = prog();
        let c0 = procstat::read_cpus(&path.cost_cpus)?;
        let t0 = Instant::now();
        if !sh::sleep(Duration::from_secs_f64(self.cfg.duration)) {
            return Err("interrupted".into());
        }
        let c1 = procstat::read_cpus(&path.cost_cpus)?;
        let secs = t0.elapsed().as_secs_f64();
        let p1 = prog();
        let sink1 = t.link_stats(&t.sink, path.sink_if)?;
        let vx1 = crate::bpfmap::xdp_counter(&t.sink, path.sink_if).ok();
        let gen1 = t.link_stats(&t.gen, path.gen_if)?;
        let d = c1.since(&c0);
        let delivered = sink1.rx_packets.saturating_sub(sink0.rx_packets);
        let offered = gen1.tx_packets.saturating_sub(gen0.tx_packets);
        let vxlan_at_sink = vx0.zip(vx1).map(|(a, b)| b.saturating_sub(a));
        let busy_s = d.busy() as f64 / self.tick_hz;
        Ok(Sample {
            secs,
            delivered,
            offered,
            vxlan_at_sink,
            mpps: delivered as f64 / secs / 1e6,
            offered_mpps: offered as f64 / secs / 1e6,
            cpu_busy_pct: if d.total() > 0 {
                100.0 * d.busy() as f64 / d.total() as f64
            } else {
                0.0
            },
            cycles_per_packet: (delivered > 0).then(|| busy_s * self.tsc_hz / delivered as f64),
            prog_ns_per_run: p0
                .as_ref()
                .zip(p1.as_ref())
                .and_then(|(a, b)| b.ns_per_run_since(a)),
            xdp_prog: p1.map(|p| p.name),
            ..Sample::default()
        })
    }

    pub(crate) fn busy_share(&self, cpu: usize, d: Duration) -> Option<f64> {
        let a = procstat::read_cpu(cpu).ok()?;
        std::thread::sleep(d);
        let b = procstat::read_cpu(cpu).ok()?.since(&a);
        (b.total() > 0).then(|| 100.0 * b.busy() as f64 / b.total() as f64)
    }
}

/// A generator process and its log.
type Running = (Child, PathBuf);

/// An error naming the first of `gens` that has exited, with its log's last lines.
fn generators_running(g: &Generator, gens: &mut [Running]) -> Result<(), String> {
    for (child, log) in gens.iter_mut() {
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!(
                "{} exited ({st}): {}",
                g.name(),
                generator::tail(log, 3)
            ));
        }
    }
    Ok(())
}

/// Stop every generator (SIGINT, then SIGKILL after 3 s).
fn stop_generators(gens: &mut [Running]) {
    for (child, _) in gens {
        sh::stop(child, libc::SIGINT, Duration::from_secs(3));
    }
}

/// `, <what> a / b` of per-worker or per-queue packet counts, or nothing.
fn counts(what: &str, v: Option<&Vec<u64>>) -> String {
    v.map_or(String::new(), |v| {
        let v: Vec<String> = v.iter().map(|&n| report::thousands(n as f64)).collect();
        format!(", {what} {}", v.join(" / "))
    })
}

/// The progress line of window `run` of `runs`.
fn window_line(run: usize, runs: usize, sample: &Sample, path: &Path3) -> String {
    format!(
        "  run {run}/{runs}: {:.3} Mpps at the sink (offered {:.3}), {} cycles/pkt, cpu{} {:.0}% busy{}{}{}",
        sample.mpps,
        sample.offered_mpps,
        sample.cycles_per_packet.map_or("-".into(), report::thousands),
        cpu_list(&path.cost_cpus),
        sample.cpu_busy_pct,
        counts("per worker", sample.worker_packets.as_ref()),
        counts("swin rx queues", sample.queue_packets.as_ref()),
        sample.prog_ns_per_run.map_or(String::new(), |ns| format!(
            ", {} {ns:.0} ns a run",
            sample.xdp_prog.as_deref().unwrap_or("XDP program")
        ))
    )
}

/// "upcalls x% of packets (y% lost)" from the switch's own counters.
pub(crate) fn upcall_note(row: &Row) -> Option<String> {
    if row.samples.iter().all(|s| s.upcalls.is_none()) {
        return None;
    }
    let up: u64 = row.samples.iter().filter_map(|s| s.upcalls).sum();
    let lost: u64 = row.samples.iter().filter_map(|s| s.lost_upcalls).sum();
    let pkts: u64 = row.samples.iter().filter_map(|s| s.own_packets).sum();
    let pct = |n: u64| 100.0 * n as f64 / pkts.max(1) as f64;
    Some(if lost > 0 {
        format!(
            "upcalls {:.1}% of packets, plus {:.1}% misses not installed (lost upcalls)",
            pct(up),
            pct(lost)
        )
    } else {
        format!("upcalls {:.1}% of packets", pct(up))
    })
}

/// `--interleave`: fold one round's rows (one window each) into the rows so far, matched
/// by system, class and case. Windows add up; a note is kept once; a round that failed
/// where others measured becomes a note ("one round failed: ..."), and the row is an
/// error only if no round measured. The upcall share is recounted over all windows.
pub(crate) fn merge_round(rows: &mut Vec<Row>, round: Vec<Row>) {
    for got in round {
        let Some(r) = rows
            .iter_mut()
            .find(|r| (&r.system, &r.class, &r.case) == (&got.system, &got.class, &got.case))
        else {
            rows.push(got);
            continue;
        };
        r.samples.extend(got.samples);
        r.notes.retain(|n| !n.starts_with("upcalls "));
        for n in got.notes {
            if !n.starts_with("upcalls ") && !r.notes.contains(&n) {
                r.notes.push(n);
            }
        }
        for e in [r.error.take(), got.error].into_iter().flatten() {
            let note = format!("one round failed: {e}");
            if r.samples.is_empty() {
                r.error.get_or_insert(e);
            } else if !r.notes.contains(&note) {
                r.notes.push(note);
            }
        }
        if let Some(n) = upcall_note(r) {
            r.notes.push(n);
        }
        r.summarise();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(system: &str, mpps: f64, upcalls: u64, error: Option<&str>) -> Row {
        let mut r = Row {
            system: system.into(),
            class: "ipv4".into(),
            case: "hit".into(),
            samples: if error.is_some() {
                Vec::new()
            } else {
                vec![Sample {
                    secs: 1.0,
                    mpps,
                    offered_mpps: mpps,
                    cycles_per_packet: Some(1000.0 / mpps),
                    own_packets: Some(1000),
                    upcalls: Some(upcalls),
                    ..Sample::default()
                }]
            },
            notes: vec!["swin pinned".into()],
            error: error.map(String::from),
            ..Row::default()
        };
        if let Some(n) = upcall_note(&r) {
            r.notes.push(n);
        }
        r.summarise();
        r
    }

    #[test]
    fn interleaved_rounds_fold_into_one_row_per_system() {
        let mut rows = Vec::new();
        merge_round(
            &mut rows,
            vec![row("a", 1.0, 0, None), row("b", 2.0, 10, None)],
        );
        merge_round(
            &mut rows,
            vec![row("a", 3.0, 0, None), row("b", 4.0, 30, None)],
        );
        merge_round(
            &mut rows,
            vec![row("a", 2.0, 0, None), row("b", 0.0, 0, Some("boom"))],
        );
        assert_eq!(rows.len(), 2);
        let (a, b) = (&rows[0], &rows[1]);
        assert_eq!(
            (a.runs, a.mpps, a.mpps_min, a.mpps_max),
            (3, Some(2.0), Some(1.0), Some(3.0))
        );
        assert_eq!(a.error, None);
        assert_eq!(a.notes, vec!["swin pinned", "upcalls 0.0% of packets"]);
        // b measured twice and failed once: a row with a note, its upcalls over both windows;
        // its median the upper of the two windows (a measured value).
        assert_eq!((b.runs, b.mpps), (2, Some(4.0)));
        assert_eq!(b.error, None);
        assert!(b.notes.contains(&"one round failed: boom".to_string()));
        assert!(b.notes.contains(&"upcalls 2.0% of packets".to_string()));
        assert_eq!(
            b.notes.iter().filter(|n| n.starts_with("upcalls")).count(),
            1
        );
    }

    #[test]
    fn a_row_that_never_measured_keeps_its_error() {
        let mut rows = Vec::new();
        merge_round(&mut rows, vec![row("a", 0.0, 0, Some("no driver"))]);
        merge_round(&mut rows, vec![row("a", 0.0, 0, Some("no driver"))]);
        assert_eq!(rows[0].error.as_deref(), Some("no driver"));
        assert_eq!(rows[0].runs, 0);
    }
}
