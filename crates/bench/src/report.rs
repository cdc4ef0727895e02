//! Presenting results: a terminal table and JSON for scripts.

use crate::machine::Machine;
use crate::runner::CaseResult;
use serde::Serialize;
use std::fmt::Write;

/// One JSON object per case: the case's figures plus where they were measured.
#[derive(Serialize)]
struct JsonRow<'a> {
    #[serde(flatten)]
    result: &'a CaseResult,
    machine: &'a Machine,
}

#[derive(Serialize)]
struct JsonAttackRow<'a> {
    #[serde(flatten)]
    result: &'a crate::attack::AttackResult,
    machine: &'a Machine,
}

/// The `--json` output: an array with one object per case (cost cases, then attacks).
pub fn json(
    results: &[CaseResult],
    attacks: &[crate::attack::AttackResult],
    machine: &Machine,
) -> String {
    let mut rows: Vec<serde_json::Value> = results
        .iter()
        .map(|r| serde_json::to_value(JsonRow { result: r, machine }))
        .collect::<Result<_, _>>()
        .expect("results serialise");
    for a in attacks {
        rows.push(
            serde_json::to_value(JsonAttackRow { result: a, machine }).expect("results serialise"),
        );
    }
    serde_json::to_string_pretty(&rows).expect("results serialise")
}

/// The first lines of the table: what ran where.
pub fn header(machine: &Machine, frame_size: usize) -> String {
    format!(
        "flowpath bench — one core, {frame_size} B frames, in-memory traffic, real datapath\n{}",
        machine.lines(&format!("TSC {:.3} GHz", machine.tsc_ghz))
    )
}

/// The human-readable table.
pub fn table(results: &[CaseResult], machine: &Machine) -> String {
    let mut s = header(machine, results.first().map_or(64, |r| r.frame_size));
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<17} {:>8} {:>10} {:>19} {:>5}  {:>6} {:>6} {:>6} {:>6}  {:>5} {:>5} {:>5} {:>6} {:>6}  {:>5} {:>6}",
        "case", "Mpps", "cyc/pkt", "(min–max)", "runs", "emc%", "smc%", "mf%", "miss%",
        "parse", "emc", "mf", "upcall", "action", "subt", "mflows"
    );
    for r in results {
        let _ = writeln!(
            s,
            "{:<17} {:>8.2} {:>10.1} {:>19} {:>5}  {:>6.1} {:>6.1} {:>6.1} {:>6.1}  {:>5.0} {:>5.0} {:>5.0} {:>6.0} {:>6.0}  {:>5} {:>6}",
            r.case,
            r.mpps,
            r.cycles_per_packet,
            format!("({:.1}–{:.1})", r.cycles_min, r.cycles_max),
            r.runs,
            r.emc_hit_share * 100.0,
            r.smc_hit_share * 100.0,
            (r.megaflow_hit_share - r.smc_hit_share) * 100.0,
            r.upcall_share * 100.0,
            r.stage_cycles.parse,
            r.stage_cycles.emc,
            r.stage_cycles.megaflow,
            r.stage_cycles.upcall,
            r.stage_cycles.actions,
            r.megaflow_subtables,
            r.megaflows,
        );
    }
    let _ = writeln!(s);
    let apart = if results.iter().any(|r| r.processes > 1) {
        ", each run a fresh process"
    } else {
        ", all in one process"
    };
    let _ = writeln!(
        s,
        "cyc/pkt: TSC cycles per packet for the whole loop (median of runs{apart}); the stage columns are \
         the datapath's own per-stage TSC stamps per packet (the signature-match cache's within mf); \
         emc%/smc%/mf%/miss%: share of packets each tier answered (mf%: by a subtable search); subt/mflows: megaflow subtables/entries at the end."
    );
    s
}

/// The `--rule-change` paragraph.
pub fn rule_change(r: &crate::runner::RuleChangeResult) -> String {
    let hz = flowpath_base::clock::tsc_hz();
    let n = r.megaflows.max(1) as f64;
    format!(
        "rule change with {} megaflows cached (median of {} runs):\n  \
         revalidate: {:.1} ms, {:.0} cycles per megaflow, {} kept\n  \
         flush:      {:.2} ms; then every still-active flow misses once, at ~{:.0} cycles each\n  \
         break-even: flushing is cheaper while fewer than {:.0} % of cached megaflows are still active\n",
        r.megaflows,
        r.runs,
        r.revalidate_cycles / hz * 1e3,
        r.revalidate_cycles / n,
        r.revalidate_kept,
        r.flush_cycles / hz * 1e3,
        r.miss_cycles,
        ((r.revalidate_cycles - r.flush_cycles) / n / r.miss_cycles * 100.0).min(100.0),
    )
}

/// The text block of `flowpath bench --first-flood`.
pub fn first_flood(r: &crate::runner::FirstFloodResult) -> String {
    let hz = flowpath_base::clock::tsc_hz();
    let ms = |c: f64| c / hz * 1e3;
    format!(
        "first flood: a new datapath meets {} new flows (median of {} runs):\n  \
         {:.0} cycles per packet over the flood\n  \
         batch cycles: p50 {:.0}, p99 {:.0}, p99.9 {:.0}, worst {:.0} ({:.2} ms)\n  \
         worst batch once the megaflow cache was full: {}\n  \
         worst batch of all runs: {} cycles ({:.2} ms), after {} new flows\n  \
         the five longest batches of all runs: {}\n  \
         making the datapath: {:.1} ms, {} page faults; during the flood: {} page faults\n",
        r.packets,
        r.runs,
        r.cycles_per_packet,
        r.batch_p50,
        r.batch_p99,
        r.batch_p999,
        r.batch_max,
        ms(r.batch_max),
        r.batch_max_full.map_or_else(
            || "none (the flood did not fill it)".to_string(),
            |c| format!("{c:.0} cycles ({:.2} ms)", ms(c))
        ),
        r.worst_batch,
        ms(r.worst_batch as f64),
        r.worst_batch_at,
        r.longest_batches
            .iter()
            .map(|&(c, at, run)| format!("{:.2} M after {at} (run {})", c as f64 / 1e6, run + 1))
            .collect::<Vec<_>>()
            .join(", "),
        ms(r.make_cycles),
        r.faults_at_start,
        r.faults_in_flood,
    )
}

/// `--markdown`: the cost cases' table (each case's cycles also over the floor's, the peer
/// measured in the same run) and the attacks' table, each under a caption naming the command,
/// machine and date.
pub fn markdown(
    results: &[CaseResult],
    attacks: &[crate::attack::AttackResult],
    machine: &Machine,
) -> String {
    let mut s = String::new();
    let (ct, cost): (Vec<CaseResult>, Vec<CaseResult>) =
        results.iter().cloned().partition(|r| r.ct.is_some());
    if !cost.is_empty() {
        s.push_str(&cost_markdown(&cost, machine));
    }
    if !ct.is_empty() {
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(&crate::ct::markdown(results, machine));
    }
    if !attacks.is_empty() {
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(&attack_markdown(attacks, machine));
    }
    s
}

/// One cost case's Markdown row; `floor` gives the cycles of a floor case in the same run.
fn cost_row(r: &CaseResult, floor: impl Fn(&str) -> Option<f64>) -> Vec<String> {
    let cyc = |x: f64| {
        if x >= 1000.0 {
            flowpath_report::thousands(x)
        } else {
            format!("{x:.1}")
        }
    };
    let st = &r.stage_cycles;
    let (stages, tiers) = if r.case.starts_with("floor") {
        ("—".to_string(), "—".to_string())
    } else {
        (
            format!(
                "{:.0} / {:.0} / {:.0} / {:.0} / {:.0}",
                st.parse, st.emc, st.megaflow, st.upcall, st.actions
            ),
            format!(
                "{:.0} / {:.0} / {:.0} / {:.0}",
                100.0 * r.emc_hit_share,
                100.0 * r.smc_hit_share,
                100.0 * (r.megaflow_hit_share - r.smc_hit_share),
                100.0 * r.upcall_share
            ),
        )
    };
    // Each case over the floor with its traffic: the many-flows cases over the floor that
    // reads its frames from the same million-slot arena.
    let own_floor = if r.case.starts_with("floor") {
        None
    } else if r.case.starts_with("many_flows") {
        floor("floor_many_flows")
    } else {
        floor("floor")
    };
    let over_floor = match own_floor {
        Some(f) if f > 0.0 => format!("{:.1}x", r.cycles_per_packet / f),
        _ => String::new(),
    };
    vec![
        format!("`{}`", r.case),
        format!("{:.2}", r.mpps),
        format!(
            "{} [{}–{}]",
            cyc(r.cycles_per_packet),
            cyc(r.cycles_min),
            cyc(r.cycles_max)
        ),
        over_floor,
        stages,
        tiers,
    ]
}

fn cost_markdown(results: &[CaseResult], machine: &Machine) -> String {
    let floor = |case: &str| {
        results
            .iter()
            .find(|r| r.case == case)
            .map(|r| r.cycles_per_packet)
    };
    let rows: Vec<Vec<String>> = results.iter().map(|r| cost_row(r, floor)).collect();
    let runs = results.iter().map(|r| r.runs).max().unwrap_or(0);
    let apart = if results.iter().any(|r| r.processes > 1) {
        "each run a fresh process"
    } else {
        "all runs in one process"
    };
    let what = format!(
        "TSC cycles per packet on one core, {} B frames, median of {runs} runs [min–max], {apart}; \
         \"x floor\" is a case's cycles over its floor's (the loop and the same traffic alone, \
         `floor_many_flows` for the many-flows cases) in the same run; the stage columns are the datapath's own TSC stamps per packet, the tier columns the \
         share of packets each tier answered (%).",
        results.first().map_or(64, |r| r.frame_size)
    );
    flowpath_report::markdown::captioned(
        &what,
        machine.tsc_ghz,
        &[
            "case",
            "Mpps",
            "cycles/packet [min–max]",
            "x floor",
            "parse+hash / EMC / megaflow / slow path / actions",
            "EMC / SMC / megaflow / miss %",
        ],
        &rows,
    )
}

fn attack_markdown(attacks: &[crate::attack::AttackResult], machine: &Machine) -> String {
    use flowpath_report::thousands;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for a in attacks {
        for d in &a.defences {
            rows.push(vec![
                format!(
                    "`{}` ({} flows, {} rules, {})",
                    a.case, a.established_flows, a.rules, a.classifier
                ),
                d.defence.name().to_string(),
                format!(
                    "{:.1} % [{:.1}–{:.1}]",
                    100.0 * d.established_retained,
                    100.0 * d.retained_min,
                    100.0 * d.retained_max
                ),
                format!(
                    "{:.2} ({:.2})",
                    d.established_mpps, d.established_mpps_no_attack
                ),
                thousands(d.attack_pps),
                thousands(d.attack_upcalls_per_sec),
                thousands(d.attack_budget_drops_per_sec),
                d.subtables.to_string(),
            ]);
        }
    }
    let runs = attacks.iter().map(|a| a.runs).max().unwrap_or(0);
    let load = attacks.first().map_or(0.0, |a| {
        100.0 * a.established_offered_mpps / a.established_saturated_mpps.max(1e-9)
    });
    let what = format!(
        "Port A offers established flows at {load:.0} % of the rate it reaches alone while port B \
         attacks as fast as the worker takes packets; \"kept\" is A's delivered rate with the attack over without \
         it, median of {runs} runs [min–max]; over budget: attack misses dropped by their port's miss \
         budget; masks: megaflow subtables after the attack."
    );
    flowpath_report::markdown::captioned(
        &what,
        machine.tsc_ghz,
        &[
            "attack",
            "defence",
            "port A kept",
            "A Mpps (no attack)",
            "attack pps taken",
            "attack upcalls/s",
            "over budget/s",
            "masks",
        ],
        &rows,
    )
}
