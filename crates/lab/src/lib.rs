//! The lab: a network-namespace topology that sends the same traffic through flowpath,
//! Open vSwitch (afxdp), DPDK testpmd (net_af_xdp) and Linux forwarding, measured alike.

pub mod generator;
pub mod pmdperf;
pub mod procstat;
pub mod report;
pub mod sh;
pub mod systems;
pub mod topo;

use generator::{GenJob, Generator};
use report::{Row, Sample};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use systems::{Ctx, Switch};
use topo::Topology;

/// The compiled XDP_DROP program for the sinks (empty when clang was missing at build).
pub const XDP_SINK_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xdp_sink.o"));
/// The compiled XDP_PASS program for `swin` when the switch attaches none of its own
/// (Linux, AF_PACKET): a veth drops XDP-transmitted frames unless its peer has one.
pub const XDP_PASS_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xdp_pass.o"));

/// The two workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// Established flows (`--flows`, default 1,000): every packet a cache hit.
    Hit,
    /// Every packet a new flow (a new source address).
    Miss,
}

impl Case {
    pub fn name(self) -> &'static str {
        match self {
            Case::Hit => "hit",
            Case::Miss => "miss",
        }
    }

    pub fn parse(s: &str) -> Result<Case, String> {
        match s.trim() {
            "hit" => Ok(Case::Hit),
            "miss" => Ok(Case::Miss),
            o => Err(format!("unknown case '{o}' (hit, miss)")),
        }
    }
}

/// Which generator to drive the switches with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenChoice {
    /// `flowpath gen --tx` when available, else trafgen.
    Auto,
    Flowpath,
    Trafgen,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct LabConfig {
    /// Names from `systems::SYSTEMS`.
    pub systems: Vec<String>,
    pub cases: Vec<Case>,
    /// Seconds per measurement window.
    pub duration: f64,
    /// Windows per system and case.
    pub runs: usize,
    /// Seconds of traffic before the first window.
    pub warmup: f64,
    /// Established flows in the hit case.
    pub flows: u32,
    pub switch_cpu: usize,
    pub gen_cpu: usize,
    /// The flowpath binary (`flowpath switch`, `flowpath gen`).
    pub exe: PathBuf,
    pub ovs_xdp_mode: String,
    pub generator: GenChoice,
    /// Run `swin`'s receive (NAPI: XDP programs, the copy into AF_XDP sockets, the
    /// kernel stack) in a thread pinned to the switch CPU, so that every system's
    /// figure is one core's work. False: it runs in the generator CPU's softirq, as a
    /// veth does by default, and is in no system's figure.
    pub napi_on_switch_cpu: bool,
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            systems: systems::SYSTEMS.iter().map(|s| s.to_string()).collect(),
            cases: vec![Case::Hit, Case::Miss],
            duration: 5.0,
            runs: 3,
            warmup: 2.0,
            flows: 1000,
            switch_cpu: 1,
            gen_cpu: 0,
            exe: std::env::current_exe().unwrap_or_else(|_| "flowpath".into()),
            ovs_xdp_mode: "native".into(),
            generator: GenChoice::Auto,
            napi_on_switch_cpu: true,
        }
    }
}

/// Checks before anything is built: root, `ip`, a known system list.
pub fn preflight(cfg: &LabConfig) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("the lab needs root (network namespaces, XDP, huge pages)".into());
    }
    if sh::which("ip").is_none() {
        return Err("`ip` (iproute2) not found".into());
    }
    for s in &cfg.systems {
        if !systems::SYSTEMS.contains(&s.as_str()) {
            return Err(format!(
                "unknown system '{s}' (known: {})",
                systems::SYSTEMS.join(", ")
            ));
        }
    }
    if cfg.runs == 0 || cfg.duration <= 0.0 {
        return Err("--runs and --duration must be positive".into());
    }
    Ok(())
}

/// Write an XDP object to `dir`; None when it was not built.
fn xdp_object(dir: &Path, name: &str, bytes: &[u8]) -> Option<PathBuf> {
    if bytes.is_empty() {
        return None;
    }
    let p = dir.join(name);
    std::fs::write(&p, bytes).ok()?;
    Some(p)
}

/// Where traffic goes and which CPU's time is the cost.
struct Path3<'a> {
    gen_if: &'a str,
    dst_mac: &'a str,
    src_mac: &'a str,
    sink_if: &'a str,
    cpu: usize,
}

/// The lab, built: run systems one after the other.
pub struct Lab {
    pub cfg: LabConfig,
    pub topo: Topology,
    pub generator: Option<Generator>,
    pub trafgen: Option<Generator>,
    /// Why the preferred generator is not used, when it is not.
    pub generator_note: Option<String>,
    pass_obj: Option<PathBuf>,
    tsc_hz: f64,
    tick_hz: f64,
}

/// Progress to stderr.
fn progress(msg: &str) {
    eprintln!("[lab] {msg}");
}

impl Lab {
    /// Build the topology (namespaces `fpl<pid>-*`) and pick the generator.
    pub fn new(cfg: LabConfig) -> Result<Lab, String> {
        preflight(&cfg)?;
        let id = topo::run_id();
        let scratch = std::env::temp_dir().join(format!("{id}-xdp"));
        std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
        topo::register_dir(&scratch);
        let obj = xdp_object(&scratch, "xdp_sink.o", XDP_SINK_OBJ);
        let pass_obj = xdp_object(&scratch, "xdp_pass.o", XDP_PASS_OBJ);
        progress(&format!(
            "building namespaces {id}-gen, {id}-sw, {id}-sink (switch on CPU {}, generator on CPU {})",
            cfg.switch_cpu, cfg.gen_cpu
        ));
        let topo = Topology::create(&id, obj.as_deref())?;
        let trafgen = Generator::trafgen();
        let fp = Generator::flowpath(&cfg.exe);
        let (generator, generator_note) = match cfg.generator {
            GenChoice::Auto => match fp {
                Some(g) => (Some(g), None),
                None => (
                    trafgen.clone(),
                    Some(
                        "`flowpath gen --tx` is not available: trafgen drives the switches".into(),
                    ),
                ),
            },
            GenChoice::Flowpath => match fp {
                Some(g) => (Some(g), None),
                None => (
                    None,
                    Some("`flowpath gen` has no --tx in this build".into()),
                ),
            },
            GenChoice::Trafgen => (trafgen.clone(), None),
        };
        Ok(Lab {
            tsc_hz: flowpath_datapath::tsc::tsc_hz(),
            tick_hz: procstat::ticks_per_second(),
            cfg,
            topo,
            pass_obj,
            generator,
            trafgen,
            generator_note,
        })
    }

    /// Run every configured system and case; `on_row` sees each row as it is done.
    pub fn run(&mut self, mut on_row: impl FnMut(&Row)) -> Vec<Row> {
        let mut rows = Vec::new();
        let systems = self.cfg.systems.clone();
        let cases = self.cfg.cases.clone();
        let total = systems.len() * cases.len();
        let mut k = 0;
        for sys in &systems {
            for &case in &cases {
                k += 1;
                if topo::interrupted() {
                    return rows;
                }
                progress(&format!("[{k}/{total}] {sys} {}", case.name()));
                let row = self.run_one(sys, case);
                match &row.error {
                    Some(e) => progress(&format!("  skipped: {e}")),
                    None => progress(&format!(
                        "  {:.3} Mpps, {} cycles/pkt",
                        row.mpps.unwrap_or(0.0),
                        row.cycles_per_packet.map_or("-".into(), report::thousands)
                    )),
                }
                on_row(&row);
                rows.push(row);
            }
        }
        annotate_generator_bound(&mut rows);
        rows
    }

    fn run_one(&mut self, sys: &str, case: Case) -> Row {
        let direct = Path3 {
            gen_if: topo::GDIR_IF,
            dst_mac: topo::SDIR_MAC,
            src_mac: topo::GDIR_MAC,
            sink_if: topo::SDIR_IF,
            cpu: self.cfg.gen_cpu,
        };
        let switched = Path3 {
            gen_if: topo::GEN_IF,
            dst_mac: topo::SWIN_MAC,
            src_mac: topo::GEN_MAC,
            sink_if: topo::SINK_IF,
            cpu: self.cfg.switch_cpu,
        };
        let gen_name = self.generator.as_ref().map_or("none", |g| g.name());
        match sys {
            "generator" => {
                let Some(g) = self.generator.clone() else {
                    return Row::failed(sys, case.name(), gen_name, self.no_generator());
                };
                let mut row = self.measure(sys, case, &g, &direct, None);
                row.notes.insert(
                    0,
                    format!(
                        "{} -> veth -> XDP drop, no switch; cycles are the generator's",
                        g.name()
                    ),
                );
                row
            }
            "trafgen" => {
                let Some(g) = self.trafgen.clone() else {
                    return Row::failed(
                        sys,
                        case.name(),
                        "trafgen",
                        "trafgen not installed".into(),
                    );
                };
                let mut row = self.measure(sys, case, &g, &direct, None);
                row.notes.insert(
                    0,
                    "trafgen -> veth -> XDP drop, no switch (for comparison)".into(),
                );
                row
            }
            _ => {
                let Some(g) = self.generator.clone() else {
                    return Row::failed(sys, case.name(), gen_name, self.no_generator());
                };
                let Some(s) = systems::make(sys) else {
                    return Row::failed(sys, case.name(), gen_name, "unknown system".into());
                };
                self.measure(sys, case, &g, &switched, Some(s))
            }
        }
    }

    /// One paragraph on how the table was made: TSC rate, generator, CPUs, windows.
    pub fn summary(&self) -> String {
        format!(
            "Cycles are TSC cycles at {:.3} GHz (flowpath_datapath::tsc::tsc_hz) of the measured CPU's \
             busy time (/proc/stat); switch on CPU {}, generator ({}) on CPU {}; {} windows of {} s \
             after {} s of warm-up per system and case; 64-byte frames, {} flows in the hit case.",
            self.tsc_hz / 1e9,
            self.cfg.switch_cpu,
            self.generator.as_ref().map_or("none", |g| g.name()),
            self.cfg.gen_cpu,
            self.cfg.runs,
            self.cfg.duration,
            self.cfg.warmup,
            self.cfg.flows,
        )
    }

    /// A veth drops frames its peer transmits from XDP (the generator's) unless it runs
    /// NAPI: give `swin` a native XDP_PASS program, or where another program holds it in
    /// generic mode, turn on GRO (which also enables NAPI). Returns the note for the row.
    fn let_swin_take_xdp_frames(&self) -> String {
        let sw = &self.topo.sw;
        let mut why = String::from("built without clang");
        if let Some(obj) = &self.pass_obj {
            let obj = obj.to_string_lossy();
            match sh::ip(&[
                "-n",
                sw,
                "link",
                "set",
                "dev",
                topo::SWIN_IF,
                "xdpdrv",
                "obj",
                &obj,
                "sec",
                "xdp",
            ]) {
                Ok(_) => return "native XDP_PASS on swin".into(),
                Err(e) => why = e,
            }
        }
        match sh::run(Some(sw), "ethtool", &["-K", topo::SWIN_IF, "gro", "on"]) {
            Ok(_) => "GRO on swin (NAPI for the generator's XDP frames)".into(),
            Err(e) => {
                format!("swin may drop the generator's frames: no XDP_PASS ({why}), no GRO ({e})")
            }
        }
    }

    fn no_generator(&self) -> String {
        self.generator_note
            .clone()
            .unwrap_or_else(|| "no traffic generator (install netsniff-ng for trafgen)".into())
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            topo: &self.topo,
            switch_cpu: self.cfg.switch_cpu,
            gen_cpu: self.cfg.gen_cpu,
            exe: &self.cfg.exe,
            ovs_xdp_mode: &self.cfg.ovs_xdp_mode,
        }
    }

    fn measure(
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
            tsc_hz: self.tsc_hz,
            ..Row::default()
        };
        if let Some(n) = &self.topo.sink_xdp_note {
            row.notes.push(n.clone());
        }
        // Background load on the measured CPU, before anything of ours runs there: wait
        // up to 30 s for it to go quiet, and say so when it does not.
        let quiet = sh::wait_for(Duration::from_secs(30), || {
            self.busy_share(path.cpu, Duration::from_millis(300))
                .filter(|&b| b < 10.0)
        });
        if quiet.is_none() {
            let b = self
                .busy_share(path.cpu, Duration::from_millis(300))
                .unwrap_or(0.0);
            progress(&format!(
                "  cpu{} is {b:.0}% busy with other work",
                path.cpu
            ));
            row.notes.push(format!(
                "NOISY: cpu{} was {b:.0}% busy before the run",
                path.cpu
            ));
        }
        systems::reset_switch_ports(&self.topo);
        if let Some(s) = switch.as_mut() {
            let ctx = self.ctx();
            if let Err(e) = s.start(&ctx, case) {
                s.stop(&ctx);
                row.error = Some(e);
                return row;
            }
            row.notes.extend(s.notes());
            if !self.topo.has_native_xdp(&self.topo.sw, topo::SWIN_IF) {
                row.notes.push(self.let_swin_take_xdp_frames());
            }
            if self.cfg.napi_on_switch_cpu {
                row.notes.push(
                    match self
                        .topo
                        .napi_on_cpu(&self.topo.sw, topo::SWIN_IF, path.cpu)
                    {
                        Ok(_) => format!(
                            "swin's receive (threaded NAPI, XDP included) pinned to cpu{}",
                            path.cpu
                        ),
                        Err(e) => {
                            format!("NOT per-core: swin's receive stays on the sender's CPU ({e})")
                        }
                    },
                );
            }
        }
        let result = self.windows(case, g, path, &mut switch, &mut row);
        if let Some(s) = switch.as_mut() {
            s.stop(&self.ctx());
        }
        // Other work on the measured CPU right after the run probably ran during it too.
        if result.is_ok() {
            if let Some(b) = self.busy_share(path.cpu, Duration::from_millis(300)) {
                if b > 10.0 {
                    progress(&format!(
                        "  cpu{} is {b:.0}% busy right after the run",
                        path.cpu
                    ));
                    row.notes.push(format!(
                        "NOISY: cpu{} was {b:.0}% busy with other work right after the run",
                        path.cpu
                    ));
                }
            }
        }
        if let Err(e) = result {
            row.error = Some(e);
            row.samples.clear();
        }
        row.summarise();
        row
    }

    fn windows(
        &mut self,
        case: Case,
        g: &Generator,
        path: &Path3,
        switch: &mut Option<Box<dyn Switch>>,
        row: &mut Row,
    ) -> Result<(), String> {
        let total = self.cfg.warmup + self.cfg.runs as f64 * (self.cfg.duration + 1.0) + 10.0;
        let job = GenJob {
            ns: &self.topo.gen,
            iface: path.gen_if,
            src_mac: path.src_mac,
            dst_mac: path.dst_mac,
            dst_ip: topo::SINK_IP,
            case,
            flows: self.cfg.flows,
            secs: total.ceil() as u64,
            cpu: self.cfg.gen_cpu,
            dir: &self.topo.dir,
        };
        let (mut child, log) = g.spawn(&job)?;
        let result = (|| {
            if !sh::sleep(Duration::from_secs_f64(self.cfg.warmup)) {
                return Err("interrupted".to_string());
            }
            for run in 0..self.cfg.runs {
                if let Ok(Some(st)) = child.try_wait() {
                    return Err(format!(
                        "{} exited ({st}): {}",
                        g.name(),
                        generator::tail(&log, 3)
                    ));
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
                    }
                    s.check()?;
                }
                progress(&format!(
                    "  run {}/{}: {:.3} Mpps at the sink (offered {:.3}), {} cycles/pkt, cpu{} {:.0}% busy",
                    run + 1,
                    self.cfg.runs,
                    sample.mpps,
                    sample.offered_mpps,
                    sample.cycles_per_packet.map_or("-".into(), report::thousands),
                    path.cpu,
                    sample.cpu_busy_pct
                ));
                row.samples.push(sample);
            }
            Ok(())
        })();
        sh::stop(&mut child, libc::SIGINT, Duration::from_secs(3));
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
    fn window(&self, path: &Path3) -> Result<Sample, String> {
        let t = &self.topo;
        let (rx0, _) = t.counters(&t.sink, path.sink_if)?;
        let (_, tx0) = t.counters(&t.gen, path.gen_if)?;
        let c0 = procstat::read_cpu(path.cpu)?;
        let t0 = Instant::now();
        if !sh::sleep(Duration::from_secs_f64(self.cfg.duration)) {
            return Err("interrupted".into());
        }
        let c1 = procstat::read_cpu(path.cpu)?;
        let secs = t0.elapsed().as_secs_f64();
        let (rx1, _) = t.counters(&t.sink, path.sink_if)?;
        let (_, tx1) = t.counters(&t.gen, path.gen_if)?;
        let d = c1.since(&c0);
        let delivered = rx1.saturating_sub(rx0);
        let offered = tx1.saturating_sub(tx0);
        let busy_s = d.busy() as f64 / self.tick_hz;
        Ok(Sample {
            secs,
            delivered,
            offered,
            mpps: delivered as f64 / secs / 1e6,
            offered_mpps: offered as f64 / secs / 1e6,
            cpu_busy_pct: if d.total() > 0 {
                100.0 * d.busy() as f64 / d.total() as f64
            } else {
                0.0
            },
            cycles_per_packet: (delivered > 0).then(|| busy_s * self.tsc_hz / delivered as f64),
            ..Sample::default()
        })
    }

    fn busy_share(&self, cpu: usize, d: Duration) -> Option<f64> {
        let a = procstat::read_cpu(cpu).ok()?;
        std::thread::sleep(d);
        let b = procstat::read_cpu(cpu).ok()?.since(&a);
        (b.total() > 0).then(|| 100.0 * b.busy() as f64 / b.total() as f64)
    }
}

/// "upcalls x% of packets (y% lost)" from the switch's own counters.
fn upcall_note(row: &Row) -> Option<String> {
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

/// Mark rows whose rate is within 10 % of what the generator alone reaches for that case:
/// there the generator, not the switch, may be the limit.
pub fn annotate_generator_bound(rows: &mut [Row]) {
    let gen: Vec<(String, f64)> = rows
        .iter()
        .filter(|r| r.system == "generator")
        .filter_map(|r| Some((r.case.clone(), r.mpps?)))
        .collect();
    for r in rows.iter_mut() {
        if r.system == "generator" || r.system == "trafgen" {
            continue;
        }
        let Some(m) = r.mpps else { continue };
        if let Some((_, g)) = gen.iter().find(|(c, _)| *c == r.case) {
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

    #[test]
    fn cases_parse() {
        assert_eq!(Case::parse("hit"), Ok(Case::Hit));
        assert_eq!(Case::parse(" miss"), Ok(Case::Miss));
        assert!(Case::parse("mixed").is_err());
    }

    #[test]
    fn generator_bound_rows_are_marked() {
        let mk = |s: &str, m: f64| Row {
            system: s.into(),
            case: "hit".into(),
            mpps: Some(m),
            ..Row::default()
        };
        let mut rows = vec![
            mk("generator", 1.0),
            mk("linux", 0.95),
            mk("ovs-afxdp", 0.3),
        ];
        annotate_generator_bound(&mut rows);
        assert!(rows[1].notes.iter().any(|n| n.contains("GENERATOR-BOUND")));
        assert!(rows[2].notes.is_empty());
        assert!(rows[0].notes.is_empty());
    }
}
