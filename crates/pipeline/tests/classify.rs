//! Classifier properties at the key level (no packets): every backend agrees with a naive
//! scan and with the others, and every megaflow is sound — any key that agrees
//! with the classified key on the megaflow's mask gets the same actions and the same mask.

use flowpath_packet::{Field, FlowKey, KEY_WORDS};
use flowpath_pipeline::testing::{arb_headers, arb_rules, key_of};
use flowpath_pipeline::{Backend, Change, RuleId, RuleSpec, RuleStore};
use proptest::prelude::*;

fn store_with(backend: Backend, rules: &[RuleSpec]) -> (RuleStore, Vec<RuleId>) {
    let s = RuleStore::new(backend);
    let ids = s
        .add(rules.iter().cloned())
        .expect("generated rules are valid");
    (s, ids)
}

/// The naive answer for one table: scan every rule, best (priority, then oldest) wins.
fn naive_best(rules: &[(RuleId, RuleSpec)], table: u8, key: &FlowKey) -> Option<RuleId> {
    rules
        .iter()
        .filter(|(_, r)| r.table == table && r.matches.matches(key))
        .max_by(|(ia, a), (ib, b)| a.priority.cmp(&b.priority).then(ib.cmp(ia)))
        .map(|(id, _)| *id)
}

/// Randomise every key bit outside `mask`, except the recirculation id: a first pass's
/// megaflow holds first-pass keys only (the datapath keeps the passes apart, so the id is
/// not in its mask).
fn perturb(key: &FlowKey, mask: &FlowKey, noise: &[u64; KEY_WORDS]) -> FlowKey {
    let mut k = *key;
    for ((w, m), n) in k.words.iter_mut().zip(&mask.words).zip(noise) {
        *w = (*w & m) | (n & !m);
    }
    k.set(Field::RecircId, key.get(Field::RecircId));
    k
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn table_lookup_equals_naive_scan(
        rules in arb_rules(3, 40, 4),
        heads in prop::collection::vec(arb_headers(), 1..20),
    ) {
        // Rules in which add order changes the winner among equal priorities are kept:
        // the ids decide, identically for all three.
        for backend in Backend::ALL {
            let (store, _) = store_with(backend, &rules);
            let p = store.snapshot();
            let installed: Vec<(RuleId, RuleSpec)> = p.rules().map(|r| (r.id, (*r.spec).clone())).collect();
            for h in &heads {
                let key = key_of(h);
                for t in 0..3u8 {
                    let mut wc = FlowKey::ZERO;
                    let got = p.table(t).and_then(|tb| tb.lookup(&key, &mut wc)).map(|i| p.table(t).unwrap().rules()[i as usize].id);
                    prop_assert_eq!(got, naive_best(&installed, t, &key), "backend {:?} table {}", backend, t);
                }
            }
        }
    }

    #[test]
    fn backends_translate_alike(
        rules in arb_rules(4, 40, 4),
        heads in prop::collection::vec(arb_headers(), 1..20),
    ) {
        let (tss, _) = store_with(Backend::TupleSpace, &rules);
        let (lin, _) = store_with(Backend::Linear, &rules);
        let (a, b) = (tss.snapshot(), lin.snapshot());
        for h in &heads {
            let key = key_of(h);
            let (ta, tb) = (a.translate(&key), b.translate(&key));
            prop_assert_eq!(&ta.actions, &tb.actions);
            prop_assert_eq!(ta.ending, tb.ending);
        }
    }

    #[test]
    fn megaflows_are_sound(
        rules in arb_rules(4, 40, 4),
        heads in prop::collection::vec(arb_headers(), 1..12),
        noise in prop::collection::vec(prop::array::uniform21(any::<u64>()), 1..6),
        backend in prop::sample::select(Backend::ALL.to_vec()),
    ) {
        let (store, _) = store_with(backend, &rules);
        let p = store.snapshot();
        for h in &heads {
            let key = key_of(h);
            let tr = p.translate(&key);
            prop_assert!(tr.mask.get(Field::InPort) == u32::MAX as u128, "in_port always exact");
            for n in &noise {
                let other = perturb(&key, &tr.mask, n);
                let tr2 = p.translate(&other);
                prop_assert_eq!(&tr2.actions, &tr.actions, "key {:?} vs {:?} under mask {:?}", key, other, tr.mask);
                prop_assert_eq!(tr2.ending, tr.ending);
                // Every backend may give a neighbour another (equally sound) mask: the tree
                // and the linear list pick the cheapest separating field per key, and
                // tuple-space search the cheapest field its prefix tries rule a subtable
                // out on. Megaflows may then overlap, with equal actions.
            }
        }
    }

    #[test]
    fn changes_are_atomic_and_versioned(
        rules in arb_rules(3, 30, 4),
        bad_at in 0usize..30,
    ) {
        let store = RuleStore::new(Backend::TupleSpace);
        store.add(rules.iter().cloned()).unwrap();
        let before: Vec<RuleId> = store.snapshot().rules().map(|r| r.id).collect();
        let v = store.version();
        // A batch with one invalid rule changes nothing.
        let mut batch: Vec<Change> = rules.iter().cloned().map(Change::Add).collect();
        let mut bad = rules[0].clone();
        bad.table = 2;
        bad.goto = Some(1);
        batch.insert(bad_at.min(batch.len()), Change::Add(bad));
        prop_assert!(store.apply(batch).is_err());
        prop_assert_eq!(store.version(), v);
        let after: Vec<RuleId> = store.snapshot().rules().map(|r| r.id).collect();
        prop_assert_eq!(before, after);
    }
}

#[test]
fn identical_match_and_priority_replaces() {
    let store = RuleStore::new(Backend::TupleSpace);
    let m = flowpath_pipeline::Match::any().exact(Field::TpDst, 80);
    store
        .add([RuleSpec::new(0, 5, m).actions([flowpath_packet::Action::Output(1)])])
        .unwrap();
    store
        .add([RuleSpec::new(0, 5, m).actions([flowpath_packet::Action::Output(2)])])
        .unwrap();
    let p = store.snapshot();
    assert_eq!(p.rules().count(), 1);
    let mut k = FlowKey::ZERO;
    k.set(Field::TpDst, 80);
    assert_eq!(
        &p.translate(&k).actions[..],
        &[flowpath_packet::Action::Output(2)]
    );
}

#[test]
fn delete_strict_and_clear() {
    let store = RuleStore::new(Backend::TupleSpace);
    let m = flowpath_pipeline::Match::any().exact(Field::TpDst, 80);
    let ids = store
        .add([
            RuleSpec::new(0, 5, m),
            RuleSpec::new(1, 5, m),
            RuleSpec::new(0, 6, m),
        ])
        .unwrap();
    store
        .apply(vec![Change::DeleteStrict {
            table: 0,
            priority: 5,
            matches: m,
        }])
        .unwrap();
    let left: Vec<RuleId> = store.snapshot().rules().map(|r| r.id).collect();
    assert_eq!(left, vec![ids[2], ids[1]]);
    store.apply(vec![Change::Delete(ids[1])]).unwrap();
    assert!(store.apply(vec![Change::Delete(ids[1])]).is_err());
    store.apply(vec![Change::Clear]).unwrap();
    assert_eq!(store.snapshot().rules().count(), 0);
    assert_eq!(store.version(), 4);
}

/// A rule on one host must not give every other host a megaflow of its own: with the lab's
/// rules (drop one source, forward the rest) a thousand sources share one megaflow, in
/// every backend (tuple-space search through its prefix tries) except tuple-space search
/// without them, where each source gets its own.
#[test]
fn a_rule_on_one_host_leaves_other_hosts_one_megaflow() {
    use flowpath_packet::key::ethertype;
    use flowpath_packet::Action;
    let host = |a: u32| a as u128;
    for backend in Backend::ALL {
        let store = RuleStore::new(backend);
        let ip = flowpath_pipeline::Match::any()
            .exact(Field::InPort, 1)
            .exact(Field::EthType, ethertype::IPV4 as u128);
        store
            .add([
                RuleSpec::new(0, 200, ip.exact(Field::Ipv4Src, host(0x0a0a_01fe))),
                RuleSpec::new(
                    0,
                    100,
                    flowpath_pipeline::Match::any().exact(Field::InPort, 1),
                )
                .actions([Action::Output(2)]),
                RuleSpec::new(0, 0, flowpath_pipeline::Match::any()),
            ])
            .unwrap();
        let p = store.snapshot();
        let mut megaflows = std::collections::HashSet::new();
        for i in 1..=1000u32 {
            let mut k = FlowKey::ZERO;
            k.set(Field::InPort, 1);
            k.set(Field::EthType, ethertype::IPV4 as u128);
            k.set(Field::Ipv4Src, host(0x0a01_0000 + i)); // 10.1.0.1 ..
            k.set(Field::Ipv4Dst, host(0x0a02_0001));
            k.set(Field::NwProto, 17);
            k.set(Field::TpSrc, 1000 + i as u128);
            let tr = p.translate(&k);
            assert_eq!(&tr.actions[..], &[Action::Output(2)], "{backend:?}");
            let mut masked = k;
            for (w, m) in masked.words.iter_mut().zip(&tr.mask.words) {
                *w &= m;
            }
            megaflows.insert((masked, tr.mask));
        }
        let want = if backend == Backend::TupleSpaceWholeMasks {
            1000
        } else {
            1
        };
        assert_eq!(megaflows.len(), want, "{backend:?}");
        // The dropped host itself still gets its own exact megaflow.
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 1);
        k.set(Field::EthType, ethertype::IPV4 as u128);
        k.set(Field::Ipv4Src, host(0x0a0a_01fe));
        let tr = p.translate(&k);
        assert!(tr.actions.is_empty(), "{backend:?}");
        assert_eq!(tr.mask.get(Field::Ipv4Src), u32::MAX as u128, "{backend:?}");
    }
}
