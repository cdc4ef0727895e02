//! Measuring one system on one case: wait for a quiet CPU, start the switch with its
//! receive on the measured CPU, run the generator's windows, read the CPU's and the
//! switch's own counters, and note what could make the numbers lie.

use crate::generator::{GenJob, Generator};
use crate::report::{Row, Sample};
use crate::systems::{self, Switch};
use crate::{generator, procstat, progress, report, sh, topo, Case, Lab};
use std::time::{Duration, Instant};

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

    pub(crate) fn windows(
        &mut self,
        case: Case,
        g: &Generator,
        path: &Path3,
        switch: &mut Option<Box<dyn Switch>>,
        row: &mut Row,
    ) -> Result<(), String> {
        let total = self.cfg.warmup + self.cfg.runs as f64 * (self.cfg.duration + 1.0) + 10.0;
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
                    for (child, _) in &mut gens {
                        sh::stop(child, libc::SIGINT, Duration::from_secs(3));
                    }
                    return Err(e);
                }
            }
        }
        let result = (|| {
            if !sh::sleep(Duration::from_secs_f64(self.cfg.warmup)) {
                return Err("interrupted".to_string());
            }
            for run in 0..self.cfg.runs {
                for (child, log) in &mut gens {
                    if let Ok(Some(st)) = child.try_wait() {
                        return Err(format!(
                            "{} exited ({st}): {}",
                            g.name(),
                            generator::tail(log, 3)
                        ));
                    }
                }
                if let Some(s) = switch.as_mut() {
                    s.check()?;
                    s.before_window(&self.ctx());
                }
                let mut sample = self.window(path)?;
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
                progress(&format!(
                    "  run {}/{}: {:.3} Mpps at the sink (offered {:.3}), {} cycles/pkt, cpu{} {:.0}% busy{}{}",
                    run + 1,
                    self.cfg.runs,
                    sample.mpps,
                    sample.offered_mpps,
                    sample.cycles_per_packet.map_or("-".into(), report::thousands),
                    cpu_list(&path.cost_cpus),
                    sample.cpu_busy_pct,
                    sample.worker_packets.as_ref().map_or(String::new(), |w| format!(
                        ", per worker {}",
                        w.iter().map(|&n| report::thousands(n as f64)).collect::<Vec<_>>().join(" / ")
                    )),
                    sample.prog_ns_per_run.map_or(String::new(), |ns| format!(
                        ", {} {ns:.0} ns a run",
                        sample.xdp_prog.as_deref().unwrap_or("XDP program")
                    ))
                ));
                row.samples.push(sample);
            }
            Ok(())
        })();
        for (child, _) in &mut gens {
            sh::stop(child, libc::SIGINT, Duration::from_secs(3));
        }
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

/// The multi-worker rows: each worker's packets, the rate over the one-worker row of the
/// same system, case and class in this run (issue 18's target: >= 1.8x), and whether that
/// ratio can be judged here: not when the workers and the generators (one per worker)
/// need more CPUs than `cpus`, or when the generators offer no more than is delivered.
pub fn annotate_scaling(rows: &mut [Row], cpus: usize) {
    let one: Vec<((String, String, String), f64)> = rows
        .iter()
        .filter_map(|r| Some(((r.system.clone(), r.case.clone(), r.class.clone()), r.mpps?)))
        .collect();
    for r in rows.iter_mut() {
        let workers = r.worker_packets.len();
        if workers < 2 {
            continue;
        }
        let per: Vec<String> = r
            .worker_packets
            .iter()
            .map(|&n| report::thousands(n as f64))
            .collect();
        r.notes
            .push(format!("packets per worker: {}", per.join(" / ")));
        let (Some(m2), Some(base)) = (r.mpps, r.system.strip_suffix(&format!("-{workers}w")))
        else {
            continue;
        };
        let Some((_, m1)) = one
            .iter()
            .find(|((s, case, class), _)| s == base && *case == r.case && *class == r.class)
        else {
            continue;
        };
        let mut bound = Vec::new();
        if 2 * workers > cpus {
            bound.push(format!(
                "{workers} workers and {workers} generators (and swin's receive) share {cpus} CPUs"
            ));
        }
        if let Some(o) = r.offered_mpps.filter(|&o| o <= 1.1 * m2) {
            bound.push(format!("offered {o:.3} Mpps ~ delivered"));
        }
        let ratio = m2 / m1;
        let verdict = if bound.is_empty() {
            if ratio >= 1.8 {
                "target >= 1.8x met".to_string()
            } else {
                "target >= 1.8x NOT met".to_string()
            }
        } else {
            format!(
                "GENERATOR-BOUND: {}: the 1->{workers} ratio is not judged here",
                bound.join("; ")
            )
        };
        r.notes.push(format!(
            "1->{workers} workers: {ratio:.2}x ({base} {m1:.3} -> {m2:.3} Mpps, this run); {verdict}"
        ));
    }
}

/// A CPU this busy or more is saturated: the row's Mpps is what the switch can do.
const SATURATED_BUSY_PCT: f64 = 95.0;

/// The XDP tier against redirect-only XDP (issue 18's target: cached flows at >= 0.8x):
/// each `flowpath-xdp` hit row next to the `xdp-forward` row of the same class in this
/// run, by Mpps at the sink and by the switch CPU's busy cycles per packet (redirect-only's
/// cycles over the tier's). The verdict uses Mpps when both rows saturated the switch CPU,
/// else the cycles (the generator then set the rate, not the switch), and says which.
pub fn annotate_xdp_tier_ratio(rows: &mut [Row]) {
    let fwd: Vec<(String, f64, f64, Option<f64>)> = rows
        .iter()
        .filter(|r| r.system == "xdp-forward" && r.case == "hit")
        .filter_map(|r| {
            Some((
                r.class.clone(),
                r.mpps?,
                r.cycles_per_packet?,
                r.cpu_busy_pct,
            ))
        })
        .collect();
    for r in rows.iter_mut() {
        if r.system != "flowpath-xdp" || r.case != "hit" {
            continue;
        }
        let (Some(m), Some(c)) = (r.mpps, r.cycles_per_packet) else {
            continue;
        };
        let Some((_, fm, fc, fbusy)) = fwd.iter().find(|(class, ..)| *class == r.class) else {
            continue;
        };
        let by_mpps = m / fm;
        let by_cycles = fc / c;
        let saturated = |b: Option<f64>| b.is_some_and(|b| b >= SATURATED_BUSY_PCT);
        let (ratio, figure) = if saturated(r.cpu_busy_pct) && saturated(*fbusy) {
            (
                by_mpps,
                "Mpps: both rows saturated the switch CPU".to_string(),
            )
        } else {
            let busy = |b: Option<f64>| b.map_or("?".into(), |b| format!("{b:.0}%"));
            (
                by_cycles,
                format!(
                    "cycles/pkt: the switch CPU was under {SATURATED_BUSY_PCT}% busy in a row \
                     (tier {}, redirect-only {})",
                    busy(r.cpu_busy_pct),
                    busy(*fbusy)
                ),
            )
        };
        let verdict = if ratio >= 0.8 { "met" } else { "NOT met" };
        r.notes.push(format!(
            "vs redirect-only (xdp-forward, this run): {by_mpps:.2}x by Mpps, {by_cycles:.2}x by \
             cycles/pkt; judged by {figure}; target >= 0.8x {verdict}"
        ));
    }
}

/// Where the XDP tier's cycles over redirect-only go, from the three XDP hit rows of a
/// class in this run: `xdp-parse-forward` over `xdp-forward` is reading and parsing the
/// headers (every switch pays it; its ratio to redirect-only bounds any parsing program's),
/// `flowpath-xdp` over `xdp-parse-forward` is the tier's own lookup, actions and counters.
/// Busy cycles per packet of the switch CPU, whichever row set the rate. When the rows have
/// the same number of windows (as `--interleave` takes them: window i of each row in round
/// i) each part is the median of its per-round differences, with their range, so a slow
/// spell of a shared machine falls on both sides of a difference; else the rows' medians.
pub fn annotate_xdp_parse_split(rows: &mut [Row]) {
    let find = |rows: &[Row], system: &str, class: &str| {
        rows.iter()
            .position(|r| r.system == system && r.case == "hit" && r.class == class)
    };
    let mut notes = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if r.case != "hit" || r.system != "flowpath-xdp" {
            continue;
        }
        let (Some(f), Some(p)) = (
            find(rows, "xdp-forward", &r.class),
            find(rows, systems::PARSE_FORWARD, &r.class),
        ) else {
            continue;
        };
        let Some(split) = ParseSplit::of(&rows[f], &rows[p], r) else {
            continue;
        };
        let th = report::thousands;
        let part = |(m, lo, hi): (f64, f64, f64)| {
            if split.rounds > 1 {
                format!("{} [{}..{}]", th(m), th(lo), th(hi))
            } else {
                th(m)
            }
        };
        let how = if split.rounds > 1 {
            format!("medians of {} per-round differences [range]", split.rounds)
        } else {
            "the rows' medians".into()
        };
        notes.push((
            p,
            format!(
                "vs redirect-only: reading and parsing the headers costs {} cycles a packet \
                 ({how}); a program that parses cannot beat redirect-only by more than that",
                part(split.read)
            ),
        ));
        notes.push((
            i,
            format!(
                "its cycles over redirect-only: {} reading and parsing the headers \
                 (xdp-parse-forward), {} the tier's lookup, actions and counters ({how}, \
                 cycles a packet)",
                part(split.read),
                part(split.own)
            ),
        ));
    }
    for (i, n) in notes {
        rows[i].notes.push(n);
    }
}

/// [`annotate_xdp_parse_split`]'s two parts, each (median, min, max) cycles a packet.
struct ParseSplit {
    rounds: usize,
    read: (f64, f64, f64),
    own: (f64, f64, f64),
}

impl ParseSplit {
    fn of(fwd: &Row, parse: &Row, tier: &Row) -> Option<ParseSplit> {
        let cycles = |s: &Sample| s.cycles_per_packet;
        if let (Some(read), Some(own)) = (
            per_round_difference(fwd, parse, cycles),
            per_round_difference(parse, tier, cycles),
        ) {
            if read.len() == own.len() {
                return Some(ParseSplit {
                    rounds: read.len(),
                    read: report::median_min_max(&read)?,
                    own: report::median_min_max(&own)?,
                });
            }
        }
        let (f, p, t) = (
            fwd.cycles_per_packet?,
            parse.cycles_per_packet?,
            tier.cycles_per_packet?,
        );
        Some(ParseSplit {
            rounds: 1,
            read: (p - f, p - f, p - f),
            own: (t - p, t - p, t - p),
        })
    }
}

/// `b` minus `a` window by window in a figure of their windows, when both rows have it in
/// the same number of windows (as `--interleave` takes them: window i of each row in round
/// i), so that a slow spell falls on both sides of each difference.
fn per_round_difference(
    a: &Row,
    b: &Row,
    window: impl Fn(&Sample) -> Option<f64>,
) -> Option<Vec<f64>> {
    let wa: Vec<f64> = a.samples.iter().filter_map(&window).collect();
    let wb: Vec<f64> = b.samples.iter().filter_map(&window).collect();
    (!wa.is_empty() && wa.len() == wb.len())
        .then(|| wb.iter().zip(&wa).map(|(b, a)| b - a).collect())
}

/// Issue 18's other target for the XDP tier: cached flows at >= this many Mpps per core
/// equivalent (the published OVS XDP flow-provider result).
pub const XDP_TIER_PER_CORE_MPPS: f64 = 3.5;

/// The XDP tier's hit rows against [`XDP_TIER_PER_CORE_MPPS`]. Per core equivalent is the
/// TSC rate over the switch CPU's busy cycles per packet: what one fully busy core forwards
/// at this row's cost. That is the figure to judge by when the generator cannot offer the
/// rate itself (on a small machine it cannot), so the note also says what was offered.
pub fn annotate_xdp_tier_per_core(rows: &mut [Row]) {
    for r in rows.iter_mut() {
        if r.system != "flowpath-xdp" || r.case != "hit" || r.tsc_hz <= 0.0 {
            continue;
        }
        let Some(c) = r.cycles_per_packet.filter(|&c| c > 0.0) else {
            continue;
        };
        let per_core = r.tsc_hz / c / 1e6;
        let verdict = if per_core >= XDP_TIER_PER_CORE_MPPS {
            "met"
        } else {
            "NOT met"
        };
        let offered = match r.offered_mpps {
            Some(o) if o < XDP_TIER_PER_CORE_MPPS => format!(
                "; the generator offered {o:.2} Mpps, less than the target, so the cycles judge it"
            ),
            Some(o) => format!("; offered {o:.2} Mpps"),
            None => String::new(),
        };
        r.notes.push(format!(
            "per core equivalent: {per_core:.2} Mpps (TSC {:.3} GHz / {} busy cycles a \
             packet); target >= {XDP_TIER_PER_CORE_MPPS} Mpps {verdict}{offered}",
            r.tsc_hz / 1e9,
            report::thousands(c)
        ));
    }
}

/// `b` minus `a` in a figure, (median, min, max) and the rounds it is over: the
/// [`per_round_difference`]s when there are, else the difference of the rows' medians (one
/// "round").
fn difference(
    a: &Row,
    b: &Row,
    window: impl Fn(&Sample) -> Option<f64>,
    row: impl Fn(&Row) -> Option<f64>,
) -> Option<((f64, f64, f64), usize)> {
    if let Some(d) = per_round_difference(a, b, window) {
        return Some((report::median_min_max(&d)?, d.len()));
    }
    let d = row(b)? - row(a)?;
    Some(((d, d, d), 1))
}

/// With `--prog-time`: each row's XDP program time (the program on the switch's ingress,
/// nanoseconds a run by the kernel's run-time statistics), and for the XDP tier's hit rows
/// what that time is over redirect-only's and parse-then-redirect's programs in this run.
/// That is the programs' own difference, without the driver's and the stack's work around
/// them, which the rows' cycles also hold.
pub fn annotate_prog_time(rows: &mut [Row]) {
    let mut notes = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let Some(ns) = r.prog_ns_per_run else {
            continue;
        };
        let name = r.xdp_prog.as_deref().unwrap_or("?");
        let range = match (r.prog_ns_min, r.prog_ns_max) {
            (Some(lo), Some(hi)) if r.runs > 1 => format!(" [{lo:.0}..{hi:.0}]"),
            _ => String::new(),
        };
        notes.push((
            i,
            format!(
                "XDP program {name} on swin: {ns:.0} ns a run{range} (the kernel's run-time \
                 statistics, --prog-time)"
            ),
        ));
        if r.system != "flowpath-xdp" || r.case != "hit" {
            continue;
        }
        let other = |system: &str| {
            rows.iter()
                .find(|o| o.system == system && o.case == "hit" && o.class == r.class)
        };
        let ns_of = |s: &Sample| s.prog_ns_per_run;
        let ns_row = |r: &Row| r.prog_ns_per_run;
        let over = |system: &str| {
            let ((m, lo, hi), rounds) = difference(other(system)?, r, ns_of, ns_row)?;
            let cycles = m * r.tsc_hz / 1e9;
            Some(if rounds > 1 {
                format!(
                    "{m:.0} ns a run [{lo:.0}..{hi:.0}] over {system}'s program (median of \
                     {rounds} per-round differences; {} cycles at the TSC rate)",
                    report::thousands(cycles)
                )
            } else {
                format!(
                    "{m:.0} ns a run over {system}'s program ({} cycles at the TSC rate)",
                    report::thousands(cycles)
                )
            })
        };
        let parts: Vec<String> = ["xdp-forward", systems::PARSE_FORWARD]
            .into_iter()
            .filter_map(over)
            .collect();
        if !parts.is_empty() {
            notes.push((i, format!("by program time: {}", parts.join("; "))));
        }
    }
    for (i, n) in notes {
        rows[i].notes.push(n);
    }
}

/// With `--gen-rate` (packets per second in all): mark rows whose generator offered less
/// than 95 % of that rate (median of the windows), so a paced comparison says when a row
/// was not offered the rate asked (a generator that cannot keep up, or one sharing its
/// CPU with the switch's receive).
pub fn annotate_pacing(rows: &mut [Row], gen_rate: Option<f64>) {
    let Some(asked) = gen_rate.map(|r| r / 1e6) else {
        return;
    };
    for r in rows.iter_mut() {
        if r.system == "trafgen" {
            continue; // --gen-rate paces flowpath gen only
        }
        let Some(offered) = r.offered_mpps else {
            continue;
        };
        if offered < 0.95 * asked {
            r.notes.push(format!(
                "PACED BELOW THE RATE ASKED: the generator offered {offered:.3} of the {asked:.3} Mpps asked (--gen-rate)"
            ));
        }
    }
}

/// Mark rows whose rate is within 10 % of what the generator alone reaches for that case:
/// there the generator, not the switch, may be the limit.
pub fn annotate_generator_bound(rows: &mut [Row]) {
    let gen: Vec<((String, String), f64)> = rows
        .iter()
        .filter(|r| r.system == "generator")
        .filter_map(|r| Some(((r.case.clone(), r.class.clone()), r.mpps?)))
        .collect();
    for r in rows.iter_mut() {
        if r.system == "generator" || r.system == "trafgen" {
            continue;
        }
        let Some(m) = r.mpps else { continue };
        if let Some((_, g)) = gen
            .iter()
            .find(|((case, class), _)| *case == r.case && *class == r.class)
        {
            if m >= 0.9 * g {
                r.notes.push(format!(
                    "GENERATOR-BOUND: the generator alone reaches {g:.3} Mpps"
                ));
            }
        }
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
        // b measured twice and failed once: a row with a note, its upcalls over both windows.
        assert_eq!((b.runs, b.mpps), (2, Some(3.0)));
        assert_eq!(b.error, None);
        assert!(b.notes.contains(&"one round failed: boom".to_string()));
        assert!(b.notes.contains(&"upcalls 2.0% of packets".to_string()));
        assert_eq!(
            b.notes.iter().filter(|n| n.starts_with("upcalls")).count(),
            1
        );
    }

    #[test]
    fn a_row_offered_less_than_the_paced_rate_says_so() {
        let mk = |system: &str, offered: Option<f64>| Row {
            system: system.into(),
            offered_mpps: offered,
            ..Row::default()
        };
        let mut rows = vec![
            mk("xdp-forward", Some(1.96)),
            mk("flowpath-xdp", Some(1.66)),
            mk("trafgen", Some(0.4)),
            mk("linux", None),
        ];
        annotate_pacing(&mut rows, None);
        assert!(rows.iter().all(|r| r.notes.is_empty()), "unpaced: no notes");
        annotate_pacing(&mut rows, Some(2e6));
        assert!(rows[0].notes.is_empty(), "1.96 of 2: within 5 %");
        assert!(rows[1].notes[0].contains("offered 1.660 of the 2.000 Mpps asked"));
        assert!(rows[2].notes.is_empty(), "trafgen is not paced");
        assert!(rows[3].notes.is_empty(), "nothing offered to judge");
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
