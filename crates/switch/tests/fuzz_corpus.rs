//! The `control_request` fuzz target's checked-in inputs (fuzz/corpus-seed/, fuzz/regressions/)
//! through the same check on stable: no panic, and every outcome as their expected.txt says.

use std::path::Path;

#[path = "../../../fuzz/src/control_request.rs"]
mod control_request;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn control_request_corpus_replays() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let out = replay::replay(&fuzz, "control_request", |data| {
        let o = control_request::check(data);
        format!(
            "request={} answered={} refused={} version={}",
            o.request, o.answered, o.refused, o.version
        )
    });
    // Seeds are accepted and refused requests, and bytes that are not a request at all.
    assert!(
        out.iter().any(|(_, o)| o.contains("request=true")),
        "{out:?}"
    );
    assert!(out.iter().any(|(_, o)| o.contains("answered=0")), "{out:?}");
    assert!(
        out.iter()
            .any(|(_, o)| o.contains("refused=0") && !o.contains("version=0")),
        "{out:?}"
    );
    assert!(out.iter().any(|(_, o)| !o.contains("refused=0")), "{out:?}");
}
