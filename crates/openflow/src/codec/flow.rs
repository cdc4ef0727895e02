//! Packets and flows: `ofp_packet_in` ([`PacketIn`]), `ofp_packet_out` ([`PacketOut`]),
//! `ofp_flow_mod` ([`FlowMod`]) and `ofp_flow_removed` ([`FlowRemoved`]).

use crate::actions::{decode_list, encode_list, list_wire_len, Instruction, OfAction};
use crate::consts::*;
use crate::oxm::{decode_match, encode_match, Oxm};
use crate::wire::{DecodeError, Reader, Writer};

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

impl PacketIn {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u32(self.buffer_id);
        w.u16(self.total_len);
        w.u8(self.reason);
        w.u8(self.table_id);
        w.u64(self.cookie);
        encode_match(w, &self.match_);
        w.zeros(2);
        w.bytes(&self.data);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<PacketIn, DecodeError> {
        let buffer_id = r.u32()?;
        let total_len = r.u16()?;
        let reason = r.u8()?;
        let table_id = r.u8()?;
        let cookie = r.u64()?;
        let match_ = decode_match(r)?;
        r.skip(2)?;
        Ok(PacketIn {
            buffer_id,
            total_len,
            reason,
            table_id,
            cookie,
            match_,
            data: r.rest().to_vec(),
        })
    }
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

impl FlowRemoved {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u64(self.cookie);
        w.u16(self.priority);
        w.u8(self.reason);
        w.u8(self.table_id);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        encode_match(w, &self.match_);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<FlowRemoved, DecodeError> {
        Ok(FlowRemoved {
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
        })
    }
}

/// `ofp_packet_out`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<OfAction>,
    pub data: Vec<u8>,
}

impl PacketOut {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u32(self.buffer_id);
        w.u32(self.in_port);
        w.u16(list_wire_len(&self.actions).min(0xfff8) as u16);
        w.zeros(6);
        encode_list(w, &self.actions);
        w.bytes(&self.data);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<PacketOut, DecodeError> {
        let buffer_id = r.u32()?;
        let in_port = r.u32()?;
        let actions_len = r.u16()? as usize;
        r.skip(6)?;
        let acts = r.sub(actions_len, DecodeError::BadLen)?;
        Ok(PacketOut {
            buffer_id,
            in_port,
            actions: decode_list(acts)?,
            data: r.rest().to_vec(),
        })
    }
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

impl FlowMod {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u64(self.cookie);
        w.u64(self.cookie_mask);
        w.u8(self.table_id);
        w.u8(self.command);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u16(self.priority);
        w.u32(self.buffer_id);
        w.u32(self.out_port);
        w.u32(self.out_group);
        w.u16(self.flags);
        w.zeros(2);
        encode_match(w, &self.match_);
        encode_list(w, &self.instructions);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<FlowMod, DecodeError> {
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
        Ok(FlowMod {
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
            instructions: decode_list(rest)?,
        })
    }
}
