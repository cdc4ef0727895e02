//! The `ct_tcp` fuzz target's checked-in inputs (fuzz/corpus-seed/, fuzz/regressions/)
//! through the same check on stable: no panic, and every outcome as their expected.txt says.

use std::path::Path;

#[path = "../../../fuzz/src/ct_tcp.rs"]
mod ct_tcp;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn ct_tcp_corpus_replays() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let out = replay::replay(&fuzz, "ct_tcp", |data| {
        let o = ct_tcp::check(data);
        if !o.opened {
            return "not opened".to_string();
        }
        let last = o.last.map_or("-", |s| s.name());
        format!(
            "ok {} invalid {} reopen {} last {last}",
            o.ok, o.invalid, o.reopen
        )
    });
    // The seeds reach the ends of a connection's life, and some are refused.
    for want in ["last TIME_WAIT", "last CLOSE", "not opened"] {
        assert!(
            out.iter().any(|(_, o)| o.contains(want)),
            "no seed gives {want:?}: {out:?}"
        );
    }
    assert!(
        out.iter()
            .any(|(_, o)| !o.contains("invalid 0") && o.starts_with("ok")),
        "no seed has a refused segment: {out:?}"
    );
}
