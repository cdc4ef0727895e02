//! Connection tracking in the slow path: rules that match ct fields and keys that carry
//! them (tracked, recirculated). Every backend must pick the rule a naive scan picks in
//! each table; translations must agree across backends and with the reference evaluator
//! run on the frame with the same ct state; megaflows must be sound; a recirculated pass
//! starts in its table with the recirculation id exact in its mask, and a first pass
//! leaves the id out of its mask.

use flowpath_packet::rewrite;
use flowpath_packet::{parse, Action, Field, FlowKey, Packet, ParseOptions, KEY_WORDS};
use flowpath_pipeline::reference::evaluate_pass;
use flowpath_pipeline::testing::{
    arb_ct_headers, arb_ct_rule, arb_headers, frame_of, key_of, with_ct,
};
use flowpath_pipeline::{Backend, Match, RuleError, RuleId, RuleSpec, RuleStore};
use proptest::prelude::*;

fn store_with(backend: Backend, rules: &[RuleSpec]) -> RuleStore {
    let s = RuleStore::new(backend);
    s.add(rules.iter().cloned())
        .expect("generated rules are valid");
    s
}

fn naive_best(rules: &[(RuleId, RuleSpec)], table: u8, key: &FlowKey) -> Option<RuleId> {
    rules
        .iter()
        .filter(|(_, r)| r.table == table && r.matches.matches(key))
        .max_by(|(ia, a), (ib, b)| a.priority.cmp(&b.priority).then(ib.cmp(ia)))
        .map(|(id, _)| *id)
}

fn perturb(key: &FlowKey, mask: &FlowKey, noise: &[u64; KEY_WORDS]) -> FlowKey {
    let mut k = *key;
    for ((w, m), n) in k.words.iter_mut().zip(&mask.words).zip(noise) {
        *w = (*w & m) | (n & !m);
    }
    k
}

/// The translation's actions run on the frame as the datapath runs them (ct and
/// ct_clear act on the tracker and the key, not on the bytes).
fn execute(actions: &[Action], frame: &[u8], in_port: u32) -> Vec<(u32, Vec<u8>)> {
    let headroom = 128;
    let mut buf = vec![0u8; headroom + frame.len() + 64];
    buf[headroom..headroom + frame.len()].copy_from_slice(frame);
    let mut pkt = Packet::new(&mut buf, headroom, frame.len());
    let mut key = FlowKey::ZERO;
    let mut meta = parse(pkt.data(), in_port, &ParseOptions::default(), &mut key).unwrap();
    let mut outs = Vec::new();
    for a in actions {
        match *a {
            Action::Output(p) if p != in_port => outs.push((p, pkt.data().to_vec())),
            Action::Output(_) | Action::Controller { .. } => {}
            Action::InPort => outs.push((in_port, pkt.data().to_vec())),
            _ => {
                if rewrite::apply(a, &mut pkt, &mut meta).is_err() {
                    break;
                }
            }
        }
    }
    outs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn ct_rules_classify_alike_in_every_backend(
        rules in prop::collection::vec(arb_ct_rule(3, 4), 1..=40),
        heads in prop::collection::vec((arb_headers(), arb_ct_headers(3)), 1..16),
        noise in prop::collection::vec(prop::array::uniform21(any::<u64>()), 1..4),
    ) {
        let mut first: Option<Vec<_>> = None;
        for backend in Backend::ALL {
            let store = store_with(backend, &rules);
            let p = store.snapshot();
            let installed: Vec<(RuleId, RuleSpec)> =
                p.rules().map(|r| (r.id, (*r.spec).clone())).collect();
            let mut got = Vec::new();
            for (h, c) in &heads {
                let key = with_ct(key_of(h), c);
                for t in 0..3u8 {
                    let mut wc = FlowKey::ZERO;
                    let won = p.table(t).and_then(|tb| tb.lookup(&key, &mut wc))
                        .map(|i| p.table(t).unwrap().rules()[i as usize].id);
                    prop_assert_eq!(won, naive_best(&installed, t, &key), "{:?} table {}", backend, t);
                }
                let tr = p.translate(&key);
                let recirc = tr.mask.get(Field::RecircId);
                match c.recirc {
                    Some(t) => {
                        prop_assert_eq!(recirc, u32::MAX as u128, "recirculated: id exact");
                        prop_assert!(tr.path.first().is_none_or(|r| r.table == t), "starts in {}", t);
                    }
                    None => prop_assert_eq!(recirc, 0, "first pass: id wildcarded"),
                }
                for n in &noise {
                    // A first pass's megaflow holds first-pass keys only (the datapath
                    // keeps the passes apart): its neighbours have recirc_id 0 too.
                    let mut other = perturb(&key, &tr.mask, n);
                    if c.recirc.is_none() {
                        other.set(Field::RecircId, 0);
                    }
                    let tr2 = p.translate(&other);
                    prop_assert_eq!(&tr2.actions, &tr.actions, "{:?}: {:?} vs {:?} under {:?}", backend, key, other, tr.mask);
                    prop_assert_eq!(tr2.ending, tr.ending);
                }
                got.push((tr.actions.clone(), tr.ending));
            }
            match &first {
                None => first = Some(got),
                Some(f) => prop_assert_eq!(f, &got, "{:?} translates unlike the first backend", backend),
            }
        }
    }

    #[test]
    fn ct_translation_executes_as_the_reference(
        rules in prop::collection::vec(arb_ct_rule(3, 4), 1..=16),
        heads in prop::collection::vec((arb_headers(), arb_ct_headers(3)), 1..12),
    ) {
        let store = store_with(Backend::TupleSpace, &rules);
        let p = store.snapshot();
        let installed: Vec<(RuleId, RuleSpec)> =
            p.rules().map(|r| (r.id, (*r.spec).clone())).collect();
        for (h, c) in &heads {
            let frame = frame_of(h);
            let mut key = FlowKey::ZERO;
            parse(&frame, h.in_port, &ParseOptions::default(), &mut key).unwrap();
            let key = with_ct(key, c);
            let tr = p.translate(&key);
            let got = execute(&tr.actions, &frame, h.in_port);
            let want = evaluate_pass(&installed, &[], &frame, h.in_port, &ParseOptions::default(), &key);
            prop_assert_eq!(&got, &want.outputs, "key {:?}\nactions {:?}\nreference ending {:?}", key, tr.actions, want.ending);
        }
    }
}

#[test]
fn a_recirculated_key_starts_in_its_table() {
    use flowpath_packet::ct::{recirc_id, state};
    let store = RuleStore::new(Backend::TupleSpace);
    let est = Match::any().with(
        Field::CtState,
        (state::TRACKED | state::ESTABLISHED) as u128,
        0x22,
    );
    store
        .add([
            RuleSpec::new(0, 1, Match::any()).actions([Action::Output(9)]),
            RuleSpec::new(1, 5, est).actions([Action::Output(2)]),
            RuleSpec::new(1, 1, Match::any()),
        ])
        .unwrap();
    let p = store.snapshot();
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, 1);
    let first = p.translate(&k);
    assert_eq!(&first.actions[..], &[Action::Output(9)]);
    assert_eq!(first.mask.get(Field::RecircId), 0);
    k.set(Field::RecircId, recirc_id(1) as u128);
    k.set(Field::CtState, 0x22);
    let second = p.translate(&k);
    assert_eq!(&second.actions[..], &[Action::Output(2)]);
    assert_eq!(second.path[0].table, 1);
    assert_eq!(second.mask.get(Field::RecircId), u32::MAX as u128);
    assert_eq!(second.mask.get(Field::CtState), 0x22);
    // Untracked in table 1 (a ct_clear or a rule's own ct without table): the other rule.
    k.set(Field::CtState, 0);
    assert!(p.translate(&k).actions.is_empty());
}

#[test]
fn a_rule_matching_the_recirculation_id_is_refused() {
    let store = RuleStore::new(Backend::TupleSpace);
    let e = store
        .add([RuleSpec::new(0, 1, Match::any().exact(Field::RecircId, 2))])
        .unwrap_err();
    assert_eq!(e, RuleError::InternalField(Field::RecircId));
}

#[test]
fn a_zone_from_metadata_is_read_during_the_walk() {
    use flowpath_packet::ct::{CtId, CtSpec, CtZoneSrc};
    let by_field = CtSpec {
        zone: CtZoneSrc::Field {
            field: Field::Metadata,
            ofs: 4,
            bits: 16,
        },
        table: Some(2),
        ..CtSpec::new()
    };
    let store = RuleStore::new(Backend::TupleSpace);
    store
        .add([
            RuleSpec::new(0, 1, Match::any())
                .actions([Action::WriteMetadata {
                    value: 0x5_0000 | 0x70,
                    mask: 0xff_ffff,
                }])
                .goto(1),
            RuleSpec::new(1, 1, Match::any()).actions([
                Action::Ct(CtId::intern(by_field).unwrap()),
                Action::Output(2),
            ]),
        ])
        .unwrap();
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, 1);
    k.set(Field::EthType, 0x0800);
    let tr = store.snapshot().translate(&k);
    // The recirculated pass gets the metadata written before the ct.
    assert!(matches!(
        tr.actions[0],
        Action::WriteMetadata {
            value: 0x5_0070,
            ..
        }
    ));
    let Action::Ct(id) = tr.actions[1] else {
        panic!("{:?}", tr.actions)
    };
    assert_eq!(id.spec().zone, CtZoneSrc::Value(0x5007));
    assert_eq!(id.spec().table, Some(2));
    assert_eq!(tr.actions[2], Action::Output(2));
    assert_eq!(tr.mask.get(Field::Metadata), 0xff_ffff);
}

#[test]
fn ct_in_a_group_bucket_is_refused() {
    use flowpath_pipeline::{Bucket, Change, GroupSpec, GroupType};
    let ct = Action::Ct(flowpath_packet::CtId::intern(flowpath_packet::CtSpec::new()).unwrap());
    for a in [ct, Action::CtClear] {
        let store = RuleStore::new(Backend::TupleSpace);
        let g = GroupSpec::new(1, GroupType::All, vec![Bucket::new([a, Action::Output(2)])]);
        let e = store.apply(vec![Change::AddGroup(g)]).unwrap_err();
        assert!(e.to_string().contains("ct and ct_clear in a bucket"), "{e}");
    }
}

#[test]
fn a_recirculation_carries_the_walks_metadata() {
    use flowpath_packet::ct::{CtId, CtSpec};
    let ct = Action::Ct(
        CtId::intern(CtSpec {
            table: Some(2),
            ..CtSpec::new()
        })
        .unwrap(),
    );
    let store = RuleStore::new(Backend::TupleSpace);
    store
        .add([
            RuleSpec::new(0, 2, Match::any().exact(Field::InPort, 1))
                .actions([Action::WriteMetadata {
                    value: 0x5,
                    mask: 0xff_ffff,
                }])
                .goto(1),
            RuleSpec::new(0, 1, Match::any()).goto(1),
            RuleSpec::new(1, 1, Match::any()).actions([ct, Action::Output(3)]),
        ])
        .unwrap();
    let p = store.snapshot();
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, 1);
    let tr = p.translate(&k);
    let write = Action::WriteMetadata {
        value: 0x5,
        mask: 0xff_ffff,
    };
    assert_eq!(&tr.actions[..], &[write, ct, Action::Output(3)]);
    assert_eq!(tr.mask.get(Field::Metadata), 0xff_ffff);
    // Metadata as the packet has it: nothing to write.
    k.set(Field::InPort, 2);
    let tr = p.translate(&k);
    assert_eq!(&tr.actions[..], &[ct, Action::Output(3)]);
    assert_eq!(tr.mask.get(Field::Metadata), 0xff_ffff);
}
