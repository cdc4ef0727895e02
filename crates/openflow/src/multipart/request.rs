//! [`MultipartRequest`]: what a controller asks for, and the body of a FLOW or AGGREGATE
//! request ([`FlowStatsRequest`]).

use super::table_features::TableFeatures;
use crate::consts::*;
use crate::oxm::{decode_match, encode_match, Oxm};
use crate::wire::{DecodeError, Reader, Writer};

/// The body of an `ofp_flow_stats_request` / `ofp_aggregate_stats_request`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlowStatsRequest {
    /// [`OFPTT_ALL`] for every table.
    pub table_id: u8,
    /// [`OFPP_ANY`]: no filter.
    pub out_port: u32,
    /// [`OFPG_ANY`]: no filter.
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub match_: Vec<Oxm>,
}

impl Default for FlowStatsRequest {
    /// Every flow of every table.
    fn default() -> Self {
        FlowStatsRequest {
            table_id: OFPTT_ALL,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            cookie: 0,
            cookie_mask: 0,
            match_: Vec::new(),
        }
    }
}

impl FlowStatsRequest {
    fn encode(&self, w: &mut Writer) {
        w.u8(self.table_id);
        w.zeros(3);
        w.u32(self.out_port);
        w.u32(self.out_group);
        w.zeros(4);
        w.u64(self.cookie);
        w.u64(self.cookie_mask);
        encode_match(w, &self.match_);
    }

    fn decode(r: &mut Reader) -> Result<FlowStatsRequest, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        r.skip(4)?;
        Ok(FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie: r.u64()?,
            cookie_mask: r.u64()?,
            match_: decode_match(r)?,
        })
    }
}

/// A multipart request's type and body.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MultipartRequest {
    Desc,
    Flow(FlowStatsRequest),
    Aggregate(FlowStatsRequest),
    Table,
    /// [`OFPP_ANY`] for every port.
    PortStats {
        port_no: u32,
    },
    PortDesc,
    GroupDesc,
    /// [`OFPG_ALL`] for every group.
    Group {
        group_id: u32,
    },
    /// Empty: read the features; otherwise the controller sets them.
    TableFeatures(Vec<TableFeatures>),
}

impl MultipartRequest {
    /// The multipart type number.
    pub fn type_(&self) -> u16 {
        match self {
            MultipartRequest::Desc => mp::DESC,
            MultipartRequest::Flow(_) => mp::FLOW,
            MultipartRequest::Aggregate(_) => mp::AGGREGATE,
            MultipartRequest::Table => mp::TABLE,
            MultipartRequest::PortStats { .. } => mp::PORT_STATS,
            MultipartRequest::PortDesc => mp::PORT_DESC,
            MultipartRequest::GroupDesc => mp::GROUP_DESC,
            MultipartRequest::Group { .. } => mp::GROUP,
            MultipartRequest::TableFeatures(_) => mp::TABLE_FEATURES,
        }
    }

    pub(crate) fn encode(&self, w: &mut Writer, flags: u16) {
        w.u16(self.type_());
        w.u16(flags);
        w.zeros(4);
        match self {
            MultipartRequest::Desc
            | MultipartRequest::Table
            | MultipartRequest::PortDesc
            | MultipartRequest::GroupDesc => {}
            MultipartRequest::Flow(f) | MultipartRequest::Aggregate(f) => f.encode(w),
            MultipartRequest::PortStats { port_no: n }
            | MultipartRequest::Group { group_id: n } => {
                w.u32(*n);
                w.zeros(4);
            }
            MultipartRequest::TableFeatures(t) => {
                for f in t {
                    f.encode(w);
                }
            }
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<(u16, MultipartRequest), DecodeError> {
        let ty = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        let body = match ty {
            mp::DESC => MultipartRequest::Desc,
            mp::TABLE => MultipartRequest::Table,
            mp::PORT_DESC => MultipartRequest::PortDesc,
            mp::GROUP_DESC => MultipartRequest::GroupDesc,
            mp::FLOW => MultipartRequest::Flow(FlowStatsRequest::decode(r)?),
            mp::AGGREGATE => MultipartRequest::Aggregate(FlowStatsRequest::decode(r)?),
            mp::PORT_STATS => {
                let port_no = r.u32()?;
                r.skip(4)?;
                MultipartRequest::PortStats { port_no }
            }
            mp::GROUP => {
                let group_id = r.u32()?;
                r.skip(4)?;
                MultipartRequest::Group { group_id }
            }
            mp::TABLE_FEATURES => MultipartRequest::TableFeatures(TableFeatures::decode_list(r)?),
            other => return Err(DecodeError::BadMultipart(other)),
        };
        Ok((flags, body))
    }
}
