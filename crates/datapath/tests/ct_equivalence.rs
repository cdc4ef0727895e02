//! Caches against the slow path for connection-tracking pipelines: random rule sets of
//! `ct` (recirculating, committing, in zones), `ct_clear`, outputs and `ct_state` matches,
//! and random UDP traffic both ways, through a datapath with every cache on and through
//! one where (nearly) every pass is classified afresh (no EMC, no SMC, a one-megaflow
//! cache). Both track the same packets in the same order, so each flow's packets sent to
//! each port must be identical, in the same order (the cached one answers second passes
//! from its ct memo too). The rules are in table 0, where `ct(table=0)` recirculates, so the
//! decisions do not depend on the table a recirculated walk starts in.

mod ct_common;

use ct_common::*;
use flowpath_datapath::{Datapath, DatapathConfig, MissLimits};
use flowpath_packet::ct::state::{ESTABLISHED, NEW, REPLY_DIR, TRACKED};
use flowpath_packet::ct::CtZoneSrc;
use flowpath_packet::{Action, CtSpec, Field};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};
use proptest::prelude::*;
use std::sync::Arc;

fn ct_action() -> impl Strategy<Value = Action> {
    (
        any::<bool>(),
        0u16..3,
        any::<bool>(),
        prop::option::of(0u32..3),
    )
        .prop_map(|(commit, zone, recirc, mark)| {
            ct(CtSpec {
                commit,
                zone: CtZoneSrc::Value(zone),
                table: recirc.then_some(0),
                set_mark: mark.filter(|_| commit).map(|m| (m, 0xff)),
                ..CtSpec::new()
            })
        })
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => ct_action(),
        3 => (1u32..4).prop_map(Action::Output),
        1 => Just(Action::CtClear),
    ]
}

fn rule() -> impl Strategy<Value = RuleSpec> {
    let flags = prop::sample::select(vec![TRACKED, NEW, ESTABLISHED, REPLY_DIR]);
    (
        0u16..4,
        prop::collection::vec((flags, any::<bool>()), 0..3),
        prop::option::of(1u32..3),
        prop::option::of(0u128..3),
        prop::option::of(0u128..3),
        prop::collection::vec(action(), 0..4),
    )
        .prop_map(|(prio, states, port, zone, mark, actions)| {
            let mut m = Match::any().exact(Field::EthType, 0x0800);
            let (mut on, mut mask) = (0u8, 0u8);
            for (f, set) in states {
                mask |= f;
                if set {
                    on |= f;
                }
            }
            if mask != 0 {
                m = m.with(Field::CtState, u128::from(on), u128::from(mask));
            }
            if let Some(p) = port {
                m = m.exact(Field::InPort, u128::from(p));
            }
            if let Some(z) = zone {
                m = m.exact(Field::CtZone, z);
            }
            if let Some(v) = mark {
                m = m.with(Field::CtMark, v, 0xff);
            }
            RuleSpec::new(0, prio, m).actions(actions)
        })
}

/// A batch: its port and its packets (connection, direction).
fn batch() -> impl Strategy<Value = (u32, Vec<(u16, bool)>)> {
    (
        1u32..3,
        prop::collection::vec((0u16..5, any::<bool>()), 1..24),
    )
}

fn frame(conn: u16, reply: bool) -> Vec<u8> {
    if reply {
        udp(2, 53, 1, 1000 + conn)
    } else {
        udp(1, 1000 + conn, 2, 53)
    }
}

/// Where the IPv4 identification is in [`frame`]'s frames: not in the flow key, so each
/// packet carries its sequence number there and the flows stay the same.
const IP_ID: usize = 14 + 4;

/// What each batch sent: per (port, flow: the frame without its sequence number), the
/// sequence numbers in the order they left. Packets of different flows may leave a batch
/// in another order (the ct memo sends a packet in its first pass, the slow path after
/// it), a flow's own packets may not.
type Sent = Vec<std::collections::BTreeMap<(u32, Vec<u8>), Vec<u16>>>;

fn run(dp: &mut Datapath, batches: &[(u32, Vec<(u16, bool)>)]) -> Sent {
    let mut seq = 0u16;
    batches
        .iter()
        .map(|(port, pkts)| {
            let frames: Vec<Vec<u8>> = pkts
                .iter()
                .map(|&(c, r)| {
                    let mut f = frame(c, r);
                    seq += 1;
                    f[IP_ID..IP_ID + 2].copy_from_slice(&seq.to_be_bytes());
                    f
                })
                .collect();
            let mut by_flow = std::collections::BTreeMap::new();
            for (p, mut f) in send(dp, *port, &frames) {
                let n = u16::from_be_bytes([f[IP_ID], f[IP_ID + 1]]);
                f[IP_ID..IP_ID + 2].fill(0);
                by_flow.entry((p, f)).or_insert_with(Vec::new).push(n);
            }
            by_flow
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn cached_and_uncached_datapaths_decide_alike(
        rules in prop::collection::vec(rule(), 1..8),
        batches in prop::collection::vec(batch(), 1..10),
    ) {
        let store = Arc::new(RuleStore::new(Backend::TupleSpace));
        // Same table, priority and match: the later replaces the earlier (both stores).
        store.add(rules).unwrap();
        let mut cached = datapath_with(store.clone(), true, 4096);
        let mut slow = Datapath::new(
            store,
            DatapathConfig {
                emc: false,
                smc_entries: 0,
                megaflow_max: 1,
                miss: MissLimits::unbudgeted(),
                ..DatapathConfig::default()
            },
        );
        let a = run(&mut cached, &batches);
        let b = run(&mut slow, &batches);
        prop_assert_eq!(a, b);
        prop_assert_eq!(cached.tracker().len(), slow.tracker().len());
        prop_assert_eq!(cached.stats().drops(), slow.stats().drops());
    }
}
