//! Operator changes to a running tracker (`flowpath conntrack limits --set`, OVS's
//! `dpctl/ct-set-limits`).

use crate::Tracker;

impl Tracker {
    /// Give zones their own limits (`(zone, limit)`, limit 0 = unlimited, whatever
    /// the default) and, when given,
    /// set the default zone limit (0 = none). Connections over a lowered limit stay; new
    /// ones are refused (or make room by early drop) until the zone is under it again.
    pub fn set_limits(&self, zones: &[(u16, u32)], default: Option<u32>) {
        for &(zone, limit) in zones {
            self.set_zone_limit(zone, Some(limit));
        }
        if let Some(d) = default {
            self.set_default_zone_limit(d);
        }
    }
}
