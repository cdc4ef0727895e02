//! The `ct_nat` fuzz target's checked-in inputs (fuzz/corpus-seed/, fuzz/regressions/)
//! through the same check on stable: no panic, and every outcome as their expected.txt says.

use std::path::Path;

#[path = "../../../fuzz/src/ct_nat.rs"]
mod ct_nat;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn ct_nat_corpus_replays() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let out = replay::replay(&fuzz, "ct_nat", |data| format!("{:?}", ct_nat::check(data)));
    for want in [
        "Applied { related: false }",
        "Applied { related: true }",
        "Refused { related: false }",
        "Refused { related: true }",
    ] {
        assert!(
            out.iter().any(|(_, o)| o == want),
            "no seed gives {want:?}: {out:?}"
        );
    }
}
