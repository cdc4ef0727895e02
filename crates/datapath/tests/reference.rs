//! The datapath's decisions equal a deliberately naive evaluator's, packet by packet.
//!
//! Random rule sets (overlapping masks, equal and different priorities, several tables
//! with goto_table, rewrites that later tables match on) and random real frames go through
//! the real datapath (parse, exact-match cache, signature-match cache, megaflow cache,
//! slow path, actions) and through `flowpath_pipeline::reference` (linear scans,
//! re-parsing after every table).
//! The bytes sent to each port and to the controller must be identical: with caches cold,
//! warm, under eviction pressure, with either rule-change policy, and with random rule
//! inserts and deletes interleaved with traffic.

mod common;

use flowpath_datapath::{
    CaptureSink, Datapath, DatapathConfig, DatapathDrop, MissLimits, OnRuleChange,
};
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::ParseOptions;
use flowpath_pipeline::reference::{evaluate, RefOutcome};
use flowpath_pipeline::testing::{arb_headers, arb_rule, arb_rules, frame_of, Headers};
use flowpath_pipeline::{Backend, Change, RuleId, RuleSpec, RuleStore};
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// What the reference says for each packet, flattened in packet order.
/// What left the switch: (port, bytes) in order, and the controller's packets in order.
type Seen = (Vec<(u32, Vec<u8>)>, Vec<Vec<u8>>);

fn expected(store: &RuleStore, frames: &[(u32, Vec<u8>)]) -> Seen {
    let p = store.snapshot();
    let rules: Vec<(RuleId, RuleSpec)> = p.rules().map(|r| (r.id, (*r.spec).clone())).collect();
    let mut outs = Vec::new();
    let mut ctrl = Vec::new();
    for (in_port, f) in frames {
        let RefOutcome {
            outputs,
            controller,
            ..
        } = evaluate(&rules, f, *in_port, &ParseOptions::default());
        outs.extend(outputs);
        ctrl.extend(controller);
    }
    (outs, ctrl)
}

/// Run `frames` through `dp` in batches of at most `batch` packets sharing an in_port.
fn run(dp: &mut Datapath, frames: &[(u32, Vec<u8>)], batch: usize) -> Seen {
    let q = dp.controller_queue();
    let mut sink = CaptureSink::default();
    let mut ctrl = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let port = frames[i].0;
        let mut j = i;
        while j < frames.len() && j - i < batch && frames[j].0 == port {
            j += 1;
        }
        let batch = frames[i..j].iter().map(|(_, f)| f.as_slice());
        common::process(dp, port, batch, &mut sink);
        while let Some(c) = q.pop() {
            ctrl.push(c.data);
        }
        i = j;
    }
    (sink.packets, ctrl)
}

/// Datapath configurations: cache sizes, policies, and the mask limits (a limit of 2
/// subtables, a new-mask rate of one per second: megaflows are evicted by subtable or not
/// cached at all). The miss budget is off: what it drops depends on timing, so it has its
/// own test below.
fn configs() -> impl Strategy<Value = DatapathConfig> {
    (
        any::<bool>(),
        prop::sample::select(vec![1u32, 3]),
        prop::sample::select(vec![4usize, 65536]),
        prop::sample::select(vec![OnRuleChange::Revalidate, OnRuleChange::Flush]),
        prop::sample::select(vec![2usize, 512]),
        prop::sample::select(vec![0u32, 1]),
        // Signature-match cache: off, tiny (ways replaced and slots reused all the time,
        // so stale signatures are the rule), the default size.
        prop::sample::select(vec![0usize, 8, 1 << 20]),
    )
        .prop_map(
            |(emc, inv, max, policy, masks, mask_rate, smc)| DatapathConfig {
                emc,
                emc_entries: 64,
                smc_entries: smc,
                emc_insert_inv_prob: inv,
                megaflow_max: max,
                max_masks: masks,
                miss: MissLimits {
                    new_masks_per_sec: mask_rate,
                    ..MissLimits::off()
                },
                rerank_every: 3,
                stats_push_every: 5,
                on_rule_change: policy,
                ..DatapathConfig::default()
            },
        )
}

fn frames_of(heads: &[Headers]) -> Vec<(u32, Vec<u8>)> {
    heads.iter().map(|h| (h.in_port, frame_of(h))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn cold_and_warm_caches_agree_with_reference(
        rules in arb_rules(4, 30, 4),
        heads in prop::collection::vec(arb_headers(), 1..60),
        cfg in configs(),
        batch in 1usize..=32,
        backend in prop::sample::select(Backend::ALL.to_vec()),
    ) {
        let store = Arc::new(RuleStore::new(backend));
        store.add(rules).unwrap();
        let mut dp = Datapath::new(store.clone(), cfg);
        let frames = frames_of(&heads);
        let want = expected(&store, &frames);
        // Cold, then warm (the same packets again hit the caches), then warm in other batches.
        prop_assert_eq!(&run(&mut dp, &frames, batch), &want, "cold");
        prop_assert_eq!(&run(&mut dp, &frames, batch), &want, "warm");
        prop_assert_eq!(&run(&mut dp, &frames, 1 + batch / 3), &want, "warm, rebatched");
        let s = dp.stats();
        prop_assert_eq!(s.packets, 3 * frames.len() as u64);
        prop_assert_eq!(s.emc_hits + s.megaflow_hits + s.upcalls + s.upcalls_avoided, s.packets - s.parse_drops_total());
        prop_assert!(dp.megaflows().subtables() <= dp.megaflows().max_masks());
        prop_assert!(dp.megaflows().len() <= dp.megaflows().flow_limit());
    }

    /// With a miss budget so small that nearly every miss after a hit is over it, each
    /// packet is either dropped and counted as `miss_budget`, or forwarded exactly as the
    /// reference says: the budget never misforwards, and established flows (cached) pass.
    #[test]
    fn over_budget_misses_are_dropped_and_counted_never_misforwarded(
        rules in arb_rules(3, 20, 4),
        heads in prop::collection::vec(arb_headers(), 1..40),
        masks in prop::sample::select(vec![1usize, 3, 512]),
    ) {
        let store = Arc::new(RuleStore::new(Backend::TupleSpace));
        store.add(rules).unwrap();
        let mut dp = Datapath::new(store.clone(), DatapathConfig {
            emc_entries: 64,
            max_masks: masks,
            miss: MissLimits { slow_path_share: 0.001, quantum_cycles: 1, ..MissLimits::default() },
            ..DatapathConfig::default()
        });
        let frames = frames_of(&heads);
        // Twice over: the second pass has cache hits, so the budget binds.
        for pass in 0..2 {
            for f in &frames {
                let want = expected(&store, std::slice::from_ref(f));
                let before = dp.stats().dropped(DatapathDrop::MissBudget);
                let got = run(&mut dp, std::slice::from_ref(f), 1);
                if dp.stats().dropped(DatapathDrop::MissBudget) > before {
                    prop_assert!(got.0.is_empty() && got.1.is_empty(), "pass {pass}: a dropped miss was forwarded");
                } else {
                    prop_assert_eq!(&got, &want, "pass {}", pass);
                }
            }
        }
        let per_port: u64 = dp.port_miss_stats().iter().map(|(_, p)| p.budget_drops).sum();
        prop_assert_eq!(per_port, dp.stats().dropped(DatapathDrop::MissBudget));
        prop_assert!(dp.megaflows().subtables() <= masks);
    }

    #[test]
    fn rule_changes_interleaved_with_traffic(
        rules in arb_rules(3, 20, 4),
        steps in prop::collection::vec(
            (prop::collection::vec(arb_headers(), 1..12), prop::option::of(arb_rule(3, 4)), any::<prop::sample::Index>(), any::<bool>()),
            1..12),
        cfg in configs(),
    ) {
        let store = Arc::new(RuleStore::new(Backend::TupleSpace));
        store.add(rules).unwrap();
        let mut dp = Datapath::new(store.clone(), cfg);
        for (heads, add, which, delete) in steps {
            let frames = frames_of(&heads);
            let want = expected(&store, &frames);
            prop_assert_eq!(&run(&mut dp, &frames, 8), &want, "before change");
            // Change the rules, then the very next packets must follow the new set.
            // (Delete first: an add may replace the very rule, and a batch that then
            // deletes a replaced id is refused as a whole.)
            let mut changes = Vec::new();
            let ids: Vec<RuleId> = store.snapshot().rules().map(|r| r.id).collect();
            if delete && !ids.is_empty() {
                changes.push(Change::Delete(ids[which.index(ids.len())]));
            }
            if let Some(r) = add {
                changes.push(Change::Add(r));
            }
            if !changes.is_empty() {
                store.apply(changes).unwrap();
            }
            let want = expected(&store, &frames);
            prop_assert_eq!(&run(&mut dp, &frames, 8), &want, "after change");
        }
    }
}

#[test]
fn rule_counters_count_every_packet_on_every_tier() {
    use flowpath_packet::{Action, Field};
    use flowpath_pipeline::Match;
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    let ids = store
        .add([
            RuleSpec::new(0, 10, Match::any().exact(Field::EthType, 0x0800)).goto(1),
            RuleSpec::new(1, 10, Match::any().exact(Field::TpDst, 5001))
                .actions([Action::Output(2)]),
        ])
        .unwrap();
    let mut dp = Datapath::new(
        store.clone(),
        DatapathConfig {
            emc_insert_inv_prob: 1,
            ..DatapathConfig::default()
        },
    );
    let frames: Vec<(u32, Vec<u8>)> = (0..100u16)
        .map(|i| {
            let f = build(&FrameSpec::udp4(
                Ipv4Addr::new(10, 0, 0, (i % 7) as u8),
                Ipv4Addr::new(10, 1, 0, 1),
                1000 + i % 7,
                5001,
                64,
            ));
            (1, f)
        })
        .collect();
    let (outs, _) = run(&mut dp, &frames, 32);
    assert_eq!(outs.len(), 100);
    assert!(
        dp.stats().emc_hits > 0,
        "some packets should hit the EMC: {:?}",
        dp.stats()
    );
    dp.push_rule_stats();
    let p = store.snapshot();
    for r in p.rules() {
        assert_eq!(r.counters.get(), (100, 100 * 60), "rule {:?}", r.id);
    }
    // A rule change credits counters before megaflows go; counters survive the change.
    store
        .apply(vec![Change::Add(
            RuleSpec::new(1, 20, Match::any().exact(Field::TpDst, 5001))
                .actions([Action::Output(3)]),
        )])
        .unwrap();
    let (outs, _) = run(&mut dp, &frames[..10], 32);
    assert!(
        outs.iter().all(|(p, _)| *p == 3),
        "new rule must win at once"
    );
    dp.push_rule_stats();
    let p = store.snapshot();
    let first = p.rules().find(|r| r.id == ids[0]).unwrap();
    assert_eq!(first.counters.get().0, 110);
}

/// Misses of one batch that an earlier miss's new megaflow covers are not classified again:
/// a batch makes exactly as many upcalls and megaflows as the same packets one batch each
/// (where every later packet hits in the megaflow stage), with megaflows of several masks
/// among them, and forwards the same.
#[test]
fn a_batch_upcalls_once_per_megaflow_its_misses_make() {
    use flowpath_packet::{Action, Field};
    use flowpath_pipeline::Match;
    let ip = || Match::any().exact(Field::EthType, 0x0800);
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    store
        .add([
            // 10.1/16 goes on to table 1, which looks at the destination; the rest goes to
            // port 3 on the source's prefix bits: megaflows of different masks.
            RuleSpec::new(0, 20, ip().prefix(Field::Ipv4Src, 0x0a01_0000, 16)).goto(1),
            RuleSpec::new(0, 10, ip()).actions([Action::Output(3)]),
            RuleSpec::new(1, 20, ip().exact(Field::Ipv4Dst, 0xc0a8_0001))
                .actions([Action::Output(2)]),
            RuleSpec::new(1, 10, ip()).actions([Action::Output(4)]),
        ])
        .unwrap();
    let flow = |src: [u8; 4], dst: u8| {
        build(&FrameSpec::udp4(
            Ipv4Addr::from(src),
            Ipv4Addr::new(192, 168, 0, dst),
            1000,
            2000,
            64,
        ))
    };
    let kinds = [
        flow([10, 1, 0, 1], 1),
        flow([10, 1, 0, 2], 2),
        flow([10, 2, 0, 1], 1),
        flow([10, 3, 0, 1], 1),
        flow([172, 16, 0, 1], 1),
        flow([10, 1, 0, 3], 1),
    ];
    let order = [0usize, 1, 0, 2, 1, 0, 3, 2, 4, 5, 4, 1, 3, 0, 5, 2];
    let frames: Vec<(u32, Vec<u8>)> = order.iter().map(|&k| (1, kinds[k].clone())).collect();
    let cfg = || DatapathConfig {
        emc: false,
        smc_entries: 0,
        ..DatapathConfig::default()
    };
    let mut one_by_one = Datapath::new(store.clone(), cfg());
    let want = run(&mut one_by_one, &frames, 1);
    let mut batched = Datapath::new(store.clone(), cfg());
    let got = run(&mut batched, &frames, 32);
    assert_eq!(got, want);
    assert_eq!(got, expected(&store, &frames));
    let (a, b) = (one_by_one.stats(), batched.stats());
    assert!(
        a.upcalls >= 4,
        "the scenario makes several megaflows: {a:?}"
    );
    assert!(
        one_by_one.megaflows().subtables() >= 2,
        "of several masks: {}",
        one_by_one.megaflows().subtables()
    );
    assert_eq!(b.upcalls, a.upcalls, "one upcall per megaflow");
    assert_eq!(b.upcalls_avoided, frames.len() as u64 - a.upcalls);
    assert_eq!(batched.megaflows().len(), one_by_one.megaflows().len());
    assert_eq!(
        batched.megaflows().subtables(),
        one_by_one.megaflows().subtables()
    );
}
