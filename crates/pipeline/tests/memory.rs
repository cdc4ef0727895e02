//! What a rule costs in memory, by the pipeline's own accounting (`memory_bytes`, the
//! sizes of its allocations): bounded per rule for a synthetic table of simple flows, and
//! the same after replaces that churn the rule set.

use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Backend, Change, Match, RuleSpec, RuleStore};

/// `ip,tcp|udp,nw_src=192.168.x.y,nw_dst=10.a.b.c,tp_dst=P,actions=output:N`: distinct
/// exact addresses, a few protocols, ports and priorities, as `scripts/flow-memory.sh`
/// loads them.
fn simple(i: u32) -> RuleSpec {
    let m = Match::any()
        .exact(Field::EthType, 0x0800)
        .exact(Field::NwProto, if i % 2 == 1 { 6 } else { 17 })
        .exact(
            Field::Ipv4Src,
            (0xc0a8_0000 | ((i % 256) << 8) | ((i >> 8) % 256)) as u128,
        )
        .exact(Field::Ipv4Dst, (0x0a00_0000 | (i & 0xff_ffff)) as u128)
        .exact(Field::TpDst, 1 + (i % 1000) as u128);
    RuleSpec::new(0, 100 + (i % 7) as u16, m).actions([Action::Output(2 + i % 3)])
}

/// Bytes per rule the newest snapshot takes.
fn per_rule(store: &RuleStore) -> usize {
    let snap = store.snapshot();
    let n = snap.rules().count();
    assert!(n > 0);
    snap.memory_bytes() / n
}

/// The spec (a 344-byte match: value and mask over the whole key) is most of a rule; the
/// rest is its counters, its slot in the table and order list, and the index. A rule
/// costing more than this bound means a structure grew a per-rule copy or kept spare room.
const SIMPLE_RULE_BYTES: usize = 700;

#[test]
fn a_simple_rule_costs_less_than_the_bound_in_each_backend() {
    for backend in [Backend::TupleSpace, Backend::Tree, Backend::Linear] {
        let store = RuleStore::new(backend);
        store.add((0..10_000).map(simple)).unwrap();
        let b = per_rule(&store);
        assert!(
            b <= SIMPLE_RULE_BYTES,
            "{backend}: {b} bytes a rule (bound {SIMPLE_RULE_BYTES})"
        );
    }
}

#[test]
fn adds_one_at_a_time_and_replaces_keep_no_spare_room() {
    let store = RuleStore::new(Backend::TupleSpace);
    store.add((0..10_000).map(simple)).unwrap();
    let fresh = per_rule(&store);
    // One rule at a time (an OpenFlow flow_mod per barrier): the extended index and lists
    // must not double their room on each version.
    for i in 10_000..10_100 {
        store.add([simple(i)]).unwrap();
    }
    let grown = per_rule(&store);
    assert!(
        grown <= fresh + fresh / 8,
        "{fresh} then {grown} bytes a rule"
    );
    // A replace with a smaller set: the survivors cost what a fresh build of them costs.
    store
        .apply(vec![Change::Replace((0..1_000).map(simple).collect())])
        .unwrap();
    let replaced = per_rule(&store);
    let again = RuleStore::new(Backend::TupleSpace);
    again.add((0..1_000).map(simple)).unwrap();
    let built = per_rule(&again);
    assert!(
        replaced <= built + built / 8,
        "replaced: {replaced} bytes a rule, built fresh: {built}"
    );
    assert!(replaced <= SIMPLE_RULE_BYTES, "{replaced} bytes a rule");
}

#[test]
fn the_address_tries_cost_little_per_exact_address() {
    // Tries over 10,000 distinct /32 sources and destinations, in the tuple-space index.
    let store = RuleStore::new(Backend::TupleSpace);
    store.add((0..10_000).map(simple)).unwrap();
    let snap = store.snapshot();
    let t = snap.table(0).unwrap();
    let index = t.index_bytes() / t.rules().len();
    assert!(index <= 160, "{index} index bytes a rule");
}
