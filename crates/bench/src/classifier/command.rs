//! `flowpath bench classifier` as the command runs it: for each rule set, the backends and
//! (when `dpdk-test-acl` is installed) rte_acl on one trace, then one table, JSON or
//! Markdown for all the sets. The binary parses the flags into [`ClassifierOptions`].

use super::rte_acl::{self, RteAclRow};
use super::{load_rules, run, trace, ClassifierConfig, ClassifierRow};
use flowpath_packet::FlowKey;
use flowpath_pipeline::Backend;
use flowpath_report::{columns, grouped};
use std::path::{Path, PathBuf};

/// `flowpath bench classifier`'s options (its flags, parsed).
#[derive(Clone, Debug)]
pub struct ClassifierOptions {
    /// One or more rule sets: ClassBench filter files or flows files.
    pub rules: Vec<PathBuf>,
    /// `all` or one backend's name.
    pub backend: String,
    pub trace: Option<PathBuf>,
    pub lookups: u64,
    pub seed: u64,
    pub runs: u64,
    pub lookups_only: bool,
    pub no_dpdk: bool,
    pub json: bool,
    pub markdown: bool,
}

/// One rule set's results.
pub struct SetResult {
    pub path: PathBuf,
    pub lookups: usize,
    pub rows: Vec<ClassifierRow>,
    pub dpdk: Option<RteAclRow>,
}

/// Measure every set `o` names and return what to print on stdout (progress goes to
/// stderr). Errors name the file.
pub fn run_command(o: &ClassifierOptions) -> Result<String, String> {
    let backends = if o.backend == "all" {
        Backend::CLASSIFIERS.to_vec()
    } else {
        vec![o
            .backend
            .parse::<Backend>()
            .map_err(|e| format!("--backend: {e} or 'all'"))?]
    };
    let mut sets = Vec::new();
    for path in &o.rules {
        eprintln!("{}:", path.display());
        sets.push(measure_set(o, path, &backends)?);
    }
    Ok(if o.json {
        json(&sets)
    } else if o.markdown {
        markdown(o, &sets)
    } else {
        sets.iter()
            .map(|s| text(o, s))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn measure_set(
    o: &ClassifierOptions,
    path: &Path,
    backends: &[Backend],
) -> Result<SetResult, String> {
    let rules = load_rules(path)?;
    if rules.is_empty() {
        return Err(format!("{}: no rules", path.display()));
    }
    let keys = match &o.trace {
        Some(p) => trace::parse_trace(
            &std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?,
        )
        .map_err(|e| format!("{}: {e}", p.display()))?,
        None => trace::generate(&rules, o.lookups as usize, 0.9, o.seed),
    };
    let cfg = ClassifierConfig {
        backends: backends.to_vec(),
        runs: o.runs as usize,
        megaflows: !o.lookups_only,
        updates: !o.lookups_only,
        ..ClassifierConfig::default()
    };
    let rows = run(&rules, &keys, &cfg, |m| eprintln!("  {m}"))?;
    let dpdk = if o.no_dpdk {
        None
    } else {
        run_dpdk(path, &keys, rules.len())
    };
    Ok(SetResult {
        path: path.to_path_buf(),
        lookups: keys.len(),
        rows,
        dpdk,
    })
}

/// rte_acl on the same rules and trace, or `None` (with the reason on stderr).
fn run_dpdk(rules: &Path, keys: &[FlowKey], n_rules: usize) -> Option<RteAclRow> {
    if !rte_acl::available() {
        eprintln!(
            "  rte_acl: dpdk-test-acl is not installed (apt-get install dpdk-dev); no DPDK row"
        );
        return None;
    }
    let text = std::fs::read_to_string(rules).ok()?;
    if !flowpath_flowsyntax::is_classbench(&text) {
        eprintln!(
            "  rte_acl: dpdk-test-acl reads ClassBench files only; no DPDK row for a flows file"
        );
        return None;
    }
    eprintln!("  rte_acl: dpdk-test-acl on the same rules and trace");
    let dir = std::env::temp_dir().join(format!("flowpath-rteacl-{}", std::process::id()));
    let trace_file = dir.join("trace");
    let tuples: Vec<_> = keys
        .iter()
        .map(|k| {
            let t = trace::FiveTuple::of(k);
            (t.src, t.dst, t.sport, t.dport, t.proto)
        })
        .collect();
    let result = std::fs::create_dir_all(&dir)
        .and_then(|_| rte_acl::write_trace(&trace_file, &tuples))
        .map_err(|e| format!("{}: {e}", trace_file.display()))
        .and_then(|_| rte_acl::run_best(rules, &trace_file, n_rules, keys.len()));
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("  rte_acl: {e}");
            None
        }
    }
}

/// One JSON array of every set's rows (rte_acl's as `backend: "rte_acl (ALG)"`); with more
/// than one set each row also names its `set`.
fn json(sets: &[SetResult]) -> String {
    let mut all = Vec::new();
    for s in sets {
        let mut rows: Vec<serde_json::Value> = s
            .rows
            .iter()
            .map(|r| serde_json::to_value(r).expect("rows serialise"))
            .collect();
        if let Some(d) = &s.dpdk {
            let mut v = serde_json::to_value(d).expect("rows serialise");
            v["backend"] = format!("rte_acl ({})", d.alg).into();
            rows.push(v);
        }
        if sets.len() > 1 {
            for r in &mut rows {
                r["set"] = set_name(&s.path).into();
            }
        }
        all.extend(rows);
    }
    serde_json::to_string_pretty(&all).expect("rows serialise") + "\n"
}

fn set_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn opt(v: Option<impl std::fmt::Display>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn text(o: &ClassifierOptions, s: &SetResult) -> String {
    let mut out = format!(
        "{}: {} rules, {} lookups ({}), TSC {:.3} GHz\n\n",
        s.path.display(),
        s.rows.first().map_or(0, |r| r.rules),
        grouped(s.lookups as u64),
        if o.trace.is_some() {
            "trace file"
        } else {
            "generated, 90% inside rules"
        },
        flowpath_base::clock::tsc_hz() / 1e9
    );
    let head = [
        "backend",
        "build ms",
        "index KiB",
        "subtables",
        "entries",
        "Mlookups/s",
        "(min-max)",
        "cyc/lookup",
        "miss cyc",
        "megaflows",
        "masks",
        "insert us",
        "delete us",
        "mismatch",
    ]
    .map(String::from);
    let mut rows: Vec<[String; 14]> = s.rows.iter().map(text_row).collect();
    if let Some(d) = &s.dpdk {
        let mut r: [String; 14] = std::array::from_fn(|_| "-".to_string());
        r[0] = format!("rte_acl ({})", d.alg);
        r[1] = opt(d.build_ms.map(|b| format!("{b:.1}")));
        r[2] = opt(d.memory_bytes.map(|m| grouped(m / 1024)));
        r[5] = format!("{:.2}", d.mlookups_per_s);
        r[6] = String::new();
        r[7] = opt(d.cycles_per_lookup.map(|c| format!("{c:.0}")));
        rows.push(r);
    }
    out.push_str(&columns(&head, &rows));
    out
}

fn text_row(r: &ClassifierRow) -> [String; 14] {
    [
        r.backend.clone(),
        format!("{:.1}", r.build_ms),
        grouped(r.memory_bytes as u64 / 1024),
        grouped(r.subtables as u64),
        grouped(r.entries as u64),
        format!("{:.2}", r.mlookups_per_s),
        format!("({:.2}-{:.2})", r.mlookups_per_s_min, r.mlookups_per_s_max),
        format!("{:.0}", r.cycles_per_lookup),
        opt(r.miss_cycles.map(|c| format!("{c:.0}"))),
        opt(r.megaflows.map(|m| grouped(m as u64))),
        opt(r.megaflow_masks),
        opt(r.insert_us.map(|u| format!("{u:.0}"))),
        opt(r.delete_us.map(|u| format!("{u:.0}"))),
        format!("{}/{}", r.mismatches, grouped(r.checked as u64)),
    ]
}

/// One Markdown table for every set, each backend's lookups/s also over rte_acl's on the
/// same rules and trace (the peer measured in the same run).
fn markdown(o: &ClassifierOptions, sets: &[SetResult]) -> String {
    let mut rows = Vec::new();
    for s in sets {
        let set = set_name(&s.path);
        let peer = s.dpdk.as_ref().map(|d| d.mlookups_per_s);
        for r in &s.rows {
            let vs = peer.map_or(String::new(), |p| format!("{:.2}x", r.mlookups_per_s / p));
            rows.push(vec![
                set.clone(),
                format!("`{}`", r.backend),
                format!("{:.1}", r.build_ms),
                mib(r.memory_bytes as u64),
                format!(
                    "{:.2} [{:.2}–{:.2}]",
                    r.mlookups_per_s, r.mlookups_per_s_min, r.mlookups_per_s_max
                ),
                format!("{:.0}", r.cycles_per_lookup),
                vs,
                opt(r.miss_cycles.map(|c| grouped(c as u64))),
                match (r.megaflows, r.megaflow_masks) {
                    (Some(m), Some(k)) => format!("{} ({k})", grouped(m as u64)),
                    _ => "-".into(),
                },
                match (r.insert_us, r.delete_us) {
                    (Some(i), Some(d)) => format!("{i:.0} / {d:.0}"),
                    _ => "-".into(),
                },
                format!("{}", r.mismatches),
            ]);
        }
        if let Some(d) = &s.dpdk {
            rows.push(vec![
                set.clone(),
                format!("rte_acl ({})", d.alg),
                opt(d.build_ms.map(|b| format!("{b:.1}"))),
                opt(d.memory_bytes.map(mib)),
                format!("{:.2}", d.mlookups_per_s),
                opt(d.cycles_per_lookup.map(|c| format!("{c:.0}"))),
                "1.00x".into(),
                "–".into(),
                "–".into(),
                "rebuild".into(),
                "–".into(),
            ]);
        }
    }
    let what = format!(
        "One core; lookups over a {} trace ({}), median of {} passes [min–max]; \"vs rte_acl\" \
         is a backend's lookups/s over DPDK rte_acl's on the same rules and trace in this run; \
         full miss: the cycles of a miss through the real megaflow cache (classification and \
         install); mismatches: answers that differ from the linear reference on sampled keys.",
        grouped(sets.first().map_or(0, |s| s.lookups) as u64),
        if o.trace.is_some() {
            "ClassBench trace file"
        } else {
            "generated key, 90 % inside a rule"
        },
        o.runs
    );
    flowpath_report::markdown::captioned(
        &what,
        flowpath_base::clock::tsc_hz() / 1e9,
        &[
            "set",
            "backend",
            "build ms",
            "index",
            "Mlookups/s",
            "cycles/lookup",
            "vs rte_acl",
            "full miss, cycles",
            "megaflows (masks)",
            "one-rule add / delete µs",
            "mismatches",
        ],
        &rows,
    )
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}
