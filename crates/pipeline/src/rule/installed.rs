//! An installed rule: a spec with its identity and the packet and byte counters that
//! live as long as the rule, shared by every snapshot the rule is in; the clock that
//! times rule ages and idle times.

use super::ids::RuleId;
use super::spec::RuleSpec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Nanoseconds on a monotonic clock that starts when the process first asks for it: the
/// time base of rule ages and idle times (cheap to store in an atomic).
pub fn now_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    // Start at 1 so that 0 can mean "never".
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
        + 1
}

/// Packet and byte counters of one rule, and when it was added and last used; shared by
/// every snapshot the rule is in.
#[derive(Debug)]
pub struct RuleCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// [`now_ns`] when the rule was added.
    pub added_ns: u64,
    /// [`now_ns`] when counts were last credited (packets seen), or `added_ns`. Counts
    /// reach rules when the datapath pushes megaflow stats, so this lags by that period.
    pub last_used_ns: AtomicU64,
}

impl Default for RuleCounters {
    fn default() -> Self {
        let now = now_ns();
        RuleCounters {
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            added_ns: now,
            last_used_ns: AtomicU64::new(now),
        }
    }
}

impl RuleCounters {
    pub fn add(&self, packets: u64, bytes: u64) {
        if packets != 0 {
            self.add_at(packets, bytes, now_ns());
        }
    }

    /// [`RuleCounters::add`] at time `now` ([`now_ns`]): a caller crediting many rules
    /// reads the clock once (a read is a `clock_gettime` call, tens of nanoseconds; an
    /// evicted megaflow credits every rule on its path).
    pub fn add_at(&self, packets: u64, bytes: u64, now: u64) {
        if packets != 0 {
            self.packets.fetch_add(packets, Ordering::Relaxed);
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
            self.last_used_ns.store(now, Ordering::Relaxed);
        }
    }

    pub fn last_used_ns(&self) -> u64 {
        self.last_used_ns.load(Ordering::Relaxed)
    }

    pub fn get(&self) -> (u64, u64) {
        (
            self.packets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// An installed rule.
#[derive(Clone, Debug)]
pub struct Rule {
    pub id: RuleId,
    pub spec: Arc<RuleSpec>,
    pub counters: Arc<RuleCounters>,
}

impl Rule {
    /// Has this rule's hard timeout passed, or has it been idle past its idle timeout, at
    /// `now` ([`now_ns`])?
    pub fn expired_at(&self, now: u64) -> bool {
        const NS: u64 = 1_000_000_000;
        let hard = self.spec.hard_timeout as u64 * NS;
        let idle = self.spec.idle_timeout as u64 * NS;
        let c = &self.counters;
        (hard != 0 && now.saturating_sub(c.added_ns) >= hard)
            || (idle != 0 && now.saturating_sub(c.last_used_ns()) >= idle)
    }

    /// Bytes the rule's own allocations take (its spec with the action lists, and its
    /// counters), each with the shared count an `Arc` keeps beside it.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let arc = 2 * size_of::<usize>();
        let actions = self.spec.actions.capacity() + self.spec.write_actions.capacity();
        arc + size_of::<RuleSpec>()
            + actions * size_of::<flowpath_packet::Action>()
            + arc
            + size_of::<RuleCounters>()
    }

    /// The classifier order: higher priority first, then older (smaller id) first.
    #[inline]
    pub fn beats(&self, other: &Rule) -> bool {
        (self.spec.priority, std::cmp::Reverse(self.id))
            > (other.spec.priority, std::cmp::Reverse(other.id))
    }
}
