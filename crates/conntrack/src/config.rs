//! The tracker's settings: table and zone limits, per-state timeouts (Linux's defaults).

use std::collections::BTreeMap;

/// Per-state idle timeouts in seconds (Linux's `nf_conntrack_*_timeout*` defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub tcp_syn_sent: u32,
    pub tcp_syn_recv: u32,
    pub tcp_established: u32,
    pub tcp_fin_wait: u32,
    pub tcp_close_wait: u32,
    pub tcp_last_ack: u32,
    pub tcp_time_wait: u32,
    pub tcp_close: u32,
    /// A connection that saw no reply, or a window violation (`unacknowledged`).
    pub tcp_unack: u32,
    /// UDP seen in one direction.
    pub udp: u32,
    /// UDP seen both ways (`udp_timeout_stream`).
    pub udp_stream: u32,
    pub icmp: u32,
    /// Other IP protocols.
    pub generic: u32,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            tcp_syn_sent: 120,
            tcp_syn_recv: 60,
            tcp_established: 432_000,
            tcp_fin_wait: 120,
            tcp_close_wait: 60,
            tcp_last_ack: 30,
            tcp_time_wait: 120,
            tcp_close: 10,
            tcp_unack: 300,
            udp: 30,
            udp_stream: 120,
            icmp: 30,
            generic: 600,
        }
    }
}

/// The tracker's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtConfig {
    /// Most connections in the table (all zones); 0 = the default (1,048,576).
    pub max_connections: u32,
    /// Per-zone limits (OVS's `ct-set-limits zone=N,limit=M`).
    pub zone_limits: BTreeMap<u16, u32>,
    /// The limit for zones without their own (0 = none).
    pub default_zone_limit: u32,
    pub timeouts: Timeouts,
}

impl Default for CtConfig {
    fn default() -> Self {
        CtConfig {
            max_connections: 1 << 20,
            zone_limits: BTreeMap::new(),
            default_zone_limit: 0,
            timeouts: Timeouts::default(),
        }
    }
}
