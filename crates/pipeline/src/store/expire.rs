//! Rule timeouts: removing, in one atomic change, every rule whose hard timeout has
//! passed or that has been idle past its idle timeout, with why each went.

use super::change::{Change, RemovalReason, Removed};
use super::snapshots::RuleStore;
use crate::rule::{Rule, RuleError, RuleId};

impl RuleStore {
    /// [`RuleStore::expire`], with why each rule went (hard timeout when both passed).
    pub fn expire_removed(&self, now: u64) -> Result<Vec<Removed>, RuleError> {
        const NS: u64 = 1_000_000_000;
        Ok(self
            .expire(now)?
            .into_iter()
            .map(|rule| {
                let hard = rule.spec.hard_timeout as u64 * NS;
                let reason = if hard != 0 && now.saturating_sub(rule.counters.added_ns) >= hard {
                    RemovalReason::HardTimeout
                } else {
                    RemovalReason::IdleTimeout
                };
                Removed { rule, reason }
            })
            .collect())
    }

    /// Remove, in one atomic change, every rule whose hard timeout has passed or that has
    /// been idle longer than its idle timeout at `now` ([`crate::rule::now_ns`]). Returns
    /// the removed rules with their final counters. Idle time is measured from the last
    /// time counts were credited to the rule, so it lags by the datapath's stats-push period.
    pub fn expire(&self, now: u64) -> Result<Vec<Rule>, RuleError> {
        let snap = self.snapshot();
        let expired: Vec<Rule> = snap
            .rules()
            .filter(|r| r.expired_at(now))
            .cloned()
            .collect();
        if expired.is_empty() {
            return Ok(expired);
        }
        // A rule removed or changed meanwhile is not an error: delete what is still there.
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.current.load_full();
        drop(_w);
        let still: std::collections::HashSet<RuleId> = cur.rules().map(|r| r.id).collect();
        let changes = expired
            .iter()
            .filter(|r| still.contains(&r.id))
            .map(|r| Change::Delete(r.id))
            .collect();
        self.apply(changes)?;
        Ok(expired)
    }
}
