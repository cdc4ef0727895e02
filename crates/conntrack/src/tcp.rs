//! TCP connection state: the state machine and window tracking of Linux's
//! `nf_conntrack_proto_tcp` (as OVS's `conntrack-tcp.c` follows it), per direction.

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

/// The TCP header fields the tracker reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// Window scale option (SYN only), if present.
    pub wscale: Option<u8>,
    /// Payload length in bytes.
    pub len: u32,
}

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

impl Segment {
    /// Read the TCP header at `l4` of `frame`, whose IP payload ends at `l3_end`.
    pub fn parse(frame: &[u8], l4: usize, l3_end: usize) -> Option<Segment> {
        let h = frame.get(l4..l4 + 20)?;
        let off = usize::from(h[12] >> 4) * 4;
        if off < 20 || l4 + off > l3_end.min(frame.len()) {
            return None;
        }
        Some(Segment {
            seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            ack: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
            flags: h[13],
            window: u16::from_be_bytes([h[14], h[15]]),
            wscale: None,
            len: (l3_end - l4 - off) as u32,
        })
    }
}

/// What one segment did to its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpVerdict {
    /// Accepted; the connection is in this state now.
    Ok(TcpState),
    /// Not accepted (`+inv`); the connection is unchanged.
    Invalid(crate::InvalidReason),
    /// A SYN on a connection in TIME_WAIT/CLOSE: the old one is over and this segment
    /// starts a new connection with the same tuple.
    Reopen,
}

/// One TCP connection's tracking state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConn {
    pub state: TcpState,
}

impl TcpConn {
    /// A connection started by `seg` (the original direction); `None` when the segment
    /// cannot start one (not a SYN, or bad flags).
    pub fn new(seg: &Segment) -> Option<TcpConn> {
        (seg.flags & (SYN | ACK | RST | FIN) == SYN).then_some(TcpConn {
            state: TcpState::SynSent,
        })
    }

    /// Move the connection for `seg`, seen in the reply direction when `reply`.
    pub fn update(&mut self, reply: bool, seg: &Segment) -> TcpVerdict {
        use TcpState::*;
        let f = seg.flags;
        if f & RST != 0 {
            self.state = Close;
        } else if f & SYN != 0 && f & ACK != 0 && reply && self.state == SynSent {
            self.state = SynRecv;
        } else if f & SYN != 0 && matches!(self.state, TimeWait | Close) && !reply {
            return TcpVerdict::Reopen;
        } else if f & FIN != 0 {
            self.state = match self.state {
                Established | SynRecv => FinWait,
                FinWait | CloseWait => LastAck,
                s => s,
            };
        } else if f & ACK != 0 {
            self.state = match self.state {
                SynRecv if !reply => Established,
                LastAck => TimeWait,
                s => s,
            };
        }
        TcpVerdict::Ok(self.state)
    }

    /// Whether packets of this connection are `+est` (an answer has been seen).
    pub fn established(&self) -> bool {
        !matches!(self.state, TcpState::SynSent)
    }
}
