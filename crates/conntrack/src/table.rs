//! The connection table every worker shares, and the tracker's public face.
//!
//! This first version keeps the table behind one lock; the interface is the one the
//! datapath and the switch use.

use crate::config::CtConfig;
use crate::tcp::{Segment, TcpConn, TcpState, TcpVerdict};
use crate::tuple::Tuple;
use crate::InvalidReason;
use flowpath_packet::ct::state;
use flowpath_packet::key::ipproto;
use flowpath_packet::{CtSpec, Field, FlowKey, PacketMeta};
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Instant;

/// One tracked connection.
#[derive(Clone, Debug)]
struct Conn {
    orig: Tuple,
    reply: Tuple,
    seen_reply: bool,
    tcp: Option<TcpConn>,
    mark: u32,
    label: u128,
    expires_ms: u64,
}

#[derive(Default)]
struct Inner {
    conns: Vec<Option<Conn>>,
    free: Vec<u32>,
    index: HashMap<Tuple, u32>,
    stats: CtStats,
}

/// The connection tracker: one per switch, shared by its workers.
pub struct Tracker {
    cfg: CtConfig,
    epoch: Instant,
    inner: Mutex<Inner>,
}

/// Counters (since start) and the table's fill.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CtStats {
    pub connections: u64,
    pub created: u64,
    pub expired: u64,
    pub early_drops: u64,
    pub limit_hits: u64,
    /// `+inv` packets by reason ([`InvalidReason::ALL`] order).
    pub invalid: [u64; 7],
}

/// A connection as `flowpath conntrack dump` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    pub orig: Tuple,
    pub reply: Tuple,
    pub zone: u16,
    pub mark: u32,
    pub label: u128,
    pub tcp_state: Option<TcpState>,
    /// Seconds until it expires if idle.
    pub timeout_s: u32,
}

impl Tracker {
    pub fn new(cfg: CtConfig) -> Tracker {
        Tracker {
            cfg,
            epoch: Instant::now(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Milliseconds since the tracker was made: the clock `execute` and `expire` take.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Run one packet through the tracker as `spec` says and set its ct fields in `key`;
    /// returns the packet's `ct_state`.
    pub fn execute(
        &self,
        frame: &mut [u8],
        meta: &PacketMeta,
        key: &mut FlowKey,
        spec: &CtSpec,
        now_ms: u64,
    ) -> u8 {
        let zone = spec.zone.zone(key);
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let st = match Tuple::of_packet(frame, meta, key, zone) {
            Err(why) => {
                g.stats.invalid[why as usize] += 1;
                state::TRACKED | state::INVALID
            }
            Ok(t) => self.track(&mut g, frame, meta, key, t, spec, now_ms),
        };
        key.set(Field::CtState, st as u128);
        key.set(Field::CtZone, zone as u128);
        st
    }

    #[allow(clippy::too_many_arguments)]
    fn track(
        &self,
        g: &mut Inner,
        frame: &[u8],
        meta: &PacketMeta,
        key: &mut FlowKey,
        t: Tuple,
        spec: &CtSpec,
        now_ms: u64,
    ) -> u8 {
        let seg = (t.proto == ipproto::TCP)
            .then(|| Segment::parse(frame, meta.l4 as usize, frame.len()))
            .flatten();
        if t.proto == ipproto::TCP && seg.is_none() {
            g.stats.invalid[InvalidReason::Malformed as usize] += 1;
            return state::TRACKED | state::INVALID;
        }
        let found = g.index.get(&t).copied();
        let Some(i) = found else {
            return self.new_conn(g, key, t, seg, spec, now_ms);
        };
        let conn = g.conns[i as usize].as_mut().expect("indexed");
        let reply = conn.orig != t;
        let mut st = state::TRACKED;
        if let (Some(tcp), Some(seg)) = (conn.tcp.as_mut(), seg.as_ref()) {
            match tcp.update(reply, seg) {
                TcpVerdict::Ok(_) => {}
                TcpVerdict::Invalid(why) => {
                    g.stats.invalid[why as usize] += 1;
                    return state::TRACKED | state::INVALID;
                }
                TcpVerdict::Reopen => {
                    self.remove(g, i);
                    return self.new_conn(g, key, t, Some(*seg), spec, now_ms);
                }
            }
        }
        if reply {
            conn.seen_reply = true;
            st |= state::REPLY_DIR;
        }
        let est = conn.tcp.map_or(conn.seen_reply, |c| c.established());
        st |= if est || reply {
            state::ESTABLISHED
        } else {
            state::NEW
        };
        if spec.commit {
            if let Some((v, m)) = spec.set_mark {
                conn.mark = (conn.mark & !m) | (v & m);
            }
            if let Some((v, m)) = spec.set_label {
                conn.label = (conn.label & !m) | (v & m);
            }
        }
        conn.expires_ms = now_ms + 1000 * u64::from(self.timeout(conn));
        write_conn_fields(key, conn);
        st
    }

    fn new_conn(
        &self,
        g: &mut Inner,
        key: &mut FlowKey,
        t: Tuple,
        seg: Option<Segment>,
        spec: &CtSpec,
        now_ms: u64,
    ) -> u8 {
        let tcp = match seg {
            Some(s) => match TcpConn::new(&s) {
                Some(c) => Some(c),
                None => {
                    g.stats.invalid[InvalidReason::TcpFlags as usize] += 1;
                    return state::TRACKED | state::INVALID;
                }
            },
            None => None,
        };
        if !spec.commit {
            return state::TRACKED | state::NEW;
        }
        if g.index.len() / 2 >= self.cfg.max_connections as usize {
            g.stats.limit_hits += 1;
            g.stats.invalid[InvalidReason::Limit as usize] += 1;
            return state::TRACKED | state::INVALID;
        }
        let mut conn = Conn {
            orig: t,
            reply: t.reverse(),
            seen_reply: false,
            tcp,
            mark: 0,
            label: 0,
            expires_ms: 0,
        };
        if let Some((v, m)) = spec.set_mark {
            conn.mark = v & m;
        }
        if let Some((v, m)) = spec.set_label {
            conn.label = v & m;
        }
        conn.expires_ms = now_ms + 1000 * u64::from(self.timeout(&conn));
        write_conn_fields(key, &conn);
        let i = match g.free.pop() {
            Some(i) => i,
            None => {
                g.conns.push(None);
                (g.conns.len() - 1) as u32
            }
        };
        g.index.insert(conn.orig, i);
        g.index.insert(conn.reply, i);
        g.conns[i as usize] = Some(conn);
        g.stats.created += 1;
        state::TRACKED | state::NEW
    }

    fn remove(&self, g: &mut Inner, i: u32) {
        if let Some(c) = g.conns[i as usize].take() {
            g.index.remove(&c.orig);
            g.index.remove(&c.reply);
            g.free.push(i);
        }
    }

    fn timeout(&self, c: &Conn) -> u32 {
        let t = &self.cfg.timeouts;
        match (c.tcp, c.orig.proto) {
            (Some(tcp), _) => match tcp.state {
                TcpState::SynSent => t.tcp_syn_sent,
                TcpState::SynRecv => t.tcp_syn_recv,
                TcpState::Established => t.tcp_established,
                TcpState::FinWait => t.tcp_fin_wait,
                TcpState::CloseWait => t.tcp_close_wait,
                TcpState::LastAck => t.tcp_last_ack,
                TcpState::TimeWait => t.tcp_time_wait,
                TcpState::Close => t.tcp_close,
            },
            (None, ipproto::UDP) if c.seen_reply => t.udp_stream,
            (None, ipproto::UDP) => t.udp,
            (None, ipproto::ICMP | ipproto::ICMPV6) => t.icmp,
            _ => t.generic,
        }
    }

    /// Remove up to `budget` expired connections; returns how many went.
    pub fn expire(&self, now_ms: u64, budget: usize) -> usize {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let dead: Vec<u32> = (0..g.conns.len() as u32)
            .filter(|&i| matches!(&g.conns[i as usize], Some(c) if c.expires_ms <= now_ms))
            .take(budget)
            .collect();
        for &i in &dead {
            self.remove(&mut g, i);
        }
        g.stats.expired += dead.len() as u64;
        dead.len()
    }

    /// Every connection (of one zone).
    pub fn dump(&self, zone: Option<u16>) -> Vec<ConnInfo> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.now_ms();
        let mut v: Vec<ConnInfo> = g
            .conns
            .iter()
            .flatten()
            .filter(|c| zone.is_none_or(|z| z == c.orig.zone))
            .map(|c| ConnInfo {
                orig: c.orig,
                reply: c.reply,
                zone: c.orig.zone,
                mark: c.mark,
                label: c.label,
                tcp_state: c.tcp.map(|t| t.state),
                timeout_s: (c.expires_ms.saturating_sub(now) / 1000) as u32,
            })
            .collect();
        v.sort_by_key(|c| c.orig);
        v
    }

    /// Remove every connection (of one zone); returns how many.
    pub fn flush(&self, zone: Option<u16>) -> usize {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let all: Vec<u32> = (0..g.conns.len() as u32)
            .filter(|&i| {
                matches!(&g.conns[i as usize], Some(c) if zone.is_none_or(|z| z == c.orig.zone))
            })
            .collect();
        for &i in &all {
            self.remove(&mut g, i);
        }
        all.len()
    }

    pub fn stats(&self) -> CtStats {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = g.stats.clone();
        s.connections = (g.index.len() / 2) as u64;
        s
    }

    /// Connections in the table.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .index
            .len()
            / 2
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The connection's fields a tracked packet carries: mark, label, original tuple.
fn write_conn_fields(key: &mut FlowKey, c: &Conn) {
    key.set(Field::CtMark, c.mark as u128);
    key.set(Field::CtLabel, c.label);
    key.set(Field::CtNwProto, c.orig.proto as u128);
    key.set(Field::CtIpv6Src, c.orig.src);
    key.set(Field::CtIpv6Dst, c.orig.dst);
    if matches!(c.orig.proto, ipproto::TCP | ipproto::UDP) {
        key.set(Field::CtTpSrc, c.orig.src_port as u128);
        key.set(Field::CtTpDst, c.orig.dst_port as u128);
    }
}

fn proto_name(p: u8, ipv6: bool) -> String {
    match (p, ipv6) {
        (ipproto::TCP, _) => "tcp".into(),
        (ipproto::UDP, _) => "udp".into(),
        (ipproto::ICMP, _) => "icmp".into(),
        (ipproto::ICMPV6, _) => "icmpv6".into(),
        (p, _) => p.to_string(),
    }
}

fn addr(a: u128, ipv6: bool) -> String {
    if ipv6 {
        std::net::Ipv6Addr::from(a).to_string()
    } else {
        std::net::Ipv4Addr::from((a >> 96) as u32).to_string()
    }
}

fn write_tuple(f: &mut fmt::Formatter<'_>, t: &Tuple) -> fmt::Result {
    write!(f, "src={},dst={}", addr(t.src, t.ipv6), addr(t.dst, t.ipv6))?;
    match t.proto {
        ipproto::TCP | ipproto::UDP => write!(f, ",sport={},dport={}", t.src_port, t.dst_port),
        ipproto::ICMP | ipproto::ICMPV6 => {
            write!(f, ",id={},type={},code=0", t.src_port, t.dst_port)
        }
        _ => Ok(()),
    }
}

impl fmt::Display for ConnInfo {
    /// OVS's `dpctl/dump-conntrack` line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},orig=(", proto_name(self.orig.proto, self.orig.ipv6))?;
        write_tuple(f, &self.orig)?;
        write!(f, "),reply=(")?;
        write_tuple(f, &self.reply)?;
        write!(f, ")")?;
        if self.zone != 0 {
            write!(f, ",zone={}", self.zone)?;
        }
        if self.mark != 0 {
            write!(f, ",mark={}", self.mark)?;
        }
        if self.label != 0 {
            write!(f, ",labels={:#x}", self.label)?;
        }
        if let Some(s) = self.tcp_state {
            write!(f, ",protoinfo=(state={})", s.name())?;
        }
        Ok(())
    }
}
