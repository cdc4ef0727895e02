//! Running the suite: plan the experiments (with a cost estimate each, for the progress
//! display), measure them, and assemble [`SuiteResults`].

use super::{
    class_result, load_average, measure, report, AttackPoint, AttackSeries, Meta, Point, Progress,
    ScalingSeries, SizePoint, SuiteConfig, SuiteResults,
};
use crate::machine::Machine;
use flowpath_gen::{FrameMix, TrafficClass};

#[derive(Clone, Copy, Debug)]
enum Step {
    Curve(TrafficClass),
    Sizes,
    Scaling(f64),
    Attack(crate::attack::Attack),
}

impl Step {
    fn label(&self) -> String {
        match *self {
            Step::Curve(c) => format!("hit/miss and miss-rate curve, {}", c.name()),
            Step::Sizes => "frame sizes".into(),
            Step::Scaling(m) => format!("scaling over cores at {} new flows", report::pct(m)),
            Step::Attack(a) => format!("established flows under a {} attack", a.name()),
        }
    }
}

/// The experiments to run, each with its estimated cost, and their operating points.
struct Plan {
    steps: Vec<(Step, u64)>,
    size_specs: Vec<measure::Spec>,
}

/// What the steps measured, before it is assembled.
struct Measured {
    curves: Vec<Vec<Point>>,
    size_points: Vec<Point>,
    scaling: Vec<ScalingSeries>,
    attacks: Vec<AttackSeries>,
}

/// The under-attack experiment's cost in the plan's units (millions of TSC cycles): each
/// rate runs a saturation window and, per defence (at most three) and run, two windows
/// with a warm-up each.
fn attack_estimate(cfg: &SuiteConfig) -> u64 {
    let windows = cfg.attack_rates.len() as f64 * (1.0 + 3.0 * 2.0 * cfg.runs as f64);
    let cycles_per_ms = flowpath_base::clock::tsc_hz() / 1e3;
    ((windows * (cfg.attack_window_ms * 2 + 50) as f64 * cycles_per_ms / 1e6) as u64).max(1)
}

/// Each attack at each rate, with the suite's runs and window.
fn attack_series(
    cfg: &SuiteConfig,
    kind: crate::attack::Attack,
    tick: &mut dyn FnMut(f64),
) -> AttackSeries {
    use crate::attack::{run_attack, Attack, AttackConfig};
    let n = cfg.attack_rates.len().max(1);
    let mut points = Vec::new();
    let mut head = None;
    for (i, &rate) in cfg.attack_rates.iter().enumerate() {
        let acfg = AttackConfig {
            runs: cfg.runs,
            window_ms: cfg.attack_window_ms,
            attack_pps: (rate > 0.0).then_some(rate),
            backend: match kind {
                Attack::Flood => flowpath_pipeline::Backend::TupleSpace,
                Attack::Tse => flowpath_pipeline::Backend::Tree,
            },
            seed: cfg.seed,
            ..AttackConfig::default()
        };
        let r = run_attack(kind, &acfg, |_, _| {});
        tick((i + 1) as f64 / n as f64);
        head.get_or_insert((
            r.classifier.clone(),
            r.established_flows,
            r.established_offered_mpps,
        ));
        points.push(AttackPoint {
            offered_pps: rate,
            defences: r.defences,
        });
    }
    let (classifier, flows, offered) = head.unwrap_or_default();
    AttackSeries {
        case: kind.name().into(),
        classifier,
        established_flows: flows,
        established_offered_mpps: offered,
        points,
    }
}

/// The miss-rate curve's operating points for `class`.
fn curve_specs(cfg: &SuiteConfig, class: TrafficClass) -> Vec<measure::Spec> {
    cfg.miss_rates
        .iter()
        .map(|&m| measure::Spec {
            class,
            mix: FrameMix::Fixed(64),
            m,
        })
        .collect()
}

impl Plan {
    fn new(cfg: &SuiteConfig) -> Plan {
        let size_specs: Vec<measure::Spec> = cfg
            .mixes
            .iter()
            .flat_map(|&mix| {
                [0.0, 1.0].map(|m| measure::Spec {
                    class: TrafficClass::Ipv4,
                    mix,
                    m,
                })
            })
            .collect();
        let mut steps: Vec<(Step, u64)> = Vec::new();
        for &class in &cfg.classes {
            let est = measure::estimate_points(cfg, &curve_specs(cfg, class));
            steps.push((Step::Curve(class), est));
        }
        if !size_specs.is_empty() {
            steps.push((Step::Sizes, measure::estimate_points(cfg, &size_specs)));
        }
        if !cfg.cores.is_empty() {
            for &m in &cfg.scaling_miss_rates {
                let est = cfg
                    .cores
                    .iter()
                    .map(|&n| measure::estimate(cfg, m, n))
                    .sum();
                steps.push((Step::Scaling(m), est));
            }
        }
        if !cfg.attack_rates.is_empty() {
            for a in [crate::attack::Attack::Flood, crate::attack::Attack::Tse] {
                steps.push((Step::Attack(a), attack_estimate(cfg)));
            }
        }
        Plan { steps, size_specs }
    }

    /// Run every step, telling `progress` how far along the whole plan is.
    fn execute(self, cfg: &SuiteConfig, progress: &mut impl FnMut(&Progress)) -> Measured {
        let total: u64 = self.steps.iter().map(|p| p.1).sum::<u64>().max(1);
        let mut done = 0u64;
        let mut m = Measured {
            curves: vec![Vec::new(); cfg.classes.len()],
            size_points: Vec::new(),
            scaling: cfg
                .scaling_miss_rates
                .iter()
                .map(|&m| ScalingSeries {
                    class: TrafficClass::Ipv4,
                    miss_rate: m,
                    points: Vec::new(),
                })
                .collect(),
            attacks: Vec::new(),
        };
        for (step, est) in self.steps {
            let label = step.label();
            progress(&Progress {
                done,
                total,
                step: label.clone(),
            });
            let mut tick = |frac: f64| {
                progress(&Progress {
                    done: done + (est as f64 * frac.clamp(0.0, 1.0)) as u64,
                    total,
                    step: label.clone(),
                })
            };
            match step {
                Step::Curve(class) => {
                    let i = cfg.classes.iter().position(|&c| c == class).unwrap();
                    m.curves[i] = measure::points(cfg, &curve_specs(cfg, class), &mut tick);
                }
                Step::Sizes => m.size_points = measure::points(cfg, &self.size_specs, &mut tick),
                Step::Scaling(r) => {
                    let i = m.scaling.iter().position(|s| s.miss_rate == r).unwrap();
                    m.scaling[i].points =
                        measure::scaling(cfg, TrafficClass::Ipv4, r, &cfg.cores, &mut tick);
                }
                Step::Attack(a) => m.attacks.push(attack_series(cfg, a, &mut tick)),
            }
            done += est;
        }
        progress(&Progress {
            done: total,
            total,
            step: "done".into(),
        });
        m
    }
}

/// Each point's efficiency against the series' one-core rate.
fn set_efficiencies(scaling: &mut [ScalingSeries]) {
    for s in scaling {
        let one = s
            .points
            .iter()
            .find(|p| p.cores == 1)
            .map(|p| p.aggregate_mpps.median);
        for p in &mut s.points {
            p.efficiency = match one {
                Some(one) if one > 0.0 => p.aggregate_mpps.median / (p.cores as f64 * one),
                _ => 0.0,
            };
        }
    }
}

/// The frame-size points: a hit and a miss point per mix.
fn size_points(cfg: &SuiteConfig, points: &[Point]) -> Vec<SizePoint> {
    cfg.mixes
        .iter()
        .zip(points.chunks_exact(2))
        .map(|(mix, hm)| {
            let (hit, miss) = (hm[0].clone(), hm[1].clone());
            SizePoint {
                mix: mix.label(),
                mean_frame_bytes: hit.frame_bytes,
                hit_line_gbps: hit.mpps * (hit.frame_bytes + 20.0) * 8.0 / 1e3,
                hit,
                miss,
            }
        })
        .collect()
}

/// Connection tracking's costs, from the bench's ct cases by name (None where there are
/// none): the suite's runs, packets, flows and seed.
fn conntrack(
    cfg: &SuiteConfig,
    tsc_hz: f64,
    progress: &mut impl FnMut(&Progress),
) -> Option<super::ct_model::CtModel> {
    progress(&Progress {
        done: 0,
        total: 1,
        step: "connection-tracking costs".into(),
    });
    let bench = crate::runner::BenchConfig {
        runs: cfg.runs,
        packets: cfg.packets,
        flows: cfg.flows,
        megaflow_max: cfg.megaflow_max,
        emc_insert_inv_prob: cfg.emc_insert_inv_prob,
        seed: cfg.seed,
        ..crate::runner::BenchConfig::default()
    };
    super::ct_model::measure(&bench, tsc_hz).ok()
}

/// Run the whole suite. `progress` is called when a step starts and after every timed run.
pub fn run(cfg: &SuiteConfig, mut progress: impl FnMut(&Progress)) -> SuiteResults {
    let cfg = cfg.normalised();
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let wall = std::time::Instant::now();
    let load_before = load_average();
    let machine = Machine::probe();
    let tsc_hz = flowpath_base::clock::tsc_hz();
    // First, so that the progress the experiments report runs on from 0 to the end.
    let ct = conntrack(&cfg, tsc_hz, &mut progress);
    let mut m = Plan::new(&cfg).execute(&cfg, &mut progress);
    set_efficiencies(&mut m.scaling);
    let classes = cfg
        .classes
        .iter()
        .zip(m.curves)
        .map(|(&class, points)| class_result(class, points, tsc_hz))
        .collect();
    let sizes = size_points(&cfg, &m.size_points);
    let mut results = SuiteResults {
        schema: SuiteResults::SCHEMA,
        meta: Meta {
            machine,
            tsc_hz,
            seed: cfg.seed,
            quick: cfg.quick,
            started_unix: started,
            started_utc: report::utc(started),
            wall_seconds: 0.0,
            load_before,
            load_after: load_average(),
            config: cfg,
        },
        scaling: m.scaling,
        sizes,
        classes,
        attacks: m.attacks,
        conntrack: ct,
        findings: Vec::new(),
    };
    results.meta.wall_seconds = wall.elapsed().as_secs_f64();
    results.findings = super::findings(&results);
    results
}
