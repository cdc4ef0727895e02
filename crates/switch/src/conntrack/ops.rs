//! What the conntrack control operations carry: their requests (the `text` of a
//! [`Request`](crate::control::Request), as JSON) and their structured answers (a
//! [`Response`](crate::control::Response)'s `data`), as `flowpath conntrack ... --json`
//! prints them.

use flowpath_conntrack::{ConnInfo, CtStats, InvalidReason, Tuple};
use flowpath_packet::key::ipproto;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::str::FromStr;

/// `ct-dump` and `ct-flush`: one zone, or every zone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneRequest {
    #[serde(default)]
    pub zone: Option<u16>,
}

/// One `zone=N,limit=M` of `flowpath conntrack limits --set` (OVS's `ct-set-limits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneLimit {
    pub zone: u16,
    /// 0 = no limit for this zone (the default limit does not apply to it either).
    pub limit: u32,
}

impl FromStr for ZoneLimit {
    type Err = String;

    /// `zone=N,limit=M`, in either order.
    fn from_str(s: &str) -> Result<ZoneLimit, String> {
        let (mut zone, mut limit) = (None, None);
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}': expected zone=N or limit=M"))?;
            match k.trim() {
                "zone" => {
                    zone = Some(
                        v.trim()
                            .parse::<u16>()
                            .map_err(|_| format!("zone={v}: not a zone (0..=65535)"))?,
                    )
                }
                "limit" => {
                    limit = Some(
                        v.trim()
                            .parse::<u32>()
                            .map_err(|_| format!("limit={v}: not a count (0..=4294967295)"))?,
                    )
                }
                other => return Err(format!("'{other}': expected zone=N or limit=M")),
            }
        }
        match (zone, limit) {
            (Some(zone), Some(limit)) => Ok(ZoneLimit { zone, limit }),
            (None, _) => Err(format!("'{s}': no zone=N")),
            (_, None) => Err(format!("'{s}': no limit=M")),
        }
    }
}

/// `ct-limits`: change the limits (when `set` or `default` is given), then show them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsRequest {
    #[serde(default)]
    pub set: Vec<ZoneLimit>,
    #[serde(default)]
    pub default: Option<u32>,
}

impl LimitsRequest {
    pub fn changes(&self) -> bool {
        !self.set.is_empty() || self.default.is_some()
    }
}

/// The limits and each limited zone's connections (`ct-limits`'s data).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsAnswer {
    pub max_connections: u32,
    pub connections: u64,
    /// 0 = no default limit.
    pub default_limit: u32,
    pub zones: Vec<ZoneLimitCount>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneLimitCount {
    pub zone: u16,
    pub limit: u32,
    pub count: u64,
}

impl LimitsAnswer {
    /// OVS's `ct-get-limits` lines.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![
            format!(
                "connections={},max_connections={}",
                self.connections, self.max_connections
            ),
            format!("default limit={}", self.default_limit),
        ];
        v.extend(
            self.zones
                .iter()
                .map(|z| format!("zone={},limit={},count={}", z.zone, z.limit, z.count)),
        );
        v
    }
}

/// The limits a switch runs with: the config's, changed by `ct-limits` while it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: u32,
    pub zone_limits: BTreeMap<u16, u32>,
    pub default_zone_limit: u32,
}

impl Limits {
    /// `req` applied to these limits (a zone set to 0 is a zone without a limit).
    pub fn with(&self, req: &LimitsRequest) -> Limits {
        let mut l = self.clone();
        for z in &req.set {
            l.zone_limits.insert(z.zone, z.limit);
        }
        if let Some(d) = req.default {
            l.default_zone_limit = d;
        }
        l
    }
}

/// The tracker's counters (`ct-stats`'s data).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsAnswer {
    pub connections: u64,
    pub created: u64,
    pub expired: u64,
    pub early_drops: u64,
    pub limit_hits: u64,
    /// `+inv` packets by reason (every [`InvalidReason`], by its name).
    pub invalid: BTreeMap<String, u64>,
    /// Connections per zone and per state (a census taken for the answer).
    pub zones: BTreeMap<u16, u64>,
    pub states: BTreeMap<String, u64>,
}

impl StatsAnswer {
    pub fn new(s: &CtStats) -> StatsAnswer {
        StatsAnswer {
            connections: s.connections,
            created: s.created,
            expired: s.expired,
            early_drops: s.early_drops,
            limit_hits: s.limit_hits,
            invalid: InvalidReason::ALL
                .iter()
                .zip(s.invalid.iter())
                .map(|(r, n)| (r.name().to_string(), *n))
                .collect(),
            ..StatsAnswer::default()
        }
    }

    /// `ct-stats-show`-like lines.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![
            format!("Connections: {}", self.connections),
            format!("  created:      {:>12}", self.created),
            format!("  expired:      {:>12}", self.expired),
            format!("  early drops:  {:>12}", self.early_drops),
            format!("  limit hits:   {:>12}", self.limit_hits),
            "  invalid:".to_string(),
        ];
        v.extend(
            self.invalid
                .iter()
                .map(|(r, n)| format!("    {r:<14}{n:>12}")),
        );
        if !self.states.is_empty() {
            v.push("  by state:".into());
            v.extend(
                self.states
                    .iter()
                    .map(|(s, n)| format!("    {s:<18}{n:>8}")),
            );
        }
        if !self.zones.is_empty() {
            v.push("  by zone:".into());
            v.extend(
                self.zones
                    .iter()
                    .map(|(z, n)| format!("    zone={z:<12}{n:>9}")),
            );
        }
        v
    }
}

/// One direction of a connection, for `--json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TupleJson {
    pub src: String,
    pub dst: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_id: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_type: Option<u16>,
}

/// One connection, for `flowpath conntrack dump --json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnJson {
    /// `tcp`, `udp`, `icmp`, `icmpv6` or the protocol number.
    pub proto: String,
    pub orig: TupleJson,
    pub reply: TupleJson,
    pub zone: u16,
    pub mark: u32,
    /// The 128-bit label in hex (`0x...`).
    pub label: String,
    /// The TCP state, as Linux names it (`ESTABLISHED`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_state: Option<String>,
    /// Seconds until it expires if idle.
    pub timeout_s: u32,
}

impl From<&ConnInfo> for ConnJson {
    fn from(c: &ConnInfo) -> Self {
        ConnJson {
            proto: proto_name(c.orig.proto),
            orig: tuple_json(&c.orig),
            reply: tuple_json(&c.reply),
            zone: c.zone,
            mark: c.mark,
            label: format!("{:#x}", c.label),
            tcp_state: c.tcp_state.map(|s| s.name().to_string()),
            timeout_s: c.timeout_s,
        }
    }
}

fn proto_name(p: u8) -> String {
    match p {
        ipproto::TCP => "tcp".into(),
        ipproto::UDP => "udp".into(),
        ipproto::ICMP => "icmp".into(),
        ipproto::ICMPV6 => "icmpv6".into(),
        p => p.to_string(),
    }
}

/// An address of a [`Tuple`] (IPv4 in the first four bytes, as the key's ct fields).
pub fn addr(a: u128, ipv6: bool) -> String {
    if ipv6 {
        std::net::Ipv6Addr::from(a).to_string()
    } else {
        std::net::Ipv4Addr::from((a >> 96) as u32).to_string()
    }
}

fn tuple_json(t: &Tuple) -> TupleJson {
    let ports = matches!(t.proto, ipproto::TCP | ipproto::UDP);
    let icmp = matches!(t.proto, ipproto::ICMP | ipproto::ICMPV6);
    TupleJson {
        src: addr(t.src, t.ipv6),
        dst: addr(t.dst, t.ipv6),
        sport: ports.then_some(t.src_port),
        dport: ports.then_some(t.dst_port),
        icmp_id: icmp.then_some(t.src_port),
        icmp_type: icmp.then_some(t.dst_port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_changes_apply_over_the_running_limits() {
        let run = Limits {
            max_connections: 100,
            zone_limits: [(1, 10), (2, 20)].into_iter().collect(),
            default_zone_limit: 5,
        };
        let req = LimitsRequest {
            set: vec![
                "zone=2,limit=0".parse().unwrap(),
                "limit=30,zone=3".parse().unwrap(),
            ],
            default: None,
        };
        let l = run.with(&req);
        // Zone 2 keeps an entry: no limit for it, whatever the default.
        let zones: Vec<(u16, u32)> = l.zone_limits.into_iter().collect();
        assert_eq!(zones, [(1, 10), (2, 0), (3, 30)]);
        assert_eq!((l.max_connections, l.default_zone_limit), (100, 5));
        let l = run.with(&LimitsRequest {
            set: Vec::new(),
            default: Some(0),
        });
        assert_eq!(l.default_zone_limit, 0);
        assert_eq!(l.zone_limits, run.zone_limits);
        assert!(!LimitsRequest::default().changes());
    }
}
