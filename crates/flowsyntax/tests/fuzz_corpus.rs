//! The `flow_syntax` fuzz target's checked-in inputs (fuzz/corpus-seed/, fuzz/regressions/)
//! through the same check on stable: no panic, and every outcome as their expected.txt says.

use std::path::Path;

#[path = "../../../fuzz/src/flow_syntax.rs"]
mod flow_syntax;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn flow_syntax_corpus_replays() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let out = replay::replay(&fuzz, "flow_syntax", |data| {
        match flow_syntax::check(data) {
            Ok(n) => format!("ok {n} flows"),
            Err((line, column)) => format!("error line {line} column {column}"),
        }
    });
    assert!(
        out.iter().any(|(_, o)| o.starts_with("ok")),
        "no seed parses: {out:?}"
    );
    assert!(
        out.iter().any(|(_, o)| o.starts_with("error")),
        "no seed is refused: {out:?}"
    );
}
