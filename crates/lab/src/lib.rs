//! The lab: a network-namespace topology that sends the same traffic through flowpath,
//! Open vSwitch (afxdp), DPDK testpmd (net_af_xdp) and Linux forwarding, measured alike.

pub mod bpfmap;
mod config;
pub mod generator;
mod measure;
pub mod peers;
pub mod pmdperf;
pub mod procstat;
pub mod report;
pub mod sh;
pub mod systems;
pub mod topo;

pub use config::*;
use generator::Generator;
use measure::Path3;
pub use measure::{
    annotate_generator_bound, annotate_pacing, annotate_prog_time, annotate_scaling,
    annotate_xdp_parse_split, annotate_xdp_tier_per_core, annotate_xdp_tier_ratio,
};
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
        let direct = Path3 {
            gen_if: topo::GDIR_IF,
            dst_mac: topo::SDIR_MAC,
            src_mac: topo::GDIR_MAC,
            sink_if: topo::SDIR_IF,
            cpu: self.cfg.gen_cpu,
            cost_cpus: vec![self.cfg.gen_cpu],
            gen_cpus: vec![self.cfg.gen_cpu],
        };
        let switched = Path3 {
            gen_if: topo::GEN_IF,
            dst_mac: topo::SWIN_MAC,
            src_mac: topo::GEN_MAC,
            sink_if: topo::SINK_IF,
            cpu: self.cfg.switch_cpu,
            cost_cpus: vec![self.cfg.switch_cpu],
            gen_cpus: vec![self.cfg.gen_cpu],
        };
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
                        format!(
                            "trafgen not installed (netsniff-ng): run {}",
                            peers::SETUP_SCRIPT
                        ),
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
                let mut path = switched;
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
    fn classes_parse() {
        assert_eq!(Class::parse("ipv4"), Ok(Class::Ipv4));
        assert_eq!(Class::parse(" vxlan_decap"), Ok(Class::VxlanDecap));
        assert_eq!(Class::parse("vxlan_encap"), Ok(Class::VxlanEncap));
        assert_eq!(Class::parse("ipv6"), Ok(Class::Ipv6));
        assert!(Class::parse("vxlan").unwrap_err().contains("vxlan_decap"));
        for c in Class::ALL {
            assert_eq!(Class::parse(c.name()), Ok(c));
        }
        assert_eq!(LabConfig::default().classes, vec![Class::Ipv4]);
    }

    #[test]
    fn generator_bound_rows_are_marked() {
        let mk = |s: &str, m: f64| Row {
            system: s.into(),
            case: "hit".into(),
            class: "ipv4".into(),
            mpps: Some(m),
            ..Row::default()
        };
        let mut rows = vec![
            mk("generator", 1.0),
            mk("linux", 0.95),
            mk("ovs-afxdp", 0.3),
        ];
        rows.push(Row {
            class: "vxlan_decap".into(),
            ..mk("flowpath-afxdp", 0.95)
        });
        annotate_generator_bound(&mut rows);
        assert!(rows[1].notes.iter().any(|n| n.contains("GENERATOR-BOUND")));
        assert!(rows[2].notes.is_empty());
        assert!(rows[0].notes.is_empty());
        assert!(rows[3].notes.is_empty(), "another class's generator row");
    }

    #[test]
    fn the_xdp_tier_row_is_judged_against_redirect_only_by_the_figure_that_applies() {
        let mk = |s: &str, class: &str, m: f64, cycles: f64, busy: f64| Row {
            system: s.into(),
            case: "hit".into(),
            class: class.into(),
            mpps: Some(m),
            cycles_per_packet: Some(cycles),
            cpu_busy_pct: Some(busy),
            ..Row::default()
        };
        // The tier's note when redirect-only's CPU was `fwd_busy` % busy.
        let note = |fwd_busy: f64| {
            let mut rows = vec![
                mk("flowpath-xdp", "ipv4", 2.0, 500.0, 99.0),
                mk("xdp-forward", "ipv4", 4.0, 450.0, fwd_busy),
            ];
            annotate_xdp_tier_ratio(&mut rows);
            assert!(rows[1].notes.is_empty());
            rows[0].notes.join("; ")
        };
        // Both saturated: Mpps decides (2.0 / 4.0 = 0.50x, although cycles say 0.90x).
        let n = note(98.0);
        assert!(n.contains("0.50x by Mpps, 0.90x by cycles/pkt"), "{n}");
        assert!(n.contains("judged by Mpps"), "{n}");
        assert!(n.contains("NOT met"), "{n}");
        // The generator set the rate (86 % busy): the cycles decide.
        let n = note(86.0);
        assert!(n.contains("judged by cycles/pkt"), "{n}");
        assert!(n.contains("(tier 99%, redirect-only 86%)"), "{n}");
        assert!(n.contains("target >= 0.8x met"), "{n}");
        // No redirect-only row of that class, or a miss row: no note.
        let mut rows = vec![
            mk("flowpath-xdp", "ipv6", 2.0, 500.0, 99.0),
            mk("xdp-forward", "ipv4", 4.0, 450.0, 98.0),
            Row {
                case: "miss".into(),
                ..mk("flowpath-xdp", "ipv4", 1.0, 900.0, 99.0)
            },
        ];
        annotate_xdp_tier_ratio(&mut rows);
        assert!(rows.iter().all(|r| r.notes.is_empty()));
    }

    #[test]
    fn the_parse_baseline_splits_the_tiers_cycles_over_redirect_only() {
        let sample = |c: f64| report::Sample {
            cycles_per_packet: Some(c),
            ..report::Sample::default()
        };
        let mk = |s: &str, class: &str, windows: &[f64]| {
            let mut w = windows.to_vec();
            w.sort_by(f64::total_cmp);
            Row {
                system: s.into(),
                case: "hit".into(),
                class: class.into(),
                cycles_per_packet: Some(w[w.len() / 2]),
                samples: windows.iter().map(|&c| sample(c)).collect(),
                ..Row::default()
            }
        };
        // Three rounds; the second a slow spell for all rows. Per round: reading 100, 150,
        // 80; the tier's own work 120, 200, 140.
        let mut rows = vec![
            mk("flowpath-xdp", "ipv4", &[1120.0, 1650.0, 1120.0]),
            mk("xdp-forward", "ipv4", &[900.0, 1300.0, 900.0]),
            mk(systems::PARSE_FORWARD, "ipv4", &[1000.0, 1450.0, 980.0]),
            mk("flowpath-xdp", "ipv6", &[1300.0]),
            mk("xdp-forward", "ipv6", &[900.0]),
        ];
        annotate_xdp_parse_split(&mut rows);
        let n = rows[0].notes.join("; ");
        assert!(n.contains("100 [80..150] reading and parsing"), "{n}");
        assert!(n.contains("140 [120..200] the tier's lookup"), "{n}");
        assert!(n.contains("medians of 3 per-round differences"), "{n}");
        let n = rows[2].notes.join("; ");
        assert!(n.contains("costs 100 [80..150] cycles a packet"), "{n}");
        // Redirect-only gets no note; a class without the parse row gets none.
        assert!(rows[1].notes.is_empty());
        assert!(rows[3].notes.is_empty() && rows[4].notes.is_empty());
        // Windows that do not pair up: the rows' medians (1,120 - 980 = 140 tier's own).
        let mut rows = vec![
            mk("flowpath-xdp", "ipv4", &[1120.0]),
            mk("xdp-forward", "ipv4", &[900.0, 1300.0, 900.0]),
            mk(systems::PARSE_FORWARD, "ipv4", &[1000.0, 1450.0, 980.0]),
        ];
        annotate_xdp_parse_split(&mut rows);
        let n = rows[0].notes.join("; ");
        assert!(n.contains("100 reading and parsing"), "{n}");
        assert!(n.contains("120 the tier's lookup"), "{n}");
        assert!(n.contains("the rows' medians"), "{n}");
    }

    #[test]
    fn the_xdp_tier_hit_row_is_judged_per_core_equivalent() {
        let mk = |s: &str, case: &str, cycles: f64, offered: f64| Row {
            system: s.into(),
            case: case.into(),
            class: "ipv4".into(),
            mpps: Some(1.0),
            cycles_per_packet: Some(cycles),
            offered_mpps: Some(offered),
            tsc_hz: 2.6e9,
            ..Row::default()
        };
        let mut rows = vec![
            mk("flowpath-xdp", "hit", 700.0, 2.0),
            mk("flowpath-xdp", "hit", 1300.0, 4.0),
            mk("flowpath-xdp", "miss", 700.0, 2.0),
            mk("xdp-forward", "hit", 400.0, 2.0),
        ];
        annotate_xdp_tier_per_core(&mut rows);
        // 2.6 GHz / 700 cycles = 3.71 Mpps: met, judged by the cycles (2.0 offered).
        let n = rows[0].notes.join("; ");
        assert!(n.contains("per core equivalent: 3.71 Mpps"), "{n}");
        assert!(n.contains("700 busy cycles"), "{n}");
        assert!(n.contains("target >= 3.5 Mpps met"), "{n}");
        assert!(n.contains("offered 2.00 Mpps, less than the target"), "{n}");
        // 2.6 GHz / 1,300 = 2.00: not met, although 4.0 was offered.
        let n = rows[1].notes.join("; ");
        assert!(
            n.contains("2.00 Mpps (TSC 2.600 GHz / 1,300 busy cycles"),
            "{n}"
        );
        assert!(n.contains("NOT met; offered 4.00 Mpps"), "{n}");
        assert!(rows[2].notes.is_empty() && rows[3].notes.is_empty());
    }

    #[test]
    fn two_worker_rows_get_their_ratio_and_say_when_it_cannot_be_judged() {
        let mk = |s: &str, m: f64, offered: f64, workers: Vec<u64>| Row {
            system: s.into(),
            case: "hit".into(),
            class: "ipv4".into(),
            mpps: Some(m),
            offered_mpps: Some(offered),
            worker_packets: workers,
            ..Row::default()
        };
        let rows = || {
            vec![
                mk("flowpath-afxdp", 0.5, 3.0, vec![]),
                mk(systems::TWO_WORKERS, 0.95, 3.0, vec![100, 90]),
            ]
        };
        let mut r = rows();
        annotate_scaling(&mut r, 4);
        assert!(r[0].notes.is_empty());
        let n = r[1].notes.join("; ");
        assert!(n.contains("packets per worker: 100 / 90"), "{n}");
        assert!(n.contains("1->2 workers: 1.90x"), "{n}");
        assert!(n.contains("target >= 1.8x met"), "{n}");
        let mut r = rows();
        annotate_scaling(&mut r, 2);
        let n = r[1].notes.join("; ");
        assert!(
            n.contains("GENERATOR-BOUND: 2 workers and 2 generators"),
            "{n}"
        );
        assert!(n.contains("not judged"), "{n}");
        let mut r = rows();
        r[1].offered_mpps = Some(1.0);
        annotate_scaling(&mut r, 8);
        assert!(r[1]
            .notes
            .join(";")
            .contains("offered 1.000 Mpps ~ delivered"));
    }

    #[test]
    fn program_time_notes_give_each_row_its_ns_and_the_tier_its_difference_by_round() {
        // Three interleaved rounds; a row's windows carry the program time (--prog-time).
        let mk = |s: &str, prog: &str, ns: [f64; 3]| {
            let mut r = Row {
                system: s.into(),
                case: "hit".into(),
                class: "ipv4".into(),
                tsc_hz: 2.5e9,
                samples: ns
                    .iter()
                    .map(|&ns| report::Sample {
                        xdp_prog: Some(prog.into()),
                        prog_ns_per_run: Some(ns),
                        ..report::Sample::default()
                    })
                    .collect(),
                ..Row::default()
            };
            r.summarise();
            r
        };
        let mut rows = vec![
            mk("flowpath-xdp", "flow_tier", [180.0, 220.0, 200.0]),
            mk("xdp-forward", "xdp_fwd_all", [80.0, 100.0, 60.0]),
            mk(
                systems::PARSE_FORWARD,
                "parse_forward",
                [100.0, 130.0, 110.0],
            ),
            mk("linux", "", [0.0; 3]),
        ];
        rows[3].samples.iter_mut().for_each(|s| {
            s.xdp_prog = None;
            s.prog_ns_per_run = None;
        });
        rows[3].summarise();
        annotate_prog_time(&mut rows);
        let n = rows[0].notes.join("; ");
        assert!(
            n.contains("XDP program flow_tier on swin: 200 ns a run [180..220]"),
            "{n}"
        );
        // Per round 100, 120, 140 over redirect-only: median 120 = 300 cycles at 2.5 GHz.
        assert!(
            n.contains("120 ns a run [100..140] over xdp-forward's program (median of 3 per-round differences; 300 cycles"),
            "{n}"
        );
        // Per round 80, 90, 90 over parse-then-redirect.
        assert!(
            n.contains("90 ns a run [80..90] over xdp-parse-forward's program"),
            "{n}"
        );
        let n = rows[1].notes.join("; ");
        assert!(
            n.contains("XDP program xdp_fwd_all on swin: 80 ns a run [60..100]"),
            "{n}"
        );
        assert!(
            !n.contains("by program time"),
            "only the tier compares: {n}"
        );
        assert!(rows[3].notes.is_empty(), "no program time, no note");

        // Without a window-by-window match (one row lost a round) the medians' difference.
        rows[1].samples.pop();
        rows[1].summarise();
        rows[0].notes.clear();
        annotate_prog_time(&mut rows);
        let n = rows[0].notes.join("; ");
        assert!(
            n.contains("110 ns a run over xdp-forward's program (275 cycles"),
            "{n}"
        );
    }
}
