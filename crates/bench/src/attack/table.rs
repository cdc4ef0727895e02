//! The attack cases' terminal table.

use super::AttackResult;
use std::fmt::Write;

/// The terminal table of attack results.
pub fn table(results: &[AttackResult]) -> String {
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
