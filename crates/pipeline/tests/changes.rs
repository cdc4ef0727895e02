//! Rule changes against a naive model: every sequence of adds, deletes (by id, strict, by
//! selector), modifies, replaces and clears leaves the store with exactly the rules a
//! plain list manipulated step by step would have — same ids, same specs — and rules that
//! survive a modify or replace keep their counters.

use flowpath_packet::{Action, Field, FlowKey};
use flowpath_pipeline::testing::arb_rule;
use flowpath_pipeline::{
    now_ns, Backend, Change, Match, RuleError, RuleId, RuleSpec, RuleStore, Selector,
};
use proptest::prelude::*;
use std::collections::HashMap;

/// The model: a list of (id, spec) in insertion order and the next id.
#[derive(Clone, Debug, Default)]
struct Model {
    rules: Vec<(RuleId, RuleSpec)>,
    next: u64,
}

impl Model {
    fn new_id(&mut self) -> RuleId {
        self.next += 1;
        RuleId(self.next)
    }

    fn apply(&mut self, changes: &[Change]) -> Result<(), RuleError> {
        let mut m = self.clone();
        for c in changes {
            match c {
                Change::Add(spec) => {
                    spec.validate()?;
                    m.rules.retain(|(_, r)| {
                        !(r.table == spec.table
                            && r.priority == spec.priority
                            && r.matches == spec.matches)
                    });
                    let id = m.new_id();
                    m.rules.push((id, spec.clone()));
                }
                Change::Delete(id) => {
                    let before = m.rules.len();
                    m.rules.retain(|(i, _)| i != id);
                    if m.rules.len() == before {
                        return Err(RuleError::NoSuchRule(*id));
                    }
                }
                Change::DeleteStrict {
                    table,
                    priority,
                    matches,
                } => m.rules.retain(|(_, r)| {
                    !(r.table == *table && r.priority == *priority && r.matches == *matches)
                }),
                Change::DeleteWhere(sel) => m.rules.retain(|(_, r)| !selects(sel, r)),
                Change::Modify {
                    selector,
                    actions,
                    goto,
                    write_actions,
                    clear_actions,
                    reset_counts: _,
                } => {
                    for (_, r) in m.rules.iter_mut() {
                        if selects(selector, r) {
                            r.actions.clone_from(actions);
                            r.goto = *goto;
                            r.write_actions.clone_from(write_actions);
                            r.clear_actions = *clear_actions;
                            r.validate()?;
                        }
                    }
                }
                Change::Clear => m.rules.clear(),
                Change::AddGroup(_) | Change::ModifyGroup(_) | Change::DeleteGroup(_) => {
                    unreachable!("no group changes here (tests/groups.rs has them)")
                }
                Change::Replace(specs) => {
                    for s in specs {
                        s.validate()?;
                    }
                    let key = |r: &RuleSpec| (r.table, r.priority, r.matches);
                    let mut last = HashMap::new();
                    for (i, s) in specs.iter().enumerate() {
                        last.insert(key(s), i);
                    }
                    let old: HashMap<_, RuleId> =
                        m.rules.iter().map(|(id, r)| (key(r), *id)).collect();
                    let mut new = Vec::new();
                    for (i, s) in specs.iter().enumerate() {
                        if last[&key(s)] != i {
                            continue;
                        }
                        let id = match old.get(&key(s)) {
                            Some(id) => *id,
                            None => m.new_id(),
                        };
                        new.push((id, s.clone()));
                    }
                    new.sort_by_key(|(id, _)| *id);
                    m.rules = new;
                }
            }
        }
        *self = m;
        Ok(())
    }

    fn sorted(&self) -> Vec<(RuleId, RuleSpec)> {
        let mut v = self.rules.clone();
        v.sort_by_key(|(id, _)| *id);
        v
    }
}

/// The model's own selection, written out from OpenFlow's definition (not `Selector::selects`).
fn selects(sel: &Selector, r: &RuleSpec) -> bool {
    if let Some(t) = sel.table {
        if t != r.table {
            return false;
        }
    }
    if r.cookie & sel.cookie_mask != sel.cookie & sel.cookie_mask {
        return false;
    }
    if let Some(p) = sel.priority {
        return r.priority == p && r.matches == sel.matches;
    }
    // Non-strict: every bit the selector matches on, the rule matches on too, with the
    // same value.
    // Port fields with a range are compared as sets of ports, by brute force.
    let (s, m) = (&sel.matches, &r.matches);
    let ranged = s.has_ranges() || m.has_ranges();
    let strip = |x: &FlowKey| {
        let mut x = *x;
        if ranged {
            x.set(Field::TpSrc, 0);
            x.set(Field::TpDst, 0);
        }
        x.words
    };
    let (sm, sv) = (strip(&s.mask), strip(&s.value));
    let (rm, rv) = (strip(&m.mask), strip(&m.value));
    let bits = (0..sm.len()).all(|i| sm[i] & rm[i] == sm[i] && (sv[i] ^ rv[i]) & sm[i] == 0);
    let ports = !ranged
        || [(Field::TpSrc, 0), (Field::TpDst, 1)]
            .iter()
            .all(|&(f, slot)| {
                let has = |x: &Match, p: u16| {
                    (p as u128 & x.mask.get(f)) == x.value.get(f) && x.ports[slot].contains(p)
                };
                (0..=u16::MAX).all(|p| !has(m, p) || has(s, p))
            });
    bits && ports
}

fn store_rules(s: &RuleStore) -> Vec<(RuleId, RuleSpec)> {
    let mut v: Vec<_> = s
        .snapshot()
        .rules()
        .map(|r| (r.id, (*r.spec).clone()))
        .collect();
    v.sort_by_key(|(id, _)| *id);
    v
}

fn arb_selector() -> impl Strategy<Value = Selector> {
    (
        prop::option::of(0u8..3),
        arb_rule(3, 4),
        prop::option::of(prop::sample::select(vec![1u16, 2, 3, 5, 8])),
        prop::bool::ANY,
    )
        .prop_map(|(table, r, priority, any_match)| Selector {
            table,
            matches: if any_match { Match::any() } else { r.matches },
            priority,
            cookie: r.cookie,
            cookie_mask: 0,
            out_port: None,
            out_group: None,
        })
        .prop_flat_map(|sel| {
            // Sometimes select by cookie (rules' cookies are 0, so a mask either keeps or
            // drops everything; both paths get exercised).
            (Just(sel), prop::sample::select(vec![0u64, 0, 1, 0xff]))
        })
        .prop_map(|(mut sel, mask)| {
            sel.cookie = mask & 1;
            sel.cookie_mask = mask;
            sel
        })
}

fn arb_change(n_ids: u64) -> impl Strategy<Value = Change> {
    prop_oneof![
        6 => arb_rule(3, 4).prop_map(Change::Add),
        2 => (1..=n_ids.max(1)).prop_map(|i| Change::Delete(RuleId(i))),
        1 => arb_rule(3, 4).prop_map(|r| Change::DeleteStrict {
            table: r.table,
            priority: r.priority,
            matches: r.matches,
        }),
        2 => arb_selector().prop_map(Change::DeleteWhere),
        2 => (arb_selector(), arb_rule(3, 4)).prop_map(|(selector, r)| Change::Modify {
            selector,
            actions: r.actions,
            goto: r.goto,
            write_actions: r.write_actions,
            clear_actions: r.clear_actions,
            reset_counts: false,
        }),
        1 => Just(Change::Clear),
        1 => prop::collection::vec(arb_rule(3, 4), 0..12).prop_map(Change::Replace),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Batches of random changes: the store and the model agree after every batch, and a
    /// refused batch changes neither.
    #[test]
    fn changes_match_the_model(
        batches in prop::collection::vec(prop::collection::vec(arb_change(24), 1..6), 1..10),
    ) {
        let store = RuleStore::new(Backend::TupleSpace);
        let mut model = Model::default();
        for batch in batches {
            let want = model.apply(&batch);
            let got = store.apply(batch.clone());
            prop_assert_eq!(want.is_ok(), got.is_ok(), "batch {:?}: model {:?} store {:?}", batch, want, got);
            prop_assert_eq!(store_rules(&store), model.sorted());
        }
    }
}

#[test]
fn modify_and_replace_keep_counters_and_age() {
    let store = RuleStore::new(Backend::TupleSpace);
    let m = Match::any().exact(Field::TpDst, 80);
    let a = RuleSpec::new(0, 10, m).actions([Action::Output(1)]);
    let b = RuleSpec::new(0, 5, Match::any()).actions([Action::Output(2)]);
    let ids = store.add([a.clone(), b.clone()]).unwrap();
    let snap = store.snapshot();
    let rule_a = snap.rules().find(|r| r.id == ids[0]).unwrap().clone();
    rule_a.counters.add(3, 180);

    // Modify: actions change, counters stay.
    let done = store
        .apply(vec![Change::Modify {
            selector: Selector {
                priority: Some(10),
                matches: m,
                ..Selector::all()
            },
            actions: vec![Action::Output(3)],
            goto: None,
            write_actions: Vec::new(),
            clear_actions: false,
            reset_counts: false,
        }])
        .unwrap();
    assert_eq!(done.modified, 1);
    let snap = store.snapshot();
    let now_a = snap.rules().find(|r| r.id == ids[0]).unwrap();
    assert_eq!(now_a.spec.actions, vec![Action::Output(3)]);
    assert_eq!(now_a.counters.get(), (3, 180));

    // Replace: a kept with new actions (same id and counters), b gone, c new.
    let c = RuleSpec::new(1, 1, Match::any()).actions([Action::Output(4)]);
    let a2 = RuleSpec::new(0, 10, m).actions([Action::Output(9)]);
    let done = store
        .apply(vec![Change::Replace(vec![a2.clone(), c.clone()])])
        .unwrap();
    assert_eq!((done.added.len(), done.modified, done.removed), (1, 1, 1));
    let snap = store.snapshot();
    let kept = snap.rules().find(|r| r.id == ids[0]).unwrap();
    assert_eq!(*kept.spec, a2);
    assert_eq!(kept.counters.get(), (3, 180));
    assert_eq!(kept.counters.added_ns, rule_a.counters.added_ns);
    assert!(snap.rules().all(|r| r.id != ids[1]));
    assert_eq!(snap.rules().count(), 2);

    // Non-strict delete: everything at least as specific as tp_dst=80.
    let done = store
        .apply(vec![Change::DeleteWhere(Selector {
            matches: m,
            ..Selector::all()
        })])
        .unwrap();
    assert_eq!(done.removed, 1);
    assert_eq!(store.snapshot().rules().count(), 1);
}

#[test]
fn timeouts_expire_rules() {
    let store = RuleStore::new(Backend::TupleSpace);
    let mut idle = RuleSpec::new(0, 1, Match::any().exact(Field::TpDst, 1));
    idle.idle_timeout = 1;
    let mut hard = RuleSpec::new(0, 1, Match::any().exact(Field::TpDst, 2));
    hard.hard_timeout = 2;
    let forever = RuleSpec::new(0, 1, Match::any().exact(Field::TpDst, 3));
    let ids = store.add([idle, hard, forever]).unwrap();
    let t0 = now_ns();
    const S: u64 = 1_000_000_000;
    assert!(store.expire(t0).unwrap().is_empty());

    // Used half a second in: the idle rule's clock restarts (simulated via last_used).
    let snap = store.snapshot();
    let idle_rule = snap.rules().find(|r| r.id == ids[0]).unwrap();
    idle_rule
        .counters
        .last_used_ns
        .store(t0 + S / 2, std::sync::atomic::Ordering::Relaxed);
    assert!(store.expire(t0 + S).unwrap().is_empty(), "used 0.5 s ago");
    let gone = store.expire(t0 + S + S / 2 + 1).unwrap();
    assert_eq!(gone.iter().map(|r| r.id).collect::<Vec<_>>(), vec![ids[0]]);
    let gone = store.expire(t0 + 2 * S + 1).unwrap();
    assert_eq!(gone.iter().map(|r| r.id).collect::<Vec<_>>(), vec![ids[1]]);
    let left: Vec<RuleId> = store.snapshot().rules().map(|r| r.id).collect();
    assert_eq!(left, vec![ids[2]]);
    assert!(store.expire(t0 + 1000 * S).unwrap().is_empty());
}

#[test]
fn replace_of_many_rules_is_one_version() {
    let store = RuleStore::new(Backend::TupleSpace);
    let specs = |port: u32| -> Vec<RuleSpec> {
        (0..20_000u32)
            .map(|i| {
                RuleSpec::new(0, 100, Match::any().exact(Field::Ipv4Dst, i as u128))
                    .actions([Action::Output(port)])
            })
            .collect()
    };
    store.add(specs(1)).unwrap();
    let v = store.version();
    let done = store.apply(vec![Change::Replace(specs(2))]).unwrap();
    assert_eq!(done.version, v + 1);
    assert_eq!(
        (done.added.len(), done.modified, done.removed),
        (0, 20_000, 0)
    );
    assert!(store
        .snapshot()
        .rules()
        .all(|r| r.spec.actions == [Action::Output(2)]));
}
