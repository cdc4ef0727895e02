//! The traffic of the miss-storm cases: established flows inside an ACL's rules, and the
//! tuple-space-explosion attacker's packets against the same rules.
//!
//! A TSE packet starts inside a random rule and has one bit flipped, at a random depth, in
//! each of a random non-empty subset of the four address and port fields. Escaping a rule
//! at depth d makes the slow path un-wildcard that field down to bit d to prove the
//! packet is outside it (for every higher-priority rule it escapes), so packets that
//! escape at different depths in different fields get megaflows with different masks —
//! the "general" attack of Csikor et al. (CoNEXT 2019), aimed at whatever rule set is
//! loaded rather than at one rule built for it.

use crate::classifier::trace::{key_inside, FiveTuple};
use flowpath_base::rng::SplitMix64;
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::{Field, FlowKey};
use flowpath_pipeline::RuleSpec;
use std::net::Ipv4Addr;

/// The ClassBench ACL the cases use when given none (1,000 rules of acl2; see
/// `tests/data/README.md` for where it comes from).
pub const DEFAULT_ACL: &str = include_str!("../../tests/data/acl2_1k");

/// The built-in ACL with `output:N` actions (as `bench classifier` gives ClassBench sets).
pub fn default_acl() -> Vec<RuleSpec> {
    let mut rules =
        flowpath_flowsyntax::parse_classbench(DEFAULT_ACL, 0).expect("the built-in ACL parses");
    for (i, r) in rules.iter_mut().enumerate() {
        r.actions = vec![flowpath_packet::Action::Output(2 + (i % 15) as u32)];
    }
    rules
}

/// Rules a TCP or UDP IPv4 packet can be inside (ClassBench rules on other protocols are
/// skipped: the generator builds TCP and UDP frames).
fn tcp_udp_rules(rules: &[RuleSpec]) -> Vec<&RuleSpec> {
    rules
        .iter()
        .filter(|r| {
            let m = &r.matches;
            let proto_mask = m.mask.get(Field::NwProto);
            let proto = m.value.get(Field::NwProto);
            proto_mask == 0 || proto == 6 || proto == 17
        })
        .collect()
}

/// TCP or UDP: the rule's protocol if it pins one, else by the key's own.
fn l4_proto(k: &FlowKey) -> u8 {
    match k.get(Field::NwProto) as u8 {
        6 => 6,
        17 => 17,
        p => {
            if p % 2 == 0 {
                6
            } else {
                17
            }
        }
    }
}

fn tuple_of(k: &FlowKey) -> FiveTuple {
    let mut t = FiveTuple::of(k);
    t.proto = l4_proto(k);
    t
}

/// `n` distinct established 5-tuples, each inside a random TCP/UDP rule of `rules`.
pub fn established(rules: &[RuleSpec], n: usize, seed: u64) -> Vec<FiveTuple> {
    let pool = tcp_udp_rules(rules);
    assert!(
        !pool.is_empty(),
        "no TCP or UDP rule to send traffic inside"
    );
    let mut rng = SplitMix64::new(seed);
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    let mut tries = 0usize;
    while out.len() < n && tries < 100 * n.max(1) {
        tries += 1;
        let r = pool[(rng.next() % pool.len() as u64) as usize];
        let t = tuple_of(&key_inside(r, &mut rng));
        let id = (t.src, t.dst, t.sport, t.dport, t.proto);
        if seen.insert(id) {
            out.push(t);
        }
    }
    out
}

/// `n` tuple-space-explosion packets against `rules` (see the module documentation).
pub fn tse(rules: &[RuleSpec], n: usize, seed: u64) -> Vec<FiveTuple> {
    let pool = tcp_udp_rules(rules);
    assert!(!pool.is_empty(), "no TCP or UDP rule to aim at");
    let mut rng = SplitMix64::new(seed ^ 0x7e5e_7e5e);
    (0..n)
        .map(|_| {
            let r = pool[(rng.next() % pool.len() as u64) as usize];
            let mut t = tuple_of(&key_inside(r, &mut rng));
            let which = 1 + rng.next() % 15;
            if which & 1 != 0 {
                t.src ^= 1 << (31 - rng.next() % 32);
            }
            if which & 2 != 0 {
                t.dst ^= 1 << (31 - rng.next() % 32);
            }
            if which & 4 != 0 {
                t.sport ^= 1 << (15 - rng.next() % 16);
            }
            if which & 8 != 0 {
                t.dport ^= 1 << (15 - rng.next() % 16);
            }
            t
        })
        .collect()
}

/// A 64-byte (or `frame_size`) frame of `t`: TCP (ACK) or UDP by its protocol.
pub fn frame(t: &FiveTuple, frame_size: usize) -> Vec<u8> {
    let (s, d) = (Ipv4Addr::from(t.src), Ipv4Addr::from(t.dst));
    if t.proto == 6 {
        build(&FrameSpec::tcp4(s, d, t.sport, t.dport, 0x10, frame_size))
    } else {
        build(&FrameSpec::udp4(s, d, t.sport, t.dport, frame_size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl() -> Vec<RuleSpec> {
        flowpath_flowsyntax::parse_classbench(DEFAULT_ACL, 0).unwrap()
    }

    #[test]
    fn established_flows_are_distinct_and_inside_a_rule() {
        let rules = acl();
        let flows = established(&rules, 500, 1);
        assert_eq!(flows.len(), 500);
        for t in &flows {
            let mut k = t.key();
            k.set(Field::NwProto, t.proto as u128);
            assert!(rules.iter().any(|r| r.matches.matches(&k)), "{t:?}");
        }
    }

    #[test]
    fn tse_packets_differ_from_a_rule_key_in_at_least_one_field() {
        let rules = acl();
        let a = tse(&rules, 1000, 3);
        let distinct: std::collections::HashSet<_> =
            a.iter().map(|t| (t.src, t.dst, t.sport, t.dport)).collect();
        assert!(distinct.len() > 990, "{} distinct", distinct.len());
        assert_eq!(
            tse(&rules, 10, 3),
            tse(&rules, 10, 3),
            "same seed, same packets"
        );
    }
}
