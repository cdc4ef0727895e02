//! The `ct_established` case: 1,024 UDP connections seen both ways through the
//! security-group pipeline of two passes (untracked IP → `ct(table=0,zone=1)`; tracked
//! `+new` committed and forwarded, `+est` forwarded), every packet established: each one
//! takes two passes through the caches (both exact-match hits) and one tracker lookup.
//! Measured as `emc_hit` is (same harness, ports and configuration), so the two compare.
//!
//! The tracked rules are in table 0, the table `ct(table=0)` recirculates into: a
//! recirculated walk decides the same whichever table it starts in.

use crate::workload::IN_PORT;
use flowpath_gen::{build, FrameSpec, InMemorySource};
use flowpath_packet::ct::state::{ESTABLISHED, NEW, TRACKED};
use flowpath_packet::ct::{CtSpec, CtZoneSrc};
use flowpath_packet::{Action, CtId, Field};
use flowpath_pipeline::{Match, RuleSpec};
use std::net::Ipv4Addr;

/// The security group's rules, recirculating into `table`, in_port [`IN_PORT`] both ways
/// (the harness has one generated port: replies arrive on it too).
pub fn security_group_rules(table: u8) -> Vec<RuleSpec> {
    let ct = |spec: CtSpec| Action::Ct(CtId::intern(spec).expect("two ct specs"));
    let zone = CtZoneSrc::Value(1);
    let recirc = ct(CtSpec {
        zone,
        table: Some(table),
        ..CtSpec::new()
    });
    let commit = ct(CtSpec {
        commit: true,
        zone,
        ..CtSpec::new()
    });
    let state = |on: u8, mask: u8| {
        Match::any().exact(Field::EthType, 0x0800).with(
            Field::CtState,
            u128::from(on),
            u128::from(mask),
        )
    };
    let trk = |on: u8| state(TRACKED | on, TRACKED | on).exact(Field::InPort, IN_PORT as u128);
    vec![
        RuleSpec::new(0, 100, state(0, TRACKED)).actions([recirc]),
        RuleSpec::new(table, 90, trk(NEW)).actions([commit, Action::Output(2)]),
        RuleSpec::new(table, 90, trk(ESTABLISHED)).actions([Action::Output(2)]),
    ]
}

/// `connections` UDP connections, each as its two directions' frames (A→B, then B→A).
pub fn ct_established(connections: usize, frame_size: usize) -> (Vec<RuleSpec>, InMemorySource) {
    let mut templates = Vec::with_capacity(2 * connections);
    for i in 0..connections {
        let a = Ipv4Addr::from(0x0b00_0000 | i as u32);
        let b = Ipv4Addr::from(0x0a00_0001 | ((i as u32 % 16) << 16));
        let sport = 1024 + (i % 50_000) as u16;
        templates.push(build(&FrameSpec::udp4(a, b, sport, 5001, frame_size)));
        templates.push(build(&FrameSpec::udp4(b, a, 5001, sport, frame_size)));
    }
    (security_group_rules(0), InMemorySource::new(templates))
}
