//! The table's and the zones' connection limits, and early drop: a new connection over a
//! limit evicts an unassured connection found near its own bucket (Linux's
//! `early_drop`), or is refused.

use crate::info::{Counters, ZoneLimits};
use crate::table::Tracker;
use crate::InvalidReason;
use std::sync::atomic::{AtomicU32, Ordering};

/// Buckets (of seven entries) early drop searches from the new connection's home bucket.
pub const EVICTION_BUCKETS: usize = 8;

impl Tracker {
    /// Take a place for a new connection in `zone` (hash `h`) under the table's and the
    /// zone's limits, evicting an unassured connection if one is over, and a slot.
    pub(crate) fn reserve(&self, zone: u16, h: u64) -> Result<u32, InvalidReason> {
        let zones = self.zones();
        if !self.take(&self.count, self.max, h, None) {
            Counters::bump(&self.stats.limit_hits);
            return Err(InvalidReason::Limit);
        }
        let limit = self.zone_limit(zone);
        let zc = &zones.count[zone as usize];
        if limit == 0 {
            zc.fetch_add(1, Ordering::AcqRel);
        } else if !self.take(zc, limit, h, Some(zone)) {
            self.count.fetch_sub(1, Ordering::AcqRel);
            Counters::bump(&self.stats.limit_hits);
            return Err(InvalidReason::Limit);
        }
        match self.slab.alloc() {
            Some(slot) => Ok(slot),
            None => {
                self.count.fetch_sub(1, Ordering::AcqRel);
                zc.fetch_sub(1, Ordering::AcqRel);
                Counters::bump(&self.stats.limit_hits);
                Err(InvalidReason::Limit)
            }
        }
    }

    /// Count one more in `counter` if that stays within `limit`, early-dropping once if
    /// it would not.
    fn take(&self, counter: &AtomicU32, limit: u32, h: u64, zone: Option<u16>) -> bool {
        for attempt in 0..2 {
            if counter.fetch_add(1, Ordering::AcqRel) < limit {
                return true;
            }
            counter.fetch_sub(1, Ordering::AcqRel);
            if attempt == 1 || !self.early_drop(h, zone) {
                return false;
            }
        }
        false
    }

    /// Evict one unassured connection (of `zone`, if given) whose index entry lies in the
    /// [`EVICTION_BUCKETS`] buckets from `h`'s home. False when there is none.
    fn early_drop(&self, h: u64, zone: Option<u16>) -> bool {
        let victim = self.index.near(h, EVICTION_BUCKETS, |slot| {
            let c = self.slab.lock(slot);
            let fits = c.live() && !c.assured && zone.is_none_or(|z| c.orig.zone == z);
            fits.then_some(slot)
        });
        match victim {
            Some(slot) if self.kill_unassured(slot) => {
                Counters::bump(&self.stats.early_drops);
                true
            }
            _ => false,
        }
    }

    /// Kill `slot` if it is still live and unassured (it may have changed since it was
    /// picked).
    fn kill_unassured(&self, slot: u32) -> bool {
        let c = self.slab.lock(slot);
        if c.live() && !c.assured {
            self.kill_locked(slot, c);
            true
        } else {
            false
        }
    }

    /// The limit in force for `zone` (0: none).
    fn zone_limit(&self, zone: u16) -> u32 {
        match self.zones().own(zone) {
            Some(l) => l,
            None => self.default_zone_limit.load(Ordering::Relaxed),
        }
    }

    /// Give `zone` its own limit (`Some(0)`: unlimited), or take it away (`None`: the
    /// default applies). OVS's `ct-set-limits zone=N,limit=M` / `ct-del-limits zone=N`.
    /// Connections already over a lowered limit stay; new ones are refused.
    pub fn set_zone_limit(&self, zone: u16, limit: Option<u32>) {
        self.zones().set_own(zone, limit);
    }

    /// Set the limit of zones without their own (0: none): `ct-set-limits default=M`.
    pub fn set_default_zone_limit(&self, limit: u32) {
        self.default_zone_limit.store(limit, Ordering::Relaxed);
    }

    /// The limits in force and the limited zones' counts (`ct-get-limits`; a scan of the
    /// 65,536 zones: control path).
    pub fn zone_limits(&self) -> ZoneLimits {
        let z = self.zones();
        ZoneLimits {
            default: self.default_zone_limit.load(Ordering::Relaxed),
            zones: (0..=u16::MAX)
                .filter_map(|zone| z.own(zone).map(|l| (zone, (l, z.count(zone)))))
                .collect(),
        }
    }

    /// Connections now in `zone`.
    pub fn zone_count(&self, zone: u16) -> u32 {
        self.zones.get().map_or(0, |z| z.count(zone))
    }
}
