//! A flood of new flows on a freshly made datapath finds its tables' memory in place: the
//! megaflow arena is allocated whole and faulted in when the datapath is made, so filling
//! it faults no pages in batch by batch (before, the arena doubled as it filled, copying
//! itself into fresh memory: ~2,000 faults for these 16,384 flows). A test binary of its
//! own, so no other test's allocations land in the count.

use flowpath_base::table_memory::minor_page_faults;
use flowpath_base::Packet;
use flowpath_datapath::{CountingSink, Datapath, DatapathConfig, MissLimits};
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};
use std::net::Ipv4Addr;
use std::sync::Arc;

const FLOWS: u32 = 16_384;

#[test]
fn filling_a_fresh_megaflow_cache_faults_few_pages() {
    // Everything IPv4 to port 2, under a never-hit rule whose source mask is not a prefix:
    // every source is a megaflow of its own.
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    let ip = || Match::any().exact(Field::EthType, 0x0800);
    store
        .add([
            RuleSpec::new(0, 200, ip().with(Field::Ipv4Src, 0x0102_0304, 0x7fff_ffff)),
            RuleSpec::new(0, 100, ip()).actions([Action::Output(2)]),
        ])
        .unwrap();
    let mut frames: Vec<Vec<u8>> = (0..FLOWS)
        .map(|i| {
            let f = build(&FrameSpec::udp4(
                Ipv4Addr::from(0x0a00_0000 | i),
                Ipv4Addr::new(10, 0, 0, 1),
                1000,
                53,
                64,
            ));
            let mut b = vec![0u8; 128 + f.len()];
            b[128..].copy_from_slice(&f);
            b
        })
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
                let len = b.len() - 128;
                Packet::new(b, 128, len)
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
