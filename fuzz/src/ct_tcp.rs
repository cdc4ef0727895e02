//! The `ct_tcp` check: any bytes as a run of TCP segments in both directions through one
//! tracked connection, with the invariants that must hold (shared with a stable test).
//!
//! Compiled twice: by the fuzz crate (`fuzz/fuzz_targets/ct_tcp.rs`) and, through
//! `#[path]`, by `crates/conntrack/tests/tcp_fuzz_corpus.rs`, so it only uses
//! `flowpath_conntrack`.
//!
//! The input is 15-byte records, the first of which opens the connection:
//!
//! ```text
//! 0      bit 0: reply direction; bit 1: seq/ack relative to the end of the last segment
//!        each end had accepted
//! 1      TCP flags
//! 2..6   seq (relative: a signed offset in the low 16 bits)
//! 6..10  ack (likewise)
//! 10..12 window
//! 12     window scale option (0xff: none)
//! 13..15 payload length
//! ```

use flowpath_conntrack::tcp::{Segment, TcpConn, TcpVerdict};
use flowpath_conntrack::TcpState;

/// What the run did: how many segments were accepted, refused and reopened the connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub opened: bool,
    pub ok: u32,
    pub invalid: u32,
    pub reopen: u32,
    pub last: Option<TcpState>,
}

/// Run `data`'s segments; panics when an invariant breaks.
pub fn check(data: &[u8]) -> Outcome {
    assert!(std::mem::size_of::<TcpConn>() <= 40);
    // The header reader takes any bytes too.
    let _ = Segment::parse(data, 0, data.len());
    let _ = Segment::parse(data, 14, data.len().saturating_sub(3));
    let mut out = Outcome::default();
    let mut recs = data.chunks_exact(15);
    // Where each end's last accepted segment ended: relative records count from it.
    let mut next = [0u32; 2];
    let Some((_, first)) = recs.next().map(|r| record(r, &next)) else {
        return out;
    };
    let Some(mut conn) = TcpConn::new(&first) else {
        return out;
    };
    out.opened = true;
    assert!(!conn.established(), "a new connection is not established");
    next[0] = first.end();
    for r in recs {
        let (reply, seg) = record(r, &next);
        let before = conn;
        match conn.update(reply, &seg) {
            TcpVerdict::Ok(st) => {
                assert_eq!(st, conn.state, "the verdict names the state");
                if before.established() {
                    assert!(conn.established(), "{before:?} -> {conn:?}: +est lost");
                }
                next[usize::from(reply)] = seg.end();
                out.ok += 1;
            }
            TcpVerdict::Invalid(_) => {
                assert_eq!(conn, before, "a refused segment changed the connection");
                out.invalid += 1;
            }
            TcpVerdict::Reopen => {
                assert_eq!(
                    conn, before,
                    "a reopening segment changed the old connection"
                );
                assert!(
                    matches!(before.state, TcpState::TimeWait | TcpState::Close),
                    "reopen from {:?}",
                    before.state
                );
                conn = TcpConn::new(&seg).expect("a reopening segment starts a connection");
                next = [0; 2];
                next[usize::from(reply)] = seg.end();
                out.reopen += 1;
            }
        }
        out.last = Some(conn.state);
    }
    out
}

/// One record as a segment and its direction.
fn record(r: &[u8], next: &[u32; 2]) -> (bool, Segment) {
    let reply = r[0] & 1 != 0;
    let relative = r[0] & 2 != 0;
    let word = |i: usize| u32::from_be_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
    let (mut seq, mut ack) = (word(2), word(6));
    if relative {
        let d = usize::from(reply);
        seq = next[d].wrapping_add(seq as u16 as i16 as u32);
        ack = next[d ^ 1].wrapping_add(ack as u16 as i16 as u32);
    }
    let seg = Segment {
        seq,
        ack,
        flags: r[1],
        window: u16::from_be_bytes([r[10], r[11]]),
        wscale: (r[12] != 0xff).then_some(r[12]),
        len: u32::from(u16::from_be_bytes([r[13], r[14]])),
    };
    (reply, seg)
}
