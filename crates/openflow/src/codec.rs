//! OpenFlow 1.3 messages: [`Header`], [`Message`] with [`Message::encode`] and [`decode`],
//! and [`message_len`], which frames a byte stream into messages.

use crate::actions::{
    actions_wire_len, decode_actions, decode_instructions, encode_actions, encode_instructions,
    Instruction, OfAction,
};
use crate::consts::*;
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::oxm::{decode_match, encode_match, Oxm};
use crate::wire::{pad8, DecodeError, Reader, Writer};

/// `ofp_header`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    pub version: u8,
    pub type_: u8,
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// Read the header at the start of `buf` (no checks beyond there being 8 bytes).
    pub fn peek(buf: &[u8]) -> Option<Header> {
        let b: &[u8; 8] = buf.get(..8)?.try_into().ok()?;
        Some(Header {
            version: b[0],
            type_: b[1],
            length: u16::from_be_bytes([b[2], b[3]]),
            xid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// How many bytes the message at the start of `buf` takes: `Ok(None)` while fewer than
/// the 4 bytes that hold its length have arrived, `Ok(Some(n))` once they have (the caller
/// waits for `n` bytes, then passes exactly those to [`decode`]), and an error for a length
/// below the 8-byte header (the stream cannot be framed any more: close the connection).
pub fn message_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u16::from_be_bytes([buf[2], buf[3]]) as usize;
    if len < OFP_HEADER_LEN {
        return Err(DecodeError::BadLen);
    }
    Ok(Some(len))
}

/// A hello element.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HelloElement {
    /// The versions the sender supports: bit `v` of word `v / 32` for wire version `v`.
    VersionBitmap(Vec<u32>),
    /// Another element type, kept as it came (without its padding).
    Unknown { type_: u16, data: Vec<u8> },
}

/// The highest version both sides support, from the peer's hello (its header version and
/// bitmap, as OF 1.3 §6.3.1 says) and our own bitmap of versions.
pub fn negotiate_version(peer_version: u8, elements: &[HelloElement], ours: u32) -> Option<u8> {
    let theirs = elements.iter().find_map(|e| match e {
        HelloElement::VersionBitmap(words) => Some(words.first().copied().unwrap_or(0)),
        HelloElement::Unknown { .. } => None,
    });
    let common = match theirs {
        Some(bits) => bits & ours,
        // No bitmap: the lower of the two highest versions.
        None => {
            let our_max = 31 - ours.leading_zeros();
            let v = (peer_version as u32).min(our_max);
            if v < 32 && ours & (1 << v) != 0 {
                1 << v
            } else {
                0
            }
        }
    };
    (common != 0).then(|| (31 - common.leading_zeros()) as u8)
}

/// `ofp_switch_features` (FEATURES_REPLY).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Features {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
}

/// `ofp_switch_config` (GET_CONFIG_REPLY, SET_CONFIG).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

/// `ofp_packet_in`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub match_: Vec<Oxm>,
    pub data: Vec<u8>,
}

/// `ofp_flow_removed`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct FlowRemoved {
    pub cookie: u64,
    pub priority: u16,
    pub reason: u8,
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub packet_count: u64,
    pub byte_count: u64,
    pub match_: Vec<Oxm>,
}

/// `ofp_port` (PORT_STATUS, PORT_DESC replies).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Port {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    /// At most 15 bytes on the wire.
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    /// kbit/s.
    pub curr_speed: u32,
    pub max_speed: u32,
}

/// `ofp_packet_out`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<OfAction>,
    pub data: Vec<u8>,
}

/// `ofp_flow_mod`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    pub match_: Vec<Oxm>,
    pub instructions: Vec<Instruction>,
}

impl Default for FlowMod {
    /// An ADD into table 0 at the default priority, no buffer, no filters, match all.
    fn default() -> Self {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command: OFPFC_ADD,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: OFP_DEFAULT_PRIORITY,
            buffer_id: OFP_NO_BUFFER,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            flags: 0,
            match_: Vec::new(),
            instructions: Vec::new(),
        }
    }
}

/// `ofp_bucket`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bucket {
    pub weight: u16,
    pub watch_port: u32,
    pub watch_group: u32,
    pub actions: Vec<OfAction>,
}

impl Bucket {
    pub(crate) fn wire_len(&self) -> usize {
        16 + actions_wire_len(&self.actions)
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        w.u16(self.wire_len().min(0xfff8) as u16);
        w.u16(self.weight);
        w.u32(self.watch_port);
        w.u32(self.watch_group);
        w.zeros(4);
        encode_actions(w, &self.actions);
    }
}

/// Decode buckets until `r` is empty.
pub(crate) fn decode_buckets(mut r: Reader) -> Result<Vec<Bucket>, DecodeError> {
    let e = DecodeError::BadBucket;
    let mut out = Vec::new();
    while !r.is_empty() {
        let len = r.peek_u16(0).map_err(|_| e)? as usize;
        if len < 16 || len % 8 != 0 {
            return Err(e);
        }
        let mut b = r.sub(len, e).map_err(|_| e)?;
        b.skip(2)?;
        let weight = b.u16()?;
        let watch_port = b.u32()?;
        let watch_group = b.u32()?;
        b.skip(4)?;
        out.push(Bucket {
            weight,
            watch_port,
            watch_group,
            actions: decode_actions(b)?,
        });
    }
    Ok(out)
}

/// `ofp_group_mod`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupMod {
    pub command: u16,
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

/// `ofp_port_mod`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PortMod {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub config: u32,
    pub mask: u32,
    pub advertise: u32,
}

/// `ofp_role_request` / reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Role {
    pub role: u32,
    pub generation_id: u64,
}

/// `ofp_async_config`: index 0 is for the master/equal role, 1 for the slave role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AsyncConfig {
    pub packet_in_mask: [u32; 2],
    pub port_status_mask: [u32; 2],
    pub flow_removed_mask: [u32; 2],
}

/// One `ofp_meter_band_*`: its header fields, and the bytes after them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MeterBand {
    pub type_: u16,
    pub rate: u32,
    pub burst_size: u32,
    pub data: Vec<u8>,
}

/// `ofp_meter_mod` (decoded so that it can be refused precisely).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MeterMod {
    pub command: u16,
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

/// An OpenFlow 1.3 message (the body; the xid travels in [`Header`] / `encode`'s argument).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    Hello(Vec<HelloElement>),
    Error {
        type_: u16,
        code: u16,
        data: Vec<u8>,
    },
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        data: Vec<u8>,
    },
    FeaturesRequest,
    FeaturesReply(Features),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    PacketIn(PacketIn),
    FlowRemoved(FlowRemoved),
    PortStatus {
        reason: u8,
        port: Port,
    },
    PacketOut(PacketOut),
    FlowMod(FlowMod),
    GroupMod(GroupMod),
    PortMod(PortMod),
    TableMod {
        table_id: u8,
        config: u32,
    },
    MultipartRequest {
        flags: u16,
        body: MultipartRequest,
    },
    MultipartReply {
        flags: u16,
        body: MultipartReply,
    },
    BarrierRequest,
    BarrierReply,
    RoleRequest(Role),
    RoleReply(Role),
    GetAsyncRequest,
    GetAsyncReply(AsyncConfig),
    SetAsync(AsyncConfig),
    MeterMod(MeterMod),
}

impl Message {
    /// A HELLO offering exactly OpenFlow 1.3 (version bitmap with bit 4).
    pub fn hello() -> Message {
        Message::Hello(vec![HelloElement::VersionBitmap(vec![1 << OFP_VERSION])])
    }

    /// An ERROR answering `request` (its first 64 bytes go in the data, as the spec asks).
    pub fn error(type_code: (u16, u16), request: &[u8]) -> Message {
        Message::Error {
            type_: type_code.0,
            code: type_code.1,
            data: request[..request.len().min(OFP_ERROR_DATA_LEN)].to_vec(),
        }
    }

    /// The message type number.
    pub fn type_(&self) -> u8 {
        use Message::*;
        match self {
            Hello(_) => msg::HELLO,
            Error { .. } => msg::ERROR,
            EchoRequest(_) => msg::ECHO_REQUEST,
            EchoReply(_) => msg::ECHO_REPLY,
            Experimenter { .. } => msg::EXPERIMENTER,
            FeaturesRequest => msg::FEATURES_REQUEST,
            FeaturesReply(_) => msg::FEATURES_REPLY,
            GetConfigRequest => msg::GET_CONFIG_REQUEST,
            GetConfigReply(_) => msg::GET_CONFIG_REPLY,
            SetConfig(_) => msg::SET_CONFIG,
            PacketIn(_) => msg::PACKET_IN,
            FlowRemoved(_) => msg::FLOW_REMOVED,
            PortStatus { .. } => msg::PORT_STATUS,
            PacketOut(_) => msg::PACKET_OUT,
            FlowMod(_) => msg::FLOW_MOD,
            GroupMod(_) => msg::GROUP_MOD,
            PortMod(_) => msg::PORT_MOD,
            TableMod { .. } => msg::TABLE_MOD,
            MultipartRequest { .. } => msg::MULTIPART_REQUEST,
            MultipartReply { .. } => msg::MULTIPART_REPLY,
            BarrierRequest => msg::BARRIER_REQUEST,
            BarrierReply => msg::BARRIER_REPLY,
            RoleRequest(_) => msg::ROLE_REQUEST,
            RoleReply(_) => msg::ROLE_REPLY,
            GetAsyncRequest => msg::GET_ASYNC_REQUEST,
            GetAsyncReply(_) => msg::GET_ASYNC_REPLY,
            SetAsync(_) => msg::SET_ASYNC,
            MeterMod(_) => msg::METER_MOD,
        }
    }

    /// Encode with this xid. The caller keeps messages within 65,535 bytes (a packet_in's
    /// data cut to max_len; long multipart replies through
    /// [`crate::multipart::encode_multipart_reply`]); a longer one has its length field
    /// saturated, which [`Message::encoded_len`] lets the caller avoid.
    pub fn encode(&self, xid: u32) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(OFP_VERSION);
        w.u8(self.type_());
        w.u16(0);
        w.u32(xid);
        self.encode_body(&mut w);
        let len = w.len().min(OFP_MAX_MSG_LEN) as u16;
        w.set_u16(2, len);
        w.buf
    }

    /// Size of the encoded message.
    pub fn encoded_len(&self) -> usize {
        // Bodies are small next to the copy this saves for the common case.
        self.encode(0).len()
    }

    fn encode_body(&self, w: &mut Writer) {
        use Message::*;
        match self {
            Hello(elems) => {
                for e in elems {
                    let start = w.len();
                    match e {
                        HelloElement::VersionBitmap(words) => {
                            w.u16(OFPHET_VERSIONBITMAP);
                            w.u16((4 + 4 * words.len()).min(0xffff) as u16);
                            for x in words {
                                w.u32(*x);
                            }
                        }
                        HelloElement::Unknown { type_, data } => {
                            w.u16(*type_);
                            w.u16((4 + data.len()).min(0xffff) as u16);
                            w.bytes(data);
                        }
                    }
                    w.pad_from(start);
                }
            }
            Error { type_, code, data } => {
                w.u16(*type_);
                w.u16(*code);
                w.bytes(data);
            }
            EchoRequest(d) | EchoReply(d) => w.bytes(d),
            Experimenter {
                experimenter,
                exp_type,
                data,
            } => {
                w.u32(*experimenter);
                w.u32(*exp_type);
                w.bytes(data);
            }
            FeaturesRequest | GetConfigRequest | BarrierRequest | BarrierReply
            | GetAsyncRequest => {}
            FeaturesReply(f) => {
                w.u64(f.datapath_id);
                w.u32(f.n_buffers);
                w.u8(f.n_tables);
                w.u8(f.auxiliary_id);
                w.zeros(2);
                w.u32(f.capabilities);
                w.u32(0);
            }
            GetConfigReply(c) | SetConfig(c) => {
                w.u16(c.flags);
                w.u16(c.miss_send_len);
            }
            PacketIn(p) => {
                w.u32(p.buffer_id);
                w.u16(p.total_len);
                w.u8(p.reason);
                w.u8(p.table_id);
                w.u64(p.cookie);
                encode_match(w, &p.match_);
                w.zeros(2);
                w.bytes(&p.data);
            }
            FlowRemoved(f) => {
                w.u64(f.cookie);
                w.u16(f.priority);
                w.u8(f.reason);
                w.u8(f.table_id);
                w.u32(f.duration_sec);
                w.u32(f.duration_nsec);
                w.u16(f.idle_timeout);
                w.u16(f.hard_timeout);
                w.u64(f.packet_count);
                w.u64(f.byte_count);
                encode_match(w, &f.match_);
            }
            PortStatus { reason, port } => {
                w.u8(*reason);
                w.zeros(7);
                encode_port(w, port);
            }
            PacketOut(p) => {
                w.u32(p.buffer_id);
                w.u32(p.in_port);
                w.u16(actions_wire_len(&p.actions).min(0xfff8) as u16);
                w.zeros(6);
                encode_actions(w, &p.actions);
                w.bytes(&p.data);
            }
            FlowMod(f) => {
                w.u64(f.cookie);
                w.u64(f.cookie_mask);
                w.u8(f.table_id);
                w.u8(f.command);
                w.u16(f.idle_timeout);
                w.u16(f.hard_timeout);
                w.u16(f.priority);
                w.u32(f.buffer_id);
                w.u32(f.out_port);
                w.u32(f.out_group);
                w.u16(f.flags);
                w.zeros(2);
                encode_match(w, &f.match_);
                encode_instructions(w, &f.instructions);
            }
            GroupMod(g) => {
                w.u16(g.command);
                w.u8(g.group_type);
                w.u8(0);
                w.u32(g.group_id);
                for b in &g.buckets {
                    b.encode(w);
                }
            }
            PortMod(p) => {
                w.u32(p.port_no);
                w.zeros(4);
                w.bytes(&p.hw_addr);
                w.zeros(2);
                w.u32(p.config);
                w.u32(p.mask);
                w.u32(p.advertise);
                w.zeros(4);
            }
            TableMod { table_id, config } => {
                w.u8(*table_id);
                w.zeros(3);
                w.u32(*config);
            }
            MultipartRequest { flags, body } => body.encode(w, *flags),
            MultipartReply { flags, body } => body.encode(w, *flags),
            RoleRequest(r) | RoleReply(r) => {
                w.u32(r.role);
                w.zeros(4);
                w.u64(r.generation_id);
            }
            GetAsyncReply(a) | SetAsync(a) => {
                for x in a
                    .packet_in_mask
                    .iter()
                    .chain(&a.port_status_mask)
                    .chain(&a.flow_removed_mask)
                {
                    w.u32(*x);
                }
            }
            MeterMod(m) => {
                w.u16(m.command);
                w.u16(m.flags);
                w.u32(m.meter_id);
                for b in &m.bands {
                    w.u16(b.type_);
                    w.u16((12 + b.data.len()).min(0xffff) as u16);
                    w.u32(b.rate);
                    w.u32(b.burst_size);
                    w.bytes(&b.data);
                }
            }
        }
    }
}

pub(crate) fn encode_port(w: &mut Writer, p: &Port) {
    w.u32(p.port_no);
    w.zeros(4);
    w.bytes(&p.hw_addr);
    w.zeros(2);
    w.string(&p.name, OFP_MAX_PORT_NAME_LEN);
    for x in [
        p.config,
        p.state,
        p.curr,
        p.advertised,
        p.supported,
        p.peer,
        p.curr_speed,
        p.max_speed,
    ] {
        w.u32(x);
    }
}

pub(crate) fn decode_port(r: &mut Reader) -> Result<Port, DecodeError> {
    let port_no = r.u32()?;
    r.skip(4)?;
    let hw_addr = r.array()?;
    r.skip(2)?;
    let name = r.string(OFP_MAX_PORT_NAME_LEN)?;
    Ok(Port {
        port_no,
        hw_addr,
        name,
        config: r.u32()?,
        state: r.u32()?,
        curr: r.u32()?,
        advertised: r.u32()?,
        supported: r.u32()?,
        peer: r.u32()?,
        curr_speed: r.u32()?,
        max_speed: r.u32()?,
    })
}

/// Decode one whole message: `buf` is exactly the bytes [`message_len`] framed. A message
/// that is not version 0x04 is refused (BAD_VERSION) unless it is a HELLO, which decodes
/// whatever its version so that the caller can negotiate. Every length inside is checked;
/// trailing bytes a fixed-size message does not use are a length error.
pub fn decode(buf: &[u8]) -> Result<(Header, Message), DecodeError> {
    let h = Header::peek(buf).ok_or(DecodeError::BadLen)?;
    if (h.length as usize) < OFP_HEADER_LEN || h.length as usize != buf.len() {
        return Err(DecodeError::BadLen);
    }
    if h.version != OFP_VERSION && h.type_ != msg::HELLO {
        return Err(DecodeError::BadVersion(h.version));
    }
    let mut r = Reader::new(&buf[OFP_HEADER_LEN..], DecodeError::BadLen);
    let m = decode_body(h.type_, &mut r)?;
    if !r.is_empty() {
        return Err(DecodeError::BadLen);
    }
    Ok((h, m))
}

fn decode_body(ty: u8, r: &mut Reader) -> Result<Message, DecodeError> {
    use Message as M;
    let e = DecodeError::BadLen;
    Ok(match ty {
        msg::HELLO => {
            let mut elems = Vec::new();
            while !r.is_empty() {
                let ty = r.u16()?;
                let len = r.u16()? as usize;
                if len < 4 {
                    return Err(e);
                }
                let body = r.bytes(len - 4)?;
                // Elements are padded to 8 bytes; tolerate a last one that is not.
                let pad = pad8(len).min(r.remaining());
                r.skip(pad)?;
                if ty == OFPHET_VERSIONBITMAP {
                    if body.len() % 4 != 0 {
                        return Err(e);
                    }
                    let words = body
                        .chunks_exact(4)
                        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    elems.push(HelloElement::VersionBitmap(words));
                } else {
                    elems.push(HelloElement::Unknown {
                        type_: ty,
                        data: body.to_vec(),
                    });
                }
            }
            M::Hello(elems)
        }
        msg::ERROR => M::Error {
            type_: r.u16()?,
            code: r.u16()?,
            data: r.rest().to_vec(),
        },
        msg::ECHO_REQUEST => M::EchoRequest(r.rest().to_vec()),
        msg::ECHO_REPLY => M::EchoReply(r.rest().to_vec()),
        msg::EXPERIMENTER => M::Experimenter {
            experimenter: r.u32()?,
            exp_type: r.u32()?,
            data: r.rest().to_vec(),
        },
        msg::FEATURES_REQUEST => M::FeaturesRequest,
        msg::FEATURES_REPLY => {
            let datapath_id = r.u64()?;
            let n_buffers = r.u32()?;
            let n_tables = r.u8()?;
            let auxiliary_id = r.u8()?;
            r.skip(2)?;
            let capabilities = r.u32()?;
            r.skip(4)?;
            M::FeaturesReply(Features {
                datapath_id,
                n_buffers,
                n_tables,
                auxiliary_id,
                capabilities,
            })
        }
        msg::GET_CONFIG_REQUEST => M::GetConfigRequest,
        msg::GET_CONFIG_REPLY | msg::SET_CONFIG => {
            let c = SwitchConfig {
                flags: r.u16()?,
                miss_send_len: r.u16()?,
            };
            if ty == msg::SET_CONFIG {
                M::SetConfig(c)
            } else {
                M::GetConfigReply(c)
            }
        }
        msg::PACKET_IN => {
            let buffer_id = r.u32()?;
            let total_len = r.u16()?;
            let reason = r.u8()?;
            let table_id = r.u8()?;
            let cookie = r.u64()?;
            let match_ = decode_match(r)?;
            r.skip(2)?;
            M::PacketIn(PacketIn {
                buffer_id,
                total_len,
                reason,
                table_id,
                cookie,
                match_,
                data: r.rest().to_vec(),
            })
        }
        msg::FLOW_REMOVED => M::FlowRemoved(FlowRemoved {
            cookie: r.u64()?,
            priority: r.u16()?,
            reason: r.u8()?,
            table_id: r.u8()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            match_: decode_match(r)?,
        }),
        msg::PORT_STATUS => {
            let reason = r.u8()?;
            r.skip(7)?;
            M::PortStatus {
                reason,
                port: decode_port(r)?,
            }
        }
        msg::PACKET_OUT => {
            let buffer_id = r.u32()?;
            let in_port = r.u32()?;
            let actions_len = r.u16()? as usize;
            r.skip(6)?;
            let acts = r.sub(actions_len, e)?;
            M::PacketOut(PacketOut {
                buffer_id,
                in_port,
                actions: decode_actions(acts)?,
                data: r.rest().to_vec(),
            })
        }
        msg::FLOW_MOD => {
            let cookie = r.u64()?;
            let cookie_mask = r.u64()?;
            let table_id = r.u8()?;
            let command = r.u8()?;
            let idle_timeout = r.u16()?;
            let hard_timeout = r.u16()?;
            let priority = r.u16()?;
            let buffer_id = r.u32()?;
            let out_port = r.u32()?;
            let out_group = r.u32()?;
            let flags = r.u16()?;
            r.skip(2)?;
            let match_ = decode_match(r)?;
            let rest = Reader::new(r.rest(), DecodeError::BadInstructionLen);
            M::FlowMod(FlowMod {
                cookie,
                cookie_mask,
                table_id,
                command,
                idle_timeout,
                hard_timeout,
                priority,
                buffer_id,
                out_port,
                out_group,
                flags,
                match_,
                instructions: decode_instructions(rest)?,
            })
        }
        msg::GROUP_MOD => {
            let command = r.u16()?;
            let group_type = r.u8()?;
            r.skip(1)?;
            let group_id = r.u32()?;
            let rest = Reader::new(r.rest(), DecodeError::BadBucket);
            M::GroupMod(GroupMod {
                command,
                group_type,
                group_id,
                buckets: decode_buckets(rest)?,
            })
        }
        msg::PORT_MOD => {
            let port_no = r.u32()?;
            r.skip(4)?;
            let hw_addr = r.array()?;
            r.skip(2)?;
            let p = PortMod {
                port_no,
                hw_addr,
                config: r.u32()?,
                mask: r.u32()?,
                advertise: r.u32()?,
            };
            r.skip(4)?;
            M::PortMod(p)
        }
        msg::TABLE_MOD => {
            let table_id = r.u8()?;
            r.skip(3)?;
            M::TableMod {
                table_id,
                config: r.u32()?,
            }
        }
        msg::MULTIPART_REQUEST => {
            let (flags, body) = MultipartRequest::decode(r)?;
            M::MultipartRequest { flags, body }
        }
        msg::MULTIPART_REPLY => {
            let (flags, body) = MultipartReply::decode(r)?;
            M::MultipartReply { flags, body }
        }
        msg::BARRIER_REQUEST => M::BarrierRequest,
        msg::BARRIER_REPLY => M::BarrierReply,
        msg::ROLE_REQUEST | msg::ROLE_REPLY => {
            let role = r.u32()?;
            r.skip(4)?;
            let role = Role {
                role,
                generation_id: r.u64()?,
            };
            if ty == msg::ROLE_REQUEST {
                M::RoleRequest(role)
            } else {
                M::RoleReply(role)
            }
        }
        msg::GET_ASYNC_REQUEST => M::GetAsyncRequest,
        msg::GET_ASYNC_REPLY | msg::SET_ASYNC => {
            let a = AsyncConfig {
                packet_in_mask: [r.u32()?, r.u32()?],
                port_status_mask: [r.u32()?, r.u32()?],
                flow_removed_mask: [r.u32()?, r.u32()?],
            };
            if ty == msg::SET_ASYNC {
                M::SetAsync(a)
            } else {
                M::GetAsyncReply(a)
            }
        }
        msg::METER_MOD => {
            let command = r.u16()?;
            let flags = r.u16()?;
            let meter_id = r.u32()?;
            let mut bands = Vec::new();
            while !r.is_empty() {
                let type_ = r.u16()?;
                let len = r.u16()? as usize;
                if len < 12 {
                    return Err(e);
                }
                let rate = r.u32()?;
                let burst_size = r.u32()?;
                bands.push(MeterBand {
                    type_,
                    rate,
                    burst_size,
                    data: r.bytes(len - 12)?.to_vec(),
                });
            }
            M::MeterMod(MeterMod {
                command,
                flags,
                meter_id,
                bands,
            })
        }
        other => return Err(DecodeError::BadType(other)),
    })
}
