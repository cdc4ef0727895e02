//! The `packet_parse` fuzz target's checked-in inputs (fuzz/corpus-seed/, fuzz/regressions/)
//! through the same check on stable: no panic, and every outcome as their expected.txt says.

use std::path::Path;

#[path = "../../../fuzz/src/packet_parse.rs"]
mod packet_parse;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn packet_parse_corpus_replays() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let out = replay::replay(&fuzz, "packet_parse", |data| {
        match packet_parse::check(data) {
            // The key itself is golden.rs's business: here, whether and why not.
            Ok(_) => "ok".to_string(),
            Err(reason) => format!("drop {reason}"),
        }
    });
    // The seeds are real frames (generator, randpkt, the golden captures) and broken ones.
    assert!(
        out.iter().any(|(_, o)| o.starts_with("ok")),
        "no seed parses: {out:?}"
    );
    assert!(
        out.iter().any(|(_, o)| o.starts_with("drop")),
        "no seed is dropped: {out:?}"
    );
}
