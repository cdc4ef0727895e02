//! The suite's findings in sentences: hit/miss ratios, scaling, size sensitivity, and the
//! miss-rate curve against the two-cost model, with where any gap goes.

use super::{model, ClassResult, CurvePoint, Point, SuiteResults};
use flowpath_report::{pct, thousands};
use std::fmt::Write;

/// One line per disagreeing curve point: what was measured, what the model says, and
/// what the tier counters suggest.
pub(super) fn disagreement_note(c: &ClassResult, p: &CurvePoint) -> String {
    let mut s = format!(
        "{} at {} new flows: measured {:.2} Mpps ({:.0} cycles/packet), model {:.2} Mpps ({:.0}) — \
         the measurement disagrees by more than {} with the model ({:+.0} %; {}).",
        c.class.name(),
        pct(p.miss_rate),
        p.measured.mpps,
        p.measured.cycles.median,
        p.model_mpps,
        p.model_cycles,
        pct(model::TOLERANCE),
        p.disagreement * 100.0,
        if p.ranges_overlap {
            "within the run-to-run spread, so possibly noise"
        } else {
            "outside the run-to-run spread of both"
        }
    );
    stage_gap(&mut s, c, p);
    // The model assumes established packets cost what they cost at 0 % misses, i.e. are
    // answered by the same tier. Say when the exact-match cache answered fewer of them.
    let expected_emc = (1.0 - p.miss_rate) * c.hit.emc_hit_share;
    if p.measured.emc_hit_share + 0.02 < expected_emc {
        let _ = write!(
            s,
            " The exact-match cache answered {} of packets where the hit point's rate would give {}: \
             new flows displace established ones from it, so established packets cost more than a \
             hit — a cost of misses the two-cost model does not carry.",
            pct(p.measured.emc_hit_share),
            pct(expected_emc)
        );
    }
    s
}

/// What the run found, in sentences: hit/miss ratios, scaling, size sensitivity, and the
/// miss-rate curve against the model (every point that disagrees by more than 10 %).
pub fn findings(r: &SuiteResults) -> Vec<String> {
    let mut f = Vec::new();
    if r.meta.load_before > 0.5 {
        f.push(format!(
            "The machine was not idle: load average {:.2} when the suite started (other processes \
             compete for the CPUs; expect wider min–max spreads and a lower multi-core efficiency \
             than on an idle machine).",
            r.meta.load_before
        ));
    }
    for c in &r.classes {
        f.push(format!(
            "{}: a miss (new flow) costs {} cycles, a hit {}: {:.1}x (the talk: 10.8x for the OVS kernel \
             datapath, 50,000 vs 4,600 cycles).",
            c.class.name(),
            thousands(c.miss_cycles),
            thousands(c.hit_cycles),
            c.miss_hit_ratio
        ));
    }
    vxlan_findings(r, &mut f);
    scaling_findings(r, &mut f);
    size_findings(r, &mut f);
    curve_findings(r, &mut f);
    f
}

/// The VXLAN classes' hit rate against plain IPv4's in the same run (the target: decap and
/// encap each at least 0.8x IPv4 forwarding per core).
fn vxlan_findings(r: &SuiteResults, f: &mut Vec<String>) {
    use flowpath_gen::TrafficClass;
    let Some(ip) = r.class(TrafficClass::Ipv4) else {
        return;
    };
    for (class, what) in [
        (TrafficClass::Vxlan, "decapsulated through a tunnel port"),
        (TrafficClass::VxlanEncap, "encapsulated to a tunnel port"),
    ] {
        let Some(c) = r.class(class) else { continue };
        if ip.hit.mpps <= 0.0 {
            continue;
        }
        let ratio = c.hit.mpps / ip.hit.mpps;
        f.push(format!(
            "{}: VXLAN {what} at {:.2} Mpps per core with hits only, {:.2}x plain IPv4's {:.2} Mpps in the same run ({}the target of 0.8x); {:.0}-byte VXLAN frames on the wire against IPv4's {:.0} B.",
            class.name(),
            c.hit.mpps,
            ratio,
            ip.hit.mpps,
            if ratio >= 0.8 { "meets " } else { "below " },
            c.frame_bytes,
            ip.frame_bytes
        ));
    }
}

/// Scaling over cores: rates, rate per core, share of linear.
fn scaling_findings(r: &SuiteResults, f: &mut Vec<String>) {
    for s in &r.scaling {
        if let (Some(one), Some(last)) = (s.points.first(), s.points.last()) {
            if last.cores > one.cores {
                f.push(format!(
                    "Scaling at {} new flows: {} → {} cores, {:.2} → {:.2} Mpps aggregate, {:.2} Mpps per core, \
                     {:.0} % of linear.",
                    pct(s.miss_rate),
                    one.cores,
                    last.cores,
                    one.aggregate_mpps.median,
                    last.aggregate_mpps.median,
                    last.mpps_per_core,
                    last.efficiency * 100.0
                ));
            }
        }
    }
}

/// How much the cost of a cached packet moves across frame sizes.
fn size_findings(r: &SuiteResults, f: &mut Vec<String>) {
    if r.sizes.len() > 1 {
        let h: Vec<f64> = r.sizes.iter().map(|s| s.hit.cycles.median).collect();
        let (lo, hi) = h
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &c| (a.min(c), b.max(c)));
        f.push(format!(
            "Cached packets cost {:.0}–{:.0} cycles across frame sizes {} ({:.0} % apart; the talk: flat).",
            lo,
            hi,
            r.sizes
                .iter()
                .map(|s| s.mix.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if lo > 0.0 { (hi / lo - 1.0) * 100.0 } else { 0.0 }
        ));
    }
}

/// The miss-rate curve against the model, per class.
fn curve_findings(r: &SuiteResults, f: &mut Vec<String>) {
    for c in &r.classes {
        let bad: Vec<&CurvePoint> = c.curve.iter().filter(|p| p.disagrees).collect();
        if bad.is_empty() {
            f.push(format!(
                "{}: the measured throughput is within {} of the model at every miss rate ({}).",
                c.class.name(),
                pct(model::TOLERANCE),
                c.curve
                    .iter()
                    .map(|p| pct(p.miss_rate))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        } else {
            let slower = bad.iter().all(|p| p.disagreement < 0.0);
            let faster = bad.iter().all(|p| p.disagreement > 0.0);
            f.push(format!(
                "{}: the measurement disagrees by more than {} with the model at {} new flows ({}; {}). \
                 The notes under its curve say where the cycles go.",
                c.class.name(),
                pct(model::TOLERANCE),
                bad.iter()
                    .map(|p| pct(p.miss_rate))
                    .collect::<Vec<_>>()
                    .join(", "),
                bad.iter()
                    .map(|p| format!("{:+.0} %", p.disagreement * 100.0))
                    .collect::<Vec<_>>()
                    .join(", "),
                if slower {
                    "slower than the model predicts"
                } else if faster {
                    "faster than the model predicts"
                } else {
                    "in both directions"
                }
            ));
        }
    }
}

/// Where the gap to the model is, stage by stage: each stage's measured cycles per packet
/// against the same interpolation of that stage's cycles at 0 % and 100 % misses.
fn stage_gap(s: &mut String, c: &ClassResult, p: &CurvePoint) {
    let gap = p.measured.cycles.median - p.model_cycles;
    if p.miss_rate > 0.0 && p.miss_rate < 1.0 && gap.abs() >= 1.0 {
        let m = p.miss_rate;
        let st = |pt: &Point| {
            let s = &pt.stage_cycles;
            [s.parse, s.emc, s.megaflow, s.upcall, s.actions]
        };
        let (here, hit, miss) = (st(&p.measured), st(&c.hit), st(&c.miss));
        let names = ["parse", "EMC", "megaflow", "slow path", "actions"];
        let mut parts: Vec<(f64, &str)> = (0..5)
            .map(|i| (here[i] - model::cycles(m, hit[i], miss[i]), names[i]))
            .collect();
        let staged: f64 = parts.iter().map(|x| x.0).sum();
        parts.push((gap - staged, "outside the stages (rx, stamps, batch loop)"));
        let per_miss = |pt: &Point| {
            if pt.upcall_share > 0.0 {
                pt.stage_cycles.upcall / pt.upcall_share
            } else {
                0.0
            }
        };
        let _ = write!(
            s,
            " Of the {:+.0} cycles/packet against the model, by stage: {}. The slow path costs {:.0} cycles \
             per miss here and {:.0} when every packet misses.",
            gap,
            parts
                .iter()
                .map(|(v, n)| format!("{n} {v:+.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            per_miss(&p.measured),
            per_miss(&c.miss),
        );
    }
}
