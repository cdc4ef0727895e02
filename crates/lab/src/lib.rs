//! The lab: a network-namespace topology that sends the same traffic through flowpath,
//! Open vSwitch (afxdp), DPDK testpmd (net_af_xdp) and Linux forwarding, measured alike.

mod annotate;
pub mod bpfmap;
mod config;
pub mod dpdkrig;
pub mod generator;
mod measure;
pub mod peers;
pub mod pmdperf;
pub mod procstat;
mod registry;
pub mod report;
pub mod sh;
pub mod systems;
mod teardown;
pub mod topo;

pub use annotate::{
    annotate_generator_bound, annotate_pacing, annotate_prog_time, annotate_scaling,
    annotate_xdp_parse_split, annotate_xdp_tier_per_core, annotate_xdp_tier_ratio,
    XDP_TIER_PER_CORE_MPPS,
};
pub use config::*;
use generator::Generator;
use measure::Path3;
use report::Row;
use std::path::PathBuf;
use systems::Ctx;
use topo::Topology;

/// The compiled XDP_DROP program for the sinks (empty when clang was missing at build).
pub const XDP_SINK_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xdp_sink.o"));
/// The compiled XDP_PASS program for `swin` when the switch attaches none of its own
/// (Linux, AF_PACKET): a veth drops XDP-transmitted frames unless its peer has one.
pub const XDP_PASS_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xdp_pass.o"));

/// The lab, built: run systems one after the other.
pub struct Lab {
    pub cfg: LabConfig,
    pub topo: Topology,
    pub generator: Option<Generator>,
    pub trafgen: Option<Generator>,
    /// Why the preferred generator is not used, when it is not (and how it transmits,
    /// when not with live frames).
    pub generator_note: Option<String>,
    /// Why `flowpath gen --tx` does not use XDP live frames here, if it does not
    /// ([`Generator::without_live_frames`]).
    without_live_frames: Option<String>,
    /// What the configured systems need and this machine or build lacks
    /// ([`peers::check`]); the systems it keeps from running give a row saying so.
    pub missing: Vec<peers::Missing>,
    pass_obj: Option<PathBuf>,
    /// The class being run (what [`Lab::ctx`] hands the switches).
    class: Class,
    tsc_hz: f64,
    tick_hz: f64,
    /// The kernel's BPF run-time statistics, held on while the lab runs (`prog_time`).
    run_time_stats: Option<bpfmap::RunTimeStats>,
}

/// How the error of a row that does not apply begins ("n/a: <reason>").
pub const NA: &str = "n/a: ";

/// Progress to stderr.
pub(crate) fn progress(msg: &str) {
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
        // `flowpath gen` lists --tx in any build, but without the ports' XDP program (a
        // build without clang) it fails at once: not a generator then.
        let fp = Generator::flowpath(&cfg.exe).filter(|_| cfg.xdp_build.ports);
        let no_tx = if cfg.xdp_build.ports {
            "`flowpath gen` has no --tx in this build".to_string()
        } else {
            format!(
                "`flowpath gen --tx` needs this binary's XDP programs (it was built without \
                 clang): run {}",
                peers::SETUP_SCRIPT
            )
        };
        let (generator, generator_note) = match cfg.generator {
            GenChoice::Auto => match fp {
                Some(g) => (Some(g), None),
                None => (
                    trafgen.clone(),
                    Some(format!("{no_tx}; trafgen drives the switches")),
                ),
            },
            GenChoice::Flowpath => match fp {
                Some(g) => (Some(g), None),
                None => (None, Some(no_tx)),
            },
            GenChoice::Trafgen => (trafgen.clone(), None),
        };
        let without_live_frames = generator
            .as_ref()
            .and_then(|g| g.without_live_frames(&topo.gen, topo::GDIR_IF));
        let generator_note = match (generator_note, &without_live_frames) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or_else(|| b.clone()),
        };
        let missing = peers::check(&cfg);
        let run_time_stats = if cfg.prog_time {
            Some(bpfmap::enable_run_time_stats().map_err(|e| {
                format!(
                    "--prog-time: the kernel's BPF run-time statistics could not be turned on: {e}"
                )
            })?)
        } else {
            None
        };
        Ok(Lab {
            run_time_stats,
            missing,
            tsc_hz: flowpath_base::clock::tsc_hz(),
            tick_hz: procstat::ticks_per_second(),
            cfg,
            topo,
            pass_obj,
            class: Class::Ipv4,
            generator,
            trafgen,
            generator_note,
            without_live_frames,
        })
    }

    /// Run every configured system, class and case; `on_row` sees each row as it is done
    /// (with `interleave`, when the last round is).
    pub fn run(&mut self, mut on_row: impl FnMut(&Row)) -> Vec<Row> {
        let mut rows = if self.cfg.interleave && self.cfg.runs > 1 {
            let runs = self.cfg.runs;
            self.cfg.runs = 1;
            let mut rows: Vec<Row> = Vec::new();
            for round in 1..=runs {
                progress(&format!(
                    "round {round}/{runs} (--interleave: one window each)"
                ));
                let got = self.run_round(|_| {});
                measure::merge_round(&mut rows, got);
                if topo::interrupted() {
                    break;
                }
            }
            self.cfg.runs = runs;
            // merge_round summarised each row as it folded in.
            for row in &mut rows {
                if row.runs > 0 {
                    row.notes.push(format!(
                        "windows taken in {runs} interleaved rounds (--interleave), one per round"
                    ));
                }
                on_row(row);
            }
            rows
        } else {
            self.run_round(on_row)
        };
        annotate_generator_bound(&mut rows);
        annotate_pacing(&mut rows, self.cfg.gen_rate);
        annotate_xdp_tier_ratio(&mut rows);
        annotate_xdp_parse_split(&mut rows);
        annotate_xdp_tier_per_core(&mut rows);
        annotate_prog_time(&mut rows);
        annotate_scaling(
            &mut rows,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
        rows
    }

    /// Every system, class and case once, with `cfg.runs` windows each.
    fn run_round(&mut self, mut on_row: impl FnMut(&Row)) -> Vec<Row> {
        let mut rows = Vec::new();
        let systems = self.cfg.systems.clone();
        let cases = self.cfg.cases.clone();
        let classes = self.cfg.classes.clone();
        let total = systems.len() * cases.len() * classes.len();
        let mut k = 0;
        for sys in &systems {
            for &class in &classes {
                for &case in &cases {
                    k += 1;
                    if topo::interrupted() {
                        return rows;
                    }
                    progress(&format!(
                        "[{k}/{total}] {sys} {} {}",
                        class.name(),
                        case.name()
                    ));
                    self.class = class;
                    let mut row = match self.not_applicable(sys, class) {
                        Some(why) => Row::failed(
                            sys,
                            case.name(),
                            self.generator.as_ref().map_or("none", |g| g.name()),
                            format!("{NA}{why}"),
                        ),
                        None => self.run_one(sys, case),
                    };
                    row.class = class.name().into();
                    match &row.error {
                        Some(e) if e.starts_with(NA) => progress(&format!("  {e}")),
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
        }
        rows
    }

    /// Why `sys` cannot run `class` at all (its row then says "n/a: why"), or None.
    fn not_applicable(&self, sys: &str, class: Class) -> Option<String> {
        let gen = match sys {
            "trafgen" => self.trafgen.as_ref(),
            _ => self.generator.as_ref(),
        };
        if let Some(why) = gen.and_then(|g| g.cannot(class)) {
            return Some(why);
        }
        systems::make(sys).and_then(|s| s.cannot(class))
    }

    fn run_one(&mut self, sys: &str, case: Case) -> Row {
        let gen_name = self.generator.as_ref().map_or("none", |g| g.name());
        if let Some(why) = peers::blocked(&self.missing, sys) {
            let gen_name = if sys == "trafgen" {
                "trafgen"
            } else {
                gen_name
            };
            return Row::failed(sys, case.name(), gen_name, why);
        }
        match sys {
            "generator" | "trafgen" => self.run_direct(sys, case),
            _ => {
                let Some(g) = self.generator.clone() else {
                    return Row::failed(sys, case.name(), gen_name, self.no_generator());
                };
                let Some(s) = systems::make(sys) else {
                    return Row::failed(sys, case.name(), gen_name, "unknown system".into());
                };
                let mut path = Path3::switched(&self.cfg);
                if s.workers() > 1 {
                    // A generator on each worker's CPU: a veth puts XDP frames on the rx
                    // queue of the sending CPU, so each feeds one of swin's queues.
                    let cpus = self.ctx().worker_cpus(s.workers());
                    path.cost_cpus = cpus.clone();
                    path.gen_cpus = cpus;
                }
                self.measure(sys, case, &g, &path, Some(s))
            }
        }
    }

    /// The `generator` and `trafgen` rows: a generator straight into the sink, no switch.
    fn run_direct(&mut self, sys: &str, case: Case) -> Row {
        let (g, note) = if sys == "trafgen" {
            let Some(g) = self.trafgen.clone() else {
                return Row::failed(
                    sys,
                    case.name(),
                    "trafgen",
                    format!(
                        "trafgen not installed (netsniff-ng): run {}",
                        peers::SETUP_SCRIPT
                    ),
                );
            };
            (
                g,
                "trafgen -> veth -> XDP drop, no switch (for comparison)".to_string(),
            )
        } else {
            let Some(g) = self.generator.clone() else {
                return Row::failed(sys, case.name(), "none", self.no_generator());
            };
            let note = format!(
                "{} -> veth -> XDP drop, no switch; cycles are the generator's",
                g.name()
            );
            (g, note)
        };
        let mut row = self.measure(sys, case, &g, &Path3::direct(&self.cfg), None);
        row.notes.insert(0, note);
        row
    }

    /// One paragraph on how the table was made: TSC rate, generator, CPUs, windows.
    pub fn summary(&self) -> String {
        let mut paced = self.cfg.gen_rate.map_or(String::new(), |r| {
            format!(
                " The generator was paced to {:.3} Mpps in all (--gen-rate).",
                r / 1e6
            )
        });
        if self.cfg.random_order {
            paced.push_str(" Hit-case flows visited in random order (--flow-order random).");
        }
        if self.cfg.prog_time {
            paced.push_str(
                " XDP programs timed with the kernel's run-time statistics (--prog-time): \
                 they raise every XDP row's cycles, so compare these rows with each other only.",
            );
        }
        let s = format!(
            "Cycles are TSC cycles at {:.3} GHz (flowpath_base::clock::tsc_hz) of the measured CPU's \
             busy time (/proc/stat); switch on CPU {}, generator ({}) on CPU {}; {} windows of {} s \
             after {} s of warm-up per system and case; 64-byte frames (ipv6: 66, vxlan_decap: 96-byte \
             VXLAN frames), {} flows in the hit case.",
            self.tsc_hz / 1e9,
            self.cfg.switch_cpu,
            self.generator.as_ref().map_or("none", |g| g.name()),
            self.cfg.gen_cpu,
            self.cfg.runs,
            self.cfg.duration,
            self.cfg.warmup,
            self.cfg.flows,
        );
        let socket = self
            .without_live_frames
            .as_ref()
            .map_or(String::new(), |w| format!(" The generator: {w}."));
        s + &paced + &socket
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
        self.generator_note.clone().unwrap_or_else(|| {
            format!(
                "no traffic generator (no `flowpath gen --tx`, no trafgen): run {}",
                peers::SETUP_SCRIPT
            )
        })
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            topo: &self.topo,
            switch_cpu: self.cfg.switch_cpu,
            gen_cpu: self.cfg.gen_cpu,
            exe: &self.cfg.exe,
            ovs_xdp_mode: &self.cfg.ovs_xdp_mode,
            class: self.class,
        }
    }
}
