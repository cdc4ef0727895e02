//! A deliberately naive evaluator of a rule set, the oracle for property tests.
//!
//! It shares nothing with the fast classifier: for each table it scans every rule, keeps
//! the best match by (priority, then oldest), executes the actions on a copy of the packet,
//! and re-parses the packet bytes before the next table instead of tracking key changes.
//! The OpenFlow action set is a plain list (a write drops the action of the same kind,
//! the list is sorted into §5.10's order when it runs), and every group bucket runs on a
//! real copy of the packet's bytes: the fast path's compensating rewrites are checked
//! against actual copies. Only SELECT's bucket choice is shared ([`crate::group::select_hash`]
//! is its definition).

use crate::group::{select_bucket, select_hash, GroupSpec, GroupType};
use crate::rule::{RuleId, RuleSpec};
use flowpath_packet::rewrite::{self, RewriteDrop};
use flowpath_packet::{
    parse, Action, DropReason, Field, FlowKey, Packet, PacketMeta, ParseOptions,
};

/// How the reference's walk ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefEnding {
    ParseDrop(DropReason),
    Done,
    TableMiss(u8),
    TtlExpired,
    NoRoom,
    TooManyVlans,
}

/// Everything the packet caused: copies sent to ports and to the controller, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefOutcome {
    pub outputs: Vec<(u32, Vec<u8>)>,
    pub controller: Vec<Vec<u8>>,
    pub ending: RefEnding,
}

/// Evaluate `frame`, received on `in_port`, against `rules` (each with its id; any order).
pub fn evaluate(
    rules: &[(RuleId, RuleSpec)],
    frame: &[u8],
    in_port: u32,
    opts: &ParseOptions,
) -> RefOutcome {
    evaluate_with_groups(rules, &[], frame, in_port, opts)
}

/// [`evaluate`] with a group table.
pub fn evaluate_with_groups(
    rules: &[(RuleId, RuleSpec)],
    groups: &[GroupSpec],
    frame: &[u8],
    in_port: u32,
    opts: &ParseOptions,
) -> RefOutcome {
    evaluate_pass(rules, groups, frame, in_port, opts, &FlowKey::ZERO)
}

/// [`evaluate_with_groups`] for one pass of a packet whose recirculation id and
/// connection-tracking fields are `state`'s ([`Field::RecircId`] and [`Field::CT`]; the
/// rest of `state` is ignored): what a parsed frame cannot say. A recirculated pass
/// starts in the table its id names; the fields stay with the packet from table to table
/// until a `ct_clear` zeroes the ct ones. `ct` itself changes nothing here: the tracker's
/// answer is what `state` already holds.
pub fn evaluate_pass(
    rules: &[(RuleId, RuleSpec)],
    groups: &[GroupSpec],
    frame: &[u8],
    in_port: u32,
    opts: &ParseOptions,
    state: &FlowKey,
) -> RefOutcome {
    let mut out = RefOutcome {
        outputs: Vec::new(),
        controller: Vec::new(),
        ending: RefEnding::Done,
    };
    let headroom = 128;
    let mut buf = vec![0u8; headroom + frame.len() + 64];
    buf[headroom..headroom + frame.len()].copy_from_slice(frame);
    let mut pkt = Packet::new(&mut buf, headroom, frame.len());
    let mut key = FlowKey::ZERO;
    let mut meta = match parse(pkt.data(), in_port, opts, &mut key) {
        Ok(m) => m,
        Err(r) => {
            out.ending = RefEnding::ParseDrop(r);
            return out;
        }
    };
    // A VXLAN packet is its inner frame from here on; the tunnel fields stay in the key.
    let mut tunnel = CARRIED.map(|f| (f, key.get(f)));
    for (f, v) in tunnel.iter_mut().skip(TUNNEL_FIELDS) {
        *v = state.get(*f);
        key.set(*f, *v);
    }
    meta.strip_outer(&mut pkt);
    let mut cx = Cx {
        in_port,
        groups,
        tunnel: &mut tunnel,
    };
    let mut table = flowpath_packet::ct::recirc_table(&key).unwrap_or(0);
    let mut set: Vec<Action> = Vec::new();
    loop {
        let Some(rule) = best_rule(rules, table, &key) else {
            out.ending = RefEnding::TableMiss(table);
            return out;
        };
        if let Err(e) = run(&rule.actions, &mut pkt, &mut meta, &mut cx, &mut out) {
            out.ending = e;
            return out;
        }
        write_set(&mut set, rule);
        if rule.goto.is_none() && !set.is_empty() {
            if let Err(e) = run(&set_in_order(set), &mut pkt, &mut meta, &mut cx, &mut out) {
                out.ending = e;
            }
            return out;
        }
        let Some(next) = rule.goto else {
            return out;
        };
        // The next table sees the packet as the actions left it, parsed again.
        let reparse_opts = ParseOptions { vxlan_port: None };
        match parse(pkt.data(), in_port, &reparse_opts, &mut key) {
            Ok(m) => meta = m,
            Err(r) => {
                out.ending = RefEnding::ParseDrop(r);
                return out;
            }
        }
        for &(f, v) in cx.tunnel.iter() {
            key.set(f, v);
        }
        table = next;
    }
}

/// The rule of `table` that `key` meets: the highest priority, then the oldest.
fn best_rule<'r>(
    rules: &'r [(RuleId, RuleSpec)],
    table: u8,
    key: &FlowKey,
) -> Option<&'r RuleSpec> {
    rules
        .iter()
        .filter(|(_, r)| r.table == table && r.matches.matches(key))
        .max_by(|(ia, a), (ib, b)| a.priority.cmp(&b.priority).then(ib.cmp(ia)))
        .map(|(_, r)| r)
}

/// The rule's clear-actions and write-actions on the action set, kept as a plain list: a
/// write drops the action of its kind first.
fn write_set(set: &mut Vec<Action>, rule: &RuleSpec) {
    if rule.clear_actions {
        set.clear();
    }
    for a in &rule.write_actions {
        set.retain(|b| kind(b) != kind(a));
        set.push(*a);
    }
}

/// The action set in the order it runs (§5.10): a group, when there is one, instead of
/// the output.
fn set_in_order(mut set: Vec<Action>) -> Vec<Action> {
    set.sort_by_key(|a| kind(a).0);
    if set.iter().any(|a| matches!(a, Action::Group(_))) {
        set.retain(|a| kind(a).0 != OUTPUT);
    }
    set
}

/// Execution order ranks of the action set (OpenFlow 1.3 §5.10).
const POP: u8 = 0;
const PUSH: u8 = 1;
const DEC_TTL: u8 = 2;
const SET_FIELD: u8 = 3;
const GROUP: u8 = 4;
const OUTPUT: u8 = 5;

/// An action's kind in the action set: (order rank, which one of that rank).
fn kind(a: &Action) -> (u8, u8) {
    match a {
        Action::PopVlan => (POP, 0),
        Action::PushVlan { .. } => (PUSH, 0),
        Action::DecTtl => (DEC_TTL, 0),
        Action::SetEthSrc(_) => (SET_FIELD, 0),
        Action::SetEthDst(_) => (SET_FIELD, 1),
        Action::SetIpv4Src(_) => (SET_FIELD, 2),
        Action::SetIpv4Dst(_) => (SET_FIELD, 3),
        Action::SetIpv6Src(_) => (SET_FIELD, 4),
        Action::SetIpv6Dst(_) => (SET_FIELD, 5),
        Action::SetNwTos(_) => (SET_FIELD, 6),
        Action::SetTpSrc(_) => (SET_FIELD, 7),
        Action::SetTpDst(_) => (SET_FIELD, 8),
        Action::SetVlanVid(_) => (SET_FIELD, 9),
        Action::SetVlanPcp(_) => (SET_FIELD, 10),
        Action::SetTunnel(_) => (SET_FIELD, 11),
        Action::SetTunnelDst(_) => (SET_FIELD, 12),
        Action::Group(_) => (GROUP, 0),
        _ => (OUTPUT, 0),
    }
}

/// The fields a packet keeps across the re-parse before each table: its tunnel's (the
/// first [`TUNNEL_FIELDS`]), its recirculation id and its connection-tracking fields.
const CARRIED: [Field; 14] = [
    Field::TunId,
    Field::TunFlags,
    Field::TunSrc,
    Field::TunDst,
    Field::RecircId,
    Field::CT[0],
    Field::CT[1],
    Field::CT[2],
    Field::CT[3],
    Field::CT[4],
    Field::CT[5],
    Field::CT[6],
    Field::CT[7],
    Field::CT[8],
];
const TUNNEL_FIELDS: usize = 4;

/// What running actions needs besides the packet.
struct Cx<'a> {
    in_port: u32,
    groups: &'a [GroupSpec],
    /// The [`CARRIED`] fields' values.
    tunnel: &'a mut [(Field, u128); CARRIED.len()],
}

/// Run `actions` on the packet; `Err` is how the packet was dropped.
fn run(
    actions: &[Action],
    pkt: &mut Packet<'_>,
    meta: &mut PacketMeta,
    cx: &mut Cx<'_>,
    out: &mut RefOutcome,
) -> Result<(), RefEnding> {
    let in_port = cx.in_port;
    for a in actions {
        match a {
            Action::Output(p) => {
                if *p != in_port {
                    out.outputs.push((*p, pkt.data().to_vec()));
                }
            }
            Action::InPort => out.outputs.push((in_port, pkt.data().to_vec())),
            Action::SetTunnel(id) => cx.tunnel[0].1 = *id as u128,
            Action::SetTunnelDst(b) => cx.tunnel[3].1 = crate::translate::tun_addr(*b),
            Action::CtClear => {
                for (_, v) in cx.tunnel.iter_mut().skip(TUNNEL_FIELDS + 1) {
                    *v = 0;
                }
            }
            Action::Controller { max_len, .. } => {
                let n = pkt.len().min(*max_len as usize);
                out.controller.push(pkt.data()[..n].to_vec());
            }
            Action::Group(id) => {
                if let Some(g) = cx.groups.iter().find(|g| g.id == *id) {
                    group(g, pkt, meta, cx, out);
                }
            }
            _ => match rewrite::apply(a, pkt, meta) {
                Ok(()) => {}
                Err(RewriteDrop::TtlExpired) => return Err(RefEnding::TtlExpired),
                Err(RewriteDrop::NoRoom) => return Err(RefEnding::NoRoom),
                Err(RewriteDrop::TooManyVlans) => return Err(RefEnding::TooManyVlans),
            },
        }
    }
    Ok(())
}

/// Run group `g`: each chosen bucket on a real copy of the packet (a dropped copy ends
/// only its bucket).
fn group(g: &GroupSpec, pkt: &Packet<'_>, meta: &PacketMeta, cx: &Cx<'_>, out: &mut RefOutcome) {
    let chosen: Vec<usize> = match g.kind {
        GroupType::All => (0..g.buckets.len()).collect(),
        GroupType::Indirect => (0..g.buckets.len().min(1)).collect(),
        GroupType::Select => {
            // The key of the packet as it is now.
            let mut key = FlowKey::ZERO;
            let opts = ParseOptions { vxlan_port: None };
            if parse(pkt.data(), cx.in_port, &opts, &mut key).is_err() {
                return;
            }
            select_bucket(&g.buckets, select_hash(&key))
                .into_iter()
                .collect()
        }
        GroupType::FastFailover => Vec::new(),
    };
    for i in chosen {
        let headroom = 128;
        let mut buf = vec![0u8; headroom + pkt.len() + 64];
        buf[headroom..headroom + pkt.len()].copy_from_slice(pkt.data());
        let mut copy = Packet::new(&mut buf, headroom, pkt.len());
        let mut meta = *meta;
        let mut tunnel = *cx.tunnel;
        let mut bcx = Cx {
            in_port: cx.in_port,
            groups: cx.groups,
            tunnel: &mut tunnel,
        };
        let _ = run(&g.buckets[i].actions, &mut copy, &mut meta, &mut bcx, out);
    }
}
