//! `flowpath gen --attack tse`: the tuple-space-explosion packets written out, and the
//! megaflow masks they make in one datapath with no defence and with the defaults.

use super::config::{Defence, PORT_ATTACK};
use super::traffic;
use flowpath_datapath::{CountingSink, Datapath, DatapathConfig};
use flowpath_gen::InMemorySource;
use flowpath_pipeline::{Backend, RuleSpec, RuleStore};
use serde::Serialize;
use std::sync::Arc;

/// What `flowpath gen --attack tse` made, and what it does to a datapath's megaflow cache.
#[derive(Clone, Debug, Serialize)]
pub struct TseReport {
    pub packets: usize,
    pub distinct_tuples: usize,
    pub rules: usize,
    pub frame_size: usize,
    /// Where the frames were written, if anywhere.
    pub out: Option<String>,
    /// Megaflow subtables (masks) and megaflows after the packets go through one datapath
    /// (tree classifier) with no defence, and with the defaults.
    pub masks_no_defence: usize,
    pub megaflows_no_defence: usize,
    pub masks_default: usize,
    /// With the defaults: packets forwarded without caching their megaflow, and how many
    /// of those the new-mask rate refused.
    pub uncached_default: u64,
    pub mask_rate_refusals_default: u64,
}

impl TseReport {
    pub fn text(&self) -> String {
        format!(
            "tse attack: {} packets ({} distinct 5-tuples, {} B frames) against {} rules{}\n\
             through one datapath (tree classifier), all at once:\n  \
             no defence:    {} megaflow masks, {} megaflows\n  \
             with defaults: {} masks; {} packets forwarded uncached ({} refused a new mask by the per-port rate)\n",
            self.packets,
            self.distinct_tuples,
            self.frame_size,
            self.rules,
            self.out
                .as_ref()
                .map(|o| format!(", written to {o}"))
                .unwrap_or_default(),
            self.masks_no_defence,
            self.megaflows_no_defence,
            self.masks_default,
            self.uncached_default,
            self.mask_rate_refusals_default
        )
    }
}

/// Make `n` TSE packets against `rules` (written to `out` as pcap if given) and measure
/// the masks they create with and without the defence.
pub fn tse_report(
    rules: &[RuleSpec],
    n: usize,
    seed: u64,
    frame_size: usize,
    out: Option<&str>,
) -> Result<TseReport, String> {
    let tuples = traffic::tse(rules, n.max(1), seed);
    let distinct = tuples
        .iter()
        .map(|t| (t.src, t.dst, t.sport, t.dport, t.proto))
        .collect::<std::collections::HashSet<_>>()
        .len();
    let frames: Vec<Vec<u8>> = tuples
        .iter()
        .map(|t| traffic::frame(t, frame_size))
        .collect();
    if let Some(path) = out {
        let mut src = InMemorySource::new(frames.clone());
        flowpath_gen::write_pcap_file(path, &mut src, frames.len() as u64)
            .map_err(|e| format!("{path}: {e}"))?;
    }
    let run = |d: Defence| {
        let store = Arc::new(RuleStore::new(Backend::Tree));
        store.add(rules.iter().cloned()).expect("valid rules");
        let mut dp = Datapath::new(store, d.config(&DatapathConfig::default()));
        let mut sink = CountingSink::default();
        // Every frame once, in order: the source's first slots hold the templates in turn.
        let mut src = InMemorySource::new(frames.clone());
        let mut left = frames.len();
        while left > 0 {
            let mut pkts = src.lend(left.min(flowpath_base::BATCH));
            left -= pkts.len();
            dp.process(PORT_ATTACK, &mut pkts, &mut sink);
        }
        let per = dp.port_miss_stats();
        let p = per
            .iter()
            .find(|(n, _)| *n == PORT_ATTACK)
            .map(|(_, s)| *s)
            .unwrap_or_default();
        (dp.megaflows().subtables(), dp.megaflows().len(), p)
    };
    let (masks_none, mf_none, _) = run(Defence::None);
    let (masks_def, _, p) = run(Defence::Default);
    Ok(TseReport {
        packets: frames.len(),
        distinct_tuples: distinct,
        rules: rules.len(),
        frame_size,
        out: out.map(String::from),
        masks_no_defence: masks_none,
        megaflows_no_defence: mf_none,
        masks_default: masks_def,
        uncached_default: p.uncached,
        mask_rate_refusals_default: p.mask_rate_refusals,
    })
}
