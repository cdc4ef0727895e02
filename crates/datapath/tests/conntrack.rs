//! Connection tracking through the datapath: the security-group pipeline over two passes
//! (UDP and TCP, both directions, a port that starts nothing), megaflows and EMC hits per
//! pass, OVS's fork, the recirculation depth limit, and revalidation of recirculated
//! megaflows.

mod ct_common;

use ct_common::*;
use flowpath_datapath::{DatapathDrop, MAX_PASSES};
use flowpath_packet::ct::state::{NEW, TRACKED};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::RuleSpec;

/// The security group with its tracked rules in `target`: the first packet is forwarded
/// and committed, replies are `+est` and forwarded back, a packet from port 2 that starts
/// no connection is dropped; later packets hit the EMC on both passes.
fn security_group_udp(target: u8) {
    let mut dp = datapath(security_group(target));
    let (a_b, b_a) = (udp(1, 1000, 2, 53), udp(2, 53, 1, 1000));

    assert_eq!(send1(&mut dp, 1, &a_b), vec![(2, a_b.clone())]);
    assert_eq!(
        dp.tracker().len(),
        1,
        "the first packet committed its connection"
    );
    let st = dp.stats();
    assert_eq!(
        (st.ct_executed, st.recirculations, st.recirc_passes),
        (2, 1, 1)
    );

    assert_eq!(send1(&mut dp, 2, &b_a), vec![(1, b_a.clone())]);
    // From port 2, a connection nobody started: untracked rule, then no +new rule for it.
    assert_eq!(send(&mut dp, 2, &[udp(3, 7, 1, 1000)]), vec![]);
    assert_eq!(dp.tracker().len(), 1, "port 2 commits nothing");
    assert_eq!(dp.stats().dropped(DatapathDrop::TableMiss), 1);

    // One first-pass megaflow per in_port shape, recirculated ones per ct outcome.
    let (first, recirc) = megaflows_by_pass(&dp);
    assert!(
        first >= 1 && recirc >= 2,
        "megaflows: {first} first-pass, {recirc} recirculated"
    );
    assert!(dp.megaflows().recirc_subtables() >= 1);

    // The first +est packet from port 1 is a new ct outcome (a megaflow of its own); later
    // packets of the connection: both passes from the EMC, no upcall.
    assert_eq!(send1(&mut dp, 1, &a_b), vec![(2, a_b.clone())]);
    let before = dp.stats().clone();
    let out = send(&mut dp, 1, &[a_b.clone(), a_b.clone()]);
    assert_eq!(out, vec![(2, a_b.clone()), (2, a_b.clone())]);
    assert_eq!(send1(&mut dp, 2, &b_a), vec![(1, b_a.clone())]);
    let st = dp.stats();
    assert_eq!(
        st.upcalls, before.upcalls,
        "established packets need no upcall"
    );
    assert_eq!(
        st.emc_hits - before.emc_hits,
        6,
        "three packets, two passes each"
    );
    assert_eq!(st.recirculations - before.recirculations, 3);
}

#[test]
fn security_group_in_one_table_over_two_passes() {
    security_group_udp(0);
}

#[test]
fn security_group_over_two_tables() {
    security_group_udp(1);
}

/// A TCP handshake and data through the security group: SYN forwarded and committed,
/// SYN-ACK back (+est, reply), the ACK and data both ways.
fn security_group_tcp(target: u8) {
    let mut dp = datapath(security_group(target));
    let (syn, ack) = (0x02, 0x10);
    let c2s = |flags, seq, ackn| tcp(1, 40000, 2, 80, flags, seq, ackn);
    let s2c = |flags, seq, ackn| tcp(2, 80, 1, 40000, flags, seq, ackn);
    let steps = [
        (1, c2s(syn, 100, 0)),
        (2, s2c(syn | ack, 300, 101)),
        (1, c2s(ack, 101, 301)),
        (1, c2s(ack | 0x08, 101, 301)),
        (2, s2c(ack | 0x08, 301, 102)),
    ];
    for (n, (port, f)) in steps.iter().enumerate() {
        let to = 3 - port;
        assert_eq!(send1(&mut dp, *port, f), vec![(to, f.clone())], "step {n}");
    }
    assert_eq!(dp.tracker().len(), 1);
    // A SYN from port 2 starts nothing.
    assert_eq!(send(&mut dp, 2, &[tcp(2, 81, 1, 40001, syn, 1, 0)]), vec![]);
}

#[test]
fn tcp_through_the_security_group_in_one_table() {
    security_group_tcp(0);
}

#[test]
fn tcp_through_the_security_group_over_two_tables() {
    security_group_tcp(1);
}

/// A batch mixing directions and connections keeps its packets' order and decisions, and
/// a full batch recirculates as one pass.
#[test]
fn a_full_batch_recirculates_as_one_pass() {
    let mut dp = datapath(security_group(0));
    let fwd: Vec<Vec<u8>> = (0..32).map(|i| udp(1, 2000 + i, 2, 53)).collect();
    let out = send(&mut dp, 1, &fwd);
    assert_eq!(out, fwd.iter().map(|f| (2, f.clone())).collect::<Vec<_>>());
    assert_eq!(dp.stats().recirc_passes, 1);
    assert_eq!(dp.tracker().len(), 32);
    // Replies for the even ones, strangers in between: only the replies pass.
    let back: Vec<Vec<u8>> = (0..32)
        .map(|i| match i % 2 {
            0 => udp(2, 53, 1, 2000 + i),
            _ => udp(2, 53, 9, 2000 + i),
        })
        .collect();
    let out = send(&mut dp, 2, &back);
    let want: Vec<(u32, Vec<u8>)> = back.iter().step_by(2).map(|f| (1, f.clone())).collect();
    assert_eq!(out, want);
}

/// `ct(table=0)` for every packet, tracked or not: each pass recirculates again until
/// the depth limit drops it; one megaflow per pass kind (first pass, recirculated).
#[test]
fn recirculation_stops_at_the_depth_limit() {
    let store = std::sync::Arc::new(flowpath_pipeline::RuleStore::new(
        flowpath_pipeline::Backend::TupleSpace,
    ));
    store
        .add([RuleSpec::new(0, 1, ip()).actions([ct_recirc(0)])])
        .unwrap();
    let mut dp = datapath(store);
    assert_eq!(send(&mut dp, 1, &[udp(1, 1, 2, 2)]), vec![]);
    let st = dp.stats();
    let passes = u64::from(MAX_PASSES);
    assert_eq!(st.dropped(DatapathDrop::RecircDepth), 1);
    assert_eq!(st.recirculations, passes - 1);
    assert_eq!(st.recirc_passes, passes - 1);
    assert_eq!(
        st.dropped(DatapathDrop::TableMiss) + st.dropped(DatapathDrop::RuleDrop),
        0
    );
    assert_eq!(megaflows_by_pass(&dp), (1, 1));
    assert_eq!(st.upcalls, 2, "the recirculated passes share one megaflow");
}

/// OVS's fork: actions after `ct(table=)` that output run on the packet itself,
/// untracked, now; a copy is tracked and recirculated.
#[test]
fn actions_after_a_recirculating_ct_fork_the_packet() {
    let store = std::sync::Arc::new(flowpath_pipeline::RuleStore::new(
        flowpath_pipeline::Backend::TupleSpace,
    ));
    store
        .add([
            RuleSpec::new(0, 10, ct_state(0, TRACKED)).actions([ct_recirc(0), Action::Output(3)]),
            RuleSpec::new(0, 10, ct_state(TRACKED | NEW, 0)).actions([Action::Output(2)]),
        ])
        .unwrap();
    let mut dp = datapath(store);
    let f = udp(1, 1, 2, 2);
    let out = send(&mut dp, 1, &[f.clone(), f.clone()]);
    // The first pass's outputs for the whole batch, then the recirculated pass's.
    assert_eq!(
        out,
        vec![
            (3, f.clone()),
            (3, f.clone()),
            (2, f.clone()),
            (2, f.clone())
        ]
    );
    assert_eq!(dp.stats().recirculations, 2);
}

/// `ct` without `table=` tracks (and commits) and the packet goes on with the next
/// action; `ct_clear` clears the key's ct fields before a later recirculation.
#[test]
fn ct_without_table_goes_on_and_ct_clear_untracks() {
    let store = std::sync::Arc::new(flowpath_pipeline::RuleStore::new(
        flowpath_pipeline::Backend::TupleSpace,
    ));
    let mark = |v: u128| ct_state(TRACKED, 0).with(Field::CtMark, v, 0xffff_ffff);
    let committing = ct(flowpath_packet::CtSpec {
        commit: true,
        zone: flowpath_packet::ct::CtZoneSrc::Value(1),
        set_mark: Some((7, 0xffff_ffff)),
        table: Some(0),
        ..flowpath_packet::CtSpec::new()
    });
    let zone2 = ct(flowpath_packet::CtSpec {
        zone: flowpath_packet::ct::CtZoneSrc::Value(2),
        table: Some(0),
        ..flowpath_packet::CtSpec::new()
    });
    store
        .add([
            // Port 5: ct(commit) without table, then out; the key stays untracked.
            RuleSpec::new(0, 20, ip().exact(Field::InPort, 5))
                .actions([ct_commit(), Action::Output(6)]),
            RuleSpec::new(0, 10, ct_state(0, TRACKED)).actions([committing]),
            RuleSpec::new(0, 10, mark(7).exact(Field::CtZone, 1)).actions([Action::CtClear, zone2]),
            RuleSpec::new(0, 10, mark(0).exact(Field::CtZone, 2)).actions([Action::Output(2)]),
            RuleSpec::new(0, 10, mark(7).exact(Field::CtZone, 2)).actions([Action::Output(3)]),
        ])
        .unwrap();
    let mut dp = datapath(store);
    let f = udp(1, 1, 2, 2);
    assert_eq!(send1(&mut dp, 5, &f), vec![(6, f.clone())]);
    assert_eq!(dp.tracker().len(), 1);
    assert_eq!(dp.stats().recirculations, 0);
    let g = udp(1, 9, 2, 9);
    assert_eq!(
        send1(&mut dp, 1, &g),
        vec![(2, g.clone())],
        "ct_clear zeroed the mark"
    );
    assert_eq!(dp.stats().recirculations, 2);
}

/// A rule change revalidates recirculated megaflows from their stored keys (recirc_id and
/// ct fields in them): unrelated changes keep them, a change to their rule removes them.
#[test]
fn revalidation_keeps_recirculated_megaflows_and_follows_their_rules() {
    let store = security_group(0);
    let mut dp = datapath(store.clone());
    let (a_b, b_a) = (udp(1, 1000, 2, 53), udp(2, 53, 1, 1000));
    send1(&mut dp, 1, &a_b);
    send1(&mut dp, 2, &b_a);
    let (first, recirc) = megaflows_by_pass(&dp);
    store
        .add([RuleSpec::new(5, 1, ip()).actions([Action::Output(9)])])
        .unwrap();
    dp.sync_rules();
    assert_eq!(
        megaflows_by_pass(&dp),
        (first, recirc),
        "an unrelated rule keeps them all"
    );
    // Established from port 2 now dropped: the rule that forwarded it goes.
    delete_established_from_2(&store, 0);
    dp.sync_rules();
    assert_eq!(send1(&mut dp, 2, &b_a), vec![]);
    assert_eq!(send1(&mut dp, 1, &a_b), vec![(2, a_b)]);
}

/// A packet-out's `ct(table=)` recirculates its frame (a copy: it is not in a received
/// batch) through the caches like a received packet's.
#[test]
fn a_packet_out_recirculates_through_ct() {
    let mut dp = datapath(security_group(0));
    let f = udp(1, 1000, 2, 53);
    let po = flowpath_datapath::PacketOut {
        in_port: Some(1),
        actions: vec![ct_recirc(0)],
        data: f.clone(),
    };
    let mut sink = flowpath_datapath::CaptureSink::default();
    dp.packet_out(&po, &mut sink);
    assert_eq!(sink.packets, vec![(2, f)]);
    assert_eq!(dp.tracker().len(), 1);
    assert_eq!(dp.stats().recirculations, 1);
}

/// One pass with a packet that stayed in place and a fork's copy, both recirculating
/// again: they run gathered, and the pass after that runs from the queue; every output in
/// pass order.
#[test]
fn moved_packets_and_copies_recirculate_together() {
    let store = std::sync::Arc::new(flowpath_pipeline::RuleStore::new(
        flowpath_pipeline::Backend::TupleSpace,
    ));
    let zone2 = ct(flowpath_packet::CtSpec {
        zone: flowpath_packet::ct::CtZoneSrc::Value(2),
        table: Some(0),
        ..flowpath_packet::CtSpec::new()
    });
    let untracked_to = |port: u128| ct_state(0, TRACKED).exact(Field::TpDst, port);
    let tracked_in = |zone: u128| ct_state(TRACKED, 0).exact(Field::CtZone, zone);
    store
        .add([
            RuleSpec::new(0, 10, untracked_to(53)).actions([ct_recirc(0)]),
            RuleSpec::new(0, 10, untracked_to(54)).actions([ct_recirc(0), Action::Output(3)]),
            RuleSpec::new(0, 10, tracked_in(1)).actions([zone2]),
            RuleSpec::new(0, 10, tracked_in(2)).actions([Action::Output(2)]),
        ])
        .unwrap();
    let mut dp = datapath(store);
    let (a, b) = (udp(1, 1, 2, 53), udp(1, 1, 2, 54));
    for round in 0..2 {
        let out = send(&mut dp, 1, &[a.clone(), b.clone()]);
        assert_eq!(
            out,
            vec![(3, b.clone()), (2, a.clone()), (2, b.clone())],
            "round {round}"
        );
    }
    let st = dp.stats();
    assert_eq!((st.recirculations, st.recirc_passes), (8, 4));
}
