//! Groups and meters: `ofp_group_mod` ([`GroupMod`], its buckets are
//! [`crate::common::Bucket`]) and `ofp_meter_mod` ([`MeterMod`], decoded so that it can be
//! refused precisely).

use crate::common::{decode_buckets, encode_buckets, Bucket};
use crate::wire::{DecodeError, Reader, Writer};

/// `ofp_group_mod`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupMod {
    pub command: u16,
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

impl GroupMod {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u16(self.command);
        w.u8(self.group_type);
        w.u8(0);
        w.u32(self.group_id);
        encode_buckets(w, &self.buckets);
    }

    pub(super) fn decode(r: &mut Reader) -> Result<GroupMod, DecodeError> {
        let command = r.u16()?;
        let group_type = r.u8()?;
        r.skip(1)?;
        let group_id = r.u32()?;
        let rest = Reader::new(r.rest(), DecodeError::BadBucket);
        Ok(GroupMod {
            command,
            group_type,
            group_id,
            buckets: decode_buckets(rest)?,
        })
    }
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

impl MeterMod {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.u16(self.command);
        w.u16(self.flags);
        w.u32(self.meter_id);
        for b in &self.bands {
            w.u16(b.type_);
            w.u16((12 + b.data.len()).min(0xffff) as u16);
            w.u32(b.rate);
            w.u32(b.burst_size);
            w.bytes(&b.data);
        }
    }

    pub(super) fn decode(r: &mut Reader) -> Result<MeterMod, DecodeError> {
        let command = r.u16()?;
        let flags = r.u16()?;
        let meter_id = r.u32()?;
        let mut bands = Vec::new();
        while !r.is_empty() {
            let type_ = r.u16()?;
            let len = r.u16()? as usize;
            if len < 12 {
                return Err(DecodeError::BadLen);
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
        Ok(MeterMod {
            command,
            flags,
            meter_id,
            bands,
        })
    }
}
