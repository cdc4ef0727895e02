//! A flood of new flows on a freshly made datapath finds its tables' memory in place: the
//! megaflow arena is allocated whole and faulted in when the datapath is made, so filling
//! it faults no pages in batch by batch (before, the arena doubled as it filled, copying
//! itself into fresh memory: ~2,000 faults for these 16,384 flows). A test binary of its
//! own, so no other test's allocations land in the count.

mod common;

use common::{every_source_its_own_megaflow, udp_from};
use flowpath_base::table_memory::minor_page_faults;
use flowpath_base::{Packet, HEADROOM};
use flowpath_datapath::{CountingSink, Datapath, DatapathConfig, MissLimits};
use std::net::Ipv4Addr;

const FLOWS: u32 = 16_384;

#[test]
fn filling_a_fresh_megaflow_cache_faults_few_pages() {
    let store = every_source_its_own_megaflow();
    let mut frames: Vec<Vec<u8>> = (0..FLOWS)
        .map(|i| udp_from(Ipv4Addr::from(0x0a00_0000 | i)))
        .collect();
    let mut dp = Datapath::new(
        store,
        DatapathConfig {
            megaflow_max: FLOWS as usize,
            miss: MissLimits::off(),
            ..DatapathConfig::default()
        },
    );
    let mut sink = CountingSink::default();
    let before = minor_page_faults();
    for chunk in frames.chunks_mut(32) {
        let mut pkts: Vec<Packet> = chunk
            .iter_mut()
            .map(|b| {
                let len = b.len() - HEADROOM;
                Packet::new(b, HEADROOM, len)
            })
            .collect();
        dp.process(1, &mut pkts, &mut sink);
    }
    let faults = minor_page_faults() - before;
    assert_eq!(dp.megaflows().len(), FLOWS as usize, "every flow installed");
    // What is left: the subtable index doubling (~130 faults up to 512 KB) and the heap
    // growing for each megaflow's actions and the test's own packet vectors.
    assert!(faults < 700, "{faults} page faults filling a fresh cache");
}
