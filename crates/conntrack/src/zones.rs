//! Per-zone connection counts and limits: two arrays of 65,536 atomic words, made when
//! the tracker first creates a connection or is given a limit.

use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) struct Zones {
    pub count: Box<[AtomicU32]>,
    /// A zone's own limit plus one (0: none, the default applies).
    own: Box<[AtomicU32]>,
}

impl Zones {
    pub(crate) fn new() -> Zones {
        let words = || (0..=u16::MAX as usize).map(|_| AtomicU32::new(0)).collect();
        Zones {
            count: words(),
            own: words(),
        }
    }

    /// The zone's own limit, if it has one (0 = unlimited, as OVS's `limit=0`).
    pub(crate) fn own(&self, zone: u16) -> Option<u32> {
        match self.own[zone as usize].load(Ordering::Relaxed) {
            0 => None,
            v => Some(v - 1),
        }
    }

    pub(crate) fn set_own(&self, zone: u16, limit: Option<u32>) {
        let v = limit.map_or(0, |l| l.min(u32::MAX - 1) + 1);
        self.own[zone as usize].store(v, Ordering::Relaxed);
    }

    pub(crate) fn count(&self, zone: u16) -> u32 {
        self.count[zone as usize].load(Ordering::Relaxed)
    }
}
