//! The requests that change what the switch does with packets: FLOW_MOD (adds batched,
//! so a stream of them is a few rule store changes, not one per message), GROUP_MOD and
//! PACKET_OUT.

use super::peer::Peer;
use flowpath_openflow::consts::*;
use flowpath_openflow::translate::{
    self, flow_mod_selector, flow_mod_to_spec, group_mod_to_spec, rule_error, ActionContext,
};
use flowpath_openflow::{FlowMod, GroupMod, OfError, PacketOut};
use flowpath_pipeline::{Change, Match, RuleSpec};

/// Adds waiting to be applied together, with what is needed to answer each on its own.
#[derive(Default)]
pub(crate) struct PendingAdds {
    adds: Vec<PendingAdd>,
}

struct PendingAdd {
    xid: u32,
    /// The first 64 bytes of the flow_mod, for an error reply.
    head: Vec<u8>,
    spec: RuleSpec,
    buffer_id: u32,
}

/// Apply the pending adds at the latest when this many are waiting.
const MAX_PENDING: usize = 65_536;

fn head(raw: &[u8]) -> Vec<u8> {
    raw[..raw.len().min(64)].to_vec()
}

impl PendingAdds {
    pub(crate) fn is_empty(&self) -> bool {
        self.adds.is_empty()
    }

    /// One FLOW_MOD from `p`: an add waits with the others (see [`PendingAdds::flush`]);
    /// anything else applies the waiting adds first, then itself.
    pub(crate) fn flow_mod(&mut self, p: &Peer, fm: &FlowMod, raw: &[u8], xid: u32) {
        match fm.command {
            OFPFC_ADD => {
                let spec = match flow_mod_to_spec(fm) {
                    Ok(s) => s,
                    Err(e) => {
                        self.flush(p);
                        return p.of_error(e, raw, xid);
                    }
                };
                if spec.flags.check_overlap {
                    // The overlap check must see the adds before it.
                    self.flush(p);
                }
                self.adds.push(PendingAdd {
                    xid,
                    head: head(raw),
                    spec,
                    buffer_id: fm.buffer_id,
                });
                if self.adds.len() >= MAX_PENDING {
                    self.flush(p);
                }
            }
            OFPFC_MODIFY | OFPFC_MODIFY_STRICT => {
                self.flush(p);
                let r = flow_mod_selector(fm).and_then(|sel| {
                    let spec = flow_mod_to_spec(fm)?;
                    Ok(Change::Modify {
                        selector: sel,
                        actions: spec.actions,
                        goto: spec.goto,
                        write_actions: spec.write_actions,
                        clear_actions: spec.clear_actions,
                        reset_counts: spec.flags.reset_counts,
                    })
                });
                apply(p, r, raw, xid);
            }
            OFPFC_DELETE | OFPFC_DELETE_STRICT => {
                self.flush(p);
                apply(p, flow_mod_selector(fm).map(Change::DeleteWhere), raw, xid);
            }
            _ => {
                self.flush(p);
                p.of_error(
                    OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_COMMAND),
                    raw,
                    xid,
                );
            }
        }
    }

    /// Apply the pending adds as one change; if the store refuses the batch (one add
    /// overlaps, names a missing group...), apply them one by one so each refused add
    /// gets its own error and the others still go in.
    pub(crate) fn flush(&mut self, p: &Peer) {
        let adds = std::mem::take(&mut self.adds);
        if adds.is_empty() {
            return;
        }
        let sw = &p.sh.switch;
        let changes: Vec<Change> = adds.iter().map(|a| Change::Add(a.spec.clone())).collect();
        if sw.apply_batch(changes).is_err() {
            for a in &adds {
                if let Err(e) = sw.apply_batch(vec![Change::Add(a.spec.clone())]) {
                    p.of_error(rule_error(&e), &a.head, a.xid);
                }
            }
        }
        for a in &adds {
            if a.buffer_id != OFP_NO_BUFFER {
                // flowpath keeps no packet buffers (features say n_buffers = 0).
                p.error((et::BAD_REQUEST, brc::BUFFER_UNKNOWN), &a.head, a.xid);
            }
        }
    }
}

/// Apply one change the request `raw` asked for, or answer with why not.
fn apply(p: &Peer, change: Result<Change, OfError>, raw: &[u8], xid: u32) {
    match change {
        Ok(ch) => {
            if let Err(e) = p.sh.switch.apply_batch(vec![ch]) {
                p.of_error(rule_error(&e), raw, xid);
            }
        }
        Err(e) => p.of_error(e, raw, xid),
    }
}

/// GROUP_MOD: add, modify or delete a group, published with the rules.
pub(crate) fn group_mod(p: &Peer, gm: GroupMod, raw: &[u8], xid: u32) {
    let change = match gm.command {
        OFPGC_DELETE => Ok(Change::DeleteGroup(gm.group_id)),
        OFPGC_ADD => group_mod_to_spec(&gm).map(Change::AddGroup),
        OFPGC_MODIFY => group_mod_to_spec(&gm).map(Change::ModifyGroup),
        _ => Err(OfError::new(et::GROUP_MOD_FAILED, gmfc::BAD_COMMAND)),
    };
    apply(p, change, raw, xid);
}

/// PACKET_OUT: the frame and its actions go to a worker.
pub(crate) fn packet_out(p: &Peer, po: PacketOut, raw: &[u8], xid: u32) {
    if po.buffer_id != OFP_NO_BUFFER {
        return p.error((et::BAD_REQUEST, brc::BUFFER_UNKNOWN), raw, xid);
    }
    if po.data.is_empty() {
        return p.error((et::BAD_REQUEST, brc::BAD_PACKET), raw, xid);
    }
    let io = &p.sh.io;
    if po.in_port != OFPP_CONTROLLER
        && po.in_port != OFPP_ANY
        && po.in_port != OFPP_LOCAL
        && !io.has_port(po.in_port)
    {
        return p.error((et::BAD_REQUEST, brc::BAD_PORT), raw, xid);
    }
    let in_port = if po.in_port == OFPP_ANY || po.in_port == OFPP_LOCAL {
        OFPP_CONTROLLER
    } else {
        po.in_port
    };
    // The frame is known: set_field prerequisites are checked against what it is.
    let m = frame_match(&po.data, in_port);
    let actions = match translate::of_actions_to_actions(&po.actions, &m, ActionContext::PacketOut)
    {
        Ok(a) => a,
        Err(e) => return p.of_error(e, raw, xid),
    };
    for a in &actions {
        if let flowpath_packet::Action::Output(port) = a {
            if !io.has_port(*port) {
                return p.error((et::BAD_ACTION, bac::BAD_OUT_PORT), raw, xid);
            }
        }
    }
    if let Err(e) = io.packet_out(in_port, actions, po.data) {
        p.of_error(e, raw, xid);
    }
}

/// An exact match on the frame's parsed key (for checking packet-out actions).
fn frame_match(data: &[u8], in_port: u32) -> Match {
    use flowpath_packet::{parse, Field, ParseOptions};
    let mut key = flowpath_packet::FlowKey::ZERO;
    let port = if in_port == OFPP_CONTROLLER {
        0
    } else {
        in_port
    };
    if parse(data, port, &ParseOptions::default(), &mut key).is_err() {
        return Match::any();
    }
    let mut m = Match::any();
    for f in [Field::EthType, Field::NwProto, Field::VlanTci] {
        m = m.exact(f, key.get(f));
    }
    m
}
