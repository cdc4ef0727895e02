//! TCP window tracking per direction (Linux's `tcp_in_window`, without "be liberal" and
//! without SACK blocks): which sequence and acknowledgement numbers a segment may carry,
//! and how an accepted segment moves the edges.
//!
//! For each direction (the *sender* of a segment, its peer the *receiver*):
//!
//! ```text
//! end    = max(seq + len) sent
//! maxend = max(ack + max(win, 1)) the receiver sent back
//! maxwin = max(win) sent (scaled), grown when data passes maxend
//!
//! I.   seq       <= sender.maxend                       (not over the receiver's window)
//! II.  seq + len >= sender.end - receiver.maxwin        (not data acknowledged long ago)
//! III. ack       <= receiver.end                        (not acknowledging unseen data)
//! IV.  ack       >= receiver.end - max(sender.maxwin, 66000)
//! ```

use super::segment::{Segment, ACK, RST, SYN};

/// Linux's `MAXACKWINCONST`: the least span of acknowledgement numbers taken as valid.
const MAX_ACK_WINDOW: u32 = 66_000;

/// The window scale shift (low four bits of a direction's flags).
pub const SCALE: u8 = 0x0f;
/// The direction sent the window scale option on its SYN.
pub const WSCALE: u8 = 0x10;
/// The direction sent the first FIN (Linux's `IP_CT_TCP_FLAG_CLOSE_INIT`).
pub const CLOSE_INIT: u8 = 0x20;
/// The direction has data its peer has not acknowledged yet.
pub const UNACKED: u8 = 0x40;

/// One direction's sequence space edges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Edges {
    pub end: u32,
    pub maxend: u32,
    pub maxwin: u32,
}

/// `a` comes before `b` in sequence space (RFC 1982 serial arithmetic).
#[inline]
pub fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[inline]
pub fn after(a: u32, b: u32) -> bool {
    before(b, a)
}

/// The flags byte for a SYN's window scale option.
pub fn scale_flags(wscale: Option<u8>) -> u8 {
    wscale.map_or(0, |s| WSCALE | (s & SCALE))
}

/// What the connection's state says about a segment's window check.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    /// The connection is in SYN_SENT (not simultaneous open).
    pub syn_sent: bool,
    /// A SYN from this direction may restart its sequence space (SYN_SENT for the
    /// original direction, SYN_RECV for the reply direction: RFC 793's reinitialised TCP).
    pub may_reinit: bool,
}

/// Check `seg`, sent by direction `dir`, against the window and, if it is in it, move the
/// edges. `e` and `f` are both directions' edges and flags; they may be changed even when
/// the segment is refused, so the caller works on a copy.
pub fn in_window(
    e: &mut [Edges; 2],
    f: &mut [u8; 2],
    dir: usize,
    cx: Context,
    seg: &Segment,
) -> bool {
    let (s, r) = (dir & 1, (dir & 1) ^ 1);
    let syn = seg.flags & SYN != 0;
    let has_ack = seg.flags & ACK != 0;
    let rst = seg.flags & RST != 0;
    let mut seq = seg.seq;
    let mut ack = seg.ack;
    let mut end = seg.end();
    let win = u32::from(seg.window);

    if e[s].maxwin == 0 {
        if syn {
            // The SYN/ACK answering a SYN, or the reply direction's SYN of a
            // simultaneous open: this direction's first segment.
            e[s] = Edges {
                end,
                maxend: end,
                maxwin: win.max(1),
            };
            f[s] = (f[s] & !(SCALE | WSCALE)) | scale_flags(seg.wscale);
            // RFC 7323: scaling is on only when both SYNs carried the option.
            if f[s] & f[r] & WSCALE == 0 {
                f[s] &= !SCALE;
                f[r] &= !SCALE;
            }
            if !has_ack {
                return true;
            }
        } else {
            // This direction's first segment is not a SYN (an RST answering the SYN):
            // take the edges from it.
            let swin = (win << (f[s] & SCALE)).max(1);
            e[s] = Edges {
                end,
                maxend: end.wrapping_add(swin),
                maxwin: swin,
            };
            if e[r].maxwin == 0 {
                e[r].end = ack;
                e[r].maxend = ack;
            }
        }
    } else if syn && cx.may_reinit && after(end, e[s].end) {
        // RFC 793: a reinitialised TCP only has to use higher sequence numbers.
        e[s] = Edges {
            end,
            maxend: end,
            maxwin: win.max(1),
        };
        f[s] = (f[s] & !(SCALE | WSCALE)) | scale_flags(seg.wscale);
    }

    if !has_ack || (rst && ack == 0) {
        // No acknowledgement (or a broken stack's RST+ACK with ack 0): take it as right.
        ack = e[r].end;
    }
    if seq == end && (!rst || (seq == 0 && cx.syn_sent)) {
        // No data: only the acknowledgement is checked. An RST is checked by its
        // sequence number, except one with sequence 0 answering a SYN.
        seq = e[s].end;
        end = e[s].end;
    }

    let max_ack_win = e[s].maxwin.max(MAX_ACK_WINDOW);
    let ok = before(seq, e[s].maxend.wrapping_add(1))
        && after(end, e[s].end.wrapping_sub(e[r].maxwin).wrapping_sub(1))
        && before(ack, e[r].end.wrapping_add(1))
        && after(ack, e[r].end.wrapping_sub(max_ack_win).wrapping_sub(1));
    if !ok {
        return false;
    }

    let win = if syn { win } else { win << (f[s] & SCALE) };
    e[s].maxwin = e[s].maxwin.max(win);
    if after(end, e[s].end) {
        e[s].end = end;
        f[s] |= UNACKED;
    }
    if e[r].maxwin != 0 && after(end, e[s].maxend) {
        e[r].maxwin = e[r].maxwin.wrapping_add(end.wrapping_sub(e[s].maxend));
    }
    let right = ack.wrapping_add(win);
    if after(right, e[r].maxend.wrapping_sub(1)) {
        e[r].maxend = if win == 0 {
            right.wrapping_add(1)
        } else {
            right
        };
    }
    if ack == e[r].end {
        f[r] &= !UNACKED;
    }
    true
}
