//! The `pcap_read` fuzz target's checked-in inputs (fuzz/corpus-seed/, fuzz/regressions/)
//! through the same check on stable: no panic, and every outcome as their expected.txt says.

use std::path::Path;

#[path = "../../../fuzz/src/pcap_read.rs"]
mod pcap_read;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn pcap_read_corpus_replays() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let out = replay::replay(&fuzz, "pcap_read", |data| match pcap_read::check(data) {
        Ok(cap) => format!(
            "{} {} frames, {} truncated{}",
            cap.format,
            cap.frames.len(),
            cap.truncated,
            cap.cut_short.map_or(String::new(), |c| format!(
                ", cut short in record {} at byte {}",
                c.record, c.byte
            ))
        ),
        Err(kind) => format!("error {kind:?}"),
    });
    for format in ["pcap ", "pcapng ", "error "] {
        let n = out.iter().filter(|(_, o)| o.starts_with(format)).count();
        assert!(n > 0, "no seed gives {format:?}: {out:?}");
    }
}
