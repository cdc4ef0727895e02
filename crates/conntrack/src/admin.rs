//! Operator changes to a running tracker (`flowpath conntrack limits --set`, OVS's
//! `dpctl/ct-set-limits`).

use crate::Tracker;
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
    /// Give zones their own limits (`(zone, limit)`, limit 0 = unlimited) and, when given,
    /// set the default zone limit (0 = none), all or nothing. This table holds its limits
    /// in the configuration it was made with, so it refuses the change ([`LimitsFixed`]).
    pub fn set_limits(
        &self,
        zones: &[(u16, u32)],
        default: Option<u32>,
    ) -> Result<(), LimitsFixed> {
        let _ = (zones, default);
        Err(LimitsFixed)
    }
}
