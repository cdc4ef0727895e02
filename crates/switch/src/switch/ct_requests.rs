//! The conntrack control operations as the [`Switch`] answers them: `ct-dump`,
//! `ct-flush`, `ct-stats` and `ct-limits` (OVS's `dpctl/dump-conntrack`,
//! `flush-conntrack`, `ct-stats-show`, `ct-set-limits` / `ct-get-limits`).

use super::Switch;
use crate::conntrack::{
    Census, ConnJson, LimitsAnswer, LimitsRequest, StatsAnswer, ZoneLimitCount, ZoneRequest,
};
use crate::control::{Op, Response};
use serde::de::DeserializeOwned;

/// A request's JSON arguments (empty text: the defaults).
fn args<T: Default + DeserializeOwned>(op: Op, text: &str) -> Result<T, Response> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    serde_json::from_str(text)
        .map_err(|e| Response::error(format!("{}: bad request: {e}", op.name())))
}

impl Switch {
    /// Carry out one conntrack operation.
    pub(super) fn conntrack(&self, op: Op, text: &str) -> Response {
        let r = match op {
            Op::CtDump => args(op, text).map(|a| self.ct_dump(a)),
            Op::CtFlush => args(op, text).map(|a| self.ct_flush(a)),
            Op::CtStats => Ok(self.ct_stats()),
            Op::CtLimits => args(op, text).map(|a| self.ct_limits(a)),
            _ => Err(Response::error(format!(
                "{}: not a conntrack operation",
                op.name()
            ))),
        };
        let mut r = r.unwrap_or_else(|e| e);
        r.version = self.store.version();
        r
    }

    /// `ct-dump`: every connection (of one zone), as OVS prints them; the data is a list
    /// of [`ConnJson`].
    fn ct_dump(&self, a: ZoneRequest) -> Response {
        let conns = self.tracker.dump(a.zone);
        let json: Vec<ConnJson> = conns.iter().map(ConnJson::from).collect();
        Response {
            summary: format!("{} connections", conns.len()),
            lines: conns.iter().map(|c| c.to_string()).collect(),
            data: serde_json::to_value(&json).ok(),
            ..Response::default()
        }
    }

    /// `ct-flush`: remove every connection (of one zone).
    fn ct_flush(&self, a: ZoneRequest) -> Response {
        let n = self.tracker.flush(a.zone);
        let of = a.zone.map(|z| format!(" of zone {z}")).unwrap_or_default();
        Response {
            summary: format!("flushed {n} connections{of}"),
            data: Some(serde_json::json!({ "flushed": n })),
            ..Response::default()
        }
    }

    /// `ct-stats`: the tracker's counters, and connections by zone and state (counted now).
    fn ct_stats(&self) -> Response {
        let census = Census::take(&self.tracker);
        let mut s = StatsAnswer::new(&self.tracker.stats());
        s.zones = census.zones.clone();
        s.states = census
            .states
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        self.census.set(census);
        Response {
            lines: s.lines(),
            data: serde_json::to_value(&s).ok(),
            ..Response::default()
        }
    }

    /// `ct-limits`: change the limits when asked (all or nothing), then show them with
    /// each limited zone's connections.
    fn ct_limits(&self, req: LimitsRequest) -> Response {
        let mut limits = self.ct_limits.lock().unwrap_or_else(|e| e.into_inner());
        if req.changes() {
            let new = limits.with(&req);
            let set: Vec<(u16, u32)> = req.set.iter().map(|z| (z.zone, z.limit)).collect();
            self.tracker.set_limits(&set, req.default);
            *limits = new;
        }
        let census = Census::take(&self.tracker);
        let answer = LimitsAnswer {
            max_connections: limits.max_connections,
            connections: census.zones.values().sum(),
            default_limit: limits.default_zone_limit,
            zones: limits
                .zone_limits
                .iter()
                .map(|(&zone, &limit)| ZoneLimitCount {
                    zone,
                    limit,
                    count: census.zones.get(&zone).copied().unwrap_or(0),
                })
                .collect(),
        };
        drop(limits);
        self.census.set(census);
        Response {
            lines: answer.lines(),
            data: serde_json::to_value(&answer).ok(),
            ..Response::default()
        }
    }
}
