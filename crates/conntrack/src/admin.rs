//! Operator changes to a running tracker (`flowpath conntrack limits --set`, OVS's
//! `dpctl/ct-set-limits`).

use crate::Tracker;
use std::collections::BTreeMap;
use std::fmt;

/// The tracker cannot change its limits while it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitsFixed;

impl fmt::Display for LimitsFixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "this tracker keeps the zone limits it was made with; change [conntrack] in the \
             config file and restart the switch",
        )
    }
}

impl Tracker {
    /// Replace the per-zone limits and the default zone limit (0 = none) of a running
    /// tracker. This table holds its limits in the configuration it was made with, so it
    /// refuses the change ([`LimitsFixed`]).
    pub fn set_limits(
        &self,
        zone_limits: &BTreeMap<u16, u32>,
        default_zone_limit: u32,
    ) -> Result<(), LimitsFixed> {
        let _ = (zone_limits, default_zone_limit);
        Err(LimitsFixed)
    }
}
