//! What an underlay is given: flowpath's underlay ports and the tuning of resolution.

use std::time::Duration;

/// One of flowpath's underlay ports: its port number and the Linux interface it sends
/// on (the daemon's `[[port]]` entries of type afxdp, afpacket or tap).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnderlayPort {
    pub port: u32,
    pub ifname: String,
}

/// Tuning; the defaults suit a switch.
#[derive(Clone, Debug)]
pub struct UnderlayConfig {
    /// At most one resolution request per remote per this interval.
    pub resolve_interval: Duration,
    /// How often next hops in use whose neighbour entry is STALE are re-confirmed.
    pub stale_refresh: Duration,
    /// At most this many remotes are tracked (each costs an `RTM_GETROUTE` on every
    /// route change); others stay unknown (`UnderlayStats::remotes_over_limit`).
    pub max_remotes: usize,
}

impl Default for UnderlayConfig {
    fn default() -> Self {
        UnderlayConfig {
            resolve_interval: Duration::from_millis(500),
            stale_refresh: Duration::from_secs(15),
            max_remotes: 16_384,
        }
    }
}
