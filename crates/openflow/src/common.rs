//! The structures both messages and multipart bodies carry: `ofp_port` ([`Port`], in
//! PORT_STATUS and PORT_DESC replies) and `ofp_bucket` ([`Bucket`], in GROUP_MOD and
//! GROUP_DESC replies), with their wire codecs.

use crate::actions::{decode_list, encode_list, list_wire_len, OfAction};
use crate::consts::*;
use crate::wire::{DecodeError, Reader, Writer};

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

impl Port {
    /// Length on the wire.
    pub(crate) const WIRE_LEN: usize = 64;

    pub(crate) fn encode(&self, w: &mut Writer) {
        w.u32(self.port_no);
        w.zeros(4);
        w.bytes(&self.hw_addr);
        w.zeros(2);
        w.string(&self.name, OFP_MAX_PORT_NAME_LEN);
        for x in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            w.u32(x);
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Port, DecodeError> {
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
        16 + list_wire_len(&self.actions)
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        w.u16(self.wire_len().min(0xfff8) as u16);
        w.u16(self.weight);
        w.u32(self.watch_port);
        w.u32(self.watch_group);
        w.zeros(4);
        encode_list(w, &self.actions);
    }
}

/// Encode a list of buckets.
pub(crate) fn encode_buckets(w: &mut Writer, buckets: &[Bucket]) {
    for b in buckets {
        b.encode(w);
    }
}

/// Decode buckets until `r` is empty.
pub(crate) fn decode_buckets(mut r: Reader) -> Result<Vec<Bucket>, DecodeError> {
    let mut out = Vec::new();
    while !r.is_empty() {
        let mut b = r.record(DecodeError::BadBucket, |len| len >= 16 && len % 8 == 0)?;
        let weight = b.u16()?;
        let watch_port = b.u32()?;
        let watch_group = b.u32()?;
        b.skip(4)?;
        out.push(Bucket {
            weight,
            watch_port,
            watch_group,
            actions: decode_list(b)?,
        });
    }
    Ok(out)
}
