//! Every classifier backend against a linear scan on ACL-shaped rule sets (prefixes of
//! every length, port ranges, wildcards), big enough that the tree cuts many levels deep:
//! the same winner for every key, sound megaflows, and the same after rule churn. Some
//! rules also match connection-tracking fields (`ct_state`, `ct_zone`, as a security
//! group's second pass does) and keys carry them.

use flowpath_packet::key::ethertype;
use flowpath_packet::{Field, FlowKey, KEY_WORDS};
use flowpath_pipeline::{Backend, Change, Match, PortRange, RuleId, RuleSpec, RuleStore};
use proptest::prelude::*;

/// One ACL rule: (src, src len, dst, dst len, sport range, dport range, proto or any),
/// and ct conditions: (ct_state value, mask) or any, ct_zone or any.
type Acl = (
    u32,
    u32,
    u32,
    u32,
    (u16, u16),
    (u16, u16),
    Option<u8>,
    (Option<(u8, u8)>, Option<u16>),
);

/// ct_state conditions (+trk, -trk, +trk+est, +trk+new, +trk-inv) and values (untracked,
/// new, established, reply, invalid).
const CT_CONDS: [(u8, u8); 5] = [
    (0x20, 0x20),
    (0, 0x20),
    (0x22, 0x22),
    (0x21, 0x21),
    (0x20, 0x30),
];
const CT_STATES: [u8; 5] = [0, 0x21, 0x22, 0x2a, 0x30];

fn arb_ct_cond() -> impl Strategy<Value = (Option<(u8, u8)>, Option<u16>)> {
    (
        prop::option::weighted(0.3, prop::sample::select(CT_CONDS.to_vec())),
        prop::option::weighted(0.15, 0u16..3),
    )
}

/// Addresses from a small pool so prefixes nest and overlap.
fn arb_addr() -> impl Strategy<Value = u32> {
    (0u32..4, 0u32..4, any::<u16>())
        .prop_map(|(a, b, c)| 0x0a00_0000 | (a << 20) | (b << 16) | c as u32)
}

fn arb_len() -> impl Strategy<Value = u32> {
    prop::sample::select(vec![0u32, 8, 12, 13, 16, 20, 24, 28, 31, 32])
}

fn arb_range() -> impl Strategy<Value = (u16, u16)> {
    prop_oneof![
        2 => Just((0u16, 65535u16)),
        1 => (0u16..2000).prop_map(|p| (p, p)),
        1 => Just((1024u16, 65535u16)),
        2 => (0u16..3000, 0u16..3000).prop_map(|(a, b)| (a.min(b), a.max(b))),
    ]
}

fn arb_acl() -> impl Strategy<Value = Acl> {
    (
        arb_addr(),
        arb_len(),
        arb_addr(),
        arb_len(),
        arb_range(),
        arb_range(),
        prop::option::of(prop::sample::select(vec![6u8, 17, 1])),
        arb_ct_cond(),
    )
}

fn spec(i: usize, a: &Acl) -> RuleSpec {
    let &(s, sl, d, dl, sp, dp, proto, (ct_state, ct_zone)) = a;
    let mut m = Match::any()
        .exact(Field::EthType, ethertype::IPV4 as u128)
        .prefix(Field::Ipv4Src, s as u128, sl)
        .prefix(Field::Ipv4Dst, d as u128, dl)
        .port_range(Field::TpSrc, PortRange { lo: sp.0, hi: sp.1 })
        .port_range(Field::TpDst, PortRange { lo: dp.0, hi: dp.1 });
    if let Some(p) = proto {
        m = m.exact(Field::NwProto, p as u128);
    }
    if let Some((v, mask)) = ct_state {
        m = m.with(Field::CtState, v as u128, mask as u128);
    }
    if let Some(z) = ct_zone {
        m = m.exact(Field::CtZone, z as u128);
    }
    // A few priorities shared by many rules: ties go to the older rule.
    RuleSpec::new(0, (i % 7) as u16, m)
}

fn key(s: u32, d: u32, sp: u16, dp: u16, proto: u8) -> FlowKey {
    ct_key(s, d, sp, dp, proto, (0, 0))
}

/// A key after `ct` in zone `zone` gave it `state` (0: untracked).
fn ct_key(s: u32, d: u32, sp: u16, dp: u16, proto: u8, (state, zone): (u8, u16)) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::CtState, state as u128);
    k.set(Field::CtZone, zone as u128);
    k.set(Field::InPort, 1);
    k.set(Field::EthType, ethertype::IPV4 as u128);
    k.set(Field::Ipv4Src, s as u128);
    k.set(Field::Ipv4Dst, d as u128);
    k.set(Field::TpSrc, sp as u128);
    k.set(Field::TpDst, dp as u128);
    k.set(Field::NwProto, proto as u128);
    k
}

fn arb_key() -> impl Strategy<Value = FlowKey> {
    (
        arb_addr(),
        arb_addr(),
        0u16..3100,
        prop_oneof![0u16..3100, any::<u16>()],
        prop::sample::select(vec![6u8, 17, 1, 50]),
        (prop::sample::select(CT_STATES.to_vec()), 0u16..3),
    )
        .prop_map(|(s, d, sp, dp, p, ct)| ct_key(s, d, sp, dp, p, ct))
}

fn naive(store: &RuleStore, key: &FlowKey) -> Option<RuleId> {
    let p = store.snapshot();
    p.rules()
        .filter(|r| r.spec.matches.matches(key))
        .max_by(|a, b| a.spec.priority.cmp(&b.spec.priority).then(b.id.cmp(&a.id)))
        .map(|r| r.id)
}

fn check(
    store: &RuleStore,
    keys: &[FlowKey],
    noise: &[[u64; KEY_WORDS]],
) -> Result<(), TestCaseError> {
    let p = store.snapshot();
    let Some(t) = p.table(0) else { return Ok(()) };
    let id = |i: Option<u32>| i.map(|i| t.rules()[i as usize].id);
    for k in keys {
        let want = naive(store, k);
        prop_assert_eq!(id(t.classify(k)), want, "classify, {:?}", t.backend());
        let mut wc = FlowKey::ZERO;
        prop_assert_eq!(id(t.lookup(k, &mut wc)), want, "lookup, {:?}", t.backend());
        // Far neighbours (every free bit random) and near ones (a few free bits flipped:
        // these stay next to the key, where the rules that were cut away live).
        let near = |n: &[u64; KEY_WORDS], s: u32| {
            let mut f = *n;
            for w in &mut f {
                *w &= w.rotate_left(s) & w.rotate_left(2 * s);
            }
            f
        };
        let mut others = Vec::new();
        for n in noise {
            let mut far = *k;
            for ((w, m), r) in far.words.iter_mut().zip(&wc.words).zip(n) {
                *w = (*w & m) | (r & !m);
            }
            others.push(far);
            for s in [7, 19] {
                let mut o = *k;
                for ((w, m), r) in o.words.iter_mut().zip(&wc.words).zip(near(n, s)) {
                    *w ^= r & !m;
                }
                others.push(o);
            }
        }
        for other in others {
            prop_assert_eq!(
                id(t.classify(&other)),
                want,
                "megaflow {:?} of {:?} holds {:?} ({:?})",
                wc,
                k,
                other,
                t.backend()
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_backend_equals_a_scan_and_megaflows_are_sound(
        acls in prop::collection::vec(arb_acl(), 1..300),
        keys in prop::collection::vec(arb_key(), 1..60),
        noise in prop::collection::vec(prop::array::uniform21(any::<u64>()), 1..4),
        churn in prop::collection::vec((any::<bool>(), any::<prop::sample::Index>(), arb_acl()), 0..90),
    ) {
        // Keys inside rules too: a rule's own corner is where off-by-ones live.
        let mut keys = keys;
        for a in acls.iter().take(40) {
            keys.push(key(a.0, a.2, a.4.1, a.5.0, a.6.unwrap_or(6)));
        }
        for backend in Backend::ALL {
            let store = RuleStore::new(backend);
            store.add(acls.iter().enumerate().map(|(i, a)| spec(i, a))).unwrap();
            check(&store, &keys, &noise)?;
            // Churn: one add or delete per change, each checked (past 64 adds or a quarter
            // deleted, the tree is rebuilt rather than carried over: both paths run).
            for (i, (add, which, a)) in churn.iter().enumerate() {
                let ids: Vec<RuleId> = store.snapshot().rules().map(|r| r.id).collect();
                let change = if *add || ids.is_empty() {
                    Change::Add(spec(i + 3, a))
                } else {
                    Change::Delete(ids[which.index(ids.len())])
                };
                store.apply(vec![change]).unwrap();
                check(&store, &keys[..keys.len().min(12)], &noise[..1])?;
            }
        }
    }
}
