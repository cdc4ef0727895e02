//! Multipart (statistics) requests and replies: DESC, FLOW, AGGREGATE, TABLE, PORT_STATS,
//! PORT_DESC, GROUP, GROUP_DESC and TABLE_FEATURES, and the splitting of a long reply into
//! several messages flagged MORE ([`encode_multipart_reply`]).

use crate::actions::{
    decode_instructions, encode_instructions, instructions_wire_len, Instruction,
};
use crate::codec::{decode_buckets, decode_port, encode_port, Bucket, Message, Port};
use crate::consts::*;
use crate::oxm::{decode_match, encode_match, match_wire_len, Oxm};
use crate::wire::{pad8, DecodeError, Reader, Writer};

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

/// `ofp_desc`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Desc {
    pub mfr_desc: String,
    pub hw_desc: String,
    pub sw_desc: String,
    pub serial_num: String,
    pub dp_desc: String,
}

/// `ofp_flow_stats`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct FlowStats {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
    pub match_: Vec<Oxm>,
    pub instructions: Vec<Instruction>,
}

impl FlowStats {
    fn wire_len(&self) -> usize {
        48 + match_wire_len(&self.match_) + instructions_wire_len(&self.instructions)
    }
}

/// `ofp_table_stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

/// `ofp_port_stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PortStats {
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_frame_err: u64,
    pub rx_over_err: u64,
    pub rx_crc_err: u64,
    pub collisions: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

/// `ofp_group_desc`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupDesc {
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

impl GroupDesc {
    fn wire_len(&self) -> usize {
        8 + self.buckets.iter().map(Bucket::wire_len).sum::<usize>()
    }
}

/// `ofp_group_stats`; `bucket_stats` holds (packet_count, byte_count) per bucket.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct GroupStats {
    pub group_id: u32,
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub bucket_stats: Vec<(u64, u64)>,
}

/// One table features property. Instruction and action ids are their type numbers;
/// OXM ids are 32-bit OXM headers ([`crate::OxmField::header`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TableFeatureProp {
    Instructions {
        miss: bool,
        ids: Vec<u16>,
    },
    NextTables {
        miss: bool,
        tables: Vec<u8>,
    },
    WriteActions {
        miss: bool,
        ids: Vec<u16>,
    },
    ApplyActions {
        miss: bool,
        ids: Vec<u16>,
    },
    Match(Vec<u32>),
    Wildcards(Vec<u32>),
    WriteSetfield {
        miss: bool,
        oxms: Vec<u32>,
    },
    ApplySetfield {
        miss: bool,
        oxms: Vec<u32>,
    },
    /// Experimenter and unknown properties, as they came (without padding).
    Other {
        type_: u16,
        data: Vec<u8>,
    },
}

impl TableFeatureProp {
    fn type_(&self) -> u16 {
        use TableFeatureProp::*;
        let m = |miss: &bool, base: u16| base + *miss as u16;
        match self {
            Instructions { miss, .. } => m(miss, tfpt::INSTRUCTIONS),
            NextTables { miss, .. } => m(miss, tfpt::NEXT_TABLES),
            WriteActions { miss, .. } => m(miss, tfpt::WRITE_ACTIONS),
            ApplyActions { miss, .. } => m(miss, tfpt::APPLY_ACTIONS),
            Match(_) => tfpt::MATCH,
            Wildcards(_) => tfpt::WILDCARDS,
            WriteSetfield { miss, .. } => m(miss, tfpt::WRITE_SETFIELD),
            ApplySetfield { miss, .. } => m(miss, tfpt::APPLY_SETFIELD),
            Other { type_, .. } => *type_,
        }
    }

    /// Length without padding.
    fn body_len(&self) -> usize {
        use TableFeatureProp::*;
        4 + match self {
            Instructions { ids, .. } | WriteActions { ids, .. } | ApplyActions { ids, .. } => {
                4 * ids.len()
            }
            NextTables { tables, .. } => tables.len(),
            Match(o)
            | Wildcards(o)
            | WriteSetfield { oxms: o, .. }
            | ApplySetfield { oxms: o, .. } => 4 * o.len(),
            Other { data, .. } => data.len(),
        }
    }

    fn wire_len(&self) -> usize {
        let l = self.body_len();
        l + pad8(l)
    }

    fn encode(&self, w: &mut Writer) {
        use TableFeatureProp::*;
        let start = w.len();
        w.u16(self.type_());
        w.u16(self.body_len().min(0xffff) as u16);
        match self {
            Instructions { ids, .. } | WriteActions { ids, .. } | ApplyActions { ids, .. } => {
                for id in ids {
                    w.u16(*id);
                    w.u16(4);
                }
            }
            NextTables { tables, .. } => w.bytes(tables),
            Match(o)
            | Wildcards(o)
            | WriteSetfield { oxms: o, .. }
            | ApplySetfield { oxms: o, .. } => {
                for x in o {
                    w.u32(*x);
                }
            }
            Other { data, .. } => w.bytes(data),
        }
        w.pad_from(start);
    }

    fn decode(r: &mut Reader) -> Result<TableFeatureProp, DecodeError> {
        let e = DecodeError::BadTableFeaturesLen;
        let ty = r.u16()?;
        let len = r.u16()? as usize;
        if len < 4 {
            return Err(e);
        }
        let body = r.bytes(len - 4)?;
        r.skip(pad8(len))?;
        let miss = ty & 1 == 1;
        let ids = |b: &[u8]| -> Result<Vec<u16>, DecodeError> {
            let mut r = Reader::new(b, e);
            let mut out = Vec::new();
            while !r.is_empty() {
                let t = r.u16()?;
                let l = r.u16()? as usize;
                if l < 4 {
                    return Err(e);
                }
                r.skip(l - 4)?;
                out.push(t);
            }
            Ok(out)
        };
        let oxms = |b: &[u8]| -> Result<Vec<u32>, DecodeError> {
            if b.len() % 4 != 0 {
                return Err(e);
            }
            Ok(b.chunks_exact(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
        use TableFeatureProp::*;
        Ok(match ty {
            tfpt::INSTRUCTIONS | tfpt::INSTRUCTIONS_MISS => Instructions {
                miss,
                ids: ids(body)?,
            },
            tfpt::NEXT_TABLES | tfpt::NEXT_TABLES_MISS => NextTables {
                miss,
                tables: body.to_vec(),
            },
            tfpt::WRITE_ACTIONS | tfpt::WRITE_ACTIONS_MISS => WriteActions {
                miss,
                ids: ids(body)?,
            },
            tfpt::APPLY_ACTIONS | tfpt::APPLY_ACTIONS_MISS => ApplyActions {
                miss,
                ids: ids(body)?,
            },
            tfpt::MATCH => Match(oxms(body)?),
            tfpt::WILDCARDS => Wildcards(oxms(body)?),
            tfpt::WRITE_SETFIELD | tfpt::WRITE_SETFIELD_MISS => WriteSetfield {
                miss,
                oxms: oxms(body)?,
            },
            tfpt::APPLY_SETFIELD | tfpt::APPLY_SETFIELD_MISS => ApplySetfield {
                miss,
                oxms: oxms(body)?,
            },
            _ => Other {
                type_: ty,
                data: body.to_vec(),
            },
        })
    }
}

/// `ofp_table_features`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct TableFeatures {
    pub table_id: u8,
    /// At most 31 bytes on the wire.
    pub name: String,
    pub metadata_match: u64,
    pub metadata_write: u64,
    pub config: u32,
    pub max_entries: u32,
    pub properties: Vec<TableFeatureProp>,
}

impl TableFeatures {
    fn wire_len(&self) -> usize {
        64 + self
            .properties
            .iter()
            .map(TableFeatureProp::wire_len)
            .sum::<usize>()
    }

    fn encode(&self, w: &mut Writer) {
        w.u16(self.wire_len().min(0xffff) as u16);
        w.u8(self.table_id);
        w.zeros(5);
        w.string(&self.name, 32);
        w.u64(self.metadata_match);
        w.u64(self.metadata_write);
        w.u32(self.config);
        w.u32(self.max_entries);
        for p in &self.properties {
            p.encode(w);
        }
    }

    fn decode_list(r: &mut Reader) -> Result<Vec<TableFeatures>, DecodeError> {
        let e = DecodeError::BadTableFeaturesLen;
        let mut out = Vec::new();
        while !r.is_empty() {
            let len = r.peek_u16(0).map_err(|_| e)? as usize;
            if len < 64 || len % 8 != 0 {
                return Err(e);
            }
            let mut b = r.sub(len, e).map_err(|_| e)?;
            b.skip(2)?;
            let table_id = b.u8()?;
            b.skip(5)?;
            let name = b.string(32)?;
            let mut t = TableFeatures {
                table_id,
                name,
                metadata_match: b.u64()?,
                metadata_write: b.u64()?,
                config: b.u32()?,
                max_entries: b.u32()?,
                properties: Vec::new(),
            };
            while !b.is_empty() {
                t.properties.push(TableFeatureProp::decode(&mut b)?);
            }
            out.push(t);
        }
        Ok(out)
    }
}

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

fn encode_flow_stats_request(w: &mut Writer, f: &FlowStatsRequest) {
    w.u8(f.table_id);
    w.zeros(3);
    w.u32(f.out_port);
    w.u32(f.out_group);
    w.zeros(4);
    w.u64(f.cookie);
    w.u64(f.cookie_mask);
    encode_match(w, &f.match_);
}

fn decode_flow_stats_request(r: &mut Reader) -> Result<FlowStatsRequest, DecodeError> {
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
            MultipartRequest::Flow(f) | MultipartRequest::Aggregate(f) => {
                encode_flow_stats_request(w, f)
            }
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
            mp::FLOW => MultipartRequest::Flow(decode_flow_stats_request(r)?),
            mp::AGGREGATE => MultipartRequest::Aggregate(decode_flow_stats_request(r)?),
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
            MultipartReply::Desc(d) => {
                w.string(&d.mfr_desc, 256);
                w.string(&d.hw_desc, 256);
                w.string(&d.sw_desc, 256);
                w.string(&d.serial_num, 32);
                w.string(&d.dp_desc, 256);
            }
            MultipartReply::Flow(list) => {
                for f in list {
                    w.u16(f.wire_len().min(0xfff8) as u16);
                    w.u8(f.table_id);
                    w.u8(0);
                    w.u32(f.duration_sec);
                    w.u32(f.duration_nsec);
                    w.u16(f.priority);
                    w.u16(f.idle_timeout);
                    w.u16(f.hard_timeout);
                    w.u16(f.flags);
                    w.zeros(4);
                    w.u64(f.cookie);
                    w.u64(f.packet_count);
                    w.u64(f.byte_count);
                    encode_match(w, &f.match_);
                    encode_instructions(w, &f.instructions);
                }
            }
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
            MultipartReply::Table(list) => {
                for t in list {
                    w.u8(t.table_id);
                    w.zeros(3);
                    w.u32(t.active_count);
                    w.u64(t.lookup_count);
                    w.u64(t.matched_count);
                }
            }
            MultipartReply::PortStats(list) => {
                for p in list {
                    w.u32(p.port_no);
                    w.zeros(4);
                    for x in [
                        p.rx_packets,
                        p.tx_packets,
                        p.rx_bytes,
                        p.tx_bytes,
                        p.rx_dropped,
                        p.tx_dropped,
                        p.rx_errors,
                        p.tx_errors,
                        p.rx_frame_err,
                        p.rx_over_err,
                        p.rx_crc_err,
                        p.collisions,
                    ] {
                        w.u64(x);
                    }
                    w.u32(p.duration_sec);
                    w.u32(p.duration_nsec);
                }
            }
            MultipartReply::PortDesc(list) => {
                for p in list {
                    encode_port(w, p);
                }
            }
            MultipartReply::GroupDesc(list) => {
                for g in list {
                    w.u16(g.wire_len().min(0xfff8) as u16);
                    w.u8(g.group_type);
                    w.u8(0);
                    w.u32(g.group_id);
                    for b in &g.buckets {
                        b.encode(w);
                    }
                }
            }
            MultipartReply::Group(list) => {
                for g in list {
                    w.u16((40 + 16 * g.bucket_stats.len()).min(0xfff0) as u16);
                    w.zeros(2);
                    w.u32(g.group_id);
                    w.u32(g.ref_count);
                    w.zeros(4);
                    w.u64(g.packet_count);
                    w.u64(g.byte_count);
                    w.u32(g.duration_sec);
                    w.u32(g.duration_nsec);
                    for (p, b) in &g.bucket_stats {
                        w.u64(*p);
                        w.u64(*b);
                    }
                }
            }
            MultipartReply::TableFeatures(list) => {
                for t in list {
                    t.encode(w);
                }
            }
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<(u16, MultipartReply), DecodeError> {
        let e = DecodeError::BadLen;
        let ty = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        let body = match ty {
            mp::DESC => MultipartReply::Desc(Desc {
                mfr_desc: r.string(256)?,
                hw_desc: r.string(256)?,
                sw_desc: r.string(256)?,
                serial_num: r.string(32)?,
                dp_desc: r.string(256)?,
            }),
            mp::FLOW => {
                let mut list = Vec::new();
                while !r.is_empty() {
                    let len = r.peek_u16(0)? as usize;
                    if len < 56 {
                        return Err(e);
                    }
                    let mut b = r.sub(len, e)?;
                    b.skip(2)?;
                    let table_id = b.u8()?;
                    b.skip(1)?;
                    let duration_sec = b.u32()?;
                    let duration_nsec = b.u32()?;
                    let priority = b.u16()?;
                    let idle_timeout = b.u16()?;
                    let hard_timeout = b.u16()?;
                    let flags = b.u16()?;
                    b.skip(4)?;
                    let cookie = b.u64()?;
                    let packet_count = b.u64()?;
                    let byte_count = b.u64()?;
                    let match_ = decode_match(&mut b)?;
                    let rest = Reader::new(b.rest(), DecodeError::BadInstructionLen);
                    list.push(FlowStats {
                        table_id,
                        duration_sec,
                        duration_nsec,
                        priority,
                        idle_timeout,
                        hard_timeout,
                        flags,
                        cookie,
                        packet_count,
                        byte_count,
                        match_,
                        instructions: decode_instructions(rest)?,
                    });
                }
                MultipartReply::Flow(list)
            }
            mp::AGGREGATE => {
                let a = MultipartReply::Aggregate {
                    packet_count: r.u64()?,
                    byte_count: r.u64()?,
                    flow_count: r.u32()?,
                };
                r.skip(4)?;
                a
            }
            mp::TABLE => {
                let mut list = Vec::new();
                while !r.is_empty() {
                    let table_id = r.u8()?;
                    r.skip(3)?;
                    list.push(TableStats {
                        table_id,
                        active_count: r.u32()?,
                        lookup_count: r.u64()?,
                        matched_count: r.u64()?,
                    });
                }
                MultipartReply::Table(list)
            }
            mp::PORT_STATS => {
                let mut list = Vec::new();
                while !r.is_empty() {
                    let port_no = r.u32()?;
                    r.skip(4)?;
                    list.push(PortStats {
                        port_no,
                        rx_packets: r.u64()?,
                        tx_packets: r.u64()?,
                        rx_bytes: r.u64()?,
                        tx_bytes: r.u64()?,
                        rx_dropped: r.u64()?,
                        tx_dropped: r.u64()?,
                        rx_errors: r.u64()?,
                        tx_errors: r.u64()?,
                        rx_frame_err: r.u64()?,
                        rx_over_err: r.u64()?,
                        rx_crc_err: r.u64()?,
                        collisions: r.u64()?,
                        duration_sec: r.u32()?,
                        duration_nsec: r.u32()?,
                    });
                }
                MultipartReply::PortStats(list)
            }
            mp::PORT_DESC => {
                let mut list = Vec::new();
                while !r.is_empty() {
                    list.push(decode_port(r)?);
                }
                MultipartReply::PortDesc(list)
            }
            mp::GROUP_DESC => {
                let mut list = Vec::new();
                while !r.is_empty() {
                    let len = r.peek_u16(0)? as usize;
                    if len < 8 {
                        return Err(e);
                    }
                    let mut b = r.sub(len, e)?;
                    b.skip(2)?;
                    let group_type = b.u8()?;
                    b.skip(1)?;
                    let group_id = b.u32()?;
                    let rest = Reader::new(b.rest(), DecodeError::BadBucket);
                    list.push(GroupDesc {
                        group_type,
                        group_id,
                        buckets: decode_buckets(rest)?,
                    });
                }
                MultipartReply::GroupDesc(list)
            }
            mp::GROUP => {
                let mut list = Vec::new();
                while !r.is_empty() {
                    let len = r.peek_u16(0)? as usize;
                    if len < 40 || (len - 40) % 16 != 0 {
                        return Err(e);
                    }
                    let mut b = r.sub(len, e)?;
                    b.skip(4)?;
                    let mut g = GroupStats {
                        group_id: b.u32()?,
                        ref_count: b.u32()?,
                        ..GroupStats::default()
                    };
                    b.skip(4)?;
                    g.packet_count = b.u64()?;
                    g.byte_count = b.u64()?;
                    g.duration_sec = b.u32()?;
                    g.duration_nsec = b.u32()?;
                    while !b.is_empty() {
                        g.bucket_stats.push((b.u64()?, b.u64()?));
                    }
                    list.push(g);
                }
                MultipartReply::Group(list)
            }
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
        match self {
            MultipartReply::Desc(_) | MultipartReply::Aggregate { .. } => Ok(vec![self.clone()]),
            MultipartReply::Flow(l) => chunks(l, FlowStats::wire_len, room, MultipartReply::Flow),
            MultipartReply::Table(l) => chunks(l, |_| 24, room, MultipartReply::Table),
            MultipartReply::PortStats(l) => chunks(l, |_| 112, room, MultipartReply::PortStats),
            MultipartReply::PortDesc(l) => chunks(l, |_| 64, room, MultipartReply::PortDesc),
            MultipartReply::GroupDesc(l) => {
                chunks(l, GroupDesc::wire_len, room, MultipartReply::GroupDesc)
            }
            MultipartReply::Group(l) => chunks(
                l,
                |g| 40 + 16 * g.bucket_stats.len(),
                room,
                MultipartReply::Group,
            ),
            MultipartReply::TableFeatures(l) => chunks(
                l,
                TableFeatures::wire_len,
                room,
                MultipartReply::TableFeatures,
            ),
        }
    }
}

/// Why a reply could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong {
    /// Index of the item that does not fit in one message by itself.
    pub item: usize,
}

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "multipart reply item {} is longer than a message",
            self.item
        )
    }
}

impl std::error::Error for TooLong {}

/// Encode a multipart reply as one or more messages, each at most 65,535 bytes, all but
/// the last flagged [`OFPMPF_REPLY_MORE`], all with `xid`.
pub fn encode_multipart_reply(xid: u32, body: &MultipartReply) -> Result<Vec<Vec<u8>>, TooLong> {
    encode_multipart_reply_max(xid, body, OFP_MAX_MSG_LEN)
}

/// [`encode_multipart_reply`] with a smaller message size limit (tests, small buffers).
pub fn encode_multipart_reply_max(
    xid: u32,
    body: &MultipartReply,
    max_msg: usize,
) -> Result<Vec<Vec<u8>>, TooLong> {
    let parts = body
        .split(max_msg.min(OFP_MAX_MSG_LEN))
        .map_err(|item| TooLong { item })?;
    let n = parts.len();
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            let flags = if i + 1 < n { OFPMPF_REPLY_MORE } else { 0 };
            Message::MultipartReply { flags, body }.encode(xid)
        })
        .collect())
}
