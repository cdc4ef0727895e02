//! The characterisation suite (`flowpath bench suite`): the "Core Cost of Doing Business"
//! experiments on the real datapath with generated packets, each as numbers, a table and a
//! chart.
//!
//! - **scaling**: N worker threads (1 … all cores), each with its own `Datapath` (own
//!   caches) and own in-memory source, sharing one `RuleStore`: aggregate Mpps, Mpps per
//!   core, cycles per packet and scaling efficiency against one core;
//! - **frame sizes**: cycles per cached and per new-flow packet at 64 B, IMIX (7:4:1 of
//!   64/570/1518), 512, 1024 and 1518 B;
//! - **hit vs miss** per traffic class (IPv4, IPv6, VXLAN decap through a tunnel port,
//!   VXLAN encap to a tunnel port): cycles per packet when every packet is an established
//!   flow and when every packet is a new one, and their ratio;
//! - **throughput vs miss rate** per class, measured at each miss rate and beside it the
//!   model `cycles(m) = (1 − m)·c_hit + m·c_miss` from the same run's end points, with the
//!   disagreement per point ([`model`]);
//! - **under attack**: established-flow throughput kept against the attack rate, for a
//!   new-flow flood and a tuple-space-explosion attack, with no defence and with the
//!   datapath's defaults (`crate::attack`).
//!
//! Every point warms up and then times `runs` runs with the TSC; it reports the median
//! with min, max and every sample. [`run`] returns serde-serialisable [`SuiteResults`]
//! (a later `flowpath calibrate` reuses the per-class hit and miss costs and the scaling
//! efficiency); [`report`] turns them into terminal tables, an HTML page and SVG charts.

pub mod charts;
pub mod ct_model;
mod findings;
mod measure;
pub mod model;
pub mod report;
mod run;

/// The CPUs this process may use, in order (the scaling workers are pinned to them).
pub use measure::affinity::allowed_cpus;

use crate::machine::Machine;
use crate::runner::StageShare;
use flowpath_base::Summary;
use flowpath_gen::{FrameMix, TrafficClass};
use serde::{Deserialize, Serialize};

pub use findings::findings;
pub use report::{default_out_dir, html, tables, write_outputs};
pub use run::run;

/// What to run and how long. [`SuiteConfig::full`] is the default of the command;
/// [`SuiteConfig::quick`] runs every experiment with fewer packets, runs and points.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SuiteConfig {
    pub quick: bool,
    /// Timed runs per point (the median is reported, with min and max).
    pub runs: usize,
    /// Packets per timed run at miss rates up to 10 %; above, `packets · 0.1 / m`
    /// (at least `min_packets`), so that a run costs about the same at any miss rate.
    pub packets: u64,
    pub min_packets: u64,
    /// Warm-up packets at the point's miss rate (scaled like `packets`), after the
    /// megaflow cache was filled with `megaflow_max` new flows (see [`measure`]).
    pub warm_packets: u64,
    /// Established flows.
    pub flows: usize,
    /// Seed of the sources' new-flow stamping (worker k of the scaling runs uses seed + k).
    pub seed: u64,
    /// Miss rates of the throughput curve (shares 0.0..=1.0); 0 and 1 are always included:
    /// they are the hit and miss costs.
    pub miss_rates: Vec<f64>,
    pub classes: Vec<TrafficClass>,
    /// Frame sizes of the size sweep (IPv4 traffic).
    pub mixes: Vec<FrameMix>,
    /// Worker counts of the scaling experiment.
    pub cores: Vec<usize>,
    /// Miss rates the scaling experiment runs at (one series each), IPv4 traffic.
    pub scaling_miss_rates: Vec<f64>,
    pub megaflow_max: usize,
    /// Exact-match insertion: one flow in N.
    pub emc_insert_inv_prob: u32,
    /// Pin scaling worker k to the k-th CPU this process may run on.
    pub pin_threads: bool,
    /// Attack rates of the under-attack experiment (packets per second; 0 = as fast as
    /// the worker takes them); empty skips it.
    #[serde(default)]
    pub attack_rates: Vec<f64>,
    /// Length of each measured window of the under-attack experiment (ms).
    #[serde(default = "default_attack_window")]
    pub attack_window_ms: u64,
}

/// The frames of the full suite's size sweep: 64 B, IMIX, 512, 1024 and 1518 B.
pub const SIZE_SWEEP: [FrameMix; 5] = [
    FrameMix::Fixed(64),
    FrameMix::Imix,
    FrameMix::Fixed(512),
    FrameMix::Fixed(1024),
    FrameMix::Fixed(1518),
];

fn default_attack_window() -> u64 {
    200
}

impl SuiteConfig {
    /// The full suite: 5 runs of 2,000,000 packets per point, eight miss rates, four
    /// classes, five frame sizes, 1 … all cores. About a minute on a 2-core machine.
    pub fn full() -> SuiteConfig {
        SuiteConfig {
            quick: false,
            runs: 5,
            packets: 2_000_000,
            min_packets: 50_000,
            warm_packets: 1024 * 8 * 100,
            flows: 1024,
            seed: 1,
            miss_rates: vec![0.0, 0.01, 0.02, 0.05, 0.10, 0.20, 0.50, 1.0],
            classes: TrafficClass::ALL.to_vec(),
            mixes: SIZE_SWEEP.to_vec(),
            cores: default_cores(available_cores()),
            scaling_miss_rates: vec![0.0, 0.10],
            megaflow_max: 65536,
            emc_insert_inv_prob: 100,
            pin_threads: true,
            attack_rates: vec![1e3, 1e4, 1e5, 1e6, 0.0],
            attack_window_ms: 200,
        }
    }

    /// Every experiment, smaller: 3 runs of 300,000 packets, five miss rates.
    pub fn quick() -> SuiteConfig {
        SuiteConfig {
            quick: true,
            runs: 3,
            packets: 300_000,
            min_packets: 30_000,
            miss_rates: vec![0.0, 0.01, 0.10, 0.50, 1.0],
            attack_rates: vec![1e4, 1e6, 0.0],
            attack_window_ms: 100,
            ..SuiteConfig::full()
        }
    }

    /// For tests: every experiment with a handful of packets and a small megaflow cache;
    /// seconds in a debug build. The numbers mean nothing.
    pub fn tiny() -> SuiteConfig {
        SuiteConfig {
            quick: true,
            runs: 2,
            packets: 2_000,
            min_packets: 500,
            warm_packets: 2_000,
            flows: 32,
            miss_rates: vec![0.0, 0.5, 1.0],
            mixes: vec![FrameMix::Fixed(64), FrameMix::Imix],
            cores: vec![1, 2],
            megaflow_max: 256,
            emc_insert_inv_prob: 10,
            pin_threads: false,
            attack_rates: vec![0.0],
            attack_window_ms: 10,
            ..SuiteConfig::full()
        }
    }

    /// The command line's choices: `runs` timed runs and `packets` per run where given
    /// (the miss-heavy points then take at least a tenth of those, and at least 100), the
    /// seed, and whether to pin the scaling workers.
    pub fn choose(&mut self, runs: Option<u64>, packets: Option<u64>, seed: u64, pin: bool) {
        if let Some(r) = runs {
            self.runs = r as usize;
        }
        if let Some(p) = packets {
            self.packets = p;
            self.min_packets = self.min_packets.min(p / 10).max(100);
        }
        self.seed = seed;
        self.pin_threads = pin;
    }

    /// Clamp and complete the configuration: at least one run, packet and flow; miss
    /// rates in 0..=1, sorted, without duplicates, with 0 and 1; core counts ≥ 1 and
    /// including 1; no class or frame mix twice.
    pub fn normalised(&self) -> SuiteConfig {
        let mut c = self.clone();
        c.runs = c.runs.max(1);
        c.packets = c.packets.max(1);
        c.min_packets = c.min_packets.clamp(1, c.packets);
        c.flows = c.flows.max(1);
        c.megaflow_max = c.megaflow_max.max(1);
        c.emc_insert_inv_prob = c.emc_insert_inv_prob.max(1);
        let mut rates: Vec<f64> = c
            .miss_rates
            .iter()
            .copied()
            .filter(|m| m.is_finite())
            .map(|m| m.clamp(0.0, 1.0))
            .chain([0.0, 1.0])
            .collect();
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        c.miss_rates = rates;
        c.scaling_miss_rates.retain(|m| m.is_finite());
        for m in &mut c.scaling_miss_rates {
            *m = m.clamp(0.0, 1.0);
        }
        c.scaling_miss_rates.sort_by(f64::total_cmp);
        c.scaling_miss_rates.dedup();
        // Efficiency is relative to one core, so one core is always measured.
        c.cores.retain(|&n| n >= 1);
        if !c.cores.is_empty() {
            c.cores.push(1);
        }
        c.cores.sort_unstable();
        c.cores.dedup();
        let mut seen = Vec::new();
        c.classes.retain(|k| {
            let new = !seen.contains(k);
            seen.push(*k);
            new
        });
        let mut seen = Vec::new();
        c.mixes.retain(|k| {
            let new = !seen.contains(k);
            seen.push(*k);
            new
        });
        c
    }
}

/// The 1-minute load average, or -1 where the system does not say.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(-1.0)
}

/// CPUs this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// 1, 2, 4, … up to `n`, and `n` itself.
pub fn default_cores(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |k| Some(k * 2))
        .take_while(|&k| k < n)
        .collect();
    v.push(n.max(1));
    v
}

/// Median, min and max over repeated runs, and every sample in run order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
    pub samples: Vec<f64>,
}

impl Spread {
    /// The median is the upper middle sample (a sample that was measured, as the bench
    /// reports it). An empty list gives zeros.
    pub fn of(samples: &[f64]) -> Spread {
        let s = Summary::of(samples).unwrap_or(Summary {
            median: 0.0,
            min: 0.0,
            max: 0.0,
        });
        Spread {
            median: s.median,
            min: s.min,
            max: s.max,
            runs: samples.len(),
            samples: samples.to_vec(),
        }
    }
}

/// One measured operating point on one core.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// Share of packets the source stamped as new flows (the nominal miss rate).
    pub miss_rate: f64,
    /// TSC cycles per packet for the whole loop (rx from memory, parse, lookups, slow
    /// path, actions, tx to a counting sink), per run.
    pub cycles: Spread,
    /// Million packets per second on one core at the median.
    pub mpps: f64,
    pub packets_per_run: u64,
    /// Mean frame size in bytes, FCS included.
    pub frame_bytes: f64,
    /// Share of packets each tier answered (median run); `upcall_share` is the observed
    /// miss rate.
    pub emc_hit_share: f64,
    pub megaflow_hit_share: f64,
    pub upcall_share: f64,
    /// Cycles per packet by stage, from the datapath's own TSC stamps (median run).
    pub stage_cycles: StageShare,
    /// Megaflows cached at the end.
    pub megaflows: usize,
}

/// One point of the throughput-vs-miss-rate curve: measured, and the model beside it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CurvePoint {
    pub miss_rate: f64,
    pub measured: Point,
    /// `(1 − m)·c_hit + m·c_miss` with the medians of this class's hit and miss points.
    pub model_cycles: f64,
    /// The same with the hit and miss minima / maxima: the model's own spread.
    pub model_cycles_lo: f64,
    pub model_cycles_hi: f64,
    pub model_mpps: f64,
    /// `measured Mpps / model Mpps − 1` (negative: slower than the model predicts).
    pub disagreement: f64,
    /// `|disagreement| > model::TOLERANCE` (10 %).
    pub disagrees: bool,
    /// The measured min–max and the model's lo–hi overlap (the gap could be run-to-run
    /// noise).
    pub ranges_overlap: bool,
}

/// Hit and miss costs and the miss-rate curve of one traffic class.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClassResult {
    pub class: TrafficClass,
    pub description: String,
    pub frame_bytes: f64,
    pub rules: usize,
    /// Median cycles per packet with 0 % and 100 % new flows.
    pub hit_cycles: f64,
    pub miss_cycles: f64,
    /// `miss_cycles / hit_cycles` (the talk: 10.8 for the OVS kernel datapath).
    pub miss_hit_ratio: f64,
    pub hit: Point,
    pub miss: Point,
    /// Sorted by miss rate; the first point is `hit`, the last `miss`.
    pub curve: Vec<CurvePoint>,
}

/// One frame size (or mix) of the size sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SizePoint {
    /// `64`, `imix`, `512`, …
    pub mix: String,
    pub mean_frame_bytes: f64,
    pub hit: Point,
    pub miss: Point,
    /// Line rate the hit Mpps correspond to (frame + 20 B of preamble and gap).
    pub hit_line_gbps: f64,
}

/// One worker count of the scaling experiment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScalingPoint {
    pub cores: usize,
    /// Per run: all workers' packets over the slowest worker's time.
    pub aggregate_mpps: Spread,
    /// Median aggregate divided by the worker count.
    pub mpps_per_core: f64,
    /// Per run: the workers' mean cycles per packet.
    pub cycles_per_packet: Spread,
    /// `aggregate(N) / (N · aggregate(1))`, 1.0 = linear.
    pub efficiency: f64,
    /// Each worker's Mpps in the median run.
    pub worker_mpps: Vec<f64>,
    /// Every worker was pinned to its own CPU.
    pub pinned: bool,
    pub packets_per_run_per_core: u64,
}

/// The scaling experiment at one miss rate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScalingSeries {
    pub class: TrafficClass,
    pub miss_rate: f64,
    pub points: Vec<ScalingPoint>,
}

/// Where and how the suite ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Meta {
    /// CPU model, cores, TSC GHz, kernel, git revision, command line.
    pub machine: Machine,
    /// TSC ticks per second (Mpps = tsc_hz / cycles per packet / 10^6).
    pub tsc_hz: f64,
    pub seed: u64,
    pub quick: bool,
    /// Seconds since the Unix epoch when the suite started, and the same in UTC.
    pub started_unix: u64,
    pub started_utc: String,
    pub wall_seconds: f64,
    /// The 1-minute load average before and after the run (`/proc/loadavg`; -1 where
    /// unknown). Other work on the machine shows here and makes the numbers noisier.
    pub load_before: f64,
    pub load_after: f64,
    pub config: SuiteConfig,
}

/// Everything the suite measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SuiteResults {
    /// Version of this layout.
    pub schema: u32,
    pub meta: Meta,
    pub scaling: Vec<ScalingSeries>,
    pub sizes: Vec<SizePoint>,
    pub classes: Vec<ClassResult>,
    /// Established-flow throughput under attack, per attack (absent in older results).
    #[serde(default)]
    pub attacks: Vec<AttackSeries>,
    /// Connection tracking's costs and their model curve (absent in older results and
    /// where the bench has no connection-tracking cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conntrack: Option<ct_model::CtModel>,
    /// What the run found, in sentences (also at the top of the report).
    pub findings: Vec<String>,
}

/// One attack at several rates.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AttackSeries {
    /// `flood` or `tse`.
    pub case: String,
    pub classifier: String,
    pub established_flows: usize,
    /// Port A's offered rate (Mpps), the same at every point.
    pub established_offered_mpps: f64,
    pub points: Vec<AttackPoint>,
}

/// One attack rate: what each defence kept.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AttackPoint {
    /// The attack's offered rate (packets per second); 0 = as fast as taken.
    pub offered_pps: f64,
    pub defences: Vec<crate::attack::DefenceRow>,
}

impl SuiteResults {
    pub const SCHEMA: u32 = 1;

    /// Hit/miss costs and curve of one traffic class, if it ran.
    pub fn class(&self, class: TrafficClass) -> Option<&ClassResult> {
        self.classes.iter().find(|c| c.class == class)
    }

    /// Scaling efficiency at `cores` workers for the series closest to `miss_rate`.
    pub fn scaling_efficiency(&self, cores: usize, miss_rate: f64) -> Option<f64> {
        self.scaling
            .iter()
            .min_by(|a, b| {
                (a.miss_rate - miss_rate)
                    .abs()
                    .total_cmp(&(b.miss_rate - miss_rate).abs())
            })?
            .points
            .iter()
            .find(|p| p.cores == cores)
            .map(|p| p.efficiency)
    }
}

/// Where the suite is, for a progress display.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Work done and in total, in estimated millions of TSC cycles (so an ETA is fair
    /// across cheap hit points and expensive miss points).
    pub done: u64,
    pub total: u64,
    /// What runs now, e.g. `miss rate ipv6 10 %`.
    pub step: String,
}

/// A class's curve points (sorted by miss rate, 0 first and 1 last) with the model.
pub fn class_result(class: TrafficClass, points: Vec<Point>, tsc_hz: f64) -> ClassResult {
    let hit = points.first().expect("the curve has a 0 % point").clone();
    let miss = points.last().expect("the curve has a 100 % point").clone();
    let curve = model::curve(&points, &hit, &miss, tsc_hz);
    ClassResult {
        class,
        description: class.describe().into(),
        frame_bytes: hit.frame_bytes,
        rules: 1000,
        hit_cycles: hit.cycles.median,
        miss_cycles: miss.cycles.median,
        miss_hit_ratio: if hit.cycles.median > 0.0 {
            miss.cycles.median / hit.cycles.median
        } else {
            0.0
        },
        hit,
        miss,
        curve,
    }
}

/// A progress display for [`run`] on stderr: a bar with the elapsed time and an ETA when
/// stderr is a terminal, otherwise one line per experiment.
pub struct StderrProgress {
    bar: Option<indicatif::ProgressBar>,
    last: String,
}

impl Default for StderrProgress {
    fn default() -> Self {
        StderrProgress::new()
    }
}

impl StderrProgress {
    pub fn new() -> StderrProgress {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(1);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:32.cyan/blue}] {percent:>3}%  ETA {eta:>4}  {msg}",
                )
                .expect("valid progress template")
                .progress_chars("=> "),
            );
            b
        });
        StderrProgress {
            bar,
            last: String::new(),
        }
    }

    pub fn update(&mut self, p: &Progress) {
        match &self.bar {
            Some(b) => {
                b.set_length(p.total);
                b.set_position(p.done.min(p.total));
                if p.step != self.last {
                    b.set_message(p.step.clone());
                }
            }
            None => {
                // Without a terminal, one line per step.
                if p.step != self.last {
                    eprintln!("[{:>3}%] {}", p.done * 100 / p.total.max(1), p.step);
                }
            }
        }
        self.last = p.step.clone();
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
