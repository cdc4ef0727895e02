//! Timing a `replace` of a whole flow table through the path a control request takes:
//! parse the flow text, one atomic apply to the rule store, save the state file.

use flowpath_base::Summary;
use flowpath_flowsyntax::{parse_flows_file, FlowCommand};
use flowpath_pipeline::{Backend, Change, RuleSpec, RuleStore};
use flowpath_switch::StateFile;
use std::time::{Duration, Instant};

/// `n` flows like a routing table: /24 routes from 10.0.0.0 up, all to `port`.
pub fn route_flows(n: usize, port: u32) -> String {
    let mut s = String::with_capacity(n * 72);
    for i in 0..n {
        s.push_str(&format!(
            "table=0,priority=100,ip,nw_dst={}.{}.{}.0/24 actions=output:{port}\n",
            10 + i / 65_536,
            (i / 256) % 256,
            i % 256
        ));
    }
    s
}

/// How long the steps of a `replace` take (see [`time_replace`]).
#[derive(Clone, Debug, Default)]
pub struct ReplaceTiming {
    pub flows: usize,
    pub parse: Duration,
    pub apply: Duration,
    pub save: Duration,
    pub total: Duration,
}

/// Time `replace` of `n` flows (/24 routes, like a routing table) into a switch that
/// holds `n` different ones, through the same path a control request takes: parse,
/// one atomic apply, save the state file in `dir`. Runs `runs` times; returns each.
pub fn time_replace(n: usize, dir: &std::path::Path, runs: usize) -> Vec<ReplaceTiming> {
    let (a, b) = (route_flows(n, 1), route_flows(n, 2));
    let state = StateFile::new(dir.join("flows.state"));
    let store = RuleStore::new(Backend::TupleSpace);
    let mut out = Vec::new();
    for run in 0..runs + 1 {
        let t = if run % 2 == 0 { &a } else { &b };
        let t0 = Instant::now();
        let flows = parse_flows_file(t, FlowCommand::Add).expect("generated flows parse");
        let t1 = Instant::now();
        store
            .apply(vec![Change::Replace(
                flows.into_iter().map(|f| f.spec).collect(),
            )])
            .expect("generated flows are valid");
        let t2 = Instant::now();
        let snap = store.snapshot();
        let specs: Vec<&RuleSpec> = snap.rules().map(|r| &*r.spec).collect();
        state.save(&specs).expect("save the state file");
        let t3 = Instant::now();
        // The first run fills an empty switch; the timed ones replace a full set.
        if run > 0 {
            out.push(ReplaceTiming {
                flows: n,
                parse: t1 - t0,
                apply: t2 - t1,
                save: t3 - t2,
                total: t3 - t0,
            });
        }
    }
    out
}

/// `flowpath bench --replace N`: [`time_replace`] `runs` times with the state file in a
/// temporary directory (removed after), as [`table`] text.
pub fn run(n: usize, runs: usize) -> String {
    let dir = std::env::temp_dir().join(format!("flowpath-bench-replace-{}", std::process::id()));
    let t = time_replace(n, &dir, runs);
    let _ = std::fs::remove_dir_all(&dir);
    table(&t)
}

/// The `--replace` timing as a table: median and min–max of each step.
pub fn table(runs: &[ReplaceTiming]) -> String {
    let stat = |f: &dyn Fn(&ReplaceTiming) -> Duration| {
        let v: Vec<f64> = runs.iter().map(|r| f(r).as_secs_f64() * 1e3).collect();
        let s = Summary::of(&v).expect("at least one run");
        (s.median, s.min, s.max)
    };
    let n = runs.first().map_or(0, |r| r.flows);
    let mut out = format!(
        "replace of {n} flows over {n} others ({} runs; ms, median [min-max]):\n",
        runs.len()
    );
    for (name, f) in [
        (
            "parse",
            &(|r: &ReplaceTiming| r.parse) as &dyn Fn(&_) -> Duration,
        ),
        ("atomic apply", &|r: &ReplaceTiming| r.apply),
        ("state save (fsync)", &|r: &ReplaceTiming| r.save),
        ("total", &|r: &ReplaceTiming| r.total),
    ] {
        let (m, lo, hi) = stat(f);
        out.push_str(&format!("  {name:<20} {m:>8.1}  [{lo:.1}-{hi:.1}]\n"));
    }
    out
}
