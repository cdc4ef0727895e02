//! `MissGuard`: the datapath's defence against miss storms and tuple-space explosion.
//!
//! Every miss is classified inline by the worker that received it (no upcall queue, so
//! nothing is ever held: a packet is classified now or dropped now). What the guard bounds:
//!
//! - **Slow-path cycles.** While the fast path has work (a batch had a cache hit within the
//!   last millisecond), upcalls may take at most `slow_path_share` of the worker's TSC
//!   time: a token bucket of cycles refilled at that share of elapsed time. With no hits
//!   anywhere (a cold start, a pure new-flow workload) nothing is starved and the budget
//!   does not bind.
//! - **Fairness between ingress ports.** The budget is shared equally by the ports that
//!   had misses in the last millisecond (a fluid deficit round robin): each such port's
//!   credit grows at `slow_path_share / active ports` of elapsed cycles, up to a burst of
//!   `quantum_cycles`, and each upcall's measured cost is taken from its port's credit. A
//!   port flooding new flows gets its share and no more, never the whole core, and the
//!   other ports' new flows still get theirs; its misses beyond that are dropped and
//!   counted (`miss_budget`, per port).
//! - **New masks per port.** A token bucket of masks per second per port. A megaflow whose
//!   mask would be a new subtable when the port has no mask token left is not cached: the
//!   packet is forwarded as the slow path decided (never misforwarded), counted
//!   `uncached`, and the port's next such packet pays the slow path again — inside its
//!   miss budget. That is the TSE defence that does not depend on the rule set.
//! - The megaflow cache's own limits (entries, dynamic flow limit, masks) live in
//!   [`crate::MegaflowCache`].

use flowpath_base::clock::tsc_hz;

/// How much of the miss path a worker allows (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct MissLimits {
    /// Largest share of the worker's cycles upcalls may take while hits are being served,
    /// in (0, 1]; 1.0 turns the budget off.
    pub slow_path_share: f64,
    /// Most credit a port holds (its burst after a quiet spell), in cycles: about 40–100
    /// upcalls, more than one batch's worth.
    pub quantum_cycles: u64,
    /// New subtables (masks) a port may create per second, with the same number as burst;
    /// 0 = no limit.
    pub new_masks_per_sec: u32,
    /// Cycle-fair polling: each poll round gives every port this many cycles of credit,
    /// and a port is received from only while its credit is positive (deficit round robin
    /// over the TSC time its batches took; see [`crate::Worker`]); 0 = plain round robin,
    /// one batch per port per round.
    pub poll_quantum_cycles: u64,
}

impl Default for MissLimits {
    fn default() -> Self {
        MissLimits {
            slow_path_share: 0.5,
            quantum_cycles: 100_000,
            new_masks_per_sec: 200,
            poll_quantum_cycles: 1_000,
        }
    }
}

impl MissLimits {
    /// No budget, no fairness, no mask rate (the datapath as if it had no guard).
    pub fn off() -> MissLimits {
        MissLimits {
            slow_path_share: 1.0,
            quantum_cycles: u64::MAX / 4,
            new_masks_per_sec: 0,
            poll_quantum_cycles: 0,
        }
    }

    /// The defaults without the slow-path budget: every miss is classified. For cost
    /// measurements (the bench's cost cases, the suite, the planner's check), which must
    /// see what each miss costs rather than how many the budget lets through.
    pub fn unbudgeted() -> MissLimits {
        MissLimits {
            slow_path_share: 1.0,
            ..MissLimits::default()
        }
    }

    /// Whether the slow-path budget binds at all.
    pub fn budgeted(&self) -> bool {
        self.slow_path_share < 1.0
    }
}

/// What the guard saw of one ingress port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortMissStats {
    /// Packets received on the port.
    pub packets: u64,
    /// Misses classified by the slow path.
    pub upcalls: u64,
    /// Misses dropped because the port's share of the slow path was spent.
    pub budget_drops: u64,
    /// Packets forwarded without caching their megaflow (new-mask rate or mask limit).
    pub uncached: u64,
    /// Of those, refused by the port's new-mask rate.
    pub mask_rate_refusals: u64,
    /// Subtables (masks) this port's misses created.
    pub masks_created: u64,
    /// Cycles the port's upcalls took.
    pub upcall_cycles: u64,
}

#[derive(Clone, Debug, Default)]
struct PortState {
    /// Credit in cycles (may go below zero by the last upcall's cost).
    credit: f64,
    credit_at: u64,
    /// TSC of the port's last batch with misses (it shares the budget for a window).
    miss_at: u64,
    /// New-mask tokens and when they were last refilled.
    mask_tokens: f64,
    mask_refill_at: u64,
    seen: bool,
    stats: PortMissStats,
}

/// Port numbers above this share one state (`MAX_TRACKED_PORT`).
const MAX_TRACKED_PORT: u32 = 1023;

/// The guard of one worker.
#[derive(Clone, Debug)]
pub struct MissGuard {
    limits: MissLimits,
    /// TSC of the last batch with a fast-path hit.
    last_hit_at: u64,
    /// The window in which a hit makes the budget bind (1 ms of TSC).
    window: u64,
    hz: f64,
    ports: Vec<PortState>,
}

impl MissGuard {
    pub fn new(limits: MissLimits) -> MissGuard {
        let hz = tsc_hz();
        let window = (hz / 1000.0) as u64;
        MissGuard {
            limits,
            last_hit_at: 0,
            window,
            hz,
            ports: Vec::new(),
        }
    }

    pub fn limits(&self) -> &MissLimits {
        &self.limits
    }

    /// Per-port counters of the ports seen, by port number.
    pub fn port_stats(&self) -> Vec<(u32, PortMissStats)> {
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.seen)
            .map(|(n, p)| (n as u32, p.stats))
            .collect()
    }

    pub fn reset_stats(&mut self) {
        for p in &mut self.ports {
            p.stats = PortMissStats::default();
        }
    }

    #[inline(always)]
    fn port(&mut self, in_port: u32) -> &mut PortState {
        let ix = in_port.min(MAX_TRACKED_PORT) as usize;
        if ix >= self.ports.len() {
            self.ports.resize_with(ix + 1, PortState::default);
        }
        let p = &mut self.ports[ix];
        p.seen = true;
        p
    }

    /// A batch of `n` packets arrived on `in_port` (counted per port).
    #[inline(always)]
    pub fn received(&mut self, in_port: u32, n: usize) {
        self.port(in_port).stats.packets += n as u64;
    }

    /// A batch at `now` had fast-path hits: the budget binds for the next window.
    #[inline(always)]
    pub fn hit_seen(&mut self, now: u64) {
        self.last_hit_at = now;
    }

    /// The start of a batch's upcalls on `in_port` at `now`: the port joins the ports
    /// sharing the budget and its credit grows by its share of the time since its last
    /// turn. Returns whether the budget binds for this batch.
    pub fn begin(&mut self, in_port: u32, now: u64) -> bool {
        if !self.limits.budgeted() {
            return false;
        }
        let window = self.window;
        self.port(in_port).miss_at = now;
        let active = self
            .ports
            .iter()
            .filter(|p| p.miss_at != 0 && now.saturating_sub(p.miss_at) < window)
            .count()
            .max(1);
        let rate = self.limits.slow_path_share.max(0.0) / active as f64;
        let burst = self.limits.quantum_cycles as f64;
        let binds = self.last_hit_at != 0 && now.saturating_sub(self.last_hit_at) < window;
        let p = self.port(in_port);
        if p.credit_at == 0 {
            p.credit = burst;
        } else if now > p.credit_at {
            p.credit = (p.credit + rate * (now - p.credit_at) as f64).min(burst);
        }
        p.credit_at = now;
        binds
    }

    /// May `in_port` run one more upcall in this batch (`binds` from [`MissGuard::begin`])?
    /// When not, the miss is counted as a budget drop.
    #[inline(always)]
    pub fn may_upcall(&mut self, in_port: u32, binds: bool) -> bool {
        let p = self.port(in_port);
        if binds && p.credit <= 0.0 {
            p.stats.budget_drops += 1;
            return false;
        }
        true
    }

    /// `upcalls` upcalls on `in_port` took `cycles` (taken from the port's credit when
    /// binding).
    #[inline(always)]
    pub fn charge(&mut self, in_port: u32, upcalls: u64, cycles: u64, binds: bool) {
        let p = self.port(in_port);
        p.stats.upcalls += upcalls;
        p.stats.upcall_cycles += cycles;
        if binds {
            p.credit -= cycles as f64;
        }
    }

    /// May `in_port` create a new subtable at `now` (its new-mask token bucket)?
    pub fn may_create_mask(&mut self, in_port: u32, now: u64) -> bool {
        let rate = self.limits.new_masks_per_sec as f64;
        let hz = self.hz;
        let p = self.port(in_port);
        if rate <= 0.0 {
            p.stats.masks_created += 1;
            return true;
        }
        if p.mask_refill_at == 0 {
            p.mask_tokens = rate;
        } else if now > p.mask_refill_at {
            p.mask_tokens = (p.mask_tokens + rate * (now - p.mask_refill_at) as f64 / hz).min(rate);
        }
        p.mask_refill_at = now;
        if p.mask_tokens >= 1.0 {
            p.mask_tokens -= 1.0;
            p.stats.masks_created += 1;
            true
        } else {
            p.stats.mask_rate_refusals += 1;
            false
        }
    }

    /// A packet of `in_port` was forwarded without caching its megaflow.
    #[inline(always)]
    pub fn uncached(&mut self, in_port: u32) {
        self.port(in_port).stats.uncached += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_hits_the_budget_does_not_bind() {
        let mut g = MissGuard::new(MissLimits::default());
        assert!(!g.begin(1, 1_000_000));
        for _ in 0..10_000 {
            assert!(g.may_upcall(1, false));
            g.charge(1, 1, 1_000_000, false);
        }
    }

    #[test]
    fn a_flooding_port_spends_its_burst_then_drops_and_counts() {
        let lim = MissLimits {
            quantum_cycles: 10_000,
            ..MissLimits::default()
        };
        let mut g = MissGuard::new(lim);
        let t = 10_000_000u64;
        g.hit_seen(t);
        let binds = g.begin(2, t);
        assert!(binds);
        let mut done = 0;
        for _ in 0..32 {
            if g.may_upcall(2, binds) {
                g.charge(2, 1, 1_000, binds);
                done += 1;
            }
        }
        assert_eq!(
            done, 10,
            "a burst of 10,000 cycles buys ten 1,000-cycle upcalls"
        );
        let st = g.port_stats();
        let (_, p2) = st.iter().find(|(n, _)| *n == 2).unwrap();
        assert_eq!((p2.upcalls, p2.budget_drops), (10, 22));
        // Another port's credit is its own: the flood did not take it.
        let binds = g.begin(1, t + 1);
        assert!(binds && g.may_upcall(1, binds));
    }

    /// Rounds of `round` cycles in which `ports` each try to spend far more than their
    /// share; returns the cycles each spent.
    fn flood(g: &mut MissGuard, ports: &[u32], rounds: u64, round: u64) -> Vec<u64> {
        let mut now = 1_000_000u64;
        let mut spent = vec![0u64; ports.len()];
        for _ in 0..rounds {
            now += round;
            g.hit_seen(now);
            for (k, &p) in ports.iter().enumerate() {
                let b = g.begin(p, now);
                while g.may_upcall(p, b) {
                    g.charge(p, 1, 500, b);
                    spent[k] += 500;
                }
            }
        }
        spent
    }

    #[test]
    fn one_port_gets_the_share_of_elapsed_time_and_no_more() {
        let lim = MissLimits {
            slow_path_share: 0.25,
            quantum_cycles: 100_000,
            new_masks_per_sec: 0,
            poll_quantum_cycles: 0,
        };
        let mut g = MissGuard::new(lim);
        let spent = flood(&mut g, &[7], 1_000, 10_000)[0] as f64;
        let elapsed = 1_000.0 * 10_000.0;
        assert!(spent <= 0.25 * elapsed + 100_000.0 + 500.0, "spent {spent}");
        assert!(spent >= 0.24 * elapsed, "spent only {spent}");
    }

    #[test]
    fn flooding_ports_share_the_budget_equally_whatever_their_poll_order() {
        let lim = MissLimits {
            slow_path_share: 0.5,
            quantum_cycles: 100_000,
            new_masks_per_sec: 0,
            poll_quantum_cycles: 0,
        };
        let mut g = MissGuard::new(lim);
        let spent = flood(&mut g, &[3, 4, 5], 2_000, 20_000);
        let total: u64 = spent.iter().sum();
        let elapsed = 2_000.0 * 20_000.0;
        assert!(
            (total as f64) <= 0.5 * elapsed + 3.0 * 100_500.0,
            "{spent:?}"
        );
        for s in &spent {
            let third = total as f64 / 3.0;
            assert!(
                (*s as f64 - third).abs() < 0.05 * third,
                "unfair: {spent:?}"
            );
        }
    }

    #[test]
    fn new_masks_are_rate_limited_per_port() {
        let lim = MissLimits {
            new_masks_per_sec: 5,
            ..MissLimits::default()
        };
        let mut g = MissGuard::new(lim);
        let now = 1_000u64;
        let ok = (0..20).filter(|_| g.may_create_mask(3, now)).count();
        assert_eq!(ok, 5, "the burst is one second's worth");
        // Another port has its own bucket.
        assert!(g.may_create_mask(4, now));
        // A second later the port has its tokens back.
        let later = now + g.hz as u64 + 1;
        assert!(g.may_create_mask(3, later));
        let (_, p3) = g.port_stats().into_iter().find(|(n, _)| *n == 3).unwrap();
        assert_eq!((p3.masks_created, p3.mask_rate_refusals), (6, 15));
    }
}
