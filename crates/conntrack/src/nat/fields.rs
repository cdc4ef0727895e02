//! Byte-level pieces of the NAT rewrite: where a frame's IP and transport fields are, and
//! writing a field while collecting the RFC 1624 checksum difference it makes.
//!
//! Written by hand rather than through a packet crate: the rewrite runs per packet on the
//! frame in place, touching only the changed words, with no allocation.

use flowpath_packet::checksum::{adjust, word_delta};
use flowpath_packet::key::ipproto;

/// The IP header's fields the rewrite touches.
#[derive(Clone, Copy, Debug)]
pub struct IpHeader {
    pub v6: bool,
    /// Offset of the source address (the destination follows it).
    pub src_at: usize,
    /// Address length: 4 or 16.
    pub alen: usize,
    /// Where the header ends (IPv4 with its options; IPv6's fixed header).
    pub hdr_end: usize,
    /// IPv4's header checksum.
    pub csum_at: Option<usize>,
    /// Where the IP payload ends as the header says (may lie past the frame's end).
    pub end: usize,
    /// An IPv4 fragment other than the first: it carries no transport header.
    pub later_fragment: bool,
}

/// Read the IP header at `l3` of `frame` (IPv6 when `v6`); `None` if it is not one or does
/// not fit.
pub fn ip_header(frame: &[u8], l3: usize, v6: bool) -> Option<IpHeader> {
    let b0 = *frame.get(l3)?;
    if v6 {
        frame.get(l3..l3.checked_add(40)?)?;
        if b0 >> 4 != 6 {
            return None;
        }
        let plen = usize::from(get16(frame, l3 + 4)?);
        Some(IpHeader {
            v6,
            src_at: l3 + 8,
            alen: 16,
            hdr_end: l3 + 40,
            csum_at: None,
            end: l3 + 40 + plen,
            later_fragment: false,
        })
    } else {
        let ihl = usize::from(b0 & 0x0f) * 4;
        if b0 >> 4 != 4 || ihl < 20 {
            return None;
        }
        frame.get(l3..l3.checked_add(ihl)?)?;
        let total = usize::from(get16(frame, l3 + 2)?);
        Some(IpHeader {
            v6,
            src_at: l3 + 12,
            alen: 4,
            hdr_end: l3 + ihl,
            csum_at: Some(l3 + 10),
            end: l3 + total.max(ihl),
            later_fragment: get16(frame, l3 + 6)? & 0x1fff != 0,
        })
    }
}

/// An address as the header holds it: a tuple's u128 (IPv4 in the top 32 bits).
pub fn addr_bytes(a: u128, alen: usize) -> [u8; 16] {
    let mut b = [0u8; 16];
    if alen == 4 {
        b[..4].copy_from_slice(&((a >> 96) as u32).to_be_bytes());
    } else {
        b = a.to_be_bytes();
    }
    b
}

pub fn get16(frame: &[u8], at: usize) -> Option<u16> {
    let b = frame.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// Write `new` (even length) at `at` and return the one's-complement difference it made
/// to any checksum covering those bytes at an even offset. The caller checked the bounds.
pub fn put(frame: &mut [u8], at: usize, new: &[u8]) -> u32 {
    let mut delta = 0;
    for (i, w) in new.chunks_exact(2).enumerate() {
        let p = at + 2 * i;
        let old = u16::from_be_bytes([frame[p], frame[p + 1]]);
        let neu = u16::from_be_bytes([w[0], w[1]]);
        if old != neu {
            delta += word_delta(old, neu);
            frame[p..p + 2].copy_from_slice(w);
        }
    }
    delta
}

/// Apply `delta` to the checksum at `at`. `zero_is_none`: a 0 checksum means "none"
/// (UDP) and stays 0, and a result of 0 is written as 0xffff (RFC 768).
pub fn fix_csum(frame: &mut [u8], at: usize, delta: u32, zero_is_none: bool) {
    let old = u16::from_be_bytes([frame[at], frame[at + 1]]);
    if delta == 0 || (zero_is_none && old == 0) {
        return;
    }
    let mut new = adjust(old, delta);
    if zero_is_none && new == 0 {
        new = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&new.to_be_bytes());
}

/// Where a transport header's rewritable fields are.
#[derive(Clone, Copy, Debug, Default)]
pub struct L4Fields {
    /// Source port (destination port after it).
    pub ports_at: Option<usize>,
    /// ICMP echo identifier.
    pub id_at: Option<usize>,
    pub csum_at: Option<usize>,
    /// The checksum covers the IP pseudo-header.
    pub pseudo: bool,
    /// UDP: a zero checksum means none (IPv4; kept as it is over IPv6 too).
    pub zero_is_none: bool,
}

/// The fields of a `proto` header at `l4` that lie before `limit`. `whole`: the header
/// must be all there (a packet's own); otherwise (a header quoted in an ICMP error) the
/// ports or id must be and the checksum is used when it is. `None`: too short.
pub fn l4_fields(
    frame: &[u8],
    l4: usize,
    limit: usize,
    proto: u8,
    whole: bool,
) -> Option<L4Fields> {
    let has = |n: usize| l4.checked_add(n).is_some_and(|e| e <= limit);
    let (need, csum) = match proto {
        ipproto::TCP => (20, 16),
        ipproto::UDP => (8, 6),
        ipproto::ICMP | ipproto::ICMPV6 => (8, 2),
        _ => return Some(L4Fields::default()),
    };
    if !has(if whole { need } else { 8 }) {
        return None;
    }
    let csum_at = has(csum + 2).then_some(l4 + csum);
    let icmp = matches!(proto, ipproto::ICMP | ipproto::ICMPV6);
    let echo = icmp
        && matches!(
            (proto, frame[l4]),
            (ipproto::ICMP, 0 | 8) | (ipproto::ICMPV6, 128 | 129)
        );
    Some(L4Fields {
        ports_at: (!icmp).then_some(l4),
        id_at: echo.then_some(l4 + 4),
        csum_at,
        pseudo: proto != ipproto::ICMP,
        zero_is_none: proto == ipproto::UDP,
    })
}
