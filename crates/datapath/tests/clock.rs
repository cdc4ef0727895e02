//! CLOCK eviction in the datapath: the packets of the batch that installed a megaflow do
//! not count as its use, so a flow that comes back outlives new flows that never did.

mod common;

use common::{every_source_its_own_megaflow as store, udp_from};
use flowpath_base::{Packet, HEADROOM};
use flowpath_datapath::{CaptureSink, Datapath, DatapathConfig, MissLimits};
use std::net::Ipv4Addr;

/// One batch of one packet of flow `i`; it must go to port 2.
fn send(dp: &mut Datapath, i: u32) {
    let mut buf = udp_from(Ipv4Addr::from(0xc0a8_0000 | i));
    let len = buf.len() - HEADROOM;
    let mut pkts = [Packet::new(&mut buf, HEADROOM, len)];
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
