//! OpenFlow 1.3 pipeline semantics: the action set (write-actions, clear-actions), groups
//! (ALL, SELECT, INDIRECT; each bucket on its own copy of the packet), flow flags and
//! removal reasons.
//!
//! The property tests run random rule sets with write/clear-actions and random groups:
//! the slow path's flattened action list, executed on a real frame the way the datapath
//! executes it, must send the same bytes to the same ports and the controller as the
//! naive reference (`flowpath_pipeline::reference`, which keeps the action set as a list
//! and runs every bucket on a real copy of the packet); and any key that agrees with a
//! translated key on its megaflow's mask must translate to the same actions and path.

use flowpath_packet::rewrite;
use flowpath_packet::{parse, Action, Field, FlowKey, Packet, ParseOptions, KEY_WORDS};
use flowpath_pipeline::reference::evaluate_with_groups;
use flowpath_pipeline::testing::{arb_groups, arb_headers, arb_of_rule, frame_of, key_of};
use flowpath_pipeline::{
    Backend, Bucket, Change, FlowFlags, GroupSpec, GroupType, Match, RemovalReason, RuleError,
    RuleId, RuleSpec, RuleStore, Selector, GROUP_ALL,
};
use proptest::prelude::*;

type Seen = (Vec<(u32, Vec<u8>)>, Vec<Vec<u8>>);

/// Execute a flattened action list on `frame` as the datapath does (`execute` in
/// flowpath_datapath): outputs copy the packet as it is, rewrites change it, a rewrite
/// that drops ends the list.
fn execute(actions: &[Action], frame: &[u8], in_port: u32) -> Seen {
    let headroom = 128;
    let mut buf = vec![0u8; headroom + frame.len() + 64];
    buf[headroom..headroom + frame.len()].copy_from_slice(frame);
    let mut pkt = Packet::new(&mut buf, headroom, frame.len());
    let mut key = FlowKey::ZERO;
    let mut meta = parse(pkt.data(), in_port, &ParseOptions::default(), &mut key).unwrap();
    meta.strip_outer(&mut pkt);
    let (mut outs, mut ctrl) = (Vec::new(), Vec::new());
    for a in actions {
        match *a {
            Action::Output(p) => {
                if p != in_port {
                    outs.push((p, pkt.data().to_vec()));
                }
            }
            Action::InPort => outs.push((in_port, pkt.data().to_vec())),
            Action::Controller { max_len, .. } => {
                let n = pkt.len().min(max_len as usize);
                ctrl.push(pkt.data()[..n].to_vec());
            }
            Action::Group(_) => panic!("a translation holds no group action: {actions:?}"),
            _ => {
                if rewrite::apply(a, &mut pkt, &mut meta).is_err() {
                    break;
                }
            }
        }
    }
    (outs, ctrl)
}

fn store_with(groups: &[GroupSpec], rules: &[RuleSpec]) -> RuleStore {
    let store = RuleStore::new(Backend::TupleSpace);
    let mut changes: Vec<Change> = groups.iter().cloned().map(Change::AddGroup).collect();
    changes.extend(rules.iter().cloned().map(Change::Add));
    store.apply(changes).unwrap();
    store
}

/// `key` with the bits outside `mask` taken from `other`.
fn blend(key: &FlowKey, mask: &FlowKey, other: &FlowKey) -> FlowKey {
    let mut k = *key;
    for i in 0..KEY_WORDS {
        k.words[i] = (key.words[i] & mask.words[i]) | (other.words[i] & !mask.words[i]);
    }
    k
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn translation_executes_as_the_reference_with_action_sets_and_groups(
        groups in arb_groups(3, 4),
        rules in prop::collection::vec(arb_of_rule(3, 4, 3), 1..=16),
        hs in prop::collection::vec(arb_headers(), 1..12),
    ) {
        let store = store_with(&groups, &rules);
        let p = store.snapshot();
        let installed: Vec<(RuleId, RuleSpec)> =
            p.rules().map(|r| (r.id, (*r.spec).clone())).collect();
        for h in &hs {
            let frame = frame_of(h);
            let mut key = FlowKey::ZERO;
            parse(&frame, h.in_port, &ParseOptions::default(), &mut key).unwrap();
            let tr = p.translate(&key);
            let got = execute(&tr.actions, &frame, h.in_port);
            let want = evaluate_with_groups(
                &installed, &groups, &frame, h.in_port, &ParseOptions::default());
            prop_assert_eq!(
                &got, &(want.outputs.clone(), want.controller.clone()),
                "key {:?}\nactions {:?}\nreference ending {:?}", key, tr.actions, want.ending
            );
        }
    }

    #[test]
    fn megaflows_with_action_sets_and_groups_are_exact(
        groups in arb_groups(3, 4),
        rules in prop::collection::vec(arb_of_rule(3, 4, 3), 1..=16),
        hs in prop::collection::vec(arb_headers(), 1..8),
        others in prop::collection::vec(arb_headers(), 1..8),
    ) {
        let store = store_with(&groups, &rules);
        let p = store.snapshot();
        for h in &hs {
            let key = key_of(h);
            let tr = p.translate(&key);
            for o in &others {
                let k2 = blend(&key, &tr.mask, &key_of(o));
                let tr2 = p.translate(&k2);
                prop_assert_eq!(&tr2.actions, &tr.actions, "key {:?} vs {:?}", key, k2);
                prop_assert_eq!(&tr2.path, &tr.path);
                prop_assert_eq!(tr2.ending, tr.ending);
            }
        }
    }
}

fn v4(a: [u8; 4]) -> u128 {
    u32::from_be_bytes(a) as u128
}

fn udp_key(in_port: u32, dst: [u8; 4]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, in_port as u128);
    k.set(Field::EthType, 0x0800);
    k.set(Field::NwProto, 17);
    k.set(Field::NwTtl, 64);
    k.set(Field::Ipv4Dst, v4(dst));
    k.set(Field::TpDst, 53);
    k
}

#[test]
fn all_group_buckets_see_the_packet_before_the_group() {
    let g = GroupSpec::new(
        1,
        GroupType::All,
        vec![
            Bucket::new([Action::SetIpv4Dst([9, 9, 9, 9]), Action::Output(2)]),
            Bucket::new([Action::PushVlan { tpid: 0x8100 }, Action::Output(3)]),
            Bucket::new([Action::Output(4)]),
        ],
    );
    let r = RuleSpec::new(0, 1, Match::any()).actions([Action::Group(1), Action::Output(5)]);
    let store = store_with(&[g], &[r]);
    let tr = store.snapshot().translate(&udp_key(1, [10, 0, 0, 1]));
    assert_eq!(
        tr.actions.as_slice(),
        &[
            Action::SetIpv4Dst([9, 9, 9, 9]),
            Action::Output(2),
            Action::SetIpv4Dst([10, 0, 0, 1]), // back to the pre-group value
            Action::PushVlan { tpid: 0x8100 },
            Action::Output(3),
            Action::PopVlan, // back to untagged
            Action::Output(4),
            Action::Output(5),
        ]
    );
    // The restored field is exact in the megaflow.
    assert_eq!(tr.mask.get(Field::Ipv4Dst), 0xffff_ffff);
    // Path: the rule, the group, its three buckets.
    assert_eq!(tr.path.len(), 5);
    assert!(tr.path[1..].iter().all(|r| r.is_group()));
}

#[test]
fn trailing_compensation_is_dropped() {
    let g = GroupSpec::new(
        1,
        GroupType::All,
        vec![
            Bucket::new([Action::Output(2)]),
            Bucket::new([Action::SetTpDst(99), Action::Output(3)]),
        ],
    );
    let r = RuleSpec::new(0, 1, Match::any()).actions([Action::Group(1)]);
    let store = store_with(&[g], &[r]);
    let tr = store.snapshot().translate(&udp_key(1, [10, 0, 0, 1]));
    assert_eq!(
        tr.actions.as_slice(),
        &[Action::Output(2), Action::SetTpDst(99), Action::Output(3)]
    );
}

#[test]
fn action_set_runs_at_the_end_in_spec_order_and_group_beats_output() {
    let g = GroupSpec::new(
        7,
        GroupType::Indirect,
        vec![Bucket::new([Action::Output(8)])],
    );
    let t0 = RuleSpec::new(0, 1, Match::any())
        .actions([Action::Output(1)])
        .write_actions([Action::Output(2), Action::SetTpDst(80), Action::DecTtl])
        .goto(1);
    let t1 = RuleSpec::new(1, 1, Match::any())
        .write_actions([Action::SetTpDst(443), Action::PopVlan])
        .goto(2);
    let t2 = RuleSpec::new(2, 1, Match::any()).actions([Action::Output(3)]);
    let store = store_with(std::slice::from_ref(&g), &[t0.clone(), t1, t2]);
    let mut k = udp_key(9, [10, 0, 0, 1]);
    k.set(Field::VlanTci, 0x1000 | 5);
    let tr = store.snapshot().translate(&k);
    assert_eq!(
        tr.actions.as_slice(),
        &[
            Action::Output(1),
            Action::Output(3),
            Action::PopVlan,
            Action::DecTtl,
            Action::SetTpDst(443),
            Action::Output(2),
        ]
    );

    // A group in the set replaces the output; clear-actions empties the set.
    let t1 = RuleSpec::new(1, 1, Match::any())
        .write_actions([Action::Group(7)])
        .goto(2);
    let t2 = RuleSpec::new(2, 1, Match::any());
    let store = store_with(std::slice::from_ref(&g), &[t0.clone(), t1, t2]);
    let tr = store.snapshot().translate(&k);
    assert_eq!(
        tr.actions.as_slice(),
        &[
            Action::Output(1),
            Action::DecTtl,
            Action::SetTpDst(80),
            Action::Output(8)
        ]
    );
    let t1 = RuleSpec::new(1, 1, Match::any())
        .clear_actions(true)
        .goto(2);
    let t2 = RuleSpec::new(2, 1, Match::any()).write_actions([Action::Output(4)]);
    let store = store_with(&[g], &[t0, t1, t2]);
    let tr = store.snapshot().translate(&k);
    assert_eq!(
        tr.actions.as_slice(),
        &[Action::Output(1), Action::Output(4)]
    );
}

#[test]
fn select_group_is_stable_and_unwildcards_what_it_hashes() {
    let g = GroupSpec::new(
        1,
        GroupType::Select,
        vec![
            Bucket::new([Action::Output(2)]).weight(1),
            Bucket::new([Action::Output(3)]).weight(3),
            Bucket::new([Action::Output(4)]).weight(0),
        ],
    );
    let r = RuleSpec::new(0, 1, Match::any()).actions([Action::Group(1)]);
    let store = store_with(&[g], &[r]);
    let p = store.snapshot();
    let mut seen = [0usize; 5];
    for i in 0..400u32 {
        let mut k = udp_key(1, [10, 0, (i >> 8) as u8, i as u8]);
        k.set(Field::TpSrc, 1000 + i as u128);
        let tr = p.translate(&k);
        assert_eq!(tr, p.translate(&k), "stable");
        assert_eq!(tr.mask.get(Field::TpSrc), 0xffff);
        assert_eq!(tr.mask.get(Field::Ipv4Dst), 0xffff_ffff);
        match tr.actions.as_slice() {
            [Action::Output(o)] => seen[*o as usize] += 1,
            a => panic!("{a:?}"),
        }
    }
    assert_eq!(seen[4], 0, "weight 0 is never chosen");
    assert!(seen[3] > seen[2] && seen[2] > 40, "by weight: {seen:?}");
}

#[test]
fn group_changes_are_checked_and_versioned_with_the_rules() {
    let store = RuleStore::new(Backend::TupleSpace);
    let g = |id, kind| GroupSpec::new(id, kind, vec![Bucket::new([Action::Output(1)])]);
    let v0 = store.version();
    // A rule naming a missing group is refused, and so is the whole batch.
    let r = RuleSpec::new(0, 1, Match::any()).actions([Action::Group(5)]);
    let e = store
        .apply(vec![
            Change::AddGroup(g(4, GroupType::All)),
            Change::Add(r.clone()),
        ])
        .unwrap_err();
    assert_eq!(e, RuleError::UnknownGroupRef { group: 5 });
    assert!(store.snapshot().groups().is_empty());
    assert_eq!(store.version(), v0);
    // Added in the same batch, before the rule: fine, one version.
    let done = store
        .apply(vec![Change::AddGroup(g(5, GroupType::All)), Change::Add(r)])
        .unwrap();
    assert_eq!((done.groups_added, done.added.len()), (1, 1));
    assert_eq!(store.version(), v0 + 1);
    assert!(matches!(
        store.apply(vec![Change::AddGroup(g(5, GroupType::All))]),
        Err(RuleError::GroupExists(5))
    ));
    assert!(matches!(
        store.apply(vec![Change::ModifyGroup(g(6, GroupType::All))]),
        Err(RuleError::NoSuchGroup(6))
    ));
    assert!(matches!(
        store.apply(vec![Change::AddGroup(g(6, GroupType::FastFailover))]),
        Err(RuleError::BadGroup { group: 6, .. })
    ));
    assert!(matches!(
        store.apply(vec![Change::AddGroup(g(0xffff_ff01, GroupType::All))]),
        Err(RuleError::BadGroupId(_))
    ));
    let chained = GroupSpec::new(6, GroupType::All, vec![Bucket::new([Action::Group(5)])]);
    assert!(matches!(
        store.apply(vec![Change::AddGroup(chained)]),
        Err(RuleError::BadGroup { group: 6, .. })
    ));
    let two = GroupSpec::new(
        6,
        GroupType::Indirect,
        vec![Bucket::new([]), Bucket::new([])],
    );
    assert!(store.apply(vec![Change::AddGroup(two)]).is_err());
    // Modify keeps the group's counters; a modified group is what the next snapshot runs.
    let p = store.snapshot();
    let tr = p.translate(&udp_key(2, [1, 2, 3, 4]));
    for r in &tr.path {
        p.rule(*r).counters.add(2, 200);
    }
    let gt = p.groups();
    assert_eq!(gt.get(5).unwrap().counters.group.get(), (2, 200));
    assert_eq!(gt.get(5).unwrap().counters.buckets[0].get(), (2, 200));
    assert_eq!(gt.resolve(tr.path[1]), Some((5, None)));
    assert_eq!(gt.resolve(tr.path[2]), Some((5, Some(0))));
    let done = store
        .apply(vec![Change::ModifyGroup(GroupSpec::new(
            5,
            GroupType::All,
            vec![Bucket::new([Action::Output(7)])],
        ))])
        .unwrap();
    assert_eq!(done.groups_modified, 1);
    let p = store.snapshot();
    assert_eq!(p.groups().get(5).unwrap().counters.group.get(), (2, 200));
    assert_eq!(
        p.translate(&udp_key(2, [1, 2, 3, 4])).actions.as_slice(),
        &[Action::Output(7)]
    );
}

#[test]
fn deleting_a_group_deletes_the_rules_that_name_it() {
    let g = |id| GroupSpec::new(id, GroupType::All, vec![Bucket::new([Action::Output(1)])]);
    let uses = |prio, id| {
        RuleSpec::new(0, prio, Match::any().exact(Field::TpDst, prio as u128))
            .actions([Action::Group(id)])
    };
    let writes = RuleSpec::new(1, 1, Match::any()).write_actions([Action::Group(2)]);
    let other = RuleSpec::new(0, 9, Match::any()).actions([Action::Output(3)]);
    let store = store_with(
        &[g(1), g(2), g(3)],
        &[uses(1, 1), uses(2, 1), writes, uses(3, 3), other],
    );
    let done = store.apply(vec![Change::DeleteGroup(1)]).unwrap();
    assert_eq!((done.groups_removed, done.removed), (1, 2));
    assert!(done
        .removed_rules
        .iter()
        .all(|r| r.reason == RemovalReason::GroupDelete && r.rule.spec.groups().eq([1])));
    assert_eq!(store.snapshot().rules().count(), 3);
    // A group that is not there: not an error, nothing removed.
    assert_eq!(
        store.apply(vec![Change::DeleteGroup(1)]).unwrap().removed,
        0
    );
    // out_group selects by the groups a rule names (write-actions too).
    let done = store
        .apply(vec![Change::DeleteWhere(Selector {
            out_group: Some(2),
            ..Selector::all()
        })])
        .unwrap();
    assert_eq!(done.removed, 1);
    assert_eq!(done.removed_rules[0].reason, RemovalReason::Delete);
    // ALL: every group, and every rule naming one.
    let done = store.apply(vec![Change::DeleteGroup(GROUP_ALL)]).unwrap();
    assert_eq!((done.groups_removed, done.removed), (2, 1));
    assert!(store.snapshot().groups().is_empty());
    assert_eq!(store.snapshot().rules().count(), 1);
}

#[test]
fn modify_replaces_the_instructions_and_reset_counts_zeroes_counters() {
    let m = Match::any().exact(Field::TpDst, 53);
    let r = RuleSpec::new(0, 5, m)
        .actions([Action::Output(1)])
        .write_actions([Action::Output(2)])
        .clear_actions(true)
        .goto(1)
        .cookie(77)
        .flags(FlowFlags {
            send_flow_rem: true,
            ..FlowFlags::default()
        });
    let store = store_with(&[], &[r]);
    let before = store.snapshot().rules().next().unwrap().clone();
    before.counters.add(4, 400);
    let modify = |reset| Change::Modify {
        selector: Selector {
            priority: Some(5),
            matches: m,
            ..Selector::all()
        },
        actions: vec![Action::Output(3)],
        goto: None,
        write_actions: vec![Action::SetTpDst(1)],
        clear_actions: false,
        reset_counts: reset,
    };
    store.apply(vec![modify(false)]).unwrap();
    let after = store.snapshot().rules().next().unwrap().clone();
    assert_eq!(after.id, before.id);
    assert_eq!(after.spec.actions, vec![Action::Output(3)]);
    assert_eq!(after.spec.write_actions, vec![Action::SetTpDst(1)]);
    assert!(!after.spec.clear_actions);
    assert_eq!(after.spec.goto, None);
    assert_eq!(after.spec.cookie, 77, "cookie and flags stay");
    assert!(after.spec.flags.send_flow_rem);
    assert_eq!(after.counters.get(), (4, 400));
    store.apply(vec![modify(true)]).unwrap();
    let reset = store.snapshot().rules().next().unwrap().clone();
    assert_eq!(reset.counters.get(), (0, 0));
    assert_eq!(
        reset.counters.added_ns, before.counters.added_ns,
        "age stays"
    );
}

#[test]
fn check_overlap_refuses_a_rule_that_could_share_a_packet() {
    let flags = FlowFlags {
        check_overlap: true,
        ..FlowFlags::default()
    };
    let a = RuleSpec::new(0, 5, Match::any().prefix(Field::Ipv4Dst, 0x0a00_0000, 8));
    let store = store_with(&[], std::slice::from_ref(&a));
    // Overlapping (a /16 inside the /8) at the same priority: refused.
    let b = RuleSpec::new(0, 5, Match::any().prefix(Field::Ipv4Dst, 0x0a01_0000, 16));
    assert!(matches!(
        store.apply(vec![Change::Add(b.clone().flags(flags))]),
        Err(RuleError::Overlap {
            table: 0,
            priority: 5,
            ..
        })
    ));
    // An identical match overlaps too.
    assert!(store
        .apply(vec![Change::Add(a.clone().flags(flags))])
        .is_err());
    // Without the flag, or at another priority, or disjoint, or in another table: fine.
    let mut ok = b.clone();
    ok.priority = 6;
    let disjoint = RuleSpec::new(0, 5, Match::any().prefix(Field::Ipv4Dst, 0x0b00_0000, 8));
    let mut other_table = b.clone();
    other_table.table = 1;
    for r in [ok, disjoint, other_table] {
        store.apply(vec![Change::Add(r.flags(flags))]).unwrap();
    }
    store.apply(vec![Change::Add(b)]).unwrap();
}

#[test]
fn removed_rules_carry_their_reason_and_counters() {
    let r = RuleSpec::new(0, 1, Match::any()).actions([Action::Output(1)]);
    let mut hard = RuleSpec::new(0, 2, Match::any().exact(Field::TpDst, 1));
    hard.hard_timeout = 1;
    let mut idle = RuleSpec::new(0, 3, Match::any().exact(Field::TpDst, 2));
    idle.idle_timeout = 1;
    let store = store_with(&[], &[r, hard, idle]);
    let t0 = flowpath_pipeline::now_ns();
    let gone = store.expire_removed(t0 + 2_000_000_000).unwrap();
    let mut reasons: Vec<_> = gone
        .iter()
        .map(|g| (g.rule.spec.priority, g.reason))
        .collect();
    reasons.sort_by_key(|x| x.0);
    assert_eq!(
        reasons,
        vec![
            (2, RemovalReason::HardTimeout),
            (3, RemovalReason::IdleTimeout)
        ]
    );
    store.snapshot().rules().next().unwrap().counters.add(1, 60);
    let done = store.apply(vec![Change::Clear]).unwrap();
    assert_eq!(done.removed_rules.len(), 1);
    assert_eq!(done.removed_rules[0].reason, RemovalReason::Delete);
    assert_eq!(done.removed_rules[0].rule.counters.get(), (1, 60));
}

#[test]
fn write_metadata_carries_a_value_to_later_tables_and_nothing_to_the_datapath() {
    // Table 0 tags by ingress port; table 1 forwards by the tag.
    let rules = [
        RuleSpec::new(0, 10, Match::any().exact(Field::InPort, 1)).actions([
            Action::WriteMetadata {
                value: 0x42,
                mask: 0xff,
            },
        ]),
        RuleSpec::new(0, 10, Match::any().exact(Field::InPort, 2)).actions([
            Action::Output(9),
            Action::WriteMetadata {
                value: 0x7,
                mask: 0xff_ffff,
            },
        ]),
        RuleSpec::new(1, 10, Match::any().with(Field::Metadata, 0x42, 0xff))
            .actions([Action::Output(3)]),
        RuleSpec::new(1, 5, Match::any()).actions([Action::Output(4)]),
    ];
    let rules: Vec<RuleSpec> = rules
        .into_iter()
        .map(|mut r| {
            if r.table == 0 {
                r.goto = Some(1);
            }
            r
        })
        .collect();
    let store = store_with(&[], &rules);
    let snap = store.snapshot();
    let a = snap.translate(&udp_key(1, [10, 0, 0, 1]));
    assert_eq!(a.actions.as_slice(), &[Action::Output(3)]);
    let b = snap.translate(&udp_key(2, [10, 0, 0, 1]));
    assert_eq!(
        b.actions.as_slice(),
        &[Action::Output(9), Action::Output(4)]
    );
    // Packets are keyed with metadata 0: the megaflows hold for every real packet.
    for tr in [&a, &b] {
        assert_eq!(tr.mask.get(Field::Metadata) & !0xff_ffff, 0);
    }
    // Anywhere but last in the apply-actions, or wider than 24 bits, is refused.
    let bad = [
        RuleSpec::new(0, 1, Match::any()).actions([
            Action::WriteMetadata { value: 1, mask: 1 },
            Action::Output(1),
        ]),
        RuleSpec::new(0, 1, Match::any()).actions([Action::WriteMetadata {
            value: 1 << 24,
            mask: 1 << 24,
        }]),
        RuleSpec::new(0, 1, Match::any())
            .write_actions([Action::WriteMetadata { value: 1, mask: 1 }]),
    ];
    for r in bad {
        assert!(
            matches!(r.validate(), Err(RuleError::BadAction { .. })),
            "{r:?}"
        );
    }
}
