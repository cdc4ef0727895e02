//! A packet's connection tuple (addresses, ports or ICMP id, protocol, zone), read from its
//! key and frame, and its reverse.

use crate::InvalidReason;
use flowpath_packet::key::{ethertype, ipproto, FRAG_ANY};
use flowpath_packet::{Field, FlowKey, PacketMeta};

/// One direction of a connection. Addresses are held as the key holds them: IPv6 as 128
/// bits, IPv4 in the top 32 bits (the first four bytes). For ICMP echo `src_port` is the
/// identifier and `dst_port` the echo type of the request (Linux's tuple).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tuple {
    pub src: u128,
    pub dst: u128,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub ipv6: bool,
    pub zone: u16,
}

impl Tuple {
    /// The reply direction's tuple.
    pub fn reverse(&self) -> Tuple {
        let (src_port, dst_port) = match self.proto {
            ipproto::ICMP | ipproto::ICMPV6 => {
                (self.src_port, reply_type(self.proto, self.dst_port))
            }
            _ => (self.dst_port, self.src_port),
        };
        Tuple {
            src: self.dst,
            dst: self.src,
            src_port,
            dst_port,
            ..*self
        }
    }

    /// The tuple of a parsed packet in `zone`. ICMP echo replies are keyed as their
    /// request's reply (`dst_port` = the request type), so both map to one connection.
    pub fn of_packet(
        frame: &[u8],
        meta: &PacketMeta,
        key: &FlowKey,
        zone: u16,
    ) -> Result<Tuple, InvalidReason> {
        let ipv6 = match key.get(Field::EthType) as u16 {
            ethertype::IPV4 => false,
            ethertype::IPV6 => true,
            _ => return Err(InvalidReason::Malformed),
        };
        if key.get(Field::NwFrag) as u8 & FRAG_ANY != 0 {
            return Err(InvalidReason::Fragment);
        }
        let proto = key.get(Field::NwProto) as u8;
        let (src_port, dst_port) = match proto {
            ipproto::TCP | ipproto::UDP => {
                (key.get(Field::TpSrc) as u16, key.get(Field::TpDst) as u16)
            }
            ipproto::ICMP | ipproto::ICMPV6 => {
                let l4 = meta.l4 as usize;
                let id = frame.get(l4 + 4..l4 + 6).ok_or(InvalidReason::Malformed)?;
                let ty = key.get(Field::TpSrc) as u16;
                (u16::from_be_bytes([id[0], id[1]]), ty)
            }
            _ => (0, 0),
        };
        Ok(Tuple {
            src: key.get(Field::Ipv6Src),
            dst: key.get(Field::Ipv6Dst),
            src_port,
            dst_port,
            proto,
            ipv6,
            zone,
        })
    }
}

impl Tuple {
    /// The tuple's hash under `seed` (zone included): one per packet, from which the index
    /// takes the bucket (low bits) and the signature (high bits). Written by hand: three
    /// independent 64×64→128-bit multiplies, each folded (high half xor low half), over
    /// pairs of the tuple's words, summed and folded once more; the seed goes into a factor
    /// of every product, chosen per tracker, so that a peer cannot aim packets at one
    /// bucket. Cheaper than a `Hasher` over the derived field-by-field `Hash`, and the
    /// products do not wait on each other.
    #[inline]
    pub(crate) fn hash(&self, seed: u64) -> u64 {
        const K: [u64; 6] = [
            0x9e37_79b9_7f4a_7c15,
            0xbf58_476d_1ce4_e5b9,
            0x94d0_49bb_1331_11eb,
            0x2545_f491_4f6c_dd1d,
            0xd6e8_feb8_6659_fd93,
            0xa076_1d64_78bd_642f,
        ];
        let rest = u64::from(self.src_port)
            | u64::from(self.dst_port) << 16
            | u64::from(self.proto) << 32
            | u64::from(self.ipv6) << 40
            | u64::from(self.zone) << 48;
        let a = fold_mul(
            (self.src >> 64) as u64 ^ seed ^ K[0],
            self.src as u64 ^ K[1],
        );
        let b = fold_mul(
            (self.dst >> 64) as u64 ^ seed ^ K[2],
            self.dst as u64 ^ K[3],
        );
        let c = fold_mul(rest ^ seed ^ K[4], K[5]);
        let h = a
            .wrapping_add(b.rotate_left(23))
            .wrapping_add(c.rotate_left(41));
        fold_mul(h ^ seed, K[0])
    }
}

/// The 128-bit product of `a` and `b`, its halves xored.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a).wrapping_mul(u128::from(b));
    (p as u64) ^ ((p >> 64) as u64)
}

/// ICMP echo request type ↔ reply type (other types map to themselves).
pub(crate) fn reply_type(proto: u8, ty: u16) -> u16 {
    match (proto, ty) {
        (ipproto::ICMP, 8) => 0,
        (ipproto::ICMP, 0) => 8,
        (ipproto::ICMPV6, 128) => 129,
        (ipproto::ICMPV6, 129) => 128,
        _ => ty,
    }
}
