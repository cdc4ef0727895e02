//! Connections counted per zone and per state, from a dump of the tracker. The switch's
//! expiry thread takes one every [`CENSUS_EVERY`] and keeps it, so a metrics scrape reads
//! a finished count instead of walking the table.

use flowpath_conntrack::{ConnInfo, Tracker};
use flowpath_packet::key::ipproto;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the switch counts its connections per zone and state.
pub const CENSUS_EVERY: Duration = Duration::from_secs(5);

/// The most zones the metrics list by number; the others are summed into `zone="other"`.
pub const MAX_ZONE_LABELS: usize = 64;

/// Connections per zone and per state at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Census {
    pub zones: BTreeMap<u16, u64>,
    /// By [`state_label`].
    pub states: BTreeMap<&'static str, u64>,
}

impl Census {
    pub fn of(conns: &[ConnInfo]) -> Census {
        let mut c = Census::default();
        for i in conns {
            *c.zones.entry(i.zone).or_default() += 1;
            *c.states.entry(state_label(i)).or_default() += 1;
        }
        c
    }

    /// A census of `t` now (a dump of the whole table).
    pub fn take(t: &Tracker) -> Census {
        Census::of(&t.dump(None))
    }

    /// The zones as the metrics label them: the [`MAX_ZONE_LABELS`] with the most
    /// connections (by number, the lower zone first on a tie), then `other` with the
    /// sum of the rest when there is a rest.
    pub fn zone_labels(&self) -> Vec<(String, u64)> {
        let mut by_count: Vec<(u16, u64)> = self.zones.iter().map(|(z, n)| (*z, *n)).collect();
        by_count.sort_by_key(|&(z, n)| (std::cmp::Reverse(n), z));
        let rest: u64 = by_count.iter().skip(MAX_ZONE_LABELS).map(|(_, n)| n).sum();
        let mut out: Vec<(String, u64)> = by_count
            .iter()
            .take(MAX_ZONE_LABELS)
            .map(|(z, n)| (z.to_string(), *n))
            .collect();
        if by_count.len() > MAX_ZONE_LABELS {
            out.push(("other".into(), rest));
        }
        out
    }
}

/// A connection's state as the metrics and `ct-stats` name it: `tcp_` and the TCP state
/// (`tcp_established`, `tcp_time_wait`, ..., the names of the TCP timeouts), else its
/// protocol (`udp`, `icmp` (v4 or v6), `other`).
pub fn state_label(c: &ConnInfo) -> &'static str {
    use flowpath_conntrack::TcpState as S;
    match (c.tcp_state, c.orig.proto) {
        (Some(s), _) => match s {
            S::SynSent => "tcp_syn_sent",
            S::SynRecv => "tcp_syn_recv",
            S::Established => "tcp_established",
            S::FinWait => "tcp_fin_wait",
            S::CloseWait => "tcp_close_wait",
            S::LastAck => "tcp_last_ack",
            S::TimeWait => "tcp_time_wait",
            S::Close => "tcp_close",
        },
        (None, ipproto::UDP) => "udp",
        (None, ipproto::ICMP | ipproto::ICMPV6) => "icmp",
        (None, _) => "other",
    }
}

/// The latest census, shared by the thread that takes it and the scrapes that read it.
#[derive(Debug, Default)]
pub struct CensusCell(Mutex<Arc<Census>>);

impl CensusCell {
    pub fn get(&self) -> Arc<Census> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set(&self, c: Census) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(c);
    }
}
