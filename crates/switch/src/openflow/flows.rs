//! The rule side of a session: flow_mod (adds batched, so a stream of them is a few rule
//! store changes, not one per message), group_mod, packet_out, and the multipart replies
//! (desc, flow, aggregate, table, port stats, port desc, groups, table features).

use super::session::{of_port, Conn};
use flowpath_openflow::consts::*;
use flowpath_openflow::translate::{
    self, flow_mod_selector, flow_mod_to_spec, group_desc, group_mod_to_spec, rule_error,
    ActionContext,
};
use flowpath_openflow::{
    encode_multipart_reply, Desc, FlowMod, FlowStatsRequest, GroupMod, GroupStats, MultipartReply,
    MultipartRequest, OfError, PacketOut, PortStats, TableStats,
};
use flowpath_pipeline::{now_ns, Change, Match, Pipeline, Rule, RuleSpec, Selector, MAX_TABLES};
use std::time::Duration;

/// Tables flowpath has (0..=253, as OVS reports; 254 is OFPTT_MAX's neighbour).
pub(crate) const N_TABLES: u8 = 254;

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

impl PendingAdds {
    pub(crate) fn is_empty(&self) -> bool {
        self.adds.is_empty()
    }
}

/// Does this rule want FLOW_REMOVED when it goes?
pub(crate) fn sends_flow_removed(spec: &RuleSpec) -> bool {
    spec.flags.send_flow_rem
}

fn head(raw: &[u8]) -> Vec<u8> {
    raw[..raw.len().min(64)].to_vec()
}

/// One FLOW_MOD.
pub(crate) fn flow_mod(c: &mut Conn, fm: &FlowMod, raw: &[u8], xid: u32) {
    match fm.command {
        OFPFC_ADD => {
            let spec = match flow_mod_to_spec(fm) {
                Ok(s) => s,
                Err(e) => {
                    flush_adds(c);
                    return c.of_error(e, raw, xid);
                }
            };
            if spec.flags.check_overlap {
                // The overlap check must see the adds before it.
                flush_adds(c);
            }
            c.pending.adds.push(PendingAdd {
                xid,
                head: head(raw),
                spec,
                buffer_id: fm.buffer_id,
            });
            if c.pending.adds.len() >= MAX_PENDING {
                flush_adds(c);
            }
        }
        OFPFC_MODIFY | OFPFC_MODIFY_STRICT => {
            flush_adds(c);
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
            match r {
                Ok(ch) => {
                    if let Err(e) = c.shared().switch.apply_batch(vec![ch]) {
                        c.of_error(rule_error(&e), raw, xid);
                    }
                }
                Err(e) => c.of_error(e, raw, xid),
            }
        }
        OFPFC_DELETE | OFPFC_DELETE_STRICT => {
            flush_adds(c);
            match flow_mod_selector(fm) {
                Ok(sel) => {
                    if let Err(e) = c
                        .shared()
                        .switch
                        .apply_batch(vec![Change::DeleteWhere(sel)])
                    {
                        c.of_error(rule_error(&e), raw, xid);
                    }
                }
                Err(e) => c.of_error(e, raw, xid),
            }
        }
        _ => {
            flush_adds(c);
            c.of_error(
                OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_COMMAND),
                raw,
                xid,
            );
        }
    }
}

/// Apply the pending adds as one change; if the store refuses the batch (one add
/// overlaps, names a missing group...), apply them one by one so each refused add gets
/// its own error and the others still go in.
pub(crate) fn flush_adds(c: &mut Conn) {
    let adds = std::mem::take(&mut c.pending.adds);
    if adds.is_empty() {
        return;
    }
    let sw = c.shared().switch.clone();
    let changes: Vec<Change> = adds.iter().map(|a| Change::Add(a.spec.clone())).collect();
    if sw.apply_batch(changes).is_err() {
        for a in &adds {
            if let Err(e) = sw.apply_batch(vec![Change::Add(a.spec.clone())]) {
                c.of_error(rule_error(&e), &a.head, a.xid);
            }
        }
    }
    for a in &adds {
        if a.buffer_id != OFP_NO_BUFFER {
            // flowpath keeps no packet buffers (features say n_buffers = 0).
            c.error((et::BAD_REQUEST, brc::BUFFER_UNKNOWN), &a.head, a.xid);
        }
    }
}

/// GROUP_MOD: add, modify or delete a group, published with the rules.
pub(crate) fn group_mod(c: &mut Conn, gm: GroupMod, raw: &[u8], xid: u32) {
    let change = match gm.command {
        OFPGC_DELETE => Ok(Change::DeleteGroup(gm.group_id)),
        OFPGC_ADD => group_mod_to_spec(&gm).map(Change::AddGroup),
        OFPGC_MODIFY => group_mod_to_spec(&gm).map(Change::ModifyGroup),
        _ => Err(OfError::new(et::GROUP_MOD_FAILED, gmfc::BAD_COMMAND)),
    };
    match change {
        Ok(ch) => {
            if let Err(e) = c.shared().switch.apply_batch(vec![ch]) {
                c.of_error(rule_error(&e), raw, xid);
            }
        }
        Err(e) => c.of_error(e, raw, xid),
    }
}

/// PACKET_OUT: the frame and its actions go to a worker.
pub(crate) fn packet_out(c: &mut Conn, po: PacketOut, raw: &[u8], xid: u32) {
    if po.buffer_id != OFP_NO_BUFFER {
        return c.error((et::BAD_REQUEST, brc::BUFFER_UNKNOWN), raw, xid);
    }
    if po.data.is_empty() {
        return c.error((et::BAD_REQUEST, brc::BAD_PACKET), raw, xid);
    }
    let io = c.shared().io.clone();
    if po.in_port != OFPP_CONTROLLER
        && po.in_port != OFPP_ANY
        && po.in_port != OFPP_LOCAL
        && !io.has_port(po.in_port)
    {
        return c.error((et::BAD_REQUEST, brc::BAD_PORT), raw, xid);
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
        Err(e) => return c.of_error(e, raw, xid),
    };
    for a in &actions {
        if let flowpath_packet::Action::Output(p) = a {
            if !io.has_port(*p) {
                return c.error((et::BAD_ACTION, bac::BAD_OUT_PORT), raw, xid);
            }
        }
    }
    if let Err(e) = io.packet_out(in_port, actions, po.data) {
        c.of_error(e, raw, xid);
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

/// MULTIPART_REQUEST: answer with one or more replies (split under 64 KiB, MORE set on
/// all but the last).
pub(crate) fn multipart(c: &mut Conn, flags: u16, body: MultipartRequest, raw: &[u8], xid: u32) {
    if flags & OFPMPF_REQ_MORE != 0 {
        // flowpath's requests all fit in one message; a multi-part request is refused
        // rather than half-answered.
        return c.error((et::BAD_REQUEST, brc::MULTIPART_BUFFER_OVERFLOW), raw, xid);
    }
    let sh = c.shared().clone();
    let reply = match body {
        MultipartRequest::Desc => MultipartReply::Desc(Desc {
            mfr_desc: "flowpath".into(),
            hw_desc: "flowpath software switch".into(),
            sw_desc: format!("flowpath {}", env!("CARGO_PKG_VERSION")),
            serial_num: "None".into(),
            dp_desc: format!("flowpath datapath {:016x}", sh.cfg.datapath_id),
        }),
        MultipartRequest::Flow(req) => match selector(&req) {
            Ok(sel) => {
                let snap = fresh_snapshot(c);
                let now = now_ns();
                MultipartReply::Flow(
                    selected(&snap, &sel)
                        .map(|r| {
                            let (p, b) = r.counters.get();
                            translate::flow_stats(
                                &r.spec,
                                p,
                                b,
                                now.saturating_sub(r.counters.added_ns),
                            )
                        })
                        .collect(),
                )
            }
            Err(e) => return c.of_error(e, raw, xid),
        },
        MultipartRequest::Aggregate(req) => match selector(&req) {
            Ok(sel) => {
                let snap = fresh_snapshot(c);
                let (mut packets, mut bytes, mut flows) = (0u64, 0u64, 0u32);
                for r in selected(&snap, &sel) {
                    let (p, b) = r.counters.get();
                    packets += p;
                    bytes += b;
                    flows += 1;
                }
                MultipartReply::Aggregate {
                    packet_count: packets,
                    byte_count: bytes,
                    flow_count: flows,
                }
            }
            Err(e) => return c.of_error(e, raw, xid),
        },
        MultipartRequest::Table => {
            let snap = fresh_snapshot(c);
            let mut stats: Vec<TableStats> = (0..N_TABLES)
                .map(|t| TableStats {
                    table_id: t,
                    active_count: 0,
                    lookup_count: 0,
                    matched_count: 0,
                })
                .collect();
            for r in snap.rules() {
                if let Some(s) = stats.get_mut(r.spec.table as usize) {
                    s.active_count += 1;
                    s.matched_count += r.counters.get().0;
                }
            }
            MultipartReply::Table(stats)
        }
        MultipartRequest::PortStats { port_no } => {
            let all = sh.ports.counters();
            if port_no != OFPP_ANY && !all.iter().any(|p| p.number == port_no) {
                return c.error((et::BAD_REQUEST, brc::BAD_PORT), raw, xid);
            }
            MultipartReply::PortStats(
                all.into_iter()
                    .filter(|p| port_no == OFPP_ANY || p.number == port_no)
                    .map(|p| PortStats {
                        port_no: p.number,
                        rx_packets: p.rx_packets,
                        tx_packets: p.tx_packets,
                        rx_bytes: p.rx_bytes,
                        tx_bytes: p.tx_bytes,
                        rx_dropped: p.rx_dropped,
                        tx_dropped: p.tx_dropped,
                        rx_errors: p.errors,
                        tx_errors: 0,
                        rx_frame_err: 0,
                        rx_over_err: 0,
                        rx_crc_err: 0,
                        collisions: 0,
                        duration_sec: p.duration.as_secs() as u32,
                        duration_nsec: p.duration.subsec_nanos(),
                    })
                    .collect(),
            )
        }
        MultipartRequest::PortDesc => {
            MultipartReply::PortDesc(sh.ports.describe().iter().map(of_port).collect())
        }
        MultipartRequest::GroupDesc => {
            let snap = sh.switch.store().snapshot();
            let mut g: Vec<_> = snap.groups().iter().map(|g| group_desc(&g.spec)).collect();
            g.sort_by_key(|d| d.group_id);
            MultipartReply::GroupDesc(g)
        }
        MultipartRequest::Group { group_id } => {
            let snap = fresh_snapshot(c);
            let now = now_ns();
            let mut out: Vec<GroupStats> = snap
                .groups()
                .iter()
                .filter(|g| group_id == OFPG_ALL || g.spec.id == group_id)
                .map(|g| {
                    let (packet_count, byte_count) = g.counters.group.get();
                    let (duration_sec, duration_nsec) =
                        translate::duration(now.saturating_sub(g.counters.group.added_ns));
                    GroupStats {
                        group_id: g.spec.id,
                        ref_count: snap
                            .rules()
                            .filter(|r| names_group(&r.spec, g.spec.id))
                            .count() as u32,
                        packet_count,
                        byte_count,
                        duration_sec,
                        duration_nsec,
                        bucket_stats: g.counters.buckets.iter().map(|b| b.get()).collect(),
                    }
                })
                .collect();
            out.sort_by_key(|g| g.group_id);
            MultipartReply::Group(out)
        }
        MultipartRequest::TableFeatures(set) => {
            if !set.is_empty() {
                // Reconfiguring tables is not supported: the pipeline takes any rule in
                // any table.
                return c.error((et::TABLE_FEATURES_FAILED, 5), raw, xid); // OFPTFFC_EPERM
            }
            MultipartReply::TableFeatures(translate::table_features(N_TABLES, 1_000_000))
        }
    };
    match encode_multipart_reply(xid, &reply) {
        Ok(msgs) => {
            for m in msgs {
                if !c.out.send_raw(&m) {
                    return;
                }
            }
        }
        Err(_) => c.error((et::BAD_REQUEST, brc::MULTIPART_BUFFER_OVERFLOW), raw, xid),
    }
}

fn names_group(spec: &RuleSpec, id: u32) -> bool {
    spec.actions
        .iter()
        .chain(&spec.write_actions)
        .any(|a| *a == flowpath_packet::Action::Group(id))
}

/// Counters reach rules when the workers push their megaflow stats: ask for that first
/// (as `flowpath flows dump` does), then read the rules.
fn fresh_snapshot(c: &Conn) -> std::sync::Arc<Pipeline> {
    let sw = &c.shared().switch;
    sw.stats_sync().request_and_wait(Duration::from_millis(500));
    sw.store().snapshot()
}

/// The rules a flow/aggregate stats request selects (non-strict, OF 1.3 §7.3.5.2).
fn selector(req: &FlowStatsRequest) -> Result<Selector, OfError> {
    let mut sel = Selector::all();
    sel.table = match req.table_id {
        OFPTT_ALL => None,
        t if t as usize >= MAX_TABLES => {
            return Err(OfError::new(et::BAD_REQUEST, brc::BAD_TABLE_ID))
        }
        t => Some(t),
    };
    sel.matches = translate::oxm_to_match(&req.match_)?;
    sel.cookie = req.cookie;
    sel.cookie_mask = req.cookie_mask;
    sel.out_port = (req.out_port != OFPP_ANY).then_some(req.out_port);
    sel.out_group = (req.out_group != OFPG_ANY).then_some(req.out_group);
    Ok(sel)
}

/// Rules in dump order: by table, highest priority first, oldest first.
fn selected<'a>(snap: &'a Pipeline, sel: &Selector) -> impl Iterator<Item = &'a Rule> {
    let mut rules: Vec<&Rule> = snap.rules().filter(|r| sel.selects(&r.spec)).collect();
    rules.sort_by_key(|r| (r.spec.table, std::cmp::Reverse(r.spec.priority), r.id));
    rules.into_iter()
}
