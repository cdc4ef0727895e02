//! `flowpath bench` as the command runs it: which cost cases and attacks, their runs in
//! this process or in child processes (or against another build), the extra timings asked
//! for, and the table or JSON on stdout. The binary parses the flags into [`BenchOptions`].

pub mod against;
pub mod processes;

use crate::attack::{self, run_attack, Attack, AttackConfig, AttackResult};
use crate::runner::{measure_first_flood, measure_rule_change, run_case, BenchConfig, Case};
use crate::{classifier, report, CaseResult, Machine};
use flowpath_base::progress;
use flowpath_datapath::DatapathConfig;
use flowpath_pipeline::{Backend, RuleSpec};
use std::path::PathBuf;

/// `flowpath bench`'s options (its flags, parsed).
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Case and attack names; empty: the default cases and both attacks.
    pub cases: Vec<String>,
    pub runs: usize,
    pub packets: u64,
    pub flows: usize,
    pub miss_rate: f64,
    pub frame_size: usize,
    /// None: tuple-space search, or the tree for the tse attack.
    pub classifier: Option<Backend>,
    pub emc_insert_inv_prob: u32,
    pub smc_entries: usize,
    pub attack_rate: Option<f64>,
    pub established_load: f64,
    pub rules: Option<PathBuf>,
    pub json: bool,
    /// The tables as Markdown with a caption (command, machine, date).
    pub markdown: bool,
    /// The VXLAN cases over an IPv6 underlay.
    pub ipv6_underlay: bool,
    pub rule_change: bool,
    pub first_flood: Option<u64>,
    /// Flows of the `--replace` timing (the caller's, see [`run`]).
    pub replace: Option<usize>,
    pub against: Option<PathBuf>,
    pub in_process: bool,
    pub noise: bool,
}

/// Why `flowpath bench` stopped: a bad option (`usage`, exit status 2) or a failed run.
#[derive(Clone, Debug)]
pub struct BenchError {
    pub usage: bool,
    pub message: String,
}

impl BenchError {
    fn usage(message: String) -> BenchError {
        BenchError {
            usage: true,
            message,
        }
    }

    fn failed(message: String) -> BenchError {
        BenchError {
            usage: false,
            message,
        }
    }
}

/// Run `flowpath bench` as `o` asks and print its table (or JSON) on stdout, progress on
/// stderr. `replace(flows, runs)` times a whole-table replace and returns its table (the
/// switch's path, so the caller's to run); it is called when `o.replace` asks for it.
pub fn run(
    o: &BenchOptions,
    replace: impl FnOnce(usize, usize) -> String,
) -> Result<(), BenchError> {
    let (cases, attacks) = selection(o)?;
    let cfg = config(o)?;
    let rules = match &o.rules {
        Some(p) => Some(
            classifier::load_rules(p)
                .map_err(|e| BenchError::usage(format!("flowpath bench: --rules: {e}")))?,
        ),
        None => None,
    };
    let machine = Machine::probe();
    if let Some(other) = &o.against {
        if !o.cases.is_empty() && !attacks.is_empty() {
            return Err(BenchError::usage(
                "flowpath bench: --against compares the cost cases; leave out flood and tse".into(),
            ));
        }
        return compare(o, &cases, other, &machine);
    }
    let results = if o.runs > 1 && !o.in_process && !cases.is_empty() {
        processes::run(&cases, o.runs)
            .map_err(|e| BenchError::failed(format!("flowpath bench: {e}")))?
    } else {
        in_process(&cases, &cfg)
    };
    let attack_results = run_attacks(o, &attacks, rules, cases.len());
    let extras = extras(o, &cfg, replace);
    progress::clear();
    if o.json {
        println!("{}", report::json(&results, &attack_results, &machine));
    } else if o.markdown {
        print!("{}", report::markdown(&results, &attack_results, &machine));
    } else {
        print!("{}", text(o, &results, &attack_results, &machine, &extras));
    }
    Ok(())
}

/// The cost cases and the attacks `o.cases` names (all of them by default), the VXLAN
/// cases over the underlay asked for.
fn selection(o: &BenchOptions) -> Result<(Vec<Case>, Vec<Attack>), BenchError> {
    let attacks: Vec<Attack> = if o.cases.is_empty() {
        vec![Attack::Flood, Attack::Tse]
    } else {
        o.cases.iter().filter_map(|c| Attack::parse(c)).collect()
    };
    let cases: Result<Vec<Case>, String> = if o.cases.is_empty() {
        Ok(Case::defaults())
    } else {
        o.cases
            .iter()
            .filter(|c| Attack::parse(c).is_none())
            .map(|c| {
                Case::parse(c)
                    .map_err(|e| e.replace("many_flows_zipf)", "many_flows_zipf, flood, tse)"))
            })
            .collect()
    };
    let cases = match cases {
        Ok(c) if o.ipv6_underlay => c.into_iter().map(Case::with_ipv6_underlay).collect(),
        Ok(c) => c,
        Err(e) => return Err(BenchError::usage(format!("flowpath bench: --case: {e}"))),
    };
    Ok((cases, attacks))
}

/// The cost cases' configuration, its sizes checked as the datapath checks them.
fn config(o: &BenchOptions) -> Result<BenchConfig, BenchError> {
    if o.runs == 0 || o.packets == 0 {
        return Err(BenchError::usage(
            "flowpath bench: --runs and --packets must be at least 1".into(),
        ));
    }
    // The one datapath size a flag sets, bounded as the datapath bounds it.
    let sizes = DatapathConfig {
        smc_entries: o.smc_entries,
        ..Default::default()
    };
    if let Err(e) = sizes.check() {
        return Err(BenchError::usage(format!(
            "flowpath bench: --smc-entries: {}",
            e.trim_start_matches("smc_entries: ")
        )));
    }
    Ok(BenchConfig {
        runs: o.runs,
        packets: o.packets,
        flows: o.flows.max(1),
        miss_rate: o.miss_rate,
        frame_size: o.frame_size,
        backend: o.classifier.unwrap_or(Backend::TupleSpace),
        emc_insert_inv_prob: o.emc_insert_inv_prob,
        smc_entries: o.smc_entries,
        ..BenchConfig::default()
    })
}

/// `--against`: the rounds against the other build, printed as its table or JSON.
fn compare(
    o: &BenchOptions,
    cases: &[Case],
    other: &std::path::Path,
    machine: &Machine,
) -> Result<(), BenchError> {
    let paired = against::run(cases, other, o.runs, o.noise)
        .map_err(|e| BenchError::failed(format!("flowpath bench: --against: {e}")))?;
    if o.json {
        println!("{}", against::json(&paired, other));
    } else {
        let header = report::header(machine, o.frame_size);
        print!("{}", against::table(&paired, other, &header));
    }
    Ok(())
}

/// Every case's runs in this process, one case after another (`--in-process`, `--runs 1`).
fn in_process(cases: &[Case], cfg: &BenchConfig) -> Vec<CaseResult> {
    cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            let name = case.name();
            let progress = |run, runs| {
                progress::line(&format!(
                    "[{}/{}] {:<17} run {run}/{runs}",
                    i + 1,
                    cases.len(),
                    name
                ));
            };
            match case {
                Case::Ct(c) => crate::ct::run(*c, cfg, progress),
                _ => run_case(*case, cfg, progress),
            }
        })
        .collect()
}

/// The attacks, numbered after the `before` cost cases in the progress line.
fn run_attacks(
    o: &BenchOptions,
    attacks: &[Attack],
    rules: Option<Vec<RuleSpec>>,
    before: usize,
) -> Vec<AttackResult> {
    let total = before + attacks.len();
    let acfg = AttackConfig {
        runs: o.runs,
        established_load: o.established_load.max(0.01),
        attack_pps: o.attack_rate,
        rules,
        frame_size: o.frame_size,
        ..AttackConfig::default()
    };
    let mut results = Vec::new();
    for (j, a) in attacks.iter().enumerate() {
        let backend = o.classifier.unwrap_or(match a {
            Attack::Flood => Backend::TupleSpace,
            Attack::Tse => Backend::Tree,
        });
        let acfg = AttackConfig {
            backend,
            ..acfg.clone()
        };
        let r = run_attack(*a, &acfg, |step, steps| {
            progress::line(&format!(
                "[{}/{}] {:<17} step {step}/{steps}",
                before + j + 1,
                total,
                a.name()
            ));
        });
        results.push(r);
    }
    results
}

/// The text-only timings: each one's paragraph, in the order they are printed.
fn extras(
    o: &BenchOptions,
    cfg: &BenchConfig,
    replace: impl FnOnce(usize, usize) -> String,
) -> Vec<String> {
    let mut out = Vec::new();
    if o.json {
        return out;
    }
    if o.rule_change {
        progress::line("measuring a rule change (revalidate vs flush)...");
        out.push(report::rule_change(&measure_rule_change(cfg)));
    }
    if let Some(flows) = o.first_flood {
        progress::line("timing a fresh datapath's first flood...");
        out.push(report::first_flood(&measure_first_flood(cfg, flows)));
    }
    if let Some(n) = o.replace.filter(|&n| n > 0) {
        progress::line(&format!("timing replace of {n} flows..."));
        out.push(replace(n, o.runs.max(1)));
    }
    out
}

/// The terminal output: the cost cases' table (or just the header), the attacks' table,
/// then each extra timing, a blank line before each part.
fn text(
    o: &BenchOptions,
    results: &[CaseResult],
    attacks: &[AttackResult],
    machine: &Machine,
    extras: &[String],
) -> String {
    let mut s = if results.is_empty() {
        report::header(machine, o.frame_size)
    } else {
        report::table(results, machine)
    };
    let ct = crate::ct::text(results);
    if !ct.is_empty() {
        s.push('\n');
        s.push_str(&ct);
    }
    if !attacks.is_empty() {
        s.push('\n');
        s.push_str(&attack::table(attacks));
    }
    for e in extras {
        s.push('\n');
        s.push_str(e);
    }
    s
}
