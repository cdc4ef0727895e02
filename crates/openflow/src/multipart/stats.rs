//! The records multipart replies carry, each with its wire codec: the switch description
//! ([`Desc`]), flow, table, port and group statistics ([`FlowStats`], [`TableStats`],
//! [`PortStats`], [`GroupStats`]) and group descriptions ([`GroupDesc`]).

use crate::actions::{decode_list, encode_list, list_wire_len, Instruction};
use crate::common::{decode_buckets, encode_buckets, Bucket};
use crate::oxm::{decode_match, encode_match, match_wire_len, Oxm};
use crate::wire::{DecodeError, Reader, Writer};

/// `ofp_desc`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Desc {
    pub mfr_desc: String,
    pub hw_desc: String,
    pub sw_desc: String,
    pub serial_num: String,
    pub dp_desc: String,
}

impl Desc {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.string(&self.mfr_desc, 256);
        w.string(&self.hw_desc, 256);
        w.string(&self.sw_desc, 256);
        w.string(&self.serial_num, 32);
        w.string(&self.dp_desc, 256);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<Desc, DecodeError> {
        Ok(Desc {
            mfr_desc: r.string(256)?,
            hw_desc: r.string(256)?,
            sw_desc: r.string(256)?,
            serial_num: r.string(32)?,
            dp_desc: r.string(256)?,
        })
    }
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
    pub(super) fn wire_len(&self) -> usize {
        48 + match_wire_len(&self.match_) + list_wire_len(&self.instructions)
    }

    pub(super) fn encode(&self, w: &mut Writer) {
        w.u16(self.wire_len().min(0xfff8) as u16);
        w.u8(self.table_id);
        w.u8(0);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        w.u16(self.priority);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u16(self.flags);
        w.zeros(4);
        w.u64(self.cookie);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        encode_match(w, &self.match_);
        encode_list(w, &self.instructions);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<FlowStats, DecodeError> {
        let mut b = r.record(DecodeError::BadLen, |len| len >= 56)?;
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
        Ok(FlowStats {
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
            instructions: decode_list(rest)?,
        })
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

impl TableStats {
    /// Length on the wire.
    pub(super) const WIRE_LEN: usize = 24;

    pub(super) fn encode(&self, w: &mut Writer) {
        w.u8(self.table_id);
        w.zeros(3);
        w.u32(self.active_count);
        w.u64(self.lookup_count);
        w.u64(self.matched_count);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<TableStats, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        Ok(TableStats {
            table_id,
            active_count: r.u32()?,
            lookup_count: r.u64()?,
            matched_count: r.u64()?,
        })
    }
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

impl PortStats {
    /// Length on the wire.
    pub(super) const WIRE_LEN: usize = 112;

    pub(super) fn encode(&self, w: &mut Writer) {
        w.u32(self.port_no);
        w.zeros(4);
        for x in [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
            self.rx_frame_err,
            self.rx_over_err,
            self.rx_crc_err,
            self.collisions,
        ] {
            w.u64(x);
        }
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<PortStats, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        Ok(PortStats {
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
        })
    }
}

/// `ofp_group_desc`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupDesc {
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

impl GroupDesc {
    pub(super) fn wire_len(&self) -> usize {
        8 + self.buckets.iter().map(Bucket::wire_len).sum::<usize>()
    }

    pub(super) fn encode(&self, w: &mut Writer) {
        w.u16(self.wire_len().min(0xfff8) as u16);
        w.u8(self.group_type);
        w.u8(0);
        w.u32(self.group_id);
        encode_buckets(w, &self.buckets);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<GroupDesc, DecodeError> {
        let mut b = r.record(DecodeError::BadLen, |len| len >= 8)?;
        let group_type = b.u8()?;
        b.skip(1)?;
        let group_id = b.u32()?;
        let rest = Reader::new(b.rest(), DecodeError::BadBucket);
        Ok(GroupDesc {
            group_type,
            group_id,
            buckets: decode_buckets(rest)?,
        })
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

impl GroupStats {
    pub(super) fn wire_len(&self) -> usize {
        40 + 16 * self.bucket_stats.len()
    }

    pub(super) fn encode(&self, w: &mut Writer) {
        w.u16(self.wire_len().min(0xfff0) as u16);
        w.zeros(2);
        w.u32(self.group_id);
        w.u32(self.ref_count);
        w.zeros(4);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        for (p, b) in &self.bucket_stats {
            w.u64(*p);
            w.u64(*b);
        }
    }

    pub(super) fn decode(r: &mut Reader) -> Result<GroupStats, DecodeError> {
        let mut b = r.record(DecodeError::BadLen, |len| len >= 40 && (len - 40) % 16 == 0)?;
        b.skip(2)?;
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
        Ok(g)
    }
}
