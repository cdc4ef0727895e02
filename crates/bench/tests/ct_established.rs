//! The `ct_established` case's workload does what its name says: after warm-up every
//! packet is forwarded, established, in two passes that both hit the exact-match cache.

use flowpath_bench::harness::Harness;
use flowpath_bench::runner::{ct_established, BenchConfig, Case};
use flowpath_datapath::{DatapathConfig, MissLimits};
use flowpath_pipeline::{Backend, RuleStore};
use std::sync::Arc;

#[test]
fn every_packet_is_established_and_hits_the_emc_on_both_passes() {
    assert_eq!(Case::parse("ct_established"), Ok(Case::CtEstablished));
    let cfg = BenchConfig::default();
    let (rules, source) = ct_established(64, cfg.frame_size);
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    store.add(rules).unwrap();
    let dp = DatapathConfig {
        emc_insert_inv_prob: 1,
        miss: MissLimits::unbudgeted(),
        megaflow_max: 4096,
        ..DatapathConfig::default()
    };
    let mut h = Harness::new(store, dp, source);
    h.pump(4 * 128);
    assert_eq!(h.datapath_mut().tracker().len(), 64);
    let (_, st) = h.timed(1024);
    assert_eq!(st.packets, 1024);
    assert_eq!(st.upcalls, 0);
    assert_eq!(st.recirculations, 1024);
    assert_eq!(st.emc_hits, 2 * 1024);
    assert_eq!(st.drops().iter().map(|(_, n)| n).sum::<u64>(), 0);
}
