//! The tracker against a reference model (a plain HashMap state machine): random
//! sequences of UDP and ICMP echo packets in both directions and of TCP conversations
//! (handshake, ACKs, FIN or RST close, in-window sequence numbers), in two zones, with and
//! without commit (and `set_mark`), and time steps with full expiry sweeps. Every packet's
//! ct_state and ct_mark must be the model's.

mod common;

use common::*;
use flowpath_conntrack::{CtConfig, Timeouts, Tracker};
use flowpath_packet::ct::state::*;
use flowpath_packet::{CtSpec, Field};
use proptest::prelude::*;
use std::collections::HashMap;

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;

#[derive(Clone, Debug)]
enum Op {
    /// UDP between 10.0.0.1:(1000+pair) and 10.0.0.2:53, `back` = from .2.
    Udp {
        pair: u16,
        back: bool,
        zone: u16,
        commit: bool,
        mark: u32,
    },
    /// ICMP echo with id `pair`, asked by .1 (or .2 when `back`), the request or its reply.
    Icmp {
        pair: u16,
        back: bool,
        reply: bool,
        zone: u16,
        commit: bool,
        mark: u32,
    },
    /// The next step of TCP conversation `conv`, or a reset when `rst`.
    Tcp {
        conv: usize,
        zone: u16,
        commit: bool,
        rst: bool,
        mark: u32,
    },
    /// Advance time by a second, or past every timeout, then sweep the table.
    Tick { far: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let m = prop_oneof![Just(0u32), 1u32..4];
    prop_oneof![
        (0u16..4, any::<bool>(), 0u16..2, any::<bool>(), m.clone()).prop_map(
            |(pair, back, zone, commit, mark)| Op::Udp {
                pair,
                back,
                zone,
                commit,
                mark
            }
        ),
        (
            0u16..3,
            any::<bool>(),
            any::<bool>(),
            0u16..2,
            any::<bool>(),
            m.clone()
        )
            .prop_map(|(pair, back, reply, zone, commit, mark)| Op::Icmp {
                pair,
                back,
                reply,
                zone,
                commit,
                mark
            }),
        (
            0usize..3,
            0u16..2,
            any::<bool>(),
            prop::bool::weighted(0.1),
            m
        )
            .prop_map(|(conv, zone, commit, rst, mark)| Op::Tcp {
                conv,
                zone,
                commit,
                rst,
                mark
            }),
        prop::bool::weighted(0.2).prop_map(|far| Op::Tick { far }),
    ]
}

#[derive(Clone, Copy, Debug)]
struct MConn {
    /// The original direction is from .2 (`back`).
    orig_back: bool,
    seen_reply: bool,
    expires_ms: u64,
    mark: u32,
    /// UDP/ICMP timeouts in seconds (unreplied, replied); TCP never expires but far.
    timeouts: (u64, u64),
}

#[derive(Clone, Copy, Debug, Default)]
struct Conv {
    /// Next step of the script; 0 = not started.
    pos: usize,
    gen: u16,
    zone: u16,
}

/// The TCP script: (from the server?, seq, ack, flags); client ISN 1000, server 5000.
const SCRIPT: [(bool, u32, u32, u8); 8] = [
    (false, 1000, 0, SYN),
    (true, 5000, 1001, SYN | ACK),
    (false, 1001, 5001, ACK),
    (true, 5001, 1001, ACK),
    (false, 1001, 5001, FIN | ACK),
    (true, 5001, 1002, ACK),
    (true, 5001, 1002, FIN | ACK),
    (false, 1002, 5002, ACK),
];

struct Model {
    conns: HashMap<(u8, u16, u16, bool), MConn>,
    convs: [Conv; 3],
    now: u64,
}

impl Model {
    /// A packet of connection `k`, travelling from .2 when `back`; `may_start`: a packet
    /// that can create the connection. Returns (ct_state, ct_mark).
    fn packet(
        &mut self,
        k: (u8, u16, u16, bool),
        back: bool,
        may_start: bool,
        commit: bool,
        mark: u32,
        to: (u64, u64),
    ) -> (u8, u32) {
        let now = self.now;
        match self.conns.get_mut(&k) {
            Some(c) => {
                let reply = back != c.orig_back;
                c.seen_reply |= reply;
                if commit && mark != 0 {
                    c.mark = mark;
                }
                let t = if c.seen_reply {
                    c.timeouts.1
                } else {
                    c.timeouts.0
                };
                c.expires_ms = now + 1000 * t;
                let est = if c.seen_reply { ESTABLISHED } else { NEW };
                (TRACKED | est | if reply { REPLY_DIR } else { 0 }, c.mark)
            }
            None if !may_start => (TRACKED | INVALID, 0),
            None => {
                if commit {
                    let c = MConn {
                        orig_back: back,
                        seen_reply: false,
                        expires_ms: now + 1000 * to.0,
                        mark,
                        timeouts: to,
                    };
                    self.conns.insert(k, c);
                    (TRACKED | NEW, mark)
                } else {
                    (TRACKED | NEW, 0)
                }
            }
        }
    }

    fn sweep(&mut self) {
        let now = self.now;
        self.conns.retain(|_, c| c.expires_ms > now);
    }
}

fn with_mark(commit: bool, zone: u16, mark: u32) -> CtSpec {
    CtSpec {
        set_mark: (mark != 0).then_some((mark, u32::MAX)),
        ..spec(commit, zone)
    }
}

fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let timeouts = Timeouts {
        udp: 5,
        udp_stream: 20,
        icmp: 5,
        tcp_syn_sent: 1000,
        tcp_syn_recv: 1000,
        tcp_established: 1000,
        tcp_fin_wait: 1000,
        tcp_close_wait: 1000,
        tcp_last_ack: 1000,
        tcp_time_wait: 1000,
        tcp_close: 1000,
        ..Timeouts::default()
    };
    let t = Tracker::new(CtConfig {
        timeouts,
        ..CtConfig::default()
    });
    let mut m = Model {
        conns: HashMap::new(),
        convs: [Conv::default(); 3],
        now: 0,
    };
    for (i, op) in ops.into_iter().enumerate() {
        let (mut p, want, zone) = match op {
            Op::Udp {
                pair,
                back,
                zone,
                commit,
                mark,
            } => {
                let p = if back {
                    udp("10.0.0.2", "10.0.0.1", 53, 1000 + pair)
                } else {
                    udp("10.0.0.1", "10.0.0.2", 1000 + pair, 53)
                };
                let k = (UDP, zone, pair, false);
                let want = m.packet(k, back, true, commit, mark, (5, 20));
                (p.with(with_mark(commit, zone, mark)), want, zone)
            }
            Op::Icmp {
                pair,
                back,
                reply,
                zone,
                commit,
                mark,
            } => {
                let (a, b) = if back {
                    ("10.0.0.2", "10.0.0.1")
                } else {
                    ("10.0.0.1", "10.0.0.2")
                };
                let p = if reply {
                    icmp_echo(b, a, false, pair)
                } else {
                    icmp_echo(a, b, true, pair)
                };
                let k = (1, zone, pair, back);
                let want = m.packet(k, back != reply, !reply, commit, mark, (5, 5));
                (p.with(with_mark(commit, zone, mark)), want, zone)
            }
            Op::Tcp {
                conv,
                zone,
                commit,
                rst,
                mark,
            } => {
                let c = m.convs[conv];
                let zone = if c.pos == 0 { zone } else { c.zone };
                let port = 4000 + 100 * conv as u16 + c.gen;
                let (server, seq, ack, mut flags) = SCRIPT[c.pos];
                if rst && c.pos >= 2 {
                    flags = RST | ACK;
                }
                let p = if server {
                    tcp("10.0.0.2", "10.0.0.1", 80, port, seq, ack, flags)
                } else {
                    tcp("10.0.0.1", "10.0.0.2", port, 80, seq, ack, flags)
                };
                let k = (TCP, zone, port, false);
                let commit = commit || c.pos > 0;
                let want = m.packet(k, server, c.pos == 0, commit, mark, (1_000_000, 1_000_000));
                let next = &mut m.convs[conv];
                next.zone = zone;
                if flags & RST != 0 || c.pos + 1 == SCRIPT.len() {
                    *next = Conv {
                        pos: 0,
                        gen: c.gen + 1,
                        zone,
                    };
                } else if commit {
                    next.pos += 1;
                }
                (p.with(with_mark(commit, zone, mark)), want, zone)
            }
            Op::Tick { far } => {
                m.now += if far { 10_000_000_000 } else { 1000 };
                t.expire(m.now, usize::MAX);
                m.sweep();
                if far {
                    for c in &mut m.convs {
                        if c.pos > 0 {
                            *c = Conv {
                                pos: 0,
                                gen: c.gen + 1,
                                zone: c.zone,
                            };
                        }
                    }
                }
                prop_assert_eq!(t.len(), m.conns.len(), "after tick {}", i);
                continue;
            }
        };
        let st = p.0.run(&t, &p.1, m.now);
        prop_assert_eq!(st, want.0, "op {} ct_state", i);
        prop_assert_eq!(
            p.0.key.get(Field::CtMark) as u32,
            want.1,
            "op {} ct_mark",
            i
        );
        prop_assert_eq!(p.0.key.get(Field::CtZone) as u16, zone);
        prop_assert_eq!(t.len(), m.conns.len(), "op {} table size", i);
    }
    Ok(())
}

trait With {
    fn with(self, s: CtSpec) -> (Pkt, CtSpec);
}

impl With for Pkt {
    fn with(self, s: CtSpec) -> (Pkt, CtSpec) {
        (self, s)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn tracker_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        check(ops)?;
    }
}
