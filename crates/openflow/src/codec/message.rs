//! [`Message`]: every OpenFlow 1.3 message this crate speaks, its type number, and the
//! dispatch from a message type to its body's codec (the bodies are in this module's
//! siblings, the multipart ones in [`crate::multipart`]).

use super::flow::{FlowMod, FlowRemoved, PacketIn, PacketOut};
use super::group::{GroupMod, MeterMod};
use super::hello::{decode_hello, encode_hello, HelloElement};
use super::switch::{AsyncConfig, Features, PortMod, Role, SwitchConfig};
use crate::common::Port;
use crate::consts::*;
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::wire::{DecodeError, Reader, Writer};

/// An OpenFlow 1.3 message (the body; the xid travels in [`super::Header`] /
/// `encode`'s argument).
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

    /// The body after the header: the fields a variant holds itself are written here,
    /// a body struct writes its own.
    pub(super) fn encode_body(&self, w: &mut Writer) {
        use Message::*;
        match self {
            Hello(elems) => encode_hello(w, elems),
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
            FeaturesReply(f) => f.encode(w),
            GetConfigReply(c) | SetConfig(c) => c.encode(w),
            PacketIn(p) => p.encode(w),
            FlowRemoved(f) => f.encode(w),
            PortStatus { reason, port } => {
                w.u8(*reason);
                w.zeros(7);
                port.encode(w);
            }
            PacketOut(p) => p.encode(w),
            FlowMod(f) => f.encode(w),
            GroupMod(g) => g.encode(w),
            PortMod(p) => p.encode(w),
            TableMod { table_id, config } => {
                w.u8(*table_id);
                w.zeros(3);
                w.u32(*config);
            }
            MultipartRequest { flags, body } => body.encode(w, *flags),
            MultipartReply { flags, body } => body.encode(w, *flags),
            RoleRequest(r) | RoleReply(r) => r.encode(w),
            GetAsyncReply(a) | SetAsync(a) => a.encode(w),
            MeterMod(m) => m.encode(w),
        }
    }
}

/// The body of a message of type `ty` (the header is read); the caller checks that
/// nothing is left over.
pub(super) fn decode_body(ty: u8, r: &mut Reader) -> Result<Message, DecodeError> {
    use Message as M;
    Ok(match ty {
        msg::HELLO => M::Hello(decode_hello(r)?),
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
        msg::FEATURES_REPLY => M::FeaturesReply(Features::decode(r)?),
        msg::GET_CONFIG_REQUEST => M::GetConfigRequest,
        msg::GET_CONFIG_REPLY => M::GetConfigReply(SwitchConfig::decode(r)?),
        msg::SET_CONFIG => M::SetConfig(SwitchConfig::decode(r)?),
        msg::PACKET_IN => M::PacketIn(PacketIn::decode(r)?),
        msg::FLOW_REMOVED => M::FlowRemoved(FlowRemoved::decode(r)?),
        msg::PORT_STATUS => {
            let reason = r.u8()?;
            r.skip(7)?;
            M::PortStatus {
                reason,
                port: Port::decode(r)?,
            }
        }
        msg::PACKET_OUT => M::PacketOut(PacketOut::decode(r)?),
        msg::FLOW_MOD => M::FlowMod(FlowMod::decode(r)?),
        msg::GROUP_MOD => M::GroupMod(GroupMod::decode(r)?),
        msg::PORT_MOD => M::PortMod(PortMod::decode(r)?),
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
        msg::ROLE_REQUEST => M::RoleRequest(Role::decode(r)?),
        msg::ROLE_REPLY => M::RoleReply(Role::decode(r)?),
        msg::GET_ASYNC_REQUEST => M::GetAsyncRequest,
        msg::GET_ASYNC_REPLY => M::GetAsyncReply(AsyncConfig::decode(r)?),
        msg::SET_ASYNC => M::SetAsync(AsyncConfig::decode(r)?),
        msg::METER_MOD => M::MeterMod(MeterMod::decode(r)?),
        other => return Err(DecodeError::BadType(other)),
    })
}
