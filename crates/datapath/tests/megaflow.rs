//! `MegaflowCache` on its own: install and lookup (one key and a batch, against a simple
//! reference), CLOCK eviction, generations, revalidation, flush, counters, events, and the
//! limits: masks (cold-subtable eviction, refusal), emptied subtables, the dynamic flow limit.

use flowpath_datapath::{MegaflowCache, MegaflowEvent};
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_pipeline::{now_ns, Backend, Change, Match, Pipeline, RuleSpec, RuleStore};
use std::sync::Arc;

/// Table 0: 10.0.0.0/8 → port 2, other IPv4 → port 3; table 1 is never reached.
fn store() -> RuleStore {
    let s = RuleStore::new(Backend::TupleSpace);
    let ip = || Match::any().exact(Field::EthType, 0x0800);
    s.add([
        RuleSpec::new(0, 10, ip().prefix(Field::Ipv4Dst, 0x0a00_0000, 8))
            .actions([Action::Output(2)]),
        RuleSpec::new(0, 5, ip()).actions([Action::Output(3)]),
    ])
    .unwrap();
    s
}

fn key(src: u32, dst: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, 1);
    k.set(Field::EthType, 0x0800);
    k.set(Field::Ipv4Src, src as u128);
    k.set(Field::Ipv4Dst, dst as u128);
    k
}

fn install(c: &mut MegaflowCache, p: &Pipeline, k: &FlowKey) -> u32 {
    c.install(k, p.translate(k), p)
}

#[test]
fn an_installed_megaflow_answers_every_key_it_covers_and_no_other() {
    let s = store();
    let p = s.snapshot();
    let mut c = MegaflowCache::new(1024, 7);
    let slot = install(&mut c, &p, &key(1, 0x0a01_0101));
    assert_eq!(c.entry(slot).actions(), &[Action::Output(2)]);
    // The source address was never looked at: any source hits; another /8 does not.
    assert_eq!(c.lookup(&key(99, 0x0a02_0202)), Some(slot));
    assert_eq!(c.lookup(&key(1, 0x0b01_0101)), None);
    let other = install(&mut c, &p, &key(1, 0x0b01_0101));
    assert_ne!(other, slot);
    assert_eq!(c.len(), 2);

    // The batch lookup gives what one lookup per key gives (the reference).
    let keys: Vec<FlowKey> = (0..32u32)
        .map(|i| {
            key(
                i,
                [0x0a00_0001, 0x0b00_0001, 0x0c00_0001][i as usize % 3] + i,
            )
        })
        .collect();
    let want: Vec<Option<u32>> = keys.iter().map(|k| c.lookup(k)).collect();
    let mut out = [u32::MAX; 32];
    let left = c.lookup_batch(&keys, u32::MAX, &mut out);
    for (i, w) in want.iter().enumerate() {
        match w {
            Some(s) => assert!(left & (1 << i) == 0 && out[i] == *s, "key {i}"),
            None => assert!(left & (1 << i) != 0, "key {i} must stay pending"),
        }
    }
}

#[test]
fn clock_evicts_what_was_not_used_since_the_hand_last_passed() {
    let s = store();
    let p = s.snapshot();
    let mut c = MegaflowCache::new(4, 7);
    let dst = |n: u32| (11 + n) << 24; // one megaflow per /8 (the /8 rule's bits are examined)
    let ids: Vec<_> = (0..4)
        .map(|n| {
            c.begin_batch();
            let slot = install(&mut c, &p, &key(1, dst(n)));
            c.id(slot)
        })
        .collect();
    // Full: a new megaflow is installed unmarked (only a hit in a later batch marks it),
    // so the next install takes the first entry at once.
    c.begin_batch();
    let e = install(&mut c, &p, &key(1, dst(4)));
    let _ = c.id(e);
    assert!(
        c.get(ids[0]).is_none(),
        "the oldest unreferenced entry goes"
    );
    assert_eq!(c.len(), 4);
    // Entry 1 is used again; entry 2 is not: the next eviction spares 1 and takes 2.
    c.begin_batch();
    c.hit(ids[1].slot(), 60);
    c.begin_batch();
    install(&mut c, &p, &key(1, dst(5)));
    assert!(c.get(ids[1]).is_some(), "a recently hit entry is kept");
    assert!(c.get(ids[2]).is_none(), "the unreferenced one is evicted");
    assert_eq!(c.counters.evictions, 2);
}

#[test]
fn a_removed_megaflow_is_never_reached_through_an_old_reference() {
    let s = store();
    let p = s.snapshot();
    let mut c = MegaflowCache::new(64, 7);
    let slot = install(&mut c, &p, &key(1, 0x0a01_0101));
    let id = c.id(slot);
    let gen = c.entry(slot).generation();
    assert!(c.claim(slot, gen));
    c.remove(slot, &p);
    assert!(!c.claim(slot, gen), "a stale generation is refused");
    assert!(c.get(id).is_none());
    assert!(
        !c.credit(id, 5, 300),
        "credit to a removed megaflow is refused"
    );
    // The slot is reused by the next install, under a new generation.
    let again = install(&mut c, &p, &key(1, 0x0b01_0101));
    assert_eq!(again, slot);
    assert!(
        c.get(id).is_none(),
        "the old id does not name the new entry"
    );
    assert!(c.get(c.id(again)).is_some());
}

#[test]
fn revalidation_keeps_unchanged_decisions_and_removes_changed_ones() {
    let s = store();
    let old = s.snapshot();
    let mut c = MegaflowCache::new(64, 7);
    let a = install(&mut c, &old, &key(1, 0x0a01_0101)); // → 2
    let a = c.id(a);
    let b = install(&mut c, &old, &key(1, 0x0b01_0101)); // → 3
    let b = c.id(b);

    // A rule in a table no packet reaches changes no decision: everything is kept.
    s.add([RuleSpec::new(1, 1, Match::any()).actions([Action::Output(9)])])
        .unwrap();
    let new = s.snapshot();
    assert_eq!(c.revalidate(&old, &new), (2, 0));

    // Now 10/8 goes to port 4: its megaflow is removed, the other one stays.
    let old = new;
    s.apply(vec![Change::Add(
        RuleSpec::new(
            0,
            20,
            Match::any()
                .exact(Field::EthType, 0x0800)
                .prefix(Field::Ipv4Dst, 0x0a00_0000, 8),
        )
        .actions([Action::Output(4)]),
    )])
    .unwrap();
    let new = s.snapshot();
    let (kept, removed) = c.revalidate(&old, &new);
    assert_eq!(removed, 1);
    assert_eq!(kept, 1);
    assert!(c.get(a).is_none() && c.get(b).is_some());
}

#[test]
fn counters_reach_the_rules_and_events_come_in_order() {
    let s = store();
    let p: Arc<Pipeline> = s.snapshot();
    let mut c = MegaflowCache::new(64, 7);
    c.watch(true);
    let slot = install(&mut c, &p, &key(1, 0x0a01_0101));
    let id = c.id(slot);
    for _ in 0..3 {
        c.hit(slot, 60);
    }
    assert!(c.credit(id, 2, 120), "another tier's hits are credited");
    c.push_stats(&p);
    let rule = p.rules().find(|r| r.spec.priority == 10).unwrap();
    assert_eq!(rule.counters.get(), (5, 300));
    c.rerank();
    assert_eq!(
        c.lookup(&key(2, 0x0a00_0009)),
        Some(slot),
        "re-ranking loses nothing"
    );
    c.remove(slot, &p);
    install(&mut c, &p, &key(1, 0x0b01_0101));
    c.flush(&p);
    assert!(c.is_empty());
    let mut ev = Vec::new();
    c.take_events(&mut ev);
    assert_eq!(ev.len(), 4, "{ev:?}");
    assert_eq!(ev[0], MegaflowEvent::Installed(id));
    assert_eq!(ev[1], MegaflowEvent::Removed(id));
    assert!(matches!(ev[2], MegaflowEvent::Installed(_)));
    assert_eq!(ev[3], MegaflowEvent::Flushed);
    assert!(!c.has_events(), "taking empties the log");
}

/// Source and destination prefix rules at different priorities: keys inside different
/// rules get megaflows with different masks.
fn store_of_masks() -> RuleStore {
    // The tree: its megaflows take from each rule only the bits that decide (tuple space
    // search un-wildcards whole subtable masks, which here all merge into two).
    let s = RuleStore::new(Backend::Tree);
    let ip = || Match::any().exact(Field::EthType, 0x0800);
    s.add([
        RuleSpec::new(0, 10, ip().prefix(Field::Ipv4Dst, 0x0a00_0000, 8))
            .actions([Action::Output(2)]),
        RuleSpec::new(0, 20, ip().prefix(Field::Ipv4Src, 0x0b00_0000, 16))
            .actions([Action::Output(2)]),
        RuleSpec::new(0, 25, ip().prefix(Field::Ipv4Dst, 0x0a0a_0000, 16))
            .actions([Action::Output(5)]),
        RuleSpec::new(0, 30, ip().prefix(Field::Ipv4Src, 0x0c0c_0c00, 24))
            .actions([Action::Output(4)]),
        RuleSpec::new(0, 5, ip()).actions([Action::Output(3)]),
    ])
    .unwrap();
    s
}

/// Three keys whose megaflows have three different masks.
fn three_keys_of_three_masks(p: &Pipeline) -> [FlowKey; 3] {
    let mut found: Vec<(FlowKey, FlowKey)> = Vec::new();
    let mut x = 0x9e37_79b9u32;
    for i in 0..512u32 {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let src = [0x0c0c_0c00, 0x0b00_0000, 0x0000_0000][(i % 3) as usize] | (x >> (8 + i % 24));
        let dst = [0x0a00_0000, 0x0a0a_0000, 0xc000_0000][(i / 3 % 3) as usize] | (x & 0xffff);
        let k = key(src, dst);
        let m = p.translate(&k).mask;
        if found.iter().all(|(_, fm)| *fm != m) {
            found.push((k, m));
        }
    }
    assert!(found.len() >= 3, "the rules give at least three masks");
    [found[0].0, found[1].0, found[2].0]
}

#[test]
fn the_mask_limit_evicts_a_cold_subtable_keeps_busy_ones_and_refuses_when_all_are_busy() {
    let s = store_of_masks();
    let p = s.snapshot();
    let mut c = MegaflowCache::with_limits(1024, 2, 7);
    let keys = three_keys_of_three_masks(&p);
    assert!(c.make_room_for_mask(&p));
    let a = install(&mut c, &p, &keys[0]);
    assert!(c.make_room_for_mask(&p));
    install(&mut c, &p, &keys[1]);
    assert_eq!(c.subtables(), 2);
    // Both busy since the last ranking: the third mask is refused.
    c.begin_batch();
    c.rerank();
    let mut out = [0u32; 2];
    assert_eq!(c.lookup_batch(&keys[..2], 0b11, &mut out), 0);
    assert!(!c.make_room_for_mask(&p));
    assert_eq!(c.counters.mask_limit_refusals, 1);
    // A ranking later, only the first is still hit: the second (cold) makes way.
    c.rerank();
    c.begin_batch();
    assert_eq!(c.lookup_batch(&keys[..1], 0b1, &mut out), 0);
    assert!(c.make_room_for_mask(&p));
    assert_eq!(c.counters.subtables_evicted, 1);
    install(&mut c, &p, &keys[2]);
    assert_eq!(c.subtables(), 2, "the limit holds");
    assert!(
        c.lookup(&keys[0]).is_some_and(|s| s == a),
        "the busy one stayed"
    );
    assert!(c.lookup(&keys[1]).is_none(), "the cold one went");
    assert!(c.lookup(&keys[2]).is_some());
}

#[test]
fn an_emptied_subtable_leaves_the_search_and_its_index_is_reused() {
    let s = store_of_masks();
    let p = s.snapshot();
    let mut c = MegaflowCache::new(1024, 7);
    let keys = three_keys_of_three_masks(&p);
    let a = install(&mut c, &p, &keys[0]);
    let b = install(&mut c, &p, &keys[1]);
    assert_eq!(c.subtables(), 2);
    c.remove(a, &p);
    assert_eq!(c.subtables(), 1);
    c.remove(b, &p);
    assert_eq!(c.subtables(), 0);
    // A thousand masks come and go: the cache never holds more than the live ones.
    for i in 0..1000u32 {
        let k = key(0x0100_0000 | i, 0x0a00_0001);
        let sl = install(&mut c, &p, &k);
        c.remove(sl, &p);
    }
    assert_eq!(c.subtables(), 0);
    assert!(c.is_empty());
}

#[test]
fn the_flow_limit_shrinks_when_revalidation_is_slow_and_grows_back() {
    let s = store();
    let p = s.snapshot();
    let mut c = MegaflowCache::new(65536, 7);
    for i in 0..20_000u32 {
        install(&mut c, &p, &key(i, 0x0a00_0000 | i));
    }
    let target = 1_000_000;
    // Three times the target: the limit falls to what the target allows for 20,000.
    let l = c.adjust_limit(3 * target, target);
    assert!((6_600..=6_700).contains(&l), "{l}");
    // Just over the target: down by a quarter, never under the floor.
    assert_eq!(c.adjust_limit(target + 1, target), l - l / 4);
    for _ in 0..40 {
        c.trim(&p);
        c.adjust_limit(10 * target, target);
    }
    assert_eq!(c.flow_limit(), flowpath_datapath::megaflow::MIN_FLOW_LIMIT);
    // Quick revalidations grow it back, a sixteenth of the maximum at a time, to the max.
    c.adjust_limit(target / 4, target);
    assert_eq!(c.flow_limit(), 1024 + 4096);
    for _ in 0..20 {
        c.adjust_limit(target / 4, target);
    }
    assert_eq!(c.flow_limit(), 65536);
    assert!(c.counters.flow_limit_shrinks >= 2 && c.counters.flow_limit_grows >= 2);
    // Over the limit: trim evicts down to it.
    for i in 0..20_000u32 {
        install(&mut c, &p, &key(i, 0x0a00_0000 | i));
    }
    c.adjust_limit(100 * target, target);
    assert!(c.over_limit());
    c.trim(&p);
    assert!(c.len() <= c.flow_limit());
}

/// A megaflow whose actions are one output to a port below 65,535 names that port on its
/// first line (the execute stage's shortcut); any other action list does not.
/// A freed slot keeps its action array for the next install to overwrite in place: the
/// entry that reuses it must carry its own actions, whether as long as the old ones or not.
#[test]
fn a_reused_slot_carries_the_new_megaflows_actions() {
    let s = RuleStore::new(Backend::TupleSpace);
    let ip = |d: u32| {
        Match::any()
            .exact(Field::EthType, 0x0800)
            .prefix(Field::Ipv4Dst, u128::from(d) << 24, 8)
    };
    let lists: [&[Action]; 4] = [
        &[Action::SetIpv4Src([10, 0, 0, 1]), Action::Output(2)],
        &[Action::SetIpv4Src([10, 0, 0, 3]), Action::Output(4)],
        &[Action::Output(5)],
        &[
            Action::SetEthSrc([2, 0, 0, 0, 0, 6]),
            Action::SetIpv4Src([10, 0, 0, 7]),
            Action::Output(8),
        ],
    ];
    s.add(
        lists
            .iter()
            .enumerate()
            .map(|(i, a)| RuleSpec::new(0, 10, ip(11 + i as u32)).actions(a.to_vec())),
    )
    .unwrap();
    let p = s.snapshot();
    // One entry: every install after the first evicts it and reuses its slot.
    let mut c = MegaflowCache::new(1, 7);
    for (i, a) in lists
        .iter()
        .enumerate()
        .chain(lists.iter().enumerate().rev())
    {
        c.begin_batch();
        let slot = install(&mut c, &p, &key(1, (11 + i as u32) << 24));
        assert_eq!(slot, 0);
        assert_eq!(c.entry(slot).actions(), *a, "megaflow {i}");
        assert_eq!(c.lookup(&key(9, (11 + i as u32) << 24 | 5)), Some(slot));
    }
    assert_eq!(c.counters.evictions, 7);
}

/// An eviction credits the evicted entry's counts to its rules, stamped with the rule clock
/// read at the batch's first eviction; a later batch, or packets credited by another tier
/// in between, make the next eviction read it afresh.
#[test]
fn evictions_credit_rules_with_one_clock_read_a_batch() {
    let s = store();
    let p = s.snapshot();
    let mut c = MegaflowCache::new(2, 7);
    let dst = |n: u32| (11 + n) << 24;
    let pause = || std::thread::sleep(std::time::Duration::from_millis(2));
    // Every key goes through the rule that sends IPv4 outside 10/8 to port 3.
    c.begin_batch();
    let a = install(&mut c, &p, &key(1, dst(0)));
    install(&mut c, &p, &key(1, dst(1)));
    let rule = c.entry(a).path()[0];
    let used = || p.rule(rule).counters.last_used_ns();
    let counts = || p.rule(rule).counters.get();
    // Batch 2: the first eviction reads the clock, the second uses the same stamp.
    c.begin_batch();
    c.hit(0, 60);
    c.hit(1, 60);
    let before = now_ns();
    let x = install(&mut c, &p, &key(1, dst(2)));
    let first = used();
    assert!(first >= before && first <= now_ns(), "stamped when evicted");
    assert_eq!(counts(), (1, 60));
    pause();
    let y = install(&mut c, &p, &key(1, dst(3)));
    assert_eq!(used(), first, "one clock read a batch");
    assert_eq!(counts(), (2, 120));
    // Batch 3: both used, so the hand clears both marks and takes `x`; the clock is read
    // afresh. Then packets another tier forwarded for `y` are credited, and the next
    // eviction (of `y`, in the same batch) reads the clock again.
    pause();
    c.begin_batch();
    c.hit(x, 60);
    c.hit(y, 60);
    install(&mut c, &p, &key(1, dst(4)));
    let second = used();
    assert!(second > first, "a new batch reads the clock");
    assert_eq!(counts(), (3, 180));
    pause();
    assert!(c.credit(c.id(y), 3, 180));
    install(&mut c, &p, &key(1, dst(5)));
    assert!(used() > second, "credited packets get a fresh stamp");
    assert_eq!(counts(), (7, 420));
    assert_eq!(c.counters.evictions, 4);
}

#[test]
fn only_a_single_output_below_65535_is_a_direct_output() {
    let cases: [(&[Action], Option<u32>); 6] = [
        (&[Action::Output(3)], Some(3)),
        (&[Action::Output(65_534)], Some(65_534)),
        (&[Action::Output(65_535)], None),
        (&[Action::Output(70_000)], None),
        (&[Action::Output(3), Action::Output(4)], None),
        (&[], None),
    ];
    for (actions, want) in cases {
        let s = RuleStore::new(Backend::TupleSpace);
        s.add([RuleSpec::new(0, 1, Match::any()).actions(actions.to_vec())])
            .unwrap();
        let p = s.snapshot();
        let mut c = MegaflowCache::new(16, 1);
        let slot = install(&mut c, &p, &key(1, 2));
        assert_eq!(c.entry(slot).direct_out(), want, "{actions:?}");
        assert_eq!(c.entry(slot).actions(), actions);
    }
}

/// `find_subtable` checks the subtable it found last before hashing: that guess must never
/// outlive the subtable (emptied, its index reused for another mask, or flushed).
#[test]
fn find_subtable_names_only_a_live_subtable_of_that_very_mask() {
    let s = store_of_masks();
    let p = s.snapshot();
    let mut c = MegaflowCache::new(1024, 7);
    let keys = three_keys_of_three_masks(&p);
    let masks = keys.map(|k| p.translate(&k).mask);
    let a = install(&mut c, &p, &keys[0]);
    let si = c.subtable_of(a);
    assert_eq!(c.find_subtable(&masks[0]), Some(si));
    assert_eq!(c.find_subtable(&masks[0]), Some(si), "asked twice");
    assert_eq!(c.find_subtable(&masks[1]), None);
    // Emptied: gone from the search, though its index was the last found.
    c.remove(a, &p);
    assert_eq!(c.find_subtable(&masks[0]), None);
    // Its index reused for the second mask: found for that mask, not for the first.
    let b = install(&mut c, &p, &keys[1]);
    assert_eq!(c.subtable_of(b), si, "the emptied index is reused");
    assert_eq!(c.find_subtable(&masks[1]), Some(si));
    assert_eq!(c.find_subtable(&masks[0]), None);
    // Both masks live: each names its own, alternately.
    let a = install(&mut c, &p, &keys[0]);
    for _ in 0..3 {
        assert_eq!(c.find_subtable(&masks[0]), Some(c.subtable_of(a)));
        assert_eq!(c.find_subtable(&masks[1]), Some(si));
    }
    // Flushed: nothing is found, whatever was last.
    c.flush(&p);
    assert!(masks.iter().all(|m| c.find_subtable(m).is_none()));
}
