//! MULTIPART_REQUEST: the statistics and descriptions a connection asks for (desc, flow,
//! aggregate, table, port stats, port desc, groups, table features), one function per
//! request kind, each reading the rules and ports as they are now.

use super::hub::{of_port, Shared, N_TABLES};
use super::peer::Peer;
use flowpath_openflow::consts::*;
use flowpath_openflow::translate::{self, group_desc};
use flowpath_openflow::{
    encode_multipart_reply, Desc, FlowStatsRequest, GroupStats, MultipartReply, MultipartRequest,
    OfError, PortStats, TableFeatures, TableStats,
};
use flowpath_pipeline::{now_ns, Pipeline, Rule, RuleSpec, Selector, MAX_TABLES};
use std::sync::Arc;
use std::time::Duration;

/// Answer with one or more replies (split under 64 KiB, MORE set on all but the last).
pub(crate) fn answer(p: &Peer, flags: u16, body: MultipartRequest, raw: &[u8], xid: u32) {
    if flags & OFPMPF_REQ_MORE != 0 {
        // flowpath's requests all fit in one message; a multi-part request is refused
        // rather than half-answered.
        return p.error((et::BAD_REQUEST, brc::MULTIPART_BUFFER_OVERFLOW), raw, xid);
    }
    let sh = &p.sh;
    let reply = match body {
        MultipartRequest::Desc => Ok(desc(sh)),
        MultipartRequest::Flow(req) => flow_stats(sh, &req),
        MultipartRequest::Aggregate(req) => aggregate(sh, &req),
        MultipartRequest::Table => Ok(table_stats(sh)),
        MultipartRequest::PortStats { port_no } => port_stats(sh, port_no),
        MultipartRequest::PortDesc => Ok(MultipartReply::PortDesc(
            sh.ports.describe().iter().map(of_port).collect(),
        )),
        MultipartRequest::GroupDesc => Ok(group_descs(sh)),
        MultipartRequest::Group { group_id } => Ok(group_stats(sh, group_id)),
        MultipartRequest::TableFeatures(set) => table_features(&set),
    };
    let reply = match reply {
        Ok(r) => r,
        Err(e) => return p.of_error(e, raw, xid),
    };
    match encode_multipart_reply(xid, &reply) {
        Ok(msgs) => {
            for m in msgs {
                if !p.send_raw(m) {
                    return;
                }
            }
        }
        Err(_) => p.error((et::BAD_REQUEST, brc::MULTIPART_BUFFER_OVERFLOW), raw, xid),
    }
}

fn desc(sh: &Shared) -> MultipartReply {
    MultipartReply::Desc(Desc {
        mfr_desc: "flowpath".into(),
        hw_desc: "flowpath software switch".into(),
        sw_desc: format!("flowpath {}", env!("CARGO_PKG_VERSION")),
        serial_num: "None".into(),
        dp_desc: format!("flowpath datapath {:016x}", sh.cfg.datapath_id),
    })
}

/// Each selected rule's counters, age and spec.
fn flow_stats(sh: &Shared, req: &FlowStatsRequest) -> Result<MultipartReply, OfError> {
    let sel = selector(req)?;
    let snap = fresh_snapshot(sh);
    let now = now_ns();
    Ok(MultipartReply::Flow(
        selected(&snap, &sel)
            .map(|r| {
                let (p, b) = r.counters.get();
                translate::flow_stats(&r.spec, p, b, now.saturating_sub(r.counters.added_ns))
            })
            .collect(),
    ))
}

/// The selected rules' packets, bytes and number.
fn aggregate(sh: &Shared, req: &FlowStatsRequest) -> Result<MultipartReply, OfError> {
    let sel = selector(req)?;
    let snap = fresh_snapshot(sh);
    let (mut packets, mut bytes, mut flows) = (0u64, 0u64, 0u32);
    for r in selected(&snap, &sel) {
        let (p, b) = r.counters.get();
        packets += p;
        bytes += b;
        flows += 1;
    }
    Ok(MultipartReply::Aggregate {
        packet_count: packets,
        byte_count: bytes,
        flow_count: flows,
    })
}

/// Every table's rules and the packets they matched (lookups are not counted per table).
fn table_stats(sh: &Shared) -> MultipartReply {
    let snap = fresh_snapshot(sh);
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

/// One port's counters, or every port's (OFPP_ANY).
fn port_stats(sh: &Shared, port_no: u32) -> Result<MultipartReply, OfError> {
    let all = sh.ports.counters();
    if port_no != OFPP_ANY && !all.iter().any(|p| p.number == port_no) {
        return Err(OfError::new(et::BAD_REQUEST, brc::BAD_PORT));
    }
    Ok(MultipartReply::PortStats(
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
    ))
}

/// Every group's spec, by group id.
fn group_descs(sh: &Shared) -> MultipartReply {
    let snap = sh.switch.store().snapshot();
    let mut g: Vec<_> = snap.groups().iter().map(|g| group_desc(&g.spec)).collect();
    g.sort_by_key(|d| d.group_id);
    MultipartReply::GroupDesc(g)
}

/// One group's counters (with the rules that name it), or every group's (OFPG_ALL).
fn group_stats(sh: &Shared, group_id: u32) -> MultipartReply {
    let snap = fresh_snapshot(sh);
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

/// What the tables can do; a request that would reconfigure them is refused.
fn table_features(set: &[TableFeatures]) -> Result<MultipartReply, OfError> {
    if !set.is_empty() {
        // Reconfiguring tables is not supported: the pipeline takes any rule in any table.
        return Err(OfError::new(et::TABLE_FEATURES_FAILED, 5)); // OFPTFFC_EPERM
    }
    Ok(MultipartReply::TableFeatures(translate::table_features(
        N_TABLES, 1_000_000,
    )))
}

fn names_group(spec: &RuleSpec, id: u32) -> bool {
    spec.actions
        .iter()
        .chain(&spec.write_actions)
        .any(|a| *a == flowpath_packet::Action::Group(id))
}

/// Counters reach rules when the workers push their megaflow stats: ask for that first
/// (as `flowpath flows dump` does), then read the rules.
fn fresh_snapshot(sh: &Shared) -> Arc<Pipeline> {
    let sw = &sh.switch;
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
