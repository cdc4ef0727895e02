//! Walking the slab: incremental expiry (a bounded number of slots per call, resuming
//! where the last call stopped), flush, dump, the summary and the counters.

use crate::conn::{Conn, SlotLock};
use crate::info::{proto_name, ConnInfo, CtStats, CtSummary};
use crate::table::Tracker;
use std::sync::atomic::Ordering;

impl Tracker {
    /// Visit at most `budget` slots, from where the last call stopped, and remove the
    /// connections among them idle past their timeout at `now_ms`; returns how many went.
    /// A full sweep of the table takes `slots / budget` calls. Calls from several threads
    /// at once: one sweeps, the others return 0.
    pub fn expire(&self, now_ms: u64, budget: usize) -> usize {
        let Ok(mut cursor) = self.cursor.try_lock() else {
            return 0;
        };
        let high = self.slab.high();
        if high == 0 {
            return 0;
        }
        let mut gone = 0;
        for _ in 0..budget.min(high as usize) {
            let slot = *cursor % high;
            *cursor = (slot + 1) % high;
            if let Some(c) = self.slab.try_get(slot) {
                if c.live() && c.expires_ms <= now_ms {
                    self.kill_locked(slot, c);
                    gone += 1;
                }
            }
        }
        self.stats.expired.fetch_add(gone as u64, Ordering::Relaxed);
        gone
    }

    /// Every live connection (a copy of each), in slot order: control path.
    fn each_live(&self, mut f: impl FnMut(u32, &Conn)) {
        for slot in 0..self.slab.high() {
            let Some(c) = self.slab.try_get(slot) else {
                continue;
            };
            if c.live() {
                let snap = *c;
                drop(c);
                f(slot, &snap);
            }
        }
    }

    /// Every connection (of one zone), sorted by original tuple.
    pub fn dump(&self, zone: Option<u16>) -> Vec<ConnInfo> {
        let now = self.now_ms();
        let mut v = Vec::new();
        self.each_live(|_, c| {
            if zone.is_none_or(|z| z == c.orig.zone) {
                v.push(ConnInfo {
                    orig: c.orig,
                    reply: c.reply,
                    zone: c.orig.zone,
                    mark: c.mark,
                    label: c.label,
                    tcp_state: c.tcp.map(|t| t.state),
                    timeout_s: (c.expires_ms.saturating_sub(now) / 1000) as u32,
                });
            }
        });
        v.sort_by_key(|c| c.orig);
        v
    }

    /// Remove every connection (of one zone); returns how many.
    pub fn flush(&self, zone: Option<u16>) -> usize {
        let mut victims = Vec::new();
        self.each_live(|slot, c| {
            if zone.is_none_or(|z| z == c.orig.zone) {
                victims.push(slot);
            }
        });
        victims.into_iter().filter(|&s| self.kill(s)).count()
    }

    /// Connections by protocol and state, and by zone (a scan: control path, for
    /// operators and metrics).
    pub fn summary(&self) -> CtSummary {
        let mut s = CtSummary::default();
        self.each_live(|_, c| {
            *s.by_state
                .entry((proto_name(c.orig.proto), c.state_name()))
                .or_default() += 1;
            *s.by_zone.entry(c.orig.zone).or_default() += 1;
            s.total += 1;
        });
        s
    }

    pub fn stats(&self) -> CtStats {
        self.stats.snapshot(self.len() as u64)
    }

    /// Connections in the table.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the table spends per connection when full: a slab slot plus the index's
    /// buckets shared out over `max_connections` (two entries each, at the load the index
    /// was sized for).
    pub fn bytes_per_connection(&self) -> usize {
        std::mem::size_of::<SlotLock>() + self.index.bytes() / self.max as usize
    }

    /// The most connections the table holds.
    pub fn capacity(&self) -> usize {
        self.max as usize
    }
}
