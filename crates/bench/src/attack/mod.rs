//! The miss-storm cases of `flowpath bench`: `flood` (a port sending nothing but new
//! flows) and `tse` (a trickle of tuple-space-explosion packets), each measured as what
//! established flows on another port keep of their throughput.
//!
//! One worker polls two generated ports through the same worker loop the switch runs:
//! port A offers established flows at a fixed rate ([`PacedPort`]: arrivals follow the
//! TSC, a full ring loses the rest), port B is the attacker. A's rate is a share
//! (`established_load`) of what A alone reaches unpaced on this core, measured first in
//! the same run, so "no attack" delivers all of it and the attack can only take it away.
//! Each defence setting gets a fresh datapath: warm-up, a window without the attack, then
//! the attack switched on, a warm-up, and a window with it. `established_retained` is A's
//! delivered packets per second with the attack ÷ without it (median over runs).

pub mod traffic;

use crate::classifier::trace::FiveTuple;
use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_datapath::{CountingSink, Datapath, DatapathConfig, MissLimits, Worker, WorkerPort};
use flowpath_gen::{GeneratedPort, InMemorySource, PacedPort};
use flowpath_pipeline::{Backend, RuleSpec, RuleStore};
use serde::Serialize;
use std::sync::Arc;

/// Port numbers of the established traffic and the attacker.
pub const PORT_ESTABLISHED: u32 = 1;
pub const PORT_ATTACK: u32 = 100;
/// Receive ring of each paced port (packets).
const RING: usize = 4096;

/// Which attack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attack {
    /// Port B sends 100 % new flows (every packet a never-seen source address) through
    /// the bench's miss pipeline, as fast as the worker takes them.
    Flood,
    /// Port B sends tuple-space-explosion packets against the ACL.
    Tse,
}

impl Attack {
    pub fn name(self) -> &'static str {
        match self {
            Attack::Flood => "flood",
            Attack::Tse => "tse",
        }
    }

    pub fn parse(s: &str) -> Option<Attack> {
        match s {
            "flood" => Some(Attack::Flood),
            "tse" => Some(Attack::Tse),
            _ => None,
        }
    }
}

/// The defence settings a case compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Defence {
    /// Nothing: no miss budget, no mask rate, no mask limit, subtables never re-ranked
    /// (flowpath before issue 16); the tiers' reviews (SMC, EMC, flow limit) as always.
    None,
    /// Only subtables ranked by hits (established masks are searched first).
    Ranking,
    /// The defaults: ranking, the per-port miss budget, the new-mask rate, the mask limit.
    Default,
}

impl Defence {
    pub fn name(self) -> &'static str {
        match self {
            Defence::None => "none",
            Defence::Ranking => "ranking",
            Defence::Default => "default",
        }
    }

    /// `base` with this defence.
    pub fn config(self, base: &DatapathConfig) -> DatapathConfig {
        // Only the defences go: the tiers' own reviews (the SMC and EMC switched by what
        // pays, the flow limit) run in every row, so all three start from the same A
        // without an attack. Freezing them with the ranking (as an infinite review
        // interval did) left the SMC off for A's 10,000 flows: a third of A's rate
        // before any attack, which made "retained" compare different baselines.
        let off = DatapathConfig {
            miss: MissLimits::off(),
            max_masks: u16::MAX as usize,
            rank_subtables: false,
            ..base.clone()
        };
        match self {
            Defence::None => off,
            Defence::Ranking => DatapathConfig {
                rank_subtables: base.rank_subtables,
                ..off
            },
            Defence::Default => base.clone(),
        }
    }
}

/// How to run an attack case.
#[derive(Clone, Debug)]
pub struct AttackConfig {
    pub runs: usize,
    /// Length of each measured window (ms).
    pub window_ms: u64,
    /// Established flows on port A (1,000 for flood; 10,000 for tse, more than the
    /// exact-match cache holds, so they are megaflow lookups a TSE attack can slow down).
    pub established_flows: Option<usize>,
    /// A's offered rate as a share of what A alone reaches unpaced.
    pub established_load: f64,
    /// The attacker's rate in packets per second; `None`: as fast as the worker takes.
    pub attack_pps: Option<f64>,
    /// The ACL (tse, and the rules both ports' traffic meets); `None`: the built-in
    /// 1,000-rule ClassBench acl2 set.
    pub rules: Option<Vec<RuleSpec>>,
    pub backend: Backend,
    /// The datapath configuration the `default` defence uses.
    pub datapath: DatapathConfig,
    pub frame_size: usize,
    pub seed: u64,
}

impl Default for AttackConfig {
    fn default() -> Self {
        AttackConfig {
            runs: 5,
            window_ms: 200,
            established_flows: None,
            established_load: 0.5,
            attack_pps: None,
            rules: None,
            backend: Backend::TupleSpace,
            datapath: DatapathConfig::default(),
            frame_size: 64,
            seed: 1,
        }
    }
}

/// One defence setting under the attack.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct DefenceRow {
    pub defence: Defence,
    /// A's delivered Mpps without and with the attack (median runs).
    pub established_mpps_no_attack: f64,
    pub established_mpps: f64,
    /// Median, min and max over runs of with ÷ without.
    pub established_retained: f64,
    pub retained_min: f64,
    pub retained_max: f64,
    /// Attack packets the worker received per second, and what became of them.
    pub attack_pps: f64,
    pub attack_upcalls_per_sec: f64,
    pub attack_budget_drops_per_sec: f64,
    pub attack_uncached_per_sec: f64,
    /// Megaflow subtables and entries at the end of the attack window.
    pub subtables: usize,
    pub megaflows: usize,
    pub max_masks: usize,
    pub flow_limit: usize,
    /// A's packets lost to its full receive ring during the attack window.
    pub established_ring_losses: u64,
    /// A's own misses per second in the attack window (its megaflows evicted or not yet
    /// cached).
    pub established_upcalls_per_sec: f64,
    /// Busy share of the slow path in the attack window (upcall cycles ÷ window cycles).
    pub slow_path_share: f64,
}

/// What an attack case measured.
#[derive(Clone, Debug, Serialize)]
pub struct AttackResult {
    pub case: String,
    pub established_flows: usize,
    /// A alone, unpaced (Mpps).
    pub established_saturated_mpps: f64,
    /// A's offered rate in every window (Mpps).
    pub established_offered_mpps: f64,
    /// The `default` defence's figures, at the top for scripts.
    pub established_retained: f64,
    pub established_mpps: f64,
    pub attack_pps: f64,
    pub subtables: usize,
    /// Retained with no defence, for comparison.
    pub established_retained_undefended: f64,
    pub defences: Vec<DefenceRow>,
    pub rules: usize,
    pub classifier: String,
    pub runs: usize,
    pub window_ms: u64,
    pub frame_size: usize,
}

type AttackWorker = Worker<PacedPort<GeneratedPort>, CountingSink>;

/// The rules and both ports' traffic.
struct Scenario {
    rules: Vec<RuleSpec>,
    established: Vec<Vec<u8>>,
    attack: Vec<Vec<u8>>,
    /// The attacker's source stamps every packet as a new flow (flood).
    attack_new_flows: bool,
}

fn scenario(kind: Attack, cfg: &AttackConfig) -> Scenario {
    let flows = cfg.established_flows.unwrap_or(match kind {
        Attack::Flood => 1_000,
        Attack::Tse => 10_000,
    });
    let frames = |ts: &[FiveTuple]| -> Vec<Vec<u8>> {
        ts.iter()
            .map(|t| traffic::frame(t, cfg.frame_size))
            .collect()
    };
    match kind {
        // The miss pipeline (3 tables, 1,000 rules): every never-seen source is a miss
        // there (its /32 subtable pins the source). A: its established flows; B: the same
        // frames, each packet stamped with a never-seen source.
        Attack::Flood => {
            let (rules, src) = crate::workload::miss_pipeline(flows, cfg.frame_size);
            let rules = cfg.rules.clone().unwrap_or(rules);
            let established: Vec<Vec<u8>> = (0..src.template_count())
                .map(|i| src.template(i).to_vec())
                .collect();
            Scenario {
                rules,
                attack: established.clone(),
                established,
                attack_new_flows: true,
            }
        }
        Attack::Tse => {
            let rules = cfg.rules.clone().unwrap_or_else(default_acl);
            let est = traffic::established(&rules, flows, cfg.seed);
            Scenario {
                established: frames(&est),
                attack: frames(&traffic::tse(&rules, 100_000, cfg.seed)),
                rules,
                attack_new_flows: false,
            }
        }
    }
}

/// The built-in ACL with `output:N` actions (as `bench classifier` gives ClassBench sets).
pub fn default_acl() -> Vec<RuleSpec> {
    let mut rules = flowpath_flowsyntax::parse_classbench(traffic::DEFAULT_ACL, 0)
        .expect("the built-in ACL parses");
    for (i, r) in rules.iter_mut().enumerate() {
        r.actions = vec![flowpath_packet::Action::Output(2 + (i % 15) as u32)];
    }
    rules
}

fn worker(sc: &Scenario, cfg: &AttackConfig, dp_cfg: DatapathConfig) -> AttackWorker {
    let store = Arc::new(RuleStore::new(cfg.backend));
    store
        .add(sc.rules.iter().cloned())
        .expect("attack rules are valid");
    let a_src = InMemorySource::new(sc.established.clone()).with_seed(cfg.seed);
    let mut b_src = InMemorySource::new(sc.attack.clone()).with_seed(cfg.seed ^ 1);
    if sc.attack_new_flows {
        b_src.set_new_flow_share(1.0);
    }
    let a = PacedPort::new(GeneratedPort::new("established", a_src), 0.0, RING);
    let b = PacedPort::new(GeneratedPort::new("attacker", b_src), 0.0, RING);
    Worker::new(
        Datapath::new(store, dp_cfg),
        vec![
            WorkerPort::new(PORT_ESTABLISHED, 0, a),
            WorkerPort::new(PORT_ATTACK, 0, b),
        ],
        CountingSink::default(),
        "attack bench",
    )
}

/// What one window saw.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    secs: f64,
    /// A's packets the datapath processed and did not drop for the budget.
    a_delivered: u64,
    a_ring_losses: u64,
    a_upcalls: u64,
    b_packets: u64,
    b_upcalls: u64,
    b_budget_drops: u64,
    b_uncached: u64,
    upcall_cycles: u64,
}

fn set_rates(w: &mut AttackWorker, a: f64, b: f64) {
    w.ports_mut()[0].port.set_rate(a);
    w.ports_mut()[1].port.set_rate(b);
}

/// Poll for `ms` milliseconds of TSC time.
fn spin(w: &mut AttackWorker, ms: u64) {
    let until = rdtsc() + (ms as f64 * 1e-3 * tsc_hz()) as u64;
    while rdtsc() < until {
        w.poll();
    }
}

fn window(w: &mut AttackWorker, ms: u64) -> Window {
    w.datapath_mut().reset_stats();
    let ring0 = w.ports()[0].port.overflow;
    let t0 = rdtsc();
    spin(w, ms);
    let secs = (rdtsc() - t0) as f64 / tsc_hz();
    let per = w.datapath().port_miss_stats();
    let of = |n: u32| {
        per.iter()
            .find(|(p, _)| *p == n)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    };
    let (a, b) = (of(PORT_ESTABLISHED), of(PORT_ATTACK));
    Window {
        secs,
        a_delivered: a.packets - a.budget_drops,
        a_ring_losses: w.ports()[0].port.overflow - ring0,
        a_upcalls: a.upcalls,
        b_packets: b.packets,
        b_upcalls: b.upcalls,
        b_budget_drops: b.budget_drops,
        b_uncached: b.uncached,
        upcall_cycles: a.upcall_cycles + b.upcall_cycles,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Run one attack case; `progress` gets (step, steps) as it goes.
pub fn run_attack(
    kind: Attack,
    cfg: &AttackConfig,
    mut progress: impl FnMut(usize, usize),
) -> AttackResult {
    let sc = scenario(kind, cfg);
    let defences: &[Defence] = match kind {
        Attack::Flood => &[Defence::None, Defence::Default],
        Attack::Tse => &[Defence::None, Defence::Ranking, Defence::Default],
    };
    let steps = 1 + defences.len() * cfg.runs;
    let mut step = 0;

    // A alone, unpaced, with the default datapath: the rate the offered load is a share of.
    let mut w = worker(&sc, cfg, cfg.datapath.clone());
    set_rates(&mut w, f64::INFINITY, 0.0);
    spin(&mut w, cfg.window_ms.max(100));
    let sat = window(&mut w, cfg.window_ms);
    let saturated = sat.a_delivered as f64 / sat.secs;
    let offered = saturated * cfg.established_load;
    step += 1;
    progress(step, steps);
    let attack_rate = cfg.attack_pps.unwrap_or(f64::INFINITY);

    let mut rows = Vec::new();
    for &d in defences {
        let dp_cfg = d.config(&cfg.datapath);
        let (mut no, mut with, mut kept) = (Vec::new(), Vec::new(), Vec::new());
        let mut last = (Window::default(), 0, 0, 0, 0);
        let mut b = Vec::new();
        for _ in 0..cfg.runs {
            let mut w = worker(&sc, cfg, dp_cfg.clone());
            set_rates(&mut w, offered, 0.0);
            spin(&mut w, cfg.window_ms.max(150));
            let quiet = window(&mut w, cfg.window_ms);
            set_rates(&mut w, offered, attack_rate);
            spin(&mut w, cfg.window_ms.max(100));
            let loud = window(&mut w, cfg.window_ms);
            let (q, l) = (
                quiet.a_delivered as f64 / quiet.secs,
                loud.a_delivered as f64 / loud.secs,
            );
            no.push(q);
            with.push(l);
            kept.push(l / q.max(1.0));
            b.push(loud.b_packets as f64 / loud.secs);
            let mf = w.datapath().megaflows();
            last = (
                loud,
                mf.subtables(),
                mf.len(),
                mf.max_masks(),
                mf.flow_limit(),
            );
            step += 1;
            progress(step, steps);
        }
        let (loud, subtables, megaflows, max_masks, flow_limit) = last;
        let mut kept_sorted = kept.clone();
        kept_sorted.sort_by(f64::total_cmp);
        let s = loud.secs.max(1e-9);
        rows.push(DefenceRow {
            defence: d,
            established_mpps_no_attack: median(&mut no) / 1e6,
            established_mpps: median(&mut with) / 1e6,
            established_retained: median(&mut kept),
            retained_min: kept_sorted[0],
            retained_max: *kept_sorted.last().unwrap(),
            attack_pps: median(&mut b),
            attack_upcalls_per_sec: loud.b_upcalls as f64 / s,
            attack_budget_drops_per_sec: loud.b_budget_drops as f64 / s,
            attack_uncached_per_sec: loud.b_uncached as f64 / s,
            subtables,
            megaflows,
            max_masks,
            flow_limit,
            established_ring_losses: loud.a_ring_losses,
            established_upcalls_per_sec: loud.a_upcalls as f64 / s,
            slow_path_share: loud.upcall_cycles as f64 / (s * tsc_hz()),
        });
    }
    let def = rows
        .iter()
        .find(|r| r.defence == Defence::Default)
        .expect("every case runs the default defence")
        .clone();
    let none = rows
        .iter()
        .find(|r| r.defence == Defence::None)
        .map_or(f64::NAN, |r| r.established_retained);
    AttackResult {
        case: kind.name().into(),
        established_flows: sc.established.len(),
        established_saturated_mpps: saturated / 1e6,
        established_offered_mpps: offered / 1e6,
        established_retained: def.established_retained,
        established_mpps: def.established_mpps,
        attack_pps: def.attack_pps,
        subtables: def.subtables,
        established_retained_undefended: none,
        defences: rows,
        rules: sc.rules.len(),
        classifier: cfg.backend.name().into(),
        runs: cfg.runs,
        window_ms: cfg.window_ms,
        frame_size: cfg.frame_size,
    }
}

/// The terminal table of attack results.
pub fn table(results: &[AttackResult]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for r in results {
        let _ = writeln!(
            s,
            "{}: port A {} established flows offered at {:.2} Mpps ({:.0} % of the {:.2} Mpps A reaches alone), \
             {} rules ({}), {} runs of {} ms",
            r.case,
            r.established_flows,
            r.established_offered_mpps,
            100.0 * r.established_offered_mpps / r.established_saturated_mpps.max(1e-9),
            r.established_saturated_mpps,
            r.rules,
            r.classifier,
            r.runs,
            r.window_ms
        );
        let _ = writeln!(
            s,
            "  {:<8} {:>9} {:>9} {:>9} {:>15} {:>10} {:>10} {:>10} {:>6} {:>7} {:>6}",
            "defence",
            "A Mpps",
            "(no att.)",
            "retained",
            "(min–max)",
            "attack pps",
            "upcalls/s",
            "dropped/s",
            "slow%",
            "subt",
            "mflows"
        );
        for d in &r.defences {
            let _ = writeln!(
                s,
                "  {:<8} {:>9.2} {:>9.2} {:>8.1}% {:>15} {:>10.0} {:>10.0} {:>10.0} {:>5.0}% {:>7} {:>6}",
                d.defence.name(),
                d.established_mpps,
                d.established_mpps_no_attack,
                100.0 * d.established_retained,
                format!(
                    "({:.1}–{:.1})",
                    100.0 * d.retained_min,
                    100.0 * d.retained_max
                ),
                d.attack_pps,
                d.attack_upcalls_per_sec,
                d.attack_budget_drops_per_sec,
                100.0 * d.slow_path_share,
                d.subtables,
                d.megaflows
            );
        }
    }
    let _ = writeln!(
        s,
        "\nretained: A's delivered Mpps with the attack ÷ without it (median of runs); \
         dropped/s: attack misses over their port's miss budget; slow%: share of the core in upcalls; \
         subt/mflows: megaflow subtables/entries after the attack window."
    );
    s
}

/// What `flowpath gen --attack tse` made, and what it does to a datapath's megaflow cache.
#[derive(Clone, Debug, Serialize)]
pub struct TseReport {
    pub packets: usize,
    pub distinct_tuples: usize,
    pub rules: usize,
    pub frame_size: usize,
    /// Where the frames were written, if anywhere.
    pub out: Option<String>,
    /// Megaflow subtables (masks) and megaflows after the packets go through one datapath
    /// (tree classifier) with no defence, and with the defaults.
    pub masks_no_defence: usize,
    pub megaflows_no_defence: usize,
    pub masks_default: usize,
    /// With the defaults: packets forwarded without caching their megaflow, and how many
    /// of those the new-mask rate refused.
    pub uncached_default: u64,
    pub mask_rate_refusals_default: u64,
}

impl TseReport {
    pub fn text(&self) -> String {
        format!(
            "tse attack: {} packets ({} distinct 5-tuples, {} B frames) against {} rules{}\n\
             through one datapath (tree classifier), all at once:\n  \
             no defence:    {} megaflow masks, {} megaflows\n  \
             with defaults: {} masks; {} packets forwarded uncached ({} refused a new mask by the per-port rate)\n",
            self.packets,
            self.distinct_tuples,
            self.frame_size,
            self.rules,
            self.out
                .as_ref()
                .map(|o| format!(", written to {o}"))
                .unwrap_or_default(),
            self.masks_no_defence,
            self.megaflows_no_defence,
            self.masks_default,
            self.uncached_default,
            self.mask_rate_refusals_default
        )
    }
}

/// Make `n` TSE packets against `rules` (written to `out` as pcap if given) and measure
/// the masks they create with and without the defence.
pub fn tse_report(
    rules: &[RuleSpec],
    n: usize,
    seed: u64,
    frame_size: usize,
    out: Option<&str>,
) -> Result<TseReport, String> {
    let tuples = traffic::tse(rules, n.max(1), seed);
    let distinct = tuples
        .iter()
        .map(|t| (t.src, t.dst, t.sport, t.dport, t.proto))
        .collect::<std::collections::HashSet<_>>()
        .len();
    let frames: Vec<Vec<u8>> = tuples
        .iter()
        .map(|t| traffic::frame(t, frame_size))
        .collect();
    if let Some(path) = out {
        let mut src = InMemorySource::new(frames.clone());
        flowpath_gen::write_pcap_file(path, &mut src, frames.len() as u64)
            .map_err(|e| format!("{path}: {e}"))?;
    }
    let run = |d: Defence| {
        let store = Arc::new(RuleStore::new(Backend::Tree));
        store.add(rules.iter().cloned()).expect("valid rules");
        let mut dp = Datapath::new(store, d.config(&DatapathConfig::default()));
        let mut sink = CountingSink::default();
        // Every frame once, in order: the source's first slots hold the templates in turn.
        let mut src = InMemorySource::new(frames.clone());
        let mut left = frames.len();
        while left > 0 {
            let mut pkts = src.lend(left.min(flowpath_base::BATCH));
            left -= pkts.len();
            dp.process(PORT_ATTACK, &mut pkts, &mut sink);
        }
        let per = dp.port_miss_stats();
        let p = per
            .iter()
            .find(|(n, _)| *n == PORT_ATTACK)
            .map(|(_, s)| *s)
            .unwrap_or_default();
        (dp.megaflows().subtables(), dp.megaflows().len(), p)
    };
    let (masks_none, mf_none, _) = run(Defence::None);
    let (masks_def, _, p) = run(Defence::Default);
    Ok(TseReport {
        packets: frames.len(),
        distinct_tuples: distinct,
        rules: rules.len(),
        frame_size,
        out: out.map(String::from),
        masks_no_defence: masks_none,
        megaflows_no_defence: mf_none,
        masks_default: masks_def,
        uncached_default: p.uncached,
        mask_rate_refusals_default: p.mask_rate_refusals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rows_differ_in_their_defences_only() {
        let base = DatapathConfig::default();
        let none = Defence::None.config(&base);
        let ranking = Defence::Ranking.config(&base);
        let default = Defence::Default.config(&base);
        // The tiers' reviews run at the same interval in every row.
        for c in [&none, &ranking, &default] {
            assert_eq!(c.rerank_every, base.rerank_every);
            assert_eq!(c.smc_entries, base.smc_entries);
            assert_eq!(c.megaflow_max, base.megaflow_max);
        }
        assert_eq!(
            (
                none.rank_subtables,
                ranking.rank_subtables,
                default.rank_subtables
            ),
            (false, true, true)
        );
        for c in [&none, &ranking] {
            assert_eq!(c.miss, MissLimits::off());
            assert_eq!(c.max_masks, u16::MAX as usize);
        }
        assert_eq!(default.miss, base.miss);
        assert_eq!(default.max_masks, base.max_masks);
    }
}
