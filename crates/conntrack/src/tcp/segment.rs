//! The TCP header fields the tracker reads from a frame: sequence numbers, flags, window,
//! payload length and the window scale option of a SYN.

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;
pub const URG: u8 = 0x20;
pub const ECE: u8 = 0x40;
pub const CWR: u8 = 0x80;

/// The largest window scale RFC 7323 allows; larger shifts are taken as this (as Linux).
pub const MAX_WSCALE: u8 = 14;

/// One TCP segment as the tracker sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// Window scale option (read from SYN segments only), capped at [`MAX_WSCALE`].
    pub wscale: Option<u8>,
    /// Payload length in bytes.
    pub len: u32,
}

impl Segment {
    /// Read the TCP header at `l4` of `frame`, whose IP payload ends at `l3_end`. `None`
    /// when the header (with its options) does not fit in the frame and the IP payload.
    pub fn parse(frame: &[u8], l4: usize, l3_end: usize) -> Option<Segment> {
        let h = frame.get(l4..l4.checked_add(20)?)?;
        let off = usize::from(h[12] >> 4) * 4;
        let hdr_end = l4.checked_add(off)?;
        if off < 20 || hdr_end > l3_end || hdr_end > frame.len() {
            return None;
        }
        let flags = h[13];
        let wscale = if flags & SYN != 0 {
            window_scale(&frame[l4 + 20..hdr_end])
        } else {
            None
        };
        Some(Segment {
            seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            ack: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
            flags,
            window: u16::from_be_bytes([h[14], h[15]]),
            wscale,
            len: u32::try_from(l3_end - hdr_end).ok()?,
        })
    }

    /// The sequence number after this segment: SYN and FIN count one each.
    pub fn end(&self) -> u32 {
        self.seq
            .wrapping_add(self.len)
            .wrapping_add(u32::from(self.flags & SYN != 0))
            .wrapping_add(u32::from(self.flags & FIN != 0))
    }
}

/// The window scale option among TCP options `opts` (Linux's `tcp_options`: a malformed
/// option ends the walk, a partial one is not read).
fn window_scale(mut opts: &[u8]) -> Option<u8> {
    while let Some((&kind, rest)) = opts.split_first() {
        match kind {
            0 => return None,
            1 => opts = rest,
            _ => {
                let size = usize::from(*rest.first()?);
                if size < 2 || size > opts.len() {
                    return None;
                }
                if kind == 3 && size == 3 {
                    return Some(opts[2].min(MAX_WSCALE));
                }
                opts = &opts[size..];
            }
        }
    }
    None
}
