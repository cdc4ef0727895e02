//! [`Switch`]: the rule store shared by the datapath workers, programmed through
//! [`Request`](crate::control::Request)s, with every configuration change saved to the
//! state file before it is acknowledged, and rules expired by their idle and hard
//! timeouts.

mod ct_requests;
mod requests;
mod stats_sync;

pub use requests::{dump_lines, selector, spawn_control_with};
pub use stats_sync::{MegaflowDump, StatsSync, StatsTicket};

use crate::conntrack::{Census, CensusCell, Limits, CENSUS_EVERY};
use crate::journal::Journal;
use crate::state::StateFile;
use flowpath_conntrack::{CtConfig, Tracker};
use flowpath_flowsyntax::format_flow;
use flowpath_pipeline::{
    now_ns, Applied, Backend, Change, GroupSpec, Removed, RuleError, RuleSpec, RuleStore,
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How a switch is set up.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Where the configured flows are kept; `None` keeps them in memory only.
    pub state: Option<PathBuf>,
    pub backend: Backend,
    /// How often rules are checked for expiry (and idle connections swept).
    pub expire_every: Duration,
    /// The connection tracker's limits and timeouts (`[conntrack]`).
    pub conntrack: CtConfig,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            state: None,
            backend: Backend::TupleSpace,
            expire_every: Duration::from_millis(250),
            conntrack: CtConfig::default(),
        }
    }
}

/// Told about every rule change, around it: a cache outside the workers' own (the XDP
/// tier) stops answering in `before_apply` and resumes, for the new version, in
/// `after_apply`, which runs before the change is acknowledged. Both run with the switch's
/// configuration lock held, so changes do not interleave.
pub trait RuleChangeHook: Send + Sync {
    fn before_apply(&self);
    /// `version`: the rule store's version after the change (unchanged if it was refused).
    fn after_apply(&self, version: u64);
}

/// Calls `after_apply` with the store's version when dropped (on every way out).
struct RuleChange<'a> {
    hook: Option<&'a dyn RuleChangeHook>,
    store: &'a RuleStore,
}

impl Drop for RuleChange<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.hook {
            h.after_apply(self.store.version());
        }
    }
}

/// A journal this many flow lines long is always allowed; beyond it, one longer than the
/// state file is folded into a rewrite of the file (so the journal costs at most as much
/// again as the file, and its replay at start is short).
pub const JOURNAL_MIN: usize = 10_000;

/// What waits to be made durable, with the journal it goes to.
#[derive(Default)]
struct Pending {
    journal: Option<Journal>,
    /// Flow lines of additions applied and not yet in the journal.
    lines: Vec<String>,
    /// A change other than additions was applied: the next save rewrites the state file.
    rewrite: bool,
    /// Flows in the state file as last written.
    file_flows: usize,
}

/// Load the state file and its journal into `store`; true if a journal was there (replayed,
/// or left out as older or torn), so the caller rewrites the file.
fn restore(store: &RuleStore, st: &StateFile) -> Result<(Journal, bool), String> {
    let (specs, groups) = st.load_all().map_err(|e| e.to_string())?;
    let journal = Journal::for_state(st.path());
    let replay = journal.load(st.generation()).map_err(|e| e.to_string())?;
    if replay.torn_tail {
        eprintln!(
            "flowpath: journal {}: its last record was cut short (never acknowledged): left out",
            journal.path().display()
        );
    }
    let fail = |e: flowpath_pipeline::RuleError| format!("state file {}: {e}", st.path().display());
    if !specs.is_empty() || !groups.is_empty() {
        // Groups first: flows may name them.
        let mut changes: Vec<Change> = groups.into_iter().map(Change::AddGroup).collect();
        changes.push(Change::Replace(specs));
        store.apply(changes).map_err(fail)?;
    }
    let had_journal = journal.path().exists();
    if !replay.specs.is_empty() {
        store
            .apply(replay.specs.into_iter().map(Change::Add).collect())
            .map_err(|e| format!("journal {}: {e}", journal.path().display()))?;
    }
    Ok((journal, had_journal))
}

/// The switch's control side: rules, their persistence and expiry.
pub struct Switch {
    store: Arc<RuleStore>,
    state: Option<StateFile>,
    /// Serialises configuration changes with their saves, so the file follows the order
    /// in which changes were applied.
    config: Mutex<()>,
    stats: Arc<StatsSync>,
    cfg: SwitchConfig,
    hook: OnceLock<Arc<dyn RuleChangeHook>>,
    /// Changes applied by [`Switch::apply_batch`] and not yet in the state file (they may
    /// be in its journal), and when [`Switch::save_pending`] last wrote it.
    unsaved: AtomicBool,
    /// The state file's journal and what waits to go into it (taken after `config`).
    journal: Mutex<Pending>,
    saved_at: Mutex<Instant>,
    /// Told about every rule removed by expiry or by [`Switch::apply_batch`] (the
    /// OpenFlow channel's FLOW_REMOVED).
    removal_listeners: Mutex<Vec<Arc<RemovalListener>>>,
    /// The connection tracker every worker's datapath shares.
    tracker: Arc<Tracker>,
    /// The limits the tracker runs with (the config's, as `ct-limits` shows them).
    ct_limits: Mutex<Limits>,
    /// Connections per zone and state, counted every [`CENSUS_EVERY`] by the expiry thread.
    census: Arc<CensusCell>,
}

/// Called with the rules one change removed (their counters final), and why.
pub type RemovalListener = dyn Fn(&[Removed]) + Send + Sync;

impl Switch {
    /// Set up a switch, restoring the flows saved in `cfg.state`.
    pub fn open(cfg: SwitchConfig) -> Result<Arc<Switch>, String> {
        let store = Arc::new(RuleStore::new(cfg.backend));
        let state = cfg.state.clone().map(StateFile::new);
        let (journal, replayed) = match &state {
            Some(st) => {
                let (j, replayed) = restore(&store, st)?;
                (Some(j), replayed)
            }
            None => (None, false),
        };
        let ct_limits = Limits {
            max_connections: cfg.conntrack.max_connections,
            zone_limits: cfg.conntrack.zone_limits.clone(),
            default_zone_limit: cfg.conntrack.default_zone_limit,
        };
        let file_flows = store.snapshot().rules().count();
        let sw = Arc::new(Switch {
            tracker: Arc::new(Tracker::new(cfg.conntrack.clone())),
            ct_limits: Mutex::new(ct_limits),
            census: Arc::new(CensusCell::default()),
            store,
            state,
            config: Mutex::new(()),
            stats: Arc::new(StatsSync::default()),
            cfg,
            hook: OnceLock::new(),
            unsaved: AtomicBool::new(false),
            saved_at: Mutex::new(Instant::now()),
            removal_listeners: Mutex::new(Vec::new()),
            journal: Mutex::new(Pending {
                journal,
                file_flows,
                ..Pending::default()
            }),
        });
        if replayed {
            // Fold the journal into the state file, so that it starts again empty.
            let _cfg = sw.config.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = sw.save() {
                let path = sw.state.as_ref().map(|st| st.path().display().to_string());
                return Err(format!("state file {}: {e}", path.unwrap_or_default()));
            }
        }
        Ok(sw)
    }

    pub fn store(&self) -> &Arc<RuleStore> {
        &self.store
    }

    pub fn stats_sync(&self) -> &Arc<StatsSync> {
        &self.stats
    }

    /// The connection tracker; every worker's datapath is given it before it runs.
    pub fn tracker(&self) -> &Arc<Tracker> {
        &self.tracker
    }

    /// The latest per-zone and per-state count of the tracker's connections.
    pub fn ct_census(&self) -> &Arc<CensusCell> {
        &self.census
    }

    /// Remove idle connections (a bounded number per call, so a sweep never holds the
    /// table long), and count the connections per zone and state when `census` says.
    pub fn sweep_connections(&self, census: bool) -> usize {
        /// Connections one call of the tracker's expiry removes at most; a sweep calls it
        /// again while it removes that many, up to `ROUNDS` times.
        const BUDGET: usize = 4096;
        const ROUNDS: usize = 16;
        let mut gone = 0;
        for _ in 0..ROUNDS {
            let n = self.tracker.expire(self.tracker.now_ms(), BUDGET);
            gone += n;
            if n < BUDGET {
                break;
            }
        }
        if census {
            self.census.set(Census::take(&self.tracker));
        }
        gone
    }

    /// Have `hook` called around every rule change from now on (once; false if a hook was
    /// already set).
    pub fn set_rule_change_hook(&self, hook: Arc<dyn RuleChangeHook>) -> bool {
        let _cfg = self.config.lock().unwrap_or_else(|e| e.into_inner());
        self.hook.set(hook).is_ok()
    }

    /// Start a rule change (call with the config lock held): `before_apply` now,
    /// `after_apply` when the returned guard is dropped.
    fn rule_change(&self) -> RuleChange<'_> {
        let hook = self.hook.get().map(|h| &**h);
        if let Some(h) = hook {
            h.before_apply();
        }
        RuleChange {
            hook,
            store: &self.store,
        }
    }

    /// Apply `changes` atomically (the same rule store, hook and lock as the control
    /// socket), leaving the save for [`Switch::make_durable`] (at a barrier: additions are
    /// appended to the journal) and [`Switch::save_pending`] (when the input goes quiet:
    /// the state file is rewritten): the OpenFlow channel applies a burst of flow_mods as
    /// it reads them, so a stream of 100,000 flow_mods is not 100,000 saves.
    /// The removal listeners hear about the rules it removed.
    pub fn apply_batch(&self, changes: Vec<Change>) -> Result<Applied, RuleError> {
        if changes.is_empty() {
            return Ok(Applied {
                version: self.store.version(),
                ..Applied::default()
            });
        }
        // Additions go to the journal at the next barrier; anything else rewrites the file.
        let journal_lines = (self.state.is_some()
            && changes.iter().all(|c| matches!(c, Change::Add(_))))
        .then(|| {
            changes
                .iter()
                .filter_map(|c| match c {
                    Change::Add(s) => Some(format_flow(s)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        });
        let mut done = {
            let _cfg = self.config.lock().unwrap_or_else(|e| e.into_inner());
            let _change = self.rule_change();
            let done = self.store.apply(changes)?;
            let mut j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
            match journal_lines {
                Some(lines) => j.lines.extend(lines),
                None => j.rewrite = true,
            }
            self.unsaved.store(true, Ordering::Release);
            done
        };
        let removed = std::mem::take(&mut done.removed_rules);
        if !removed.is_empty() {
            self.tell_removed(&removed);
        }
        Ok(done)
    }

    /// Make every change [`Switch::apply_batch`] applied durable before returning (an
    /// OpenFlow barrier): additions are appended to the state file's journal and flushed
    /// to disk; other changes, or a journal grown longer than the state file (and
    /// [`JOURNAL_MIN`]), rewrite the state file. Without a state file there is nothing to do.
    pub fn make_durable(&self) -> std::io::Result<()> {
        if !self.unsaved.load(Ordering::Acquire) {
            return Ok(());
        }
        let _cfg = self.config.lock().unwrap_or_else(|e| e.into_inner());
        let Some(st) = &self.state else {
            return Ok(());
        };
        let mut guard = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        let p = &mut *guard;
        if p.lines.is_empty() && !p.rewrite {
            return Ok(());
        }
        let journal = p.journal.as_mut().expect("a state file has a journal");
        let long = journal.lines() + p.lines.len() > JOURNAL_MIN.max(p.file_flows);
        if !p.rewrite && !long {
            match journal.append(st.generation(), &p.lines) {
                Ok(()) => {
                    p.lines.clear();
                    return Ok(());
                }
                Err(e) => eprintln!(
                    "flowpath: journal {}: {e}; rewriting the state file instead",
                    journal.path().display()
                ),
            }
        }
        drop(guard);
        self.unsaved.store(false, Ordering::Release);
        if let Err(e) = self.save() {
            self.unsaved.store(true, Ordering::Release);
            return Err(e);
        }
        *self.saved_at.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        Ok(())
    }

    /// Save the state file if [`Switch::apply_batch`] changed rules since the last save.
    pub fn save_pending(&self) -> std::io::Result<()> {
        if !self.unsaved.load(Ordering::Acquire) {
            return Ok(());
        }
        let _cfg = self.config.lock().unwrap_or_else(|e| e.into_inner());
        if self.unsaved.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.save() {
                self.unsaved.store(true, Ordering::Release);
                return Err(e);
            }
            *self.saved_at.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
        Ok(())
    }

    /// Hear about every rule removed by expiry or [`Switch::apply_batch`] from now on.
    pub fn on_removed(&self, listener: Arc<RemovalListener>) {
        self.removal_listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(listener);
    }

    fn tell_removed(&self, removed: &[Removed]) {
        let ls = self
            .removal_listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for l in ls {
            l(removed);
        }
    }

    /// Save the current rules (call with the config lock held).
    fn save(&self) -> std::io::Result<()> {
        let Some(st) = &self.state else {
            return Ok(());
        };
        let snap = self.store.snapshot();
        let specs: Vec<&RuleSpec> = snap.rules().map(|r| &*r.spec).collect();
        let mut groups: Vec<&GroupSpec> = snap.groups().iter().map(|g| &*g.spec).collect();
        groups.sort_by_key(|g| g.id);
        st.save_all(&specs, &groups)?;
        // The file now holds everything the journal did.
        let mut p = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        p.lines.clear();
        p.rewrite = false;
        p.file_flows = specs.len();
        if let Some(j) = p.journal.as_mut() {
            if let Err(e) = j.remove() {
                // Harmless: it names an older generation, so it is not replayed.
                eprintln!("flowpath: removing {}: {e}", j.path().display());
            }
        }
        Ok(())
    }

    /// Remove rules whose timeouts have passed (saving the new set); returns how many.
    pub fn expire(&self) -> usize {
        let now = now_ns();
        let snap = self.store.snapshot();
        if !snap
            .rules()
            .any(|r| r.spec.idle_timeout != 0 || r.spec.hard_timeout != 0)
        {
            return 0;
        }
        // Idle times must see the latest counts.
        if snap.rules().any(|r| r.spec.idle_timeout != 0) {
            self.stats.request_and_wait(Duration::from_millis(200));
        }
        let _cfg = self.config.lock().unwrap_or_else(|e| e.into_inner());
        // Only a pass that will remove something is a rule change (the XDP tier stops
        // answering for its duration).
        if !self.store.snapshot().rules().any(|r| r.expired_at(now)) {
            return 0;
        }
        let _change = self.rule_change();
        match self.store.expire_removed(now) {
            Ok(gone) if !gone.is_empty() => {
                if let Err(e) = self.save() {
                    eprintln!("flowpath: saving the state after expiring flows: {e}");
                }
                self.tell_removed(&gone);
                gone.len()
            }
            _ => 0,
        }
    }

    /// Run expiry of rules and idle connections every `expire_every` until `stop`, and
    /// count the connections per zone and state every [`CENSUS_EVERY`]; give memory that
    /// rule changes freed back to the kernel (`flowpath_pipeline::memory::give_back`).
    pub fn spawn_expiry(self: &Arc<Self>, stop: Arc<AtomicBool>) -> JoinHandle<()> {
        let sw = self.clone();
        std::thread::Builder::new()
            .name("flowpath-expiry".into())
            .spawn(move || {
                let mut counted: Option<Instant> = None;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(sw.cfg.expire_every);
                    sw.expire();
                    let census = counted.is_none_or(|t| t.elapsed() >= CENSUS_EVERY);
                    if census {
                        counted = Some(Instant::now());
                    }
                    sw.sweep_connections(census);
                    // Off the datapath threads: hand back what big rule changes freed.
                    flowpath_pipeline::memory::give_back();
                }
            })
            .expect("spawn the expiry thread")
    }
}
