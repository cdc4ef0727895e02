//! `ExactMatchCache` on its own: hits and misses, the two candidate entries, 1-in-N
//! insertion, clearing, entries whose megaflow is gone, and narrow keys (one-line
//! entries) kept apart from wide ones.

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
    // Both keys are IPv4 without a tunnel: narrow.
    mf.begin_batch();
    let left = e.lookup_batch(&keys, 0b11, 0b11, &hashes, &mut slots, &mut mf);
    assert_eq!(left, 0, "both hit while the megaflow lives");
    assert_eq!(slots, [slot, slot]);
    mf.remove(slot, &p);
    mf.begin_batch();
    let left = e.lookup_batch(&keys, 0b11, 0b11, &hashes, &mut slots, &mut mf);
    assert_eq!(left, 0b11, "a removed megaflow's entries are misses");
}

/// `key(n)` with a word past the narrow ones set: the same first seven words, wide.
fn widened(n: u32, field: Field) -> FlowKey {
    let mut k = key(n);
    k.set(field, 1);
    k
}

#[test]
fn ipv4_keys_are_narrow_and_tunnel_or_ipv6_keys_wide() {
    assert!(key(1).is_narrow());
    // The low halves of IPv6 addresses (words 5 and 7), tunnel fields, metadata.
    for f in [
        Field::Ipv6Src,
        Field::Ipv6Dst,
        Field::TunId,
        Field::TunDst,
        Field::Metadata,
    ] {
        assert!(!widened(1, f).is_narrow(), "{f:?}");
    }
    // An IPv6 destination's high half (word 6) alone leaves a key narrow.
    let mut k = FlowKey::ZERO;
    k.set(Field::Ipv6Dst, 1u128 << 127);
    assert!(k.is_narrow());
}

#[test]
fn a_wide_key_never_hits_a_narrow_entry_with_its_first_words() {
    let h = 0x0bad_cafe; // the same candidates for all
    for f in [
        Field::Ipv6Src,
        Field::Ipv6Dst,
        Field::TunId,
        Field::TunSrc,
        Field::TunDst,
        Field::Metadata,
    ] {
        let mut e = ExactMatchCache::new(64, 1);
        let (narrow, wide) = (key(1), widened(1, f));
        e.maybe_insert(&narrow, h, 1, 0);
        assert_eq!(e.lookup(&wide, h), None, "{f:?}: wide key, narrow entry");
        e.maybe_insert(&wide, h, 2, 0);
        assert_eq!(e.lookup(&narrow, h), Some((1, 0)), "{f:?}");
        assert_eq!(e.lookup(&wide, h), Some((2, 0)), "{f:?}");
        assert_eq!(e.occupancy(), 2, "one entry in each table");
        e.clear();
        e.maybe_insert(&wide, h, 2, 0);
        assert_eq!(e.lookup(&narrow, h), None, "{f:?}: narrow key, wide entry");
    }
}

#[test]
fn narrow_entries_compare_every_one_of_their_words() {
    let h = 7;
    let mut e = ExactMatchCache::new(64, 1);
    let base = key(0x0a00_0001);
    e.maybe_insert(&base, h, 3, 0);
    // Flip one bit in each of the six words in turn: a different narrow key each time.
    for w in flowpath_packet::NARROW_WORDS {
        for bit in [0, 31, 32, 63] {
            let mut k = base;
            k.words[w] ^= 1 << bit;
            assert!(k.is_narrow());
            assert_eq!(e.lookup(&k, h), None, "word {w} bit {bit}");
        }
    }
    assert_eq!(e.lookup(&base, h), Some((3, 0)));
}

/// The cache against a model of its policy (two candidates from the hash, the first
/// taken when empty or already the key's, else the second overwritten), with few
/// positions and few hashes so that keys collide and overflow all the time: every
/// lookup after every insert answers as the model does, narrow and wide. A key held in
/// its second candidate is found only through its first's overflow count, so a count
/// that drifts low loses it here; the model also says when a clear empties the table.
#[test]
fn lookups_follow_a_model_of_the_two_candidates() {
    use proptest::prelude::*;
    const ENTRIES: usize = 8;
    let positions = |h: u32| {
        let m = ENTRIES as u32 - 1;
        [(h & m) as usize, (h.rotate_left(16) & m) as usize]
    };
    // Keys 0..12, each with one of a few hashes (some with equal candidates).
    let hash_of =
        |k: u32| [0x0001_0002, 0x0003_0001, 0x0002_0002, 0x0005_0001][k as usize % 4] ^ (k / 4);
    let op = prop_oneof![
        9 => (0u32..12, any::<bool>(), 0u32..100).prop_map(|(k, w, s)| Some((k, w, s))),
        1 => Just(None),
    ];
    proptest!(|(ops in proptest::collection::vec(op, 1..80))| {
        let mut e = ExactMatchCache::new(ENTRIES, 1);
        // Per shape (narrow, wide): position -> (key number, slot).
        let mut model = [[None::<(u32, u32)>; ENTRIES]; 2];
        let the_key = |k: u32, wide: bool| if wide { widened(k, Field::TunId) } else { key(k) };
        for op in ops {
            match op {
                Some((k, wide, slot)) => {
                    let h = hash_of(k);
                    e.maybe_insert(&the_key(k, wide), h, slot, 0);
                    let t = &mut model[wide as usize];
                    let [a, b] = positions(h);
                    let p = match t[a] {
                        None => a,
                        Some((x, _)) if x == k => a,
                        _ => b,
                    };
                    t[p] = Some((k, slot));
                }
                None => {
                    e.clear();
                    model = [[None; ENTRIES]; 2];
                }
            }
            for k in 0..12 {
                for wide in [false, true] {
                    let t = &model[wide as usize];
                    let want = positions(hash_of(k))
                        .into_iter()
                        .find_map(|p| t[p].filter(|&(x, _)| x == k))
                        .map(|(_, slot)| (slot, 0));
                    prop_assert_eq!(e.lookup(&the_key(k, wide), hash_of(k)), want, "key {} wide {}", k, wide);
                }
            }
        }
    });
}
