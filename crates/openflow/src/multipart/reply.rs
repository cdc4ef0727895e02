//! [`MultipartReply`]: what the switch answers, to and from the wire, and its split into
//! bodies that each fit in one message.

use super::stats::{Desc, FlowStats, GroupDesc, GroupStats, PortStats, TableStats};
use super::table_features::TableFeatures;
use crate::common::Port;
use crate::consts::*;
use crate::wire::{DecodeError, Reader, Writer};

/// A multipart reply's type and body.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MultipartReply {
    Desc(Desc),
    Flow(Vec<FlowStats>),
    Aggregate {
        packet_count: u64,
        byte_count: u64,
        flow_count: u32,
    },
    Table(Vec<TableStats>),
    PortStats(Vec<PortStats>),
    PortDesc(Vec<Port>),
    GroupDesc(Vec<GroupDesc>),
    Group(Vec<GroupStats>),
    TableFeatures(Vec<TableFeatures>),
}

impl MultipartReply {
    /// The multipart type number.
    pub fn type_(&self) -> u16 {
        match self {
            MultipartReply::Desc(_) => mp::DESC,
            MultipartReply::Flow(_) => mp::FLOW,
            MultipartReply::Aggregate { .. } => mp::AGGREGATE,
            MultipartReply::Table(_) => mp::TABLE,
            MultipartReply::PortStats(_) => mp::PORT_STATS,
            MultipartReply::PortDesc(_) => mp::PORT_DESC,
            MultipartReply::GroupDesc(_) => mp::GROUP_DESC,
            MultipartReply::Group(_) => mp::GROUP,
            MultipartReply::TableFeatures(_) => mp::TABLE_FEATURES,
        }
    }

    pub(crate) fn encode(&self, w: &mut Writer, flags: u16) {
        w.u16(self.type_());
        w.u16(flags);
        w.zeros(4);
        match self {
            MultipartReply::Desc(d) => d.encode(w),
            MultipartReply::Flow(list) => list.iter().for_each(|f| f.encode(w)),
            MultipartReply::Aggregate {
                packet_count,
                byte_count,
                flow_count,
            } => {
                w.u64(*packet_count);
                w.u64(*byte_count);
                w.u32(*flow_count);
                w.zeros(4);
            }
            MultipartReply::Table(list) => list.iter().for_each(|t| t.encode(w)),
            MultipartReply::PortStats(list) => list.iter().for_each(|p| p.encode(w)),
            MultipartReply::PortDesc(list) => list.iter().for_each(|p| p.encode(w)),
            MultipartReply::GroupDesc(list) => list.iter().for_each(|g| g.encode(w)),
            MultipartReply::Group(list) => list.iter().for_each(|g| g.encode(w)),
            MultipartReply::TableFeatures(list) => list.iter().for_each(|t| t.encode(w)),
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<(u16, MultipartReply), DecodeError> {
        let ty = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        let body = match ty {
            mp::DESC => MultipartReply::Desc(Desc::decode(r)?),
            mp::FLOW => MultipartReply::Flow(r.list(FlowStats::decode)?),
            mp::AGGREGATE => {
                let a = MultipartReply::Aggregate {
                    packet_count: r.u64()?,
                    byte_count: r.u64()?,
                    flow_count: r.u32()?,
                };
                r.skip(4)?;
                a
            }
            mp::TABLE => MultipartReply::Table(r.list(TableStats::decode)?),
            mp::PORT_STATS => MultipartReply::PortStats(r.list(PortStats::decode)?),
            mp::PORT_DESC => MultipartReply::PortDesc(r.list(Port::decode)?),
            mp::GROUP_DESC => MultipartReply::GroupDesc(r.list(GroupDesc::decode)?),
            mp::GROUP => MultipartReply::Group(r.list(GroupStats::decode)?),
            mp::TABLE_FEATURES => MultipartReply::TableFeatures(TableFeatures::decode_list(r)?),
            other => return Err(DecodeError::BadMultipart(other)),
        };
        Ok((flags, body))
    }

    /// Split into bodies that each encode within `max_msg` bytes (a whole message,
    /// header included), keeping the items in order. An item too long to fit alone is an
    /// error (its index). Single-record replies (DESC, AGGREGATE) come back as they are.
    pub fn split(&self, max_msg: usize) -> Result<Vec<MultipartReply>, usize> {
        let room = max_msg.saturating_sub(16);
        use MultipartReply as R;
        match self {
            R::Desc(_) | R::Aggregate { .. } => Ok(vec![self.clone()]),
            R::Flow(l) => chunks(l, FlowStats::wire_len, room, R::Flow),
            R::Table(l) => chunks(l, |_| TableStats::WIRE_LEN, room, R::Table),
            R::PortStats(l) => chunks(l, |_| PortStats::WIRE_LEN, room, R::PortStats),
            R::PortDesc(l) => chunks(l, |_| Port::WIRE_LEN, room, R::PortDesc),
            R::GroupDesc(l) => chunks(l, GroupDesc::wire_len, room, R::GroupDesc),
            R::Group(l) => chunks(l, GroupStats::wire_len, room, R::Group),
            R::TableFeatures(l) => chunks(l, TableFeatures::wire_len, room, R::TableFeatures),
        }
    }
}

/// `items` in runs of at most `room` bytes each, every run wrapped as a reply body; the
/// index of an item longer than `room` by itself is the error.
fn chunks<T: Clone>(
    items: &[T],
    size: impl Fn(&T) -> usize,
    room: usize,
    wrap: impl Fn(Vec<T>) -> MultipartReply,
) -> Result<Vec<MultipartReply>, usize> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut used = 0;
    for (i, it) in items.iter().enumerate() {
        let s = size(it);
        if s > room {
            return Err(i);
        }
        if used + s > room {
            out.push(wrap(std::mem::take(&mut cur)));
            used = 0;
        }
        used += s;
        cur.push(it.clone());
    }
    out.push(wrap(cur));
    Ok(out)
}
