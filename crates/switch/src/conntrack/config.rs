//! The `[conntrack]` config section: the table's and zones' connection limits and the
//! per-state idle timeouts (named as Linux's `nf_conntrack_*_timeout*`), checked so that
//! an error names the field at fault.

use flowpath_conntrack::{CtConfig, Timeouts};
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[conntrack]`; a field left out takes the tracker's default ([`CtConfig::default`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CtSection {
    /// Most connections in the table, all zones together.
    pub max_connections: u32,
    /// The limit of every zone without its own (0 = no limit), as OVS's
    /// `ct-set-limits default=N`.
    pub default_zone_limit: u32,
    /// Per-zone limits, `{ 1 = 1000, 7 = 50 }` (0 = no limit for that zone, whatever the
    /// default).
    pub zone_limits: BTreeMap<String, u32>,
    /// `[conntrack.timeouts]`: idle timeouts per connection state, in seconds.
    pub timeouts: TimeoutSection,
}

/// `[conntrack.timeouts]`, in seconds; Linux's defaults where left out.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeoutSection {
    pub tcp_syn_sent: u32,
    pub tcp_syn_recv: u32,
    pub tcp_established: u32,
    pub tcp_fin_wait: u32,
    pub tcp_close_wait: u32,
    pub tcp_last_ack: u32,
    pub tcp_time_wait: u32,
    pub tcp_close: u32,
    pub tcp_unack: u32,
    pub udp: u32,
    pub udp_stream: u32,
    pub icmp: u32,
    pub generic: u32,
}

impl Default for CtSection {
    fn default() -> Self {
        let c = CtConfig::default();
        CtSection {
            max_connections: c.max_connections,
            default_zone_limit: c.default_zone_limit,
            zone_limits: c
                .zone_limits
                .iter()
                .map(|(z, l)| (z.to_string(), *l))
                .collect(),
            timeouts: TimeoutSection::from(&c.timeouts),
        }
    }
}

impl Default for TimeoutSection {
    fn default() -> Self {
        TimeoutSection::from(&Timeouts::default())
    }
}

impl From<&Timeouts> for TimeoutSection {
    fn from(t: &Timeouts) -> Self {
        TimeoutSection {
            tcp_syn_sent: t.tcp_syn_sent,
            tcp_syn_recv: t.tcp_syn_recv,
            tcp_established: t.tcp_established,
            tcp_fin_wait: t.tcp_fin_wait,
            tcp_close_wait: t.tcp_close_wait,
            tcp_last_ack: t.tcp_last_ack,
            tcp_time_wait: t.tcp_time_wait,
            tcp_close: t.tcp_close,
            tcp_unack: t.tcp_unack,
            udp: t.udp,
            udp_stream: t.udp_stream,
            icmp: t.icmp,
            generic: t.generic,
        }
    }
}

impl TimeoutSection {
    /// Each timeout with its field name, in the order the section documents them.
    fn named(&self) -> [(&'static str, u32); 13] {
        [
            ("tcp_syn_sent", self.tcp_syn_sent),
            ("tcp_syn_recv", self.tcp_syn_recv),
            ("tcp_established", self.tcp_established),
            ("tcp_fin_wait", self.tcp_fin_wait),
            ("tcp_close_wait", self.tcp_close_wait),
            ("tcp_last_ack", self.tcp_last_ack),
            ("tcp_time_wait", self.tcp_time_wait),
            ("tcp_close", self.tcp_close),
            ("tcp_unack", self.tcp_unack),
            ("udp", self.udp),
            ("udp_stream", self.udp_stream),
            ("icmp", self.icmp),
            ("generic", self.generic),
        ]
    }

    fn timeouts(&self) -> Timeouts {
        Timeouts {
            tcp_syn_sent: self.tcp_syn_sent,
            tcp_syn_recv: self.tcp_syn_recv,
            tcp_established: self.tcp_established,
            tcp_fin_wait: self.tcp_fin_wait,
            tcp_close_wait: self.tcp_close_wait,
            tcp_last_ack: self.tcp_last_ack,
            tcp_time_wait: self.tcp_time_wait,
            tcp_close: self.tcp_close,
            tcp_unack: self.tcp_unack,
            udp: self.udp,
            udp_stream: self.udp_stream,
            icmp: self.icmp,
            generic: self.generic,
        }
    }
}

/// The longest idle timeout the section takes: a year (longer is a typo, and the tracker
/// counts time in milliseconds).
pub const MAX_TIMEOUT_S: u32 = 365 * 24 * 3600;

/// The most connections the section takes (the table is sized from it).
pub const MAX_CONNECTIONS: u32 = 1 << 26;

impl CtSection {
    /// The tracker's configuration; errors name the field (`conntrack.timeouts.udp: ...`).
    pub fn ct_config(&self) -> Result<CtConfig, String> {
        if self.max_connections == 0 || self.max_connections > MAX_CONNECTIONS {
            return Err(format!(
                "conntrack.max_connections: {} is not in 1..={MAX_CONNECTIONS}",
                self.max_connections
            ));
        }
        let mut zone_limits = BTreeMap::new();
        for (zone, limit) in &self.zone_limits {
            let z: u16 = zone.parse().map_err(|_| {
                format!("conntrack.zone_limits.{zone}: '{zone}' is not a zone (0..=65535)")
            })?;
            zone_limits.insert(z, *limit);
        }
        for (name, v) in self.timeouts.named() {
            if v == 0 || v > MAX_TIMEOUT_S {
                return Err(format!(
                    "conntrack.timeouts.{name}: {v} s is not in 1..={MAX_TIMEOUT_S} seconds"
                ));
            }
        }
        Ok(CtConfig {
            max_connections: self.max_connections,
            zone_limits,
            default_zone_limit: self.default_zone_limit,
            timeouts: self.timeouts.timeouts(),
        })
    }
}
