//! CLOCK eviction in the datapath: the packets of the batch that installed a megaflow do
//! not count as its use, so a flow that comes back outlives new flows that never did.

use flowpath_base::Packet;
use flowpath_datapath::{CaptureSink, Datapath, DatapathConfig, MissLimits};
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// Everything IPv4 to port 2, under a never-hit rule on one source address whose mask
/// leaves out the top bit (not a prefix, so the tries cannot shorten it): every source
/// is a megaflow of its own.
fn store() -> Arc<RuleStore> {
    let s = Arc::new(RuleStore::new(Backend::TupleSpace));
    let ip = || Match::any().exact(Field::EthType, 0x0800);
    s.add([
        RuleSpec::new(0, 200, ip().with(Field::Ipv4Src, 0x0102_0304, 0x7fff_ffff)),
        RuleSpec::new(0, 100, ip()).actions([Action::Output(2)]),
    ])
    .unwrap();
    s
}

/// One batch of one packet of flow `i`; it must go to port 2.
fn send(dp: &mut Datapath, i: u32) {
    let f = build(&FrameSpec::udp4(
        Ipv4Addr::from(0xc0a8_0000 | i),
        Ipv4Addr::new(10, 0, 0, 1),
        1000,
        53,
        64,
    ));
    let mut buf = vec![0u8; 128 + f.len()];
    buf[128..].copy_from_slice(&f);
    let mut pkts = [Packet::new(&mut buf, 128, f.len())];
    let mut sink = CaptureSink::default();
    dp.process(1, &mut pkts, &mut sink);
    assert_eq!(sink.packets.len(), 1, "flow {i} forwarded");
    assert_eq!(sink.packets[0].0, 2, "flow {i} to port 2");
}

#[test]
fn a_flow_that_comes_back_outlives_new_flows_that_never_did() {
    for emc in [false, true] {
        let mut dp = Datapath::new(
            store(),
            DatapathConfig {
                emc,
                megaflow_max: 4,
                miss: MissLimits::off(),
                ..DatapathConfig::default()
            },
        );
        // Four new flows fill the cache, one batch each; then flow 0 comes back.
        for i in 0..4 {
            send(&mut dp, i);
        }
        send(&mut dp, 0);
        assert_eq!(dp.stats().upcalls, 4, "emc {emc}: flow 0 is a hit");
        // A fifth flow evicts one that never came back (had its own first packet marked
        // it, the hand would clear all four marks and take flow 0, the oldest).
        send(&mut dp, 4);
        assert_eq!(dp.stats().upcalls, 5);
        send(&mut dp, 0);
        assert_eq!(dp.stats().upcalls, 5, "emc {emc}: flow 0 was kept");
        send(&mut dp, 1);
        assert_eq!(
            dp.stats().upcalls,
            6,
            "emc {emc}: flow 1 was the one evicted"
        );
    }
}
