//! `flowpath bench classifier`: each slow-path classifier backend on one rule set and one
//! lookup trace — build time, memory, lookups/s, a full miss, megaflows — and rte_acl's row.
//!
//! Per backend it measures: the table build; classification alone over the whole trace,
//! key by key (median of runs, cycles per lookup from the TSC); a check against the linear
//! reference on a sampled subset; the trace run through the real megaflow cache (every
//! miss classified by `Pipeline::translate` and installed), giving megaflow entries, masks
//! and the cycles of a full miss; and one-rule insert and delete times on the full set.

pub mod command;
pub mod rte_acl;
pub mod trace;

use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_base::rng::SplitMix64;
use flowpath_base::{median, Summary};
use flowpath_datapath::megaflow::MegaflowCache;
use flowpath_packet::{Action, FlowKey};
use flowpath_pipeline::{Backend, Change, Pipeline, RuleSpec, RuleStore, Table};
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// What to measure.
#[derive(Clone, Debug)]
pub struct ClassifierConfig {
    pub backends: Vec<Backend>,
    /// Timed passes over the trace per backend (the median is reported).
    pub runs: usize,
    /// Keys checked against the linear reference (spread over the trace).
    pub check: usize,
    /// Run the trace through the megaflow cache (counts and full-miss cycles).
    pub megaflows: bool,
    /// Time one-rule inserts and deletes on the full set.
    pub updates: bool,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        ClassifierConfig {
            backends: Backend::CLASSIFIERS.to_vec(),
            runs: 5,
            check: 20_000,
            megaflows: true,
            updates: true,
        }
    }
}

/// One backend's row.
#[derive(Clone, Debug, Serialize)]
pub struct ClassifierRow {
    pub backend: String,
    pub rules: usize,
    pub lookups: usize,
    pub mlookups_per_s: f64,
    pub mlookups_per_s_min: f64,
    pub mlookups_per_s_max: f64,
    pub cycles_per_lookup: f64,
    pub build_ms: f64,
    pub memory_bytes: usize,
    /// Tuple-space subtables, the tree's trees, or the rule count.
    pub subtables: usize,
    /// Index entries (hash entries, leaf references, rules).
    pub entries: usize,
    pub megaflow_masks: Option<usize>,
    pub megaflows: Option<usize>,
    /// Cycles of one full miss: `translate` (all tables) plus the megaflow install.
    pub miss_cycles: Option<f64>,
    /// Median microseconds to add one rule to the full set, and to delete it again.
    pub insert_us: Option<f64>,
    pub delete_us: Option<f64>,
    pub mismatches: usize,
    pub checked: usize,
}

/// Load a rule file: ClassBench filters (first rule line starts with `@`) or a flows file.
/// ClassBench rules get `output:N` actions (N from 2 to 16 by line) so that decisions
/// differ the way an ACL's permit/deny/redirect do.
pub fn load_rules(path: &Path) -> Result<Vec<RuleSpec>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    if flowpath_flowsyntax::is_classbench(&text) {
        let mut rules = flowpath_flowsyntax::parse_classbench(&text, 0).map_err(|e| at(&e))?;
        for (i, r) in rules.iter_mut().enumerate() {
            r.actions = vec![Action::Output(2 + (i % 15) as u32)];
        }
        Ok(rules)
    } else {
        let flows =
            flowpath_flowsyntax::parse_flows_file(&text, flowpath_flowsyntax::FlowCommand::Add)
                .map_err(|e| at(&e))?;
        Ok(flows.into_iter().map(|f| f.spec).collect())
    }
}

fn store_with(backend: Backend, rules: &[RuleSpec]) -> Result<RuleStore, String> {
    let store = RuleStore::new(backend);
    store
        .add(rules.iter().cloned())
        .map_err(|e| format!("rule refused: {e}"))?;
    Ok(store)
}

/// Measure every configured backend on `rules` and `keys`.
pub fn run(
    rules: &[RuleSpec],
    keys: &[FlowKey],
    cfg: &ClassifierConfig,
    mut progress: impl FnMut(&str),
) -> Result<Vec<ClassifierRow>, String> {
    // The reference: one linear table over the same rules, for the sampled check.
    let reference = store_with(Backend::Linear, rules)?.snapshot();
    let mut rows = Vec::new();
    for &backend in &cfg.backends {
        progress(&format!("{backend}: building"));
        let t0 = Instant::now();
        let store = store_with(backend, rules)?;
        let build_ms = t0.elapsed().as_secs_f64() * 1e3;
        let snap = store.snapshot();
        let Some(table) = snap.table(0) else {
            return Err("the rule set has no rule in table 0".into());
        };
        progress(&format!(
            "{backend}: {} lookups x {} runs",
            keys.len(),
            cfg.runs
        ));
        let cycles: Vec<f64> = (0..cfg.runs.max(1))
            .map(|_| time_lookups(table, keys))
            .collect();
        let hz = tsc_hz();
        let mlps = |c: f64| hz / c / 1e6;
        let spread = Summary::of(&cycles).expect("at least one run");
        let (mismatches, checked) = check(table, reference.table(0), keys, cfg.check);
        let mut row = ClassifierRow {
            backend: backend.name().into(),
            rules: rules.len(),
            lookups: keys.len(),
            mlookups_per_s: mlps(spread.median),
            mlookups_per_s_min: mlps(spread.max),
            mlookups_per_s_max: mlps(spread.min),
            cycles_per_lookup: spread.median,
            build_ms,
            memory_bytes: table.index_bytes(),
            subtables: table.subtables(),
            entries: table.entries(),
            megaflow_masks: None,
            megaflows: None,
            miss_cycles: None,
            insert_us: None,
            delete_us: None,
            mismatches,
            checked,
        };
        if cfg.megaflows && backend != Backend::Linear {
            progress(&format!("{backend}: megaflows over the trace"));
            let (masks, entries, miss) = megaflows(&snap, keys);
            row.megaflow_masks = Some(masks);
            row.megaflows = Some(entries);
            row.miss_cycles = Some(miss);
        }
        if cfg.updates {
            progress(&format!("{backend}: one-rule updates"));
            let (ins, del) = time_updates(&store, rules);
            row.insert_us = Some(ins);
            row.delete_us = Some(del);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// TSC cycles per lookup of one pass over `keys`, classified one by one. (A batched
/// tree walk with prefetches was measured slower: the trees fit in L2, branches cost.)
#[inline(never)]
fn time_lookups(table: &Table, keys: &[FlowKey]) -> f64 {
    let mut acc = 0u32;
    let t0 = rdtsc();
    for k in keys {
        acc = acc.wrapping_add(table.classify(k).unwrap_or(u32::MAX));
    }
    let t1 = rdtsc();
    std::hint::black_box(acc);
    (t1 - t0) as f64 / keys.len().max(1) as f64
}

/// Mismatches against the reference over `n` keys spread evenly over the trace.
fn check(table: &Table, reference: Option<&Table>, keys: &[FlowKey], n: usize) -> (usize, usize) {
    let Some(reference) = reference else {
        return (0, 0);
    };
    let step = (keys.len() / n.max(1)).max(1);
    let mut bad = 0;
    let mut checked = 0;
    for k in keys.iter().step_by(step).take(n) {
        let id = |t: &Table, i: Option<u32>| i.map(|i| t.rules()[i as usize].id);
        if id(table, table.classify(k)) != id(reference, reference.classify(k)) {
            bad += 1;
        }
        checked += 1;
    }
    (bad, checked)
}

/// Run `keys` through a megaflow cache big enough to never evict: (masks, entries, median
/// cycles of a full miss over 1,024-miss windows).
fn megaflows(p: &Pipeline, keys: &[FlowKey]) -> (usize, usize, f64) {
    let mut cache = MegaflowCache::new(keys.len() + 1, 0x5eed);
    let mut windows = Vec::new();
    let (mut spent, mut misses) = (0u64, 0u64);
    for (i, k) in keys.iter().enumerate() {
        if cache.lookup(k).is_some() {
            continue;
        }
        let t0 = rdtsc();
        let tr = p.translate(k);
        cache.install(k, tr, p);
        spent += rdtsc() - t0;
        misses += 1;
        if misses == 1024 {
            windows.push(spent as f64 / misses as f64);
            (spent, misses) = (0, 0);
        }
        // Busy subtables first, as the datapath does.
        if i % 4096 == 4095 {
            cache.rerank();
        }
    }
    if misses > 0 && windows.is_empty() {
        windows.push(spent as f64 / misses as f64);
    }
    let miss = median(&windows).unwrap_or(0.0);
    (cache.subtables(), cache.len(), miss)
}

/// Median microseconds to add one rule (a copy of a random rule at a new priority) to the
/// full set, and to delete it again.
fn time_updates(store: &RuleStore, rules: &[RuleSpec]) -> (f64, f64) {
    let mut rng = SplitMix64::new(42);
    let (mut ins, mut del) = (Vec::new(), Vec::new());
    for _ in 0..21 {
        let mut spec = rules[(rng.next() % rules.len().max(1) as u64) as usize].clone();
        spec.priority = spec.priority.wrapping_add(1).max(1);
        let t0 = Instant::now();
        let Ok(done) = store.apply(vec![Change::Add(spec)]) else {
            break;
        };
        ins.push(t0.elapsed().as_secs_f64() * 1e6);
        let t0 = Instant::now();
        if store.apply(vec![Change::Delete(done.added[0])]).is_err() {
            break;
        }
        del.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let mid = |v: &[f64]| median(v).unwrap_or(f64::NAN);
    (mid(&ins), mid(&del))
}
