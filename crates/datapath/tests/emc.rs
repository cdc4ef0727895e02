//! `ExactMatchCache` on its own: hits and misses, the two candidate entries, 1-in-N
//! insertion, clearing, and entries whose megaflow is gone.

use flowpath_datapath::{ExactMatchCache, MegaflowCache};
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};

fn key(n: u32) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::EthType, 0x0800);
    k.set(Field::Ipv4Src, n as u128);
    k
}

#[test]
fn a_cached_key_hits_and_others_miss() {
    let mut e = ExactMatchCache::new(1024, 1);
    let (k, h) = (key(1), key(1).hash(3));
    assert_eq!(e.lookup(&k, h), None);
    e.maybe_insert(&k, h, 7, 2);
    assert_eq!(e.lookup(&k, h), Some((7, 2)));
    assert_eq!(e.lookup(&key(2), h), None, "same hash, other key");
    assert_eq!(e.occupancy(), 1);
    e.clear();
    assert_eq!(e.lookup(&k, h), None);
    assert_eq!(e.occupancy(), 0);
}

#[test]
fn a_key_has_two_candidate_entries_and_the_second_is_replaced() {
    let mut e = ExactMatchCache::new(1024, 1);
    let h = 0x1234_5678; // three keys forced onto the same two entries
    let (a, b, c) = (key(1), key(2), key(3));
    e.maybe_insert(&a, h, 1, 0);
    e.maybe_insert(&b, h, 2, 0);
    assert_eq!(
        (e.lookup(&a, h), e.lookup(&b, h)),
        (Some((1, 0)), Some((2, 0)))
    );
    e.maybe_insert(&c, h, 3, 0);
    assert_eq!(e.lookup(&a, h), Some((1, 0)), "the first candidate stays");
    assert_eq!(e.lookup(&b, h), None, "the second is overwritten");
    assert_eq!(e.lookup(&c, h), Some((3, 0)));
    // Re-inserting a cached key updates it in place.
    e.maybe_insert(&a, h, 9, 1);
    assert_eq!(e.lookup(&a, h), Some((9, 1)));
}

#[test]
fn one_flow_in_n_is_inserted() {
    let mut e = ExactMatchCache::new(1 << 16, 4);
    for n in 0..4000 {
        let k = key(n);
        e.maybe_insert(&k, k.hash(5), n, 0);
    }
    let got = e.occupancy();
    // Binomial(4000, 1/4): mean 1000, standard deviation 27.
    assert!(
        (850..=1150).contains(&got),
        "{got} of 4000 inserted at 1 in 4"
    );
}

#[test]
fn an_entry_whose_megaflow_is_gone_is_a_miss() {
    let s = RuleStore::new(Backend::TupleSpace);
    s.add([RuleSpec::new(0, 1, Match::any()).actions([Action::Output(2)])])
        .unwrap();
    let p = s.snapshot();
    let mut mf = MegaflowCache::new(16, 1);
    let keys = [key(1), key(2)];
    let slot = mf.install(&keys[0], p.translate(&keys[0]), &p);
    let gen = mf.entry(slot).generation();
    let mut e = ExactMatchCache::new(64, 1);
    let mut hashes = [0u32; 2];
    let mut slots = [0u32; 2];
    for (i, k) in keys.iter().enumerate() {
        hashes[i] = k.hash(9);
        e.maybe_insert(k, hashes[i], slot, gen);
    }
    mf.begin_batch();
    let left = e.lookup_batch(&keys, 0b11, &hashes, &mut slots, &mut mf);
    assert_eq!(left, 0, "both hit while the megaflow lives");
    assert_eq!(slots, [slot, slot]);
    mf.remove(slot, &p);
    mf.begin_batch();
    let left = e.lookup_batch(&keys, 0b11, &hashes, &mut slots, &mut mf);
    assert_eq!(left, 0b11, "a removed megaflow's entries are misses");
}
