//! Random rule sets and keys for property tests: small value domains, so that rules
//! overlap, priorities tie, `goto_table` chains form and megaflows get reused.

use crate::group::{Bucket, GroupSpec, GroupType};
use crate::rule::{Match, PortRange, RuleSpec};
use flowpath_packet::key::{ethertype, ipproto, VLAN_PRESENT};
use flowpath_packet::{Action, Field, FlowKey};
use proptest::prelude::*;

/// IPv4 addresses rules and packets draw from.
pub const V4: [u32; 5] = [
    0x0a00_0001,
    0x0a00_0101,
    0x0a01_0001,
    0xc0a8_0001,
    0x0a00_0002,
];
/// L4 ports rules and packets draw from.
pub const PORTS: [u16; 5] = [80, 443, 1024, 1025, 53];

/// One packet's worth of header values in the shared domain.
#[derive(Clone, Debug)]
pub struct Headers {
    pub in_port: u32,
    pub v6: bool,
    pub vlans: Vec<u16>,
    pub src: u32,
    pub dst: u32,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    pub ttl: u8,
    pub tos: u8,
}

pub fn arb_headers() -> impl Strategy<Value = Headers> {
    (
        1u32..=3,
        prop::bool::weighted(0.2),
        prop::collection::vec(prop::sample::select(vec![10u16, 20, 30]), 0..=2),
        prop::sample::select(V4.to_vec()),
        prop::sample::select(V4.to_vec()),
        prop::sample::select(vec![ipproto::TCP, ipproto::UDP, ipproto::UDP]),
        prop::sample::select(PORTS.to_vec()),
        prop::sample::select(PORTS.to_vec()),
        prop::sample::select(vec![0u8, 1, 2, 64]),
        prop::sample::select(vec![0u8, 0x10, 0xb9]),
    )
        .prop_map(
            |(in_port, v6, vlans, src, dst, proto, sport, dport, ttl, tos)| Headers {
                in_port,
                v6,
                vlans,
                src,
                dst,
                proto,
                sport,
                dport,
                ttl,
                tos,
            },
        )
}

/// The key the parser would produce for `h` (no tunnel, default MACs of zero).
pub fn key_of(h: &Headers) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, h.in_port as u128);
    if let Some(&v) = h.vlans.first() {
        k.set(Field::VlanTci, (v | VLAN_PRESENT) as u128);
    }
    if let Some(&v) = h.vlans.get(1) {
        k.set(Field::VlanInnerTci, (v | VLAN_PRESENT) as u128);
    }
    if h.v6 {
        k.set(Field::EthType, ethertype::IPV6 as u128);
        k.set(Field::Ipv6Src, v6_of(h.src));
        k.set(Field::Ipv6Dst, v6_of(h.dst));
    } else {
        k.set(Field::EthType, ethertype::IPV4 as u128);
        k.set(Field::Ipv4Src, h.src as u128);
        k.set(Field::Ipv4Dst, h.dst as u128);
    }
    k.set(Field::NwProto, h.proto as u128);
    k.set(Field::NwTtl, h.ttl as u128);
    k.set(Field::NwTos, h.tos as u128);
    k.set(Field::TpSrc, h.sport as u128);
    k.set(Field::TpDst, h.dport as u128);
    k
}

/// The IPv6 address the domain uses for IPv4 value `v`: 2001:db8::v.
pub fn v6_of(v: u32) -> u128 {
    (0x2001_0db8u128 << 96) | v as u128
}

fn arb_condition() -> impl Strategy<Value = (Field, u128, u128)> {
    let v4 = prop::sample::select(V4.to_vec()).prop_map(|v| v as u128);
    let port = prop::sample::select(PORTS.to_vec()).prop_map(|v| v as u128);
    prop_oneof![
        (1u128..=3).prop_map(|p| (Field::InPort, p, u32::MAX as u128)),
        prop::sample::select(vec![ethertype::IPV4, ethertype::IPV6]).prop_map(|t| (
            Field::EthType,
            t as u128,
            0xffff
        )),
        (v4.clone(), prop::sample::select(vec![8u32, 16, 24, 32])).prop_map(|(v, l)| (
            Field::Ipv4Src,
            v,
            (u32::MAX << (32 - l)) as u128
        )),
        (v4.clone(), prop::sample::select(vec![8u32, 16, 24, 32])).prop_map(|(v, l)| (
            Field::Ipv4Dst,
            v,
            (u32::MAX << (32 - l)) as u128
        )),
        v4.prop_map(|v| (Field::Ipv6Dst, v6_of(v as u32), u128::MAX)),
        prop::sample::select(vec![ipproto::TCP, ipproto::UDP]).prop_map(|p| (
            Field::NwProto,
            p as u128,
            0xff
        )),
        (
            port.clone(),
            prop::sample::select(vec![0xffffu128, 0xff00, 0x000f])
        )
            .prop_map(|(p, m)| (Field::TpSrc, p, m)),
        (port, prop::sample::select(vec![0xffffu128, 0xfff0])).prop_map(|(p, m)| (
            Field::TpDst,
            p,
            m
        )),
        prop::sample::select(vec![10u16, 20, 30]).prop_map(|v| (
            Field::VlanTci,
            (v | VLAN_PRESENT) as u128,
            0x1fff
        )),
        Just((Field::VlanTci, 0, VLAN_PRESENT as u128)),
        prop::sample::select(vec![1u8, 2, 63, 64]).prop_map(|t| (Field::NwTtl, t as u128, 0xff)),
        Just((Field::NwTos, 0x10, 0xfc)),
        prop::sample::select(vec![0u32, 7, 0xabcde]).prop_map(|t| (
            Field::TunId,
            t as u128,
            0xff_ffff
        )),
    ]
}

/// A port range on `TpSrc` or `TpDst` with ends at or next to the domain's ports, so keys
/// land on both sides of each edge; some ranges are prefix blocks (kept as masks).
pub fn arb_port_range() -> impl Strategy<Value = (Field, PortRange)> {
    let edge = prop::sample::select(PORTS.to_vec()).prop_flat_map(|p| {
        prop::sample::select(vec![
            p.saturating_sub(1),
            p,
            p.saturating_add(1),
            0,
            1023,
            65535,
        ])
    });
    (
        prop::sample::select(vec![Field::TpSrc, Field::TpDst]),
        edge.clone(),
        edge,
    )
        .prop_map(|(f, a, b)| {
            (
                f,
                PortRange {
                    lo: a.min(b),
                    hi: a.max(b),
                },
            )
        })
}

pub fn arb_action(max_port: u32) -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (1..=max_port).prop_map(Action::Output),
        1 => Just(Action::InPort),
        1 => Just(Action::controller(64)),
        1 => Just(Action::SetEthDst([2, 0, 0, 0, 0, 9])),
        1 => prop::sample::select(V4.to_vec()).prop_map(|v| Action::SetIpv4Dst(v.to_be_bytes())),
        1 => prop::sample::select(V4.to_vec()).prop_map(|v| Action::SetIpv4Src(v.to_be_bytes())),
        1 => prop::sample::select(V4.to_vec()).prop_map(|v| Action::SetIpv6Dst(v6_of(v).to_be_bytes())),
        1 => prop::sample::select(vec![0u8, 0x10, 0xb8]).prop_map(Action::SetNwTos),
        1 => prop::sample::select(PORTS.to_vec()).prop_map(Action::SetTpDst),
        1 => prop::sample::select(PORTS.to_vec()).prop_map(Action::SetTpSrc),
        1 => Just(Action::PushVlan { tpid: 0x8100 }),
        1 => Just(Action::PopVlan),
        1 => prop::sample::select(vec![10u16, 20, 30]).prop_map(Action::SetVlanVid),
        1 => (0u8..8).prop_map(Action::SetVlanPcp),
        2 => Just(Action::DecTtl),
        1 => prop::sample::select(vec![0u32, 7, 0xabcde]).prop_map(Action::SetTunnel),
    ]
}

/// A rule in one of `tables` tables, with 0–3 conditions, 0–3 actions, and sometimes a
/// `goto_table` to a later table.
pub fn arb_rule(tables: u8, max_port: u32) -> impl Strategy<Value = RuleSpec> {
    (
        0..tables,
        prop::sample::select(vec![1u16, 2, 3, 5, 8]),
        prop::collection::vec(arb_condition(), 0..=3),
        prop::collection::vec(arb_action(max_port), 0..=3),
        prop::bool::weighted(0.5),
        any::<u8>(),
        prop::option::weighted(0.3, arb_port_range()),
    )
        .prop_map(
            move |(table, priority, conds, actions, wants_goto, g, range)| {
                let mut m = Match::any();
                for (f, v, mask) in conds {
                    m = m.with(f, v, mask);
                }
                if let Some((f, r)) = range {
                    if m.mask.get(f) == 0 {
                        m = m.port_range(f, r);
                    }
                }
                let mut r = RuleSpec::new(table, priority, m).actions(actions);
                if wants_goto && table + 1 < tables {
                    r.goto = Some(table + 1 + g % (tables - table - 1));
                }
                r
            },
        )
}

pub fn arb_rules(
    tables: u8,
    max_rules: usize,
    max_port: u32,
) -> impl Strategy<Value = Vec<RuleSpec>> {
    prop::collection::vec(arb_rule(tables, max_port), 1..=max_rules)
}

/// An action a group bucket may hold (no `dec_ttl`: refused in buckets).
pub fn arb_bucket_action(max_port: u32) -> impl Strategy<Value = Action> {
    arb_action(max_port).prop_filter("dec_ttl is refused in buckets", |a| *a != Action::DecTtl)
}

/// Groups 1..=n: ALL (most), SELECT (weights 0–3) and INDIRECT, with 1–3 buckets of 0–3
/// actions each.
pub fn arb_groups(n: u32, max_port: u32) -> impl Strategy<Value = Vec<GroupSpec>> {
    let bucket = (
        0u16..=3,
        prop::collection::vec(arb_bucket_action(max_port), 0..=3),
    )
        .prop_map(|(w, actions)| Bucket::new(actions).weight(w));
    let group = (
        prop::sample::select(vec![
            GroupType::All,
            GroupType::All,
            GroupType::Select,
            GroupType::Indirect,
        ]),
        prop::collection::vec(bucket, 1..=3),
    );
    prop::collection::vec(group, n as usize).prop_map(|gs| {
        gs.into_iter()
            .enumerate()
            .map(|(i, (kind, mut buckets))| {
                if kind == GroupType::Indirect {
                    buckets.truncate(1);
                }
                GroupSpec::new(i as u32 + 1, kind, buckets)
            })
            .collect()
    })
}

/// An action for a rule's write-actions or apply-actions when groups 1..=n exist.
pub fn arb_of_action(max_port: u32, groups: u32) -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => arb_action(max_port),
        1 => (1..=groups.max(1)).prop_map(Action::Group),
    ]
}

/// [`arb_rule`] with OpenFlow 1.3 instructions: sometimes a group among the
/// apply-actions, 0–3 write-actions (groups 1..=`groups` included), sometimes
/// clear-actions.
pub fn arb_of_rule(tables: u8, max_port: u32, groups: u32) -> impl Strategy<Value = RuleSpec> {
    (
        arb_rule(tables, max_port),
        prop::option::weighted(0.2, (0usize..4, 1..=groups.max(1))),
        prop::collection::vec(arb_of_action(max_port, groups), 0..=3),
        prop::bool::weighted(0.2),
    )
        .prop_map(move |(mut r, apply_group, write, clear)| {
            if let Some((at, g)) = apply_group {
                let at = at.min(r.actions.len());
                r.actions.insert(at, Action::Group(g));
            }
            r.write_actions = write;
            r.clear_actions = clear;
            r
        })
}

/// A real frame with these headers (VLAN tags, IPv4 or IPv6, TCP or UDP, 64 bytes), for
/// the reference tests that run packets, not keys.
pub fn frame_of(h: &Headers) -> Vec<u8> {
    use flowpath_gen::{build, FrameSpec, L3, L4};
    use std::net::{Ipv4Addr, Ipv6Addr};
    let l3 = if h.v6 {
        L3::V6 {
            src: Ipv6Addr::from(v6_of(h.src)),
            dst: Ipv6Addr::from(v6_of(h.dst)),
            hop_limit: h.ttl,
            tclass: h.tos,
        }
    } else {
        L3::V4 {
            src: Ipv4Addr::from(h.src),
            dst: Ipv4Addr::from(h.dst),
            ttl: h.ttl,
            tos: h.tos,
        }
    };
    let l4 = if h.proto == 6 {
        L4::Tcp {
            sport: h.sport,
            dport: h.dport,
            flags: 0x10,
        }
    } else {
        L4::Udp {
            sport: h.sport,
            dport: h.dport,
        }
    };
    let mut spec = FrameSpec::new(l3, l4, 64);
    for &vid in &h.vlans {
        spec = spec.with_vlan(0x8100, vid);
    }
    build(&spec)
}

/// What the tracker and recirculation leave in a key: the pass (`recirc`: the table a
/// `ct(table=T)` sent the packet to; `None` for a first pass) and the ct fields, from
/// small domains that overlap the conditions of [`arb_ct_condition`].
#[derive(Clone, Debug)]
pub struct CtHeaders {
    pub recirc: Option<u8>,
    pub state: u8,
    pub zone: u16,
    pub mark: u32,
    pub label: u128,
    pub src: u32,
    pub dst: u32,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

/// ct_state values a tracker gives: untracked, new, established (both directions),
/// related, invalid, new with source NAT.
pub const CT_STATES: [u8; 7] = [0, 0x21, 0x22, 0x2a, 0x24, 0x30, 0x61];

pub fn arb_ct_headers(tables: u8) -> impl Strategy<Value = CtHeaders> {
    (
        prop::option::weighted(0.5, 0..tables),
        prop::sample::select(CT_STATES.to_vec()),
        0u16..3,
        prop::sample::select(vec![0u32, 1, 0x10, 0xff]),
        prop::sample::select(vec![0u128, 1, 1 << 100]),
        prop::sample::select(V4.to_vec()),
        prop::sample::select(V4.to_vec()),
        prop::sample::select(vec![ipproto::TCP, ipproto::UDP]),
        prop::sample::select(PORTS.to_vec()),
        prop::sample::select(PORTS.to_vec()),
    )
        .prop_map(
            |(recirc, state, zone, mark, label, src, dst, proto, sport, dport)| CtHeaders {
                recirc,
                state,
                zone,
                mark,
                label,
                src,
                dst,
                proto,
                sport,
                dport,
            },
        )
}

/// Write `c` into `k`: the recirculation id and, for a tracked packet, the ct fields.
pub fn with_ct(mut k: FlowKey, c: &CtHeaders) -> FlowKey {
    if let Some(t) = c.recirc {
        k.set(Field::RecircId, flowpath_packet::ct::recirc_id(t) as u128);
    }
    if c.state != 0 {
        k.set(Field::CtState, c.state as u128);
        k.set(Field::CtZone, c.zone as u128);
        k.set(Field::CtMark, c.mark as u128);
        k.set(Field::CtLabel, c.label);
        k.set(Field::CtNwSrc, c.src as u128);
        k.set(Field::CtNwDst, c.dst as u128);
        k.set(Field::CtNwProto, c.proto as u128);
        k.set(Field::CtTpSrc, c.sport as u128);
        k.set(Field::CtTpDst, c.dport as u128);
    }
    k
}

/// A condition on a ct field, as a rule after `ct(table=T)` has them.
pub fn arb_ct_condition() -> impl Strategy<Value = (Field, u128, u128)> {
    let v4 = prop::sample::select(V4.to_vec()).prop_map(|v| v as u128);
    prop_oneof![
        3 => prop::sample::select(vec![
            (0x20u128, 0x20u128),
            (0, 0x20),
            (0x22, 0x22),
            (0x21, 0x21),
            (0x20, 0x30),
            (0x2a, 0xff),
            (0x40, 0x40),
        ])
        .prop_map(|(v, m)| (Field::CtState, v, m)),
        1 => (0u128..3).prop_map(|z| (Field::CtZone, z, 0xffff)),
        1 => (
            prop::sample::select(vec![1u128, 0x10, 0xff]),
            prop::sample::select(vec![u32::MAX as u128, 0xf0, 0x1])
        )
            .prop_map(|(v, m)| (Field::CtMark, v, m)),
        1 => prop::sample::select(vec![(1u128, u128::MAX), (1 << 100, 1 << 100)])
            .prop_map(|(v, m)| (Field::CtLabel, v, m)),
        1 => (v4.clone(), prop::sample::select(vec![8u32, 24, 32])).prop_map(|(v, l)| (
            Field::CtNwSrc,
            v,
            (u32::MAX << (32 - l)) as u128
        )),
        1 => v4.prop_map(|v| (Field::CtNwDst, v, u32::MAX as u128)),
        1 => prop::sample::select(vec![ipproto::TCP, ipproto::UDP])
            .prop_map(|p| (Field::CtNwProto, p as u128, 0xff)),
        1 => prop::sample::select(PORTS.to_vec())
            .prop_map(|p| (Field::CtTpDst, p as u128, 0xffff)),
    ]
}

/// A `ct` action: sometimes committing, in zone 0..2, sometimes recirculating into one
/// of `tables` tables (any: recirculation may go back); or a `ct_clear`.
pub fn arb_ct_action(tables: u8) -> impl Strategy<Value = Action> {
    use flowpath_packet::ct::{CtId, CtSpec, CtZoneSrc};
    prop_oneof![
        4 => (any::<bool>(), 0u16..3, prop::option::weighted(0.6, 0..tables)).prop_map(
            |(commit, zone, table)| {
                let spec = CtSpec {
                    commit,
                    zone: CtZoneSrc::Value(zone),
                    table,
                    ..CtSpec::new()
                };
                Action::Ct(CtId::intern(spec).expect("few distinct specs"))
            }
        ),
        1 => Just(Action::CtClear),
    ]
}

/// [`arb_rule`] with 0–2 conditions on ct fields and sometimes a ct action among its
/// actions.
pub fn arb_ct_rule(tables: u8, max_port: u32) -> impl Strategy<Value = RuleSpec> {
    (
        arb_rule(tables, max_port),
        prop::collection::vec(arb_ct_condition(), 0..=2),
        prop::option::weighted(0.4, (0usize..4, arb_ct_action(tables))),
    )
        .prop_map(|(mut r, conds, ct)| {
            for (f, v, m) in conds {
                r.matches = r.matches.with(f, v, m);
            }
            if let Some((at, a)) = ct {
                let at = at.min(r.actions.len());
                r.actions.insert(at, a);
            }
            r
        })
}
