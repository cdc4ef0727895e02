//! Generated traffic to and from pcap files: a spec's packets written (or only counted),
//! what a capture holds, or a capture looped into packets with churn; each job returns
//! the text to print.

use flowpath_gen::pcap::{self, Capture, Pace, Summary};
use flowpath_gen::{CaptureReplay, Churn, InMemorySource, TrafficSpec};

use crate::report::{self, Verb};
use crate::Failure;

/// Generate `packets` packets of `spec` into the pcap file `out` (or only count them),
/// their timestamps as `pace` says.
pub fn generate(
    spec: &TrafficSpec,
    packets: u64,
    out: Option<&str>,
    pace: Pace,
    json: bool,
) -> Result<String, Failure> {
    let mut src = spec.source().map_err(Failure::Spec)?;
    let summary = write(out, &mut src, packets, pace)?;
    if json {
        let v = serde_json::json!({ "spec": spec, "summary": summary, "out": out });
        return Ok(report::json(&v));
    }
    let head = report::spec_head(spec, src.slot_count());
    Ok(report::summary(&head, Verb::of(out), out, &summary))
}

/// How a replayed capture is looped into packets.
pub struct Looped {
    pub packets: u64,
    pub churn: Churn,
    pub seed: u64,
    /// The written packets' timestamps.
    pub pace: Pace,
}

/// Report what the capture `cap` (read from `path`) holds, or with `looped` loop it into
/// packets written to `out` (or only counted).
pub fn replay(
    path: &str,
    cap: Capture,
    looped: Option<Looped>,
    out: Option<&str>,
    json: bool,
) -> Result<String, Failure> {
    let (count, truncated, format) = (cap.frames.len(), cap.truncated, cap.format);
    let mut head = report::capture_head(path, format, count, truncated);
    let (summary, verb) = match looped {
        Some(l) => {
            let mut src = cap
                .into_source()
                .map_err(|e| Failure::Replay(format!("{path}: {e}")))?
                .with_seed(l.seed);
            l.churn.apply_to(&mut src);
            head += &format!(", looped into {}", l.packets);
            (write(out, &mut src, l.packets, l.pace)?, Verb::of(out))
        }
        None => (cap.summary(), Verb::Holds),
    };
    if json {
        let v = serde_json::json!({ "replay": path, "format": format, "capture_packets": count,
            "truncated": truncated, "summary": summary, "out": out });
        return Ok(report::json(&v));
    }
    Ok(report::summary(&head, verb, out, &summary))
}

/// Write `n` packets of `src` to the pcap file `out`, or only count them.
fn write(
    out: Option<&str>,
    src: &mut InMemorySource,
    n: u64,
    pace: Pace,
) -> Result<Summary, Failure> {
    match out {
        Some(path) => pcap::write_pcap_file_paced(path, src, n, pace)
            .map_err(|e| Failure::Out(format!("{path}: {e}"))),
        None => pcap::write_pcap(std::io::sink(), src, n).map_err(|e| Failure::Out(e.to_string())),
    }
}
