//! The datapath's connection-tracking decisions equal a simple model's, batch by batch.
//!
//! Random batches of UDP packets go through the security group (`ct(table=0)`: two
//! passes, both through the caches) with the EMC, the SMC and a small megaflow cache on or
//! off; the model is a set of connections: a packet from port 1 is forwarded to port 2
//! and commits its connection, a packet from port 2 is forwarded to port 1 only when it
//! answers a connection committed in an earlier batch, and nothing else passes.

mod ct_common;

use ct_common::*;
use flowpath_datapath::{Datapath, DatapathConfig, MissLimits};
use proptest::prelude::*;
use std::collections::HashSet;

/// What port 2 sends: the reply of connection `i`, or a packet of nobody's connection.
#[derive(Clone, Copy, Debug)]
enum Back {
    Reply(u16),
    Stranger(u16),
}

#[derive(Clone, Debug)]
enum Batch {
    /// Port 1 opens (or continues) these connections.
    Out(Vec<u16>),
    In(Vec<Back>),
}

/// What left the datapath: (port, frame).
type Outputs = Vec<(u32, Vec<u8>)>;

fn batch() -> impl Strategy<Value = Batch> {
    let conn = 0u16..6;
    prop_oneof![
        prop::collection::vec(conn.clone(), 1..40).prop_map(Batch::Out),
        prop::collection::vec(
            prop_oneof![
                conn.clone().prop_map(Back::Reply),
                conn.prop_map(Back::Stranger)
            ],
            1..40
        )
        .prop_map(Batch::In),
    ]
}

fn forward(i: u16) -> Vec<u8> {
    udp(1, 1000 + i, 2, 53)
}

fn frame(b: Back) -> Vec<u8> {
    match b {
        Back::Reply(i) => udp(2, 53, 1, 1000 + i),
        Back::Stranger(i) => udp(3, 53, 1, 1000 + i),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_datapath_tracks_as_the_model_says(
        batches in prop::collection::vec(batch(), 1..14),
        emc in any::<bool>(),
        smc in prop::sample::select(vec![0usize, 4096]),
        megaflow_max in prop::sample::select(vec![2usize, 4096]),
    ) {
        let mut dp = Datapath::new(
            security_group(0),
            DatapathConfig {
                emc,
                emc_insert_inv_prob: 1,
                smc_entries: smc,
                megaflow_max,
                miss: MissLimits::unbudgeted(),
                ..DatapathConfig::default()
            },
        );
        let mut committed: HashSet<u16> = HashSet::new();
        for b in &batches {
            let (port, frames, want): (u32, Vec<Vec<u8>>, Outputs) = match b {
                Batch::Out(conns) => {
                    let f: Vec<Vec<u8>> = conns.iter().map(|&i| forward(i)).collect();
                    let w = f.iter().map(|f| (2, f.clone())).collect();
                    (1, f, w)
                }
                Batch::In(backs) => {
                    let w = backs
                        .iter()
                        .filter(|b| matches!(b, Back::Reply(i) if committed.contains(i)))
                        .map(|&b| (1, frame(b)))
                        .collect();
                    (2, backs.iter().map(|&b| frame(b)).collect(), w)
                }
            };
            // A flow's frames here are identical, so sorted outputs compare what each flow
            // sent (flows may leave a batch in another order: ct_equivalence checks that a
            // flow's own packets keep theirs).
            let (mut got, mut want) = (send(&mut dp, port, &frames), want);
            got.sort();
            want.sort();
            prop_assert_eq!(got, want);
            if let Batch::Out(conns) = b {
                committed.extend(conns.iter().copied());
            }
        }
        prop_assert_eq!(dp.tracker().len(), committed.len());
    }
}
