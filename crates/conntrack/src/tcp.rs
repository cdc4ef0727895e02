//! TCP connection state: the state machine of Linux's `nf_conntrack_proto_tcp` (its table
//! of states × flag events per direction) and its window tracking per direction (`window`),
//! not "liberal": a segment outside the window is invalid.
//!
//! One difference in shape: Linux's SYN_SENT2 (a SYN seen from both ends, simultaneous
//! open) is kept as a bit beside [`TcpState::SynSent`], which is what it shows as.

mod segment;
mod window;

pub use segment::{Segment, ACK, CWR, ECE, FIN, MAX_WSCALE, PSH, RST, SYN, URG};
use window::{scale_flags, Context, Edges, CLOSE_INIT, UNACKED};

/// A TCP connection's state, as Linux names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpState {
    SynSent,
    SynRecv,
    Established,
    FinWait,
    CloseWait,
    LastAck,
    TimeWait,
    Close,
}

impl TcpState {
    pub const ALL: [TcpState; 8] = [
        TcpState::SynSent,
        TcpState::SynRecv,
        TcpState::Established,
        TcpState::FinWait,
        TcpState::CloseWait,
        TcpState::LastAck,
        TcpState::TimeWait,
        TcpState::Close,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            TcpState::SynSent => "SYN_SENT",
            TcpState::SynRecv => "SYN_RECV",
            TcpState::Established => "ESTABLISHED",
            TcpState::FinWait => "FIN_WAIT",
            TcpState::CloseWait => "CLOSE_WAIT",
            TcpState::LastAck => "LAST_ACK",
            TcpState::TimeWait => "TIME_WAIT",
            TcpState::Close => "CLOSE",
        }
    }
}

/// What one segment did to its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpVerdict {
    /// Accepted; the connection is in this state now. Segments Linux *ignores* (a SYN
    /// in the middle of a connection, a retransmitted SYN/ACK: the connection may be out
    /// of sync with the ends) are accepted with the state unchanged.
    Ok(TcpState),
    /// Not accepted (`+inv`); the connection is unchanged.
    Invalid(crate::InvalidReason),
    /// A SYN on a connection in TIME_WAIT/CLOSE (or the reply direction's SYN in
    /// TIME_WAIT, the ends having switched roles): the old connection is over and this
    /// segment starts a new one with the packet's tuple as its original direction.
    Reopen,
}

/// Linux's flag events (`tcp_bit_set`), in its table's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    Syn = 0,
    SynAck = 1,
    Fin = 2,
    Ack = 3,
    Rst = 4,
}

impl Event {
    fn of(flags: u8) -> Option<Event> {
        Some(if flags & RST != 0 {
            Event::Rst
        } else if flags & SYN != 0 {
            if flags & ACK != 0 {
                Event::SynAck
            } else {
                Event::Syn
            }
        } else if flags & FIN != 0 {
            Event::Fin
        } else if flags & ACK != 0 {
            Event::Ack
        } else {
            return None;
        })
    }

    fn from_bits(b: u8) -> Option<Event> {
        [
            Event::Syn,
            Event::SynAck,
            Event::Fin,
            Event::Ack,
            Event::Rst,
        ]
        .get(usize::from(b))
        .copied()
    }
}

/// The flag combinations Linux's `tcp_valid_flags` accepts (PSH, ECE and CWR aside): SYN,
/// SYN+ACK, RST, RST+ACK, FIN+ACK, ACK; URG only beside SYN, FIN+ACK or ACK.
pub fn flags_valid(flags: u8) -> bool {
    const VALID: [u8; 9] = [
        SYN,
        SYN | URG,
        SYN | ACK,
        RST,
        RST | ACK,
        FIN | ACK,
        FIN | ACK | URG,
        ACK,
        ACK | URG,
    ];
    VALID.contains(&(flags & (FIN | SYN | RST | ACK | URG)))
}

// The table's cells: states 0..=7 are `TcpState as u8`, then SYN_SENT2, ignore, invalid.
const SS: u8 = 0;
const SR: u8 = 1;
const ES: u8 = 2;
const FW: u8 = 3;
const CW: u8 = 4;
const LA: u8 = 5;
const TW: u8 = 6;
const CL: u8 = 7;
const S2: u8 = 8;
const IG: u8 = 9;
const IV: u8 = 10;

/// Linux's `tcp_conntracks[direction][event][state]` without its NONE column (a
/// connection starts in [`TcpConn::new`]) and NONE event (refused by [`flags_valid`]).
#[rustfmt::skip]
const NEXT: [[[u8; 9]; 5]; 2] = [
    // original:  SS  SR  ES  FW  CW  LA  TW  CL  S2
    [
        /*syn*/    [SS, IG, IG, IG, IG, IG, SS, SS, S2],
        /*synack*/ [IV, SR, IV, IV, IV, IV, IV, IV, SR],
        /*fin*/    [IV, FW, FW, LA, LA, LA, TW, CL, IV],
        /*ack*/    [IV, ES, ES, CW, CW, TW, TW, CL, IV],
        /*rst*/    [CL, CL, CL, CL, CL, CL, CL, CL, CL],
    ],
    // reply:     SS  SR  ES  FW  CW  LA  TW  CL  S2
    [
        /*syn*/    [S2, IV, IV, IV, IV, IV, SS, IV, S2],
        /*synack*/ [SR, IG, IG, IG, IG, IG, IG, IG, SR],
        /*fin*/    [IV, FW, FW, LA, LA, LA, TW, CL, IV],
        /*ack*/    [IG, SR, ES, CW, CW, TW, TW, CL, IG],
        /*rst*/    [CL, CL, CL, CL, CL, CL, CL, CL, CL],
    ],
];

// `TcpConn::last` bits.
const LAST_EVENT: u8 = 0x07;
const LAST_REPLY: u8 = 0x08;
/// The last segment was ignored (its event, direction and end are remembered).
const LAST_IGNORED: u8 = 0x10;
/// SYN_SENT2: a SYN was seen from both ends.
const SIMULTANEOUS: u8 = 0x20;
/// No segment remembered yet.
const LAST_NONE: u8 = 0x07;

/// One TCP connection's tracking state (36 bytes, kept at most 40: it lives in every
/// connection entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConn {
    pub state: TcpState,
    /// The last segment's event, direction and whether it was ignored; SYN_SENT2.
    last: u8,
    /// Per direction: window scale, whether it sent the option, CLOSE_INIT, UNACKED.
    flags: [u8; 2],
    /// Per direction: the sequence space edges.
    edges: [Edges; 2],
    /// The last ignored segment's end, window and (a SYN's) window scale flags: what a
    /// SYN/ACK answering an ignored SYN resynchronises from.
    last_end: u32,
    last_win: u16,
    last_scale: u8,
}

impl TcpConn {
    /// A connection started by `seg` (the original direction); `None` when the segment
    /// cannot start one (not a SYN, or flags Linux refuses). Connections already under
    /// way are not picked up.
    pub fn new(seg: &Segment) -> Option<TcpConn> {
        if !flags_valid(seg.flags) || Event::of(seg.flags) != Some(Event::Syn) {
            return None;
        }
        let end = seg.end();
        let win = u32::from(seg.window).max(1);
        Some(TcpConn {
            state: TcpState::SynSent,
            last: LAST_NONE,
            flags: [scale_flags(seg.wscale), 0],
            edges: [
                Edges {
                    end,
                    maxend: end,
                    maxwin: win,
                },
                Edges::default(),
            ],
            last_end: 0,
            last_win: 0,
            last_scale: 0,
        })
    }

    /// Move the connection for `seg`, seen in the reply direction when `reply`.
    pub fn update(&mut self, reply: bool, seg: &Segment) -> TcpVerdict {
        use crate::InvalidReason::{OutOfWindow, TcpFlags};
        if !flags_valid(seg.flags) {
            return TcpVerdict::Invalid(TcpFlags);
        }
        let Some(ev) = Event::of(seg.flags) else {
            return TcpVerdict::Invalid(TcpFlags);
        };
        let dir = usize::from(reply);
        let mut old = self.cell();
        let mut new = NEXT[dir][ev as usize][usize::from(old)];
        let mut next = *self;
        let mut check_window = true;
        match new {
            IV => return TcpVerdict::Invalid(TcpFlags),
            SS if old == TW || old == CL => return TcpVerdict::Reopen,
            IG if !self.resync(ev, dir, seg, &mut next) => {
                self.remember(ev, dir, seg);
                return TcpVerdict::Ok(self.state);
            }
            IG => (old, new) = (SS, SR),
            CL => check_window = !self.answers_ignored(ev, dir, seg),
            _ => {}
        }
        let cx = Context {
            syn_sent: old == SS,
            may_reinit: (old == SS && dir == 0) || (old == SR && dir == 1),
        };
        if check_window && !window::in_window(&mut next.edges, &mut next.flags, dir, cx, seg) {
            return TcpVerdict::Invalid(OutOfWindow);
        }
        next.last = ev as u8 | if reply { LAST_REPLY } else { 0 };
        next.set_cell(new);
        if old != new && new == FW {
            next.flags[dir] |= CLOSE_INIT;
        }
        *self = next;
        TcpVerdict::Ok(self.state)
    }

    /// Whether packets of this connection are `+est`: an answer from the other end has
    /// been accepted (from SYN_RECV on, or the other end's SYN in a simultaneous open).
    pub fn established(&self) -> bool {
        self.state != TcpState::SynSent || self.last & SIMULTANEOUS != 0
    }

    /// Linux's SYN_SENT2: both ends sent a SYN (shown as [`TcpState::SynSent`]).
    pub fn simultaneous_open(&self) -> bool {
        self.state == TcpState::SynSent && self.last & SIMULTANEOUS != 0
    }

    /// Whether either direction has sent data the other has not acknowledged (Linux
    /// caps the timeout at `unacknowledged` then).
    pub fn unacknowledged(&self) -> bool {
        (self.flags[0] | self.flags[1]) & UNACKED != 0
    }

    /// Window scale shifts in use, original and reply direction.
    pub fn window_scales(&self) -> [u8; 2] {
        self.flags.map(|f| f & window::SCALE)
    }

    /// The table's cell for the current state (SYN_SENT2 included).
    fn cell(&self) -> u8 {
        if self.simultaneous_open() {
            S2
        } else {
            self.state as u8
        }
    }

    fn set_cell(&mut self, cell: u8) {
        let s2 = cell == S2;
        self.state = if s2 {
            TcpState::SynSent
        } else {
            TcpState::ALL[usize::from(cell.min(CL))]
        };
        self.last = (self.last & !SIMULTANEOUS) | if s2 { SIMULTANEOUS } else { 0 };
    }

    fn last_event(&self) -> Option<Event> {
        Event::from_bits(self.last & LAST_EVENT)
    }

    fn last_dir(&self) -> usize {
        usize::from(self.last & LAST_REPLY != 0)
    }

    /// Remember an ignored segment (Linux's `last_*`), for a SYN/ACK or RST answering it.
    fn remember(&mut self, ev: Event, dir: usize, seg: &Segment) {
        let keep = self.last & SIMULTANEOUS;
        self.last = ev as u8 | if dir == 1 { LAST_REPLY } else { 0 } | LAST_IGNORED | keep;
        self.last_end = seg.end();
        self.last_win = seg.window;
        self.last_scale = if ev == Event::Syn && dir == 0 {
            scale_flags(seg.wscale)
        } else {
            0
        };
    }

    /// A SYN/ACK that acknowledges a SYN this connection ignored: both ends are in sync
    /// and the tracker is not (a new connection over a stale entry). Restart the
    /// handshake from the remembered SYN, into `next`; false when this is not that case.
    fn resync(&self, ev: Event, dir: usize, seg: &Segment, next: &mut TcpConn) -> bool {
        let ld = self.last_dir();
        if ev != Event::SynAck
            || self.last_event() != Some(Event::Syn)
            || ld == dir
            || seg.ack != self.last_end
        {
            return false;
        }
        next.edges[ld] = Edges {
            end: self.last_end,
            maxend: self.last_end,
            maxwin: u32::from(self.last_win).max(1),
        };
        next.flags[ld] = self.last_scale;
        next.edges[dir] = Edges::default();
        next.flags[dir] = 0;
        true
    }

    /// An RST answering a segment this connection ignored (its ACK is that segment's end):
    /// accepted without the window check, since it may acknowledge what was ignored.
    fn answers_ignored(&self, ev: Event, dir: usize, seg: &Segment) -> bool {
        ev == Event::Rst
            && self.last & LAST_IGNORED != 0
            && self.last_dir() != dir
            && seg.flags & ACK != 0
            && seg.ack == self.last_end
    }
}
