//! TCP tracking against a reference: two simulated TCP ends exchange segments through the
//! tracker (handshake with retransmitted SYNs and SYN/ACKs, data both ways within the
//! advertised windows, drops, retransmissions, replayed old segments, FINs, an RST), and
//! a flags-level model of Linux's states says where the connection must be after each.
//! Between them come probes that must be refused and change nothing: segments far outside
//! the window, RSTs with a wrong sequence number, flag combinations no state accepts.

use flowpath_conntrack::tcp::{Segment, TcpConn, TcpVerdict, ACK, FIN, PSH, RST, SYN};
use flowpath_conntrack::{InvalidReason, TcpState};
use proptest::prelude::*;
use TcpState::*;

/// The state a legitimate segment moves the connection to (a SYN/ACK after the handshake
/// is ignored: the state stays), from TCP's meaning of the flags.
fn model(s: TcpState, reply: bool, flags: u8) -> TcpState {
    let (syn, ack, fin, rst) = (
        flags & SYN != 0,
        flags & ACK != 0,
        flags & FIN != 0,
        flags & RST != 0,
    );
    match () {
        _ if rst => Close,
        _ if syn && !ack => s, // the client's SYN again, before the answer
        _ if syn => match s {
            SynSent if reply => SynRecv,
            other => other,
        },
        _ if fin => match s {
            SynRecv | Established => FinWait,
            FinWait | CloseWait | LastAck => LastAck,
            other => other,
        },
        _ => match s {
            SynRecv if !reply => Established,
            FinWait | CloseWait => CloseWait,
            LastAck => TimeWait,
            other => other,
        },
    }
}

/// One end of the connection.
#[derive(Clone, Debug)]
struct End {
    nxt: u32,
    /// Highest acknowledgement received.
    una: u32,
    /// Next sequence number expected from the peer.
    rcv: u32,
    /// The window field it sends and the scale its peer applies to it.
    win: u16,
    shift: u8,
    /// How far it may send: the peer's highest ack + window.
    right: u32,
    fin_sent: bool,
    sent: Vec<Segment>,
}

struct Sim {
    conn: TcpConn,
    state: TcpState,
    ends: [End; 2],
}

fn after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}

impl Sim {
    /// Put a legitimate segment from `side` through the tracker; it must be accepted and
    /// land where the model says. Delivered to the other end unless `dropped`.
    fn pass(&mut self, side: usize, seg: Segment, dropped: bool) -> Result<(), TestCaseError> {
        if !dropped {
            let want = model(self.state, side == 1, seg.flags);
            let got = self.conn.update(side == 1, &seg);
            prop_assert_eq!(
                got,
                TcpVerdict::Ok(want),
                "{:?} from {} in {:?}",
                seg,
                side,
                self.state
            );
            prop_assert_eq!(self.conn.state, want);
            prop_assert_eq!(self.conn.established(), want != SynSent);
            self.state = want;
            self.deliver(side, &seg);
        }
        Ok(())
    }

    fn deliver(&mut self, side: usize, seg: &Segment) {
        let shift = if seg.flags & SYN != 0 {
            0
        } else {
            self.ends[side].shift
        };
        let to = &mut self.ends[side ^ 1];
        if seg.seq == to.rcv || seg.flags & SYN != 0 && to.rcv == 0 {
            to.rcv = seg.end();
        }
        if seg.flags & ACK != 0 {
            if after(seg.ack, to.una) {
                to.una = seg.ack;
            }
            let right = seg.ack.wrapping_add(u32::from(seg.window) << shift);
            if after(right, to.right) {
                to.right = right;
            }
        }
    }

    fn segment(&self, side: usize, flags: u8, seq: u32, len: u32) -> Segment {
        let e = &self.ends[side];
        Segment {
            seq,
            ack: e.rcv,
            flags,
            window: e.win,
            wscale: None,
            len,
        }
    }

    /// A probe that must be refused with `why` and leave the connection as it was.
    fn refuse(
        &mut self,
        side: usize,
        seg: Segment,
        why: InvalidReason,
    ) -> Result<(), TestCaseError> {
        let before = self.conn;
        prop_assert_eq!(
            self.conn.update(side == 1, &seg),
            TcpVerdict::Invalid(why),
            "{:?}",
            seg
        );
        prop_assert_eq!(self.conn, before);
        Ok(())
    }

    fn step(&mut self, op: u8, side: usize, arg: u16) -> Result<(), TestCaseError> {
        let e = self.ends[side].clone();
        let space = e.right.wrapping_sub(e.nxt);
        match op {
            // New data (dropped on the way for op 1: it will be retransmitted).
            0 | 1 if !e.fin_sent && space > 0 && (space as i32) > 0 => {
                let len = u32::from(arg % 800 + 1).min(space);
                let seg = self.segment(side, ACK | PSH, e.nxt, len);
                self.ends[side].nxt = e.nxt.wrapping_add(len);
                self.ends[side].sent.push(seg);
                self.pass(side, seg, op == 1)?;
            }
            // A pure acknowledgement.
            2 => self.pass(side, self.segment(side, ACK, e.nxt, 0), false)?,
            // Retransmit (with today's ack) or replay (as sent) an unacknowledged segment.
            3 | 4 => {
                let unacked: Vec<Segment> = e
                    .sent
                    .iter()
                    .filter(|s| after(s.end(), e.una))
                    .copied()
                    .collect();
                if let Some(old) = unacked.get(usize::from(arg) % unacked.len().max(1)) {
                    let seg = if op == 3 {
                        Segment { ack: e.rcv, ..*old }
                    } else {
                        *old
                    };
                    self.pass(side, seg, false)?;
                }
            }
            5 if !e.fin_sent && (space as i32) > 0 => self.fin(side)?,
            // Far outside the window: data, an RST, a FIN.
            6 => {
                let far = e.nxt.wrapping_add(0x4000_0000 + u32::from(arg));
                let why = InvalidReason::OutOfWindow;
                self.refuse(side, self.segment(side, ACK, far, 10), why)?;
                self.refuse(side, self.segment(side, RST, far, 0), why)?;
                self.refuse(side, self.segment(side, FIN | ACK, far, 0), why)?;
                let mut bad_ack = self.segment(side, ACK, e.nxt, 0);
                bad_ack.ack = e.rcv.wrapping_add(0x2000_0000);
                self.refuse(side, bad_ack, why)?;
            }
            7 => {
                let flags =
                    [0, SYN | FIN, SYN | RST, FIN, FIN | RST | ACK, PSH][usize::from(arg) % 6];
                self.refuse(
                    side,
                    self.segment(side, flags, e.nxt, 0),
                    InvalidReason::TcpFlags,
                )?;
            }
            _ => {}
        }
        Ok(())
    }

    fn fin(&mut self, side: usize) -> Result<(), TestCaseError> {
        let e = &self.ends[side];
        let seg = self.segment(side, FIN | ACK, e.nxt, 0);
        self.ends[side].nxt = seg.end();
        self.ends[side].fin_sent = true;
        self.ends[side].sent.push(seg);
        self.pass(side, seg, false)
    }
}

/// The handshake: `syns` SYNs, `synacks` SYN/ACKs, the ACK; window scale options as given.
fn handshake(
    isn: [u32; 2],
    win: [u16; 2],
    ws: [Option<u8>; 2],
    syns: usize,
    synacks: usize,
) -> Result<Sim, TestCaseError> {
    let both = ws[0].is_some() && ws[1].is_some();
    let shift = |i: usize| if both { ws[i].unwrap_or(0).min(14) } else { 0 };
    let end = |i: usize| End {
        nxt: isn[i].wrapping_add(1),
        una: isn[i],
        rcv: 0,
        win: win[i],
        shift: shift(i),
        right: isn[i].wrapping_add(1),
        fin_sent: false,
        sent: Vec::new(),
    };
    let syn = Segment {
        seq: isn[0],
        ack: 0,
        flags: SYN,
        window: win[0],
        wscale: ws[0],
        len: 0,
    };
    let conn = TcpConn::new(&syn).expect("a SYN starts a connection");
    let mut sim = Sim {
        conn,
        state: SynSent,
        ends: [end(0), end(1)],
    };
    prop_assert!(!sim.conn.established());
    sim.deliver(0, &syn);
    for _ in 1..syns {
        sim.pass(0, syn, false)?;
    }
    let synack = Segment {
        seq: isn[1],
        ack: isn[0].wrapping_add(1),
        flags: SYN | ACK,
        window: win[1],
        wscale: ws[1],
        len: 0,
    };
    for _ in 0..synacks {
        sim.pass(1, synack, false)?;
    }
    let ack = sim.segment(0, ACK, isn[0].wrapping_add(1), 0);
    sim.pass(0, ack, false)?;
    Ok(sim)
}

fn op_strategy() -> impl Strategy<Value = (u8, usize, u16)> {
    (0u8..8, 0usize..2, any::<u16>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_exchanges_follow_the_model_and_close_in_time_wait(
        isn in any::<[u32; 2]>(),
        win in [1000u16..=65535, 1000u16..=65535],
        ws in [proptest::option::of(0u8..16), proptest::option::of(0u8..16)],
        syns in 1usize..4,
        synacks in 1usize..4,
        ops in proptest::collection::vec(op_strategy(), 0..80),
        rst in proptest::option::of((0usize..2, any::<bool>())),
    ) {
        let mut sim = handshake(isn, win, ws, syns, synacks)?;
        prop_assert_eq!(sim.state, Established);
        for (op, side, arg) in ops {
            sim.step(op, side, arg)?;
        }
        match rst {
            Some((side, with_ack)) => {
                // An RST at exactly the next sequence number: in the window.
                let flags = if with_ack { RST | ACK } else { RST };
                let seg = sim.segment(side, flags, sim.ends[side].nxt, 0);
                sim.pass(side, seg, false)?;
                prop_assert_eq!(sim.conn.state, Close);
                // A new SYN from the client reopens.
                let syn = Segment { seq: 7, flags: SYN, ..Segment::default() };
                prop_assert_eq!(sim.conn.update(false, &syn), TcpVerdict::Reopen);
            }
            None => {
                // Everything unacknowledged again, in order, acknowledged, then the FINs.
                for side in 0..2 {
                    let e = sim.ends[side].clone();
                    for old in e.sent.iter().filter(|s| after(s.end(), e.una)) {
                        let seg = Segment { ack: sim.ends[side].rcv, ..*old };
                        sim.pass(side, seg, false)?;
                    }
                }
                for side in [0, 1, 0] {
                    let seg = sim.segment(side, ACK, sim.ends[side].nxt, 0);
                    sim.pass(side, seg, false)?;
                }
                for side in 0..2 {
                    if !sim.ends[side].fin_sent {
                        sim.fin(side)?;
                    }
                }
                for side in 0..2 {
                    let e = &sim.ends[side];
                    let seg = sim.segment(side, ACK, e.nxt, 0);
                    sim.pass(side, seg, false)?;
                }
                prop_assert_eq!(sim.conn.state, TimeWait);
                let syn = Segment { seq: 7, flags: SYN, ..Segment::default() };
                prop_assert_eq!(sim.conn.update(false, &syn), TcpVerdict::Reopen);
            }
        }
    }

    #[test]
    fn arbitrary_segments_never_panic_and_keep_state_consistent(
        first in any::<(u32, u32, u8, u16, Option<u8>, u32)>(),
        segs in proptest::collection::vec(
            (any::<bool>(), any::<(u32, u32, u8, u16, Option<u8>, u32)>()),
            0..60,
        ),
    ) {
        let mk = |(seq, ack, flags, window, wscale, len): (u32, u32, u8, u16, Option<u8>, u32)| {
            Segment { seq, ack, flags, window, wscale: wscale.map(|w| w.min(14)), len: len % 70_000 }
        };
        let Some(mut conn) = TcpConn::new(&mk(first)) else {
            return Ok(());
        };
        for (reply, s) in segs {
            let before = conn;
            match conn.update(reply, &mk(s)) {
                TcpVerdict::Invalid(_) => prop_assert_eq!(conn, before),
                TcpVerdict::Reopen => {
                    prop_assert_eq!(conn, before);
                    prop_assert!(matches!(before.state, TimeWait | Close));
                }
                TcpVerdict::Ok(st) => prop_assert_eq!(st, conn.state),
            }
            if before.established() {
                prop_assert!(conn.established(), "{:?} -> {:?}", before, conn);
            }
        }
    }
}
