//! What the tracker tells operators: counters ([`CtStats`]), a connection as
//! `dpctl/dump-conntrack` prints it ([`ConnInfo`]), the table by state and zone
//! ([`CtSummary`]) and the zone limits ([`ZoneLimits`]).

use crate::tcp::TcpState;
use crate::tuple::Tuple;
use crate::InvalidReason;
use flowpath_packet::key::ipproto;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// NAT'd packets whose frame `nat::apply` could not rewrite (the key carries the
    /// translated values all the same).
    pub nat_rewrite_failed: u64,
}

/// The live counters behind [`CtStats`].
#[derive(Default)]
pub(crate) struct Counters {
    pub created: AtomicU64,
    pub expired: AtomicU64,
    pub early_drops: AtomicU64,
    pub limit_hits: AtomicU64,
    pub invalid: [AtomicU64; 7],
    pub nat_rewrite_failed: AtomicU64,
}

impl Counters {
    #[inline]
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn invalid(&self, why: InvalidReason) {
        Counters::bump(&self.invalid[why as usize]);
    }

    pub(crate) fn snapshot(&self, connections: u64) -> CtStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CtStats {
            connections,
            created: g(&self.created),
            expired: g(&self.expired),
            early_drops: g(&self.early_drops),
            limit_hits: g(&self.limit_hits),
            invalid: std::array::from_fn(|i| g(&self.invalid[i])),
            nat_rewrite_failed: g(&self.nat_rewrite_failed),
        }
    }
}

/// Connections by protocol and state name, and by zone (see `Tracker::summary`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CtSummary {
    /// (protocol name, state name) → connections. TCP states are Linux's names; other
    /// protocols are `UNREPLIED` until a reply is seen, `REPLIED` after.
    pub by_state: BTreeMap<(String, &'static str), u64>,
    pub by_zone: BTreeMap<u16, u64>,
    pub total: u64,
}

/// The limits in force and each limited zone's count (OVS's `ct-get-limits`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneLimits {
    /// The limit of zones without their own (0: none).
    pub default: u32,
    /// Zones with their own limit: zone → (limit, connections now). Limit 0: unlimited.
    pub zones: BTreeMap<u16, (u32, u32)>,
}

/// A connection as `flowpath conntrack dump` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    pub orig: Tuple,
    /// The reply direction's tuple (NAT'd: what replies arrive with).
    pub reply: Tuple,
    pub zone: u16,
    pub mark: u32,
    pub label: u128,
    pub tcp_state: Option<TcpState>,
    /// Seconds until it expires if idle.
    pub timeout_s: u32,
}

pub(crate) fn proto_name(p: u8) -> String {
    match p {
        ipproto::TCP => "tcp".into(),
        ipproto::UDP => "udp".into(),
        ipproto::ICMP => "icmp".into(),
        ipproto::ICMPV6 => "icmpv6".into(),
        p => p.to_string(),
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
    /// OVS's `dpctl/dump-conntrack` line: protocol, orig, reply (as NAT made it), zone,
    /// mark, labels, TCP state.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},orig=(", proto_name(self.orig.proto))?;
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
