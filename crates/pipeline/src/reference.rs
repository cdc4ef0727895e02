//! A deliberately naive evaluator of a rule set, the oracle for property tests.
//!
//! It shares nothing with the fast classifier: for each table it scans every rule, keeps
//! the best match by (priority, then oldest), executes the actions on a copy of the packet,
//! and re-parses the packet bytes before the next table instead of tracking key changes.

use crate::rule::{RuleId, RuleSpec};
use flowpath_packet::rewrite::{self, RewriteDrop};
use flowpath_packet::{parse, Action, DropReason, Field, FlowKey, Packet, ParseOptions};

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
    let mut tunnel =
        [Field::TunId, Field::TunFlags, Field::TunSrc, Field::TunDst].map(|f| (f, key.get(f)));
    meta.strip_outer(&mut pkt);
    let reparse_opts = ParseOptions { vxlan_port: None };
    let mut table = 0u8;
    loop {
        let best = rules
            .iter()
            .filter(|(_, r)| r.table == table && r.matches.matches(&key))
            .max_by(|(ia, a), (ib, b)| a.priority.cmp(&b.priority).then(ib.cmp(ia)));
        let Some((_, rule)) = best else {
            out.ending = RefEnding::TableMiss(table);
            return out;
        };
        for a in &rule.actions {
            match a {
                Action::Output(p) => {
                    if *p != in_port {
                        out.outputs.push((*p, pkt.data().to_vec()));
                    }
                }
                Action::InPort => out.outputs.push((in_port, pkt.data().to_vec())),
                Action::SetTunnel(id) => tunnel[0].1 = *id as u128,
                Action::Controller { max_len, .. } => {
                    let n = pkt.len().min(*max_len as usize);
                    out.controller.push(pkt.data()[..n].to_vec());
                }
                _ => match rewrite::apply(a, &mut pkt, &mut meta) {
                    Ok(()) => {}
                    Err(RewriteDrop::TtlExpired) => {
                        out.ending = RefEnding::TtlExpired;
                        return out;
                    }
                    Err(RewriteDrop::NoRoom) => {
                        out.ending = RefEnding::NoRoom;
                        return out;
                    }
                    Err(RewriteDrop::TooManyVlans) => {
                        out.ending = RefEnding::TooManyVlans;
                        return out;
                    }
                },
            }
        }
        let Some(next) = rule.goto else {
            return out;
        };
        match parse(pkt.data(), in_port, &reparse_opts, &mut key) {
            Ok(m) => meta = m,
            Err(r) => {
                out.ending = RefEnding::ParseDrop(r);
                return out;
            }
        }
        for (f, v) in tunnel {
            key.set(f, v);
        }
        table = next;
    }
}
