//! The classifier bench on real ClassBench sets: every backend agrees with the linear
//! reference on every key of a generated trace, and the tree's megaflows are fewer than
//! tuple-space search's exact 5-tuples (the point of tracking prefixes), never more.

use flowpath_bench::classifier::{self, trace, ClassifierConfig};
use flowpath_pipeline::Backend;
use std::path::Path;

fn run_set(name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let rules = classifier::load_rules(&path).expect("the set loads");
    assert!(rules.len() > 500, "{name}: {} rules", rules.len());
    let keys = trace::generate(&rules, 20_000, 0.9, 7);
    let cfg = ClassifierConfig {
        backends: vec![Backend::TupleSpace, Backend::Tree],
        runs: 1,
        check: keys.len(),
        megaflows: true,
        updates: false,
    };
    let rows = classifier::run(&rules, &keys, &cfg, |_| {}).expect("the bench runs");
    for r in &rows {
        assert_eq!(r.checked, keys.len(), "{name} {}", r.backend);
        assert_eq!(r.mismatches, 0, "{name} {}", r.backend);
    }
    let (tss, tree) = (&rows[0], &rows[1]);
    let (a, b) = (tss.megaflows.unwrap(), tree.megaflows.unwrap());
    assert!(b < a, "{name}: tree {b} megaflows, tss {a}");
}

#[test]
fn acl_set_agrees_with_the_reference() {
    run_set("acl2_1k");
}

#[test]
fn firewall_set_agrees_with_the_reference() {
    run_set("fw2_1k");
}
