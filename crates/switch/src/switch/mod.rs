//! [`Switch`]: the rule store shared by the datapath workers, programmed through
//! [`Request`]s, with every configuration change saved to the state file before it is
//! acknowledged, and rules expired by their idle and hard timeouts.

use crate::control::{reply, ControlSocket, Op, Request, Response};
use crate::state::StateFile;
use flowpath_datapath::Datapath;
use flowpath_flowsyntax::{
    format_dump_line, parse_flow, parse_flows_file, DumpStats, FlowCommand, ParsedFlow,
};
use flowpath_inspect::megaflows::CompiledFilter;
use flowpath_inspect::{trace_request, MegaflowFilter, RawMegaflow, TraceRequest, WorkerMegaflows};
use flowpath_pipeline::{
    now_ns, Applied, Backend, Change, GroupSpec, Pipeline, Removed, RuleError, RuleSpec, RuleStore,
    Selector,
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How a switch is set up.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Where the configured flows are kept; `None` keeps them in memory only.
    pub state: Option<PathBuf>,
    pub backend: Backend,
    /// How often rules are checked for expiry.
    pub expire_every: Duration,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            state: None,
            backend: Backend::TupleSpace,
            expire_every: Duration::from_millis(250),
        }
    }
}

/// Lets the control side ask every worker to credit its megaflow counters to the rules
/// now (for `dump` and idle timeouts), and wait until they have.
#[derive(Default)]
pub struct StatsSync {
    requested: AtomicU64,
    workers: Mutex<Vec<Arc<AtomicU64>>>,
    /// The number of the last megaflow dump asked for (0: none yet), its filter (while it
    /// runs), and the workers' answers.
    dump_gen: AtomicU64,
    dump_filter: Mutex<Option<Arc<CompiledFilter>>>,
    dumps: Mutex<Vec<MegaflowDump>>,
    /// One dump at a time.
    dumping: Mutex<()>,
}

/// One worker's answer to a dump request: its counts, and the megaflows the filter chose,
/// copied out but not yet formatted (the control thread formats them).
pub struct MegaflowDump {
    pub summary: WorkerMegaflows,
    pub raw: Vec<RawMegaflow>,
}

/// A worker's side of [`StatsSync`].
pub struct StatsTicket {
    sync: Arc<StatsSync>,
    done: Arc<AtomicU64>,
    seen: u64,
    dump_seen: u64,
}

impl StatsSync {
    pub fn register(self: &Arc<Self>) -> StatsTicket {
        let now = self.requested.load(Ordering::Acquire);
        let done = Arc::new(AtomicU64::new(now));
        self.workers.lock().unwrap().push(done.clone());
        StatsTicket {
            sync: self.clone(),
            done,
            seen: now,
            dump_seen: self.dump_gen.load(Ordering::Acquire),
        }
    }

    /// Ask every worker for its megaflows (as `filter` selects them) with a push, and wait
    /// (at most `timeout`) for their answers; `None` if some live worker did not answer.
    pub fn request_dump(
        &self,
        filter: Arc<CompiledFilter>,
        timeout: Duration,
    ) -> Option<Vec<MegaflowDump>> {
        let _one = self.dumping.lock().unwrap_or_else(|e| e.into_inner());
        self.dumps.lock().unwrap_or_else(|e| e.into_inner()).clear();
        *self.dump_filter.lock().unwrap_or_else(|e| e.into_inner()) = Some(filter);
        // Set before the push is asked for: a worker doing that push sees it.
        self.dump_gen.fetch_add(1, Ordering::AcqRel);
        let all = self.request_and_wait(timeout);
        *self.dump_filter.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let dumps = std::mem::take(&mut *self.dumps.lock().unwrap_or_else(|e| e.into_inner()));
        all.then_some(dumps)
    }

    /// Ask for a push and wait (at most `timeout`) until every live worker has done it.
    pub fn request_and_wait(&self, timeout: Duration) -> bool {
        let want = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + timeout;
        loop {
            let all = {
                let mut w = self.workers.lock().unwrap();
                // A worker that has gone away holds the only other reference no more.
                w.retain(|d| Arc::strong_count(d) > 1);
                w.iter().all(|d| d.load(Ordering::Acquire) >= want)
            };
            if all {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl StatsTicket {
    /// Has a push been asked for that this worker has not done yet? (One atomic load.)
    #[inline]
    pub fn pending(&self) -> bool {
        self.sync.requested.load(Ordering::Acquire) != self.seen
    }

    /// When a push is pending ([`StatsTicket::pending`]): the filter of a megaflow dump
    /// asked for with it, if one is.
    pub fn dump_wanted(&mut self) -> Option<Arc<CompiledFilter>> {
        let gen = self.sync.dump_gen.load(Ordering::Acquire);
        if gen == self.dump_seen {
            return None;
        }
        self.dump_seen = gen;
        self.sync.dump_filter.lock().ok()?.clone()
    }

    /// Hand this worker's dump over (before the push completes with [`StatsTicket::poll`]).
    pub fn deliver(&self, dump: MegaflowDump) {
        if let Ok(mut d) = self.sync.dumps.lock() {
            d.push(dump);
        }
    }

    /// Called by the worker between batches: one atomic load when nothing is asked.
    #[inline]
    pub fn poll(&mut self, dp: &mut Datapath) {
        let req = self.sync.requested.load(Ordering::Acquire);
        if req != self.seen {
            dp.push_rule_stats();
            self.seen = req;
            self.done.store(req, Ordering::Release);
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
    /// Changes applied by [`Switch::apply_batch`] and not yet in the state file, and when
    /// [`Switch::save_pending`] last wrote it.
    unsaved: AtomicBool,
    saved_at: Mutex<Instant>,
    /// Told about every rule removed by expiry or by [`Switch::apply_batch`] (the
    /// OpenFlow channel's FLOW_REMOVED).
    removal_listeners: Mutex<Vec<Arc<RemovalListener>>>,
}

/// Called with the rules one change removed (their counters final), and why.
pub type RemovalListener = dyn Fn(&[Removed]) + Send + Sync;

impl Switch {
    /// Set up a switch, restoring the flows saved in `cfg.state`.
    pub fn open(cfg: SwitchConfig) -> Result<Arc<Switch>, String> {
        let store = Arc::new(RuleStore::new(cfg.backend));
        let state = cfg.state.clone().map(StateFile::new);
        if let Some(st) = &state {
            let (specs, groups) = st.load_all().map_err(|e| e.to_string())?;
            if !specs.is_empty() || !groups.is_empty() {
                // Groups first: flows may name them.
                let mut changes: Vec<Change> = groups.into_iter().map(Change::AddGroup).collect();
                changes.push(Change::Replace(specs));
                store
                    .apply(changes)
                    .map_err(|e| format!("state file {}: {e}", st.path().display()))?;
            }
        }
        Ok(Arc::new(Switch {
            store,
            state,
            config: Mutex::new(()),
            stats: Arc::new(StatsSync::default()),
            cfg,
            hook: OnceLock::new(),
            unsaved: AtomicBool::new(false),
            saved_at: Mutex::new(Instant::now()),
            removal_listeners: Mutex::new(Vec::new()),
        }))
    }

    pub fn store(&self) -> &Arc<RuleStore> {
        &self.store
    }

    pub fn stats_sync(&self) -> &Arc<StatsSync> {
        &self.stats
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

    /// Carry out one control request.
    pub fn handle(&self, req: &Request) -> Response {
        match req.op {
            Op::Dump => self.dump(&req.text),
            Op::Stats => Response::error(
                "stats: this switch has no port workers (`flowpath switch --config` has)",
            ),
            Op::Trace => self.trace(&req.text),
            Op::Megaflows => self.megaflows(&req.text),
            op => self.configure(op, &req.text),
        }
    }

    /// `trace`: the request's packet through the rules as they are now.
    fn trace(&self, text: &str) -> Response {
        let req: TraceRequest = match serde_json::from_str(text) {
            Ok(r) => r,
            Err(e) => return Response::error(format!("trace: bad request: {e}")),
        };
        let snap = self.store.snapshot();
        match trace_request(&snap, &req) {
            Ok(t) => Response {
                lines: t.text().lines().map(str::to_string).collect(),
                version: snap.version(),
                data: serde_json::to_value(&t).ok(),
                ..Response::default()
            },
            Err(e) => Response::error(format!("trace: {e}")),
        }
    }

    /// `megaflows`: ask every worker for its cached megaflows (between two of its batches)
    /// and print those the filter selects.
    fn megaflows(&self, text: &str) -> Response {
        let filter: MegaflowFilter = if text.trim().is_empty() {
            MegaflowFilter::default()
        } else {
            match serde_json::from_str(text) {
                Ok(f) => f,
                Err(e) => return Response::error(format!("megaflows: bad request: {e}")),
            }
        };
        let compiled = match filter.compile() {
            Ok(c) => Arc::new(c),
            Err(e) => return Response::error(e),
        };
        let Some(mut dumps) = self
            .stats
            .request_dump(compiled.clone(), Duration::from_secs(5))
        else {
            return Response::error("megaflows: the workers did not answer within 5 s");
        };
        dumps.sort_by_key(|d| d.summary.worker);
        let mut lines = Vec::new();
        let mut workers = Vec::new();
        for mut d in dumps {
            if !compiled.wants_worker(d.summary.worker) {
                continue;
            }
            d.summary.shown = d.raw.len() as u64;
            lines.push(d.summary.summary());
            if !compiled.count_only {
                d.summary.flows = d.raw.iter().map(|r| r.record(d.summary.worker)).collect();
                lines.extend(d.summary.flows.iter().map(|r| format!("  {}", r.line())));
            }
            workers.push(d.summary);
        }
        let summary = if workers.is_empty() {
            "megaflows: no datapath workers (nothing is cached)".to_string()
        } else {
            String::new()
        };
        Response {
            summary,
            lines,
            version: self.store.version(),
            data: serde_json::to_value(&workers).ok(),
            ..Response::default()
        }
    }

    fn configure(&self, op: Op, text: &str) -> Response {
        let cmd = match op {
            Op::Add | Op::Replace => FlowCommand::Add,
            Op::Mod => FlowCommand::Modify,
            Op::ModStrict => FlowCommand::ModifyStrict,
            Op::Del => FlowCommand::Delete,
            Op::DelStrict => FlowCommand::DeleteStrict,
            Op::Dump | Op::Stats | Op::Trace | Op::Megaflows => unreachable!(),
        };
        let flows = match parse_flows_file(text, cmd) {
            Ok(f) => f,
            Err(e) => return Response::error(e.to_string()),
        };
        let changes = match op {
            Op::Add => flows.into_iter().map(|f| Change::Add(f.spec)).collect(),
            Op::Replace => vec![Change::Replace(flows.into_iter().map(|f| f.spec).collect())],
            Op::Mod | Op::ModStrict => {
                if flows.is_empty() {
                    return Response::error(format!("{}: no flow given", op.name()));
                }
                flows
                    .into_iter()
                    .map(|f| Change::Modify {
                        selector: selector(&f, op == Op::ModStrict),
                        actions: f.spec.actions,
                        goto: f.spec.goto,
                        write_actions: f.spec.write_actions,
                        clear_actions: f.spec.clear_actions,
                        reset_counts: f.spec.flags.reset_counts,
                    })
                    .collect()
            }
            Op::Del | Op::DelStrict => {
                if flows.is_empty() {
                    if op == Op::DelStrict {
                        return Response::error("del-strict: no flow given");
                    }
                    vec![Change::DeleteWhere(Selector::all())]
                } else {
                    flows
                        .into_iter()
                        .map(|f| Change::DeleteWhere(selector(&f, op == Op::DelStrict)))
                        .collect()
                }
            }
            Op::Dump | Op::Stats | Op::Trace | Op::Megaflows => unreachable!(),
        };
        let _cfg = self.config.lock().unwrap_or_else(|e| e.into_inner());
        let _change = self.rule_change();
        let before = self.store.snapshot();
        let done = match self.store.apply(changes) {
            Ok(d) => d,
            Err(e) => {
                return Response::error(format!("{}: refused, nothing changed: {e}", op.name()))
            }
        };
        if let Err(e) = self.save() {
            // Keep the running switch and the file in agreement: undo.
            let old: Vec<RuleSpec> = before.rules().map(|r| (*r.spec).clone()).collect();
            let _ = self.store.apply(vec![Change::Replace(old)]);
            return Response::error(format!(
                "{}: could not save the state file, nothing changed: {e}",
                op.name()
            ));
        }
        drop(_change);
        drop(_cfg);
        if !done.removed_rules.is_empty() {
            self.tell_removed(&done.removed_rules);
        }
        let n = self.store.snapshot().rules().count();
        Response {
            error: None,
            summary: format!(
                "{}: {} added, {} modified, {} removed; {n} flows installed (version {})",
                op.name(),
                done.added.len(),
                done.modified,
                done.removed,
                done.version
            ),
            lines: Vec::new(),
            version: done.version,
            data: None,
        }
    }

    /// Apply `changes` atomically (the same rule store, hook and lock as the control
    /// socket), leaving the state-file save for [`Switch::save_pending`]: the OpenFlow
    /// channel applies a burst of flow_mods as it reads them and saves once, at a barrier
    /// or when its input goes quiet, so a stream of 100,000 flow_mods is not 100,000 saves.
    /// The removal listeners hear about the rules it removed.
    pub fn apply_batch(&self, changes: Vec<Change>) -> Result<Applied, RuleError> {
        if changes.is_empty() {
            return Ok(Applied {
                version: self.store.version(),
                ..Applied::default()
            });
        }
        let mut done = {
            let _cfg = self.config.lock().unwrap_or_else(|e| e.into_inner());
            let _change = self.rule_change();
            let done = self.store.apply(changes)?;
            self.unsaved.store(true, Ordering::Release);
            done
        };
        let removed = std::mem::take(&mut done.removed_rules);
        if !removed.is_empty() {
            self.tell_removed(&removed);
        }
        Ok(done)
    }

    /// [`Switch::save_pending`], unless the last save was less than `gap` ago (then the
    /// next quiet moment saves): a client that sends a barrier after every flow_mod, as
    /// `ovs-ofctl add-flows` does, would otherwise rewrite the whole state file per flow.
    pub fn save_pending_within(&self, gap: Duration) -> std::io::Result<()> {
        let last = self
            .saved_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed();
        if last < gap {
            return Ok(());
        }
        self.save_pending()
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
        st.save_all(&specs, &groups)
    }

    fn dump(&self, text: &str) -> Response {
        let filter = if text.trim().is_empty() {
            Selector::all()
        } else {
            match parse_flow(text.trim(), FlowCommand::Delete) {
                Ok(f) => selector(&f, false),
                Err(e) => return Response::error(format!("dump: {e}")),
            }
        };
        // Counts reach rules when workers push their megaflow stats: ask for it now.
        self.stats.request_and_wait(Duration::from_secs(1));
        let snap = self.store.snapshot();
        Response {
            error: None,
            summary: String::new(),
            lines: dump_lines(&snap, &filter, now_ns()),
            version: snap.version(),
            data: None,
        }
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

    /// Run expiry every `expire_every` until `stop`.
    pub fn spawn_expiry(self: &Arc<Self>, stop: Arc<AtomicBool>) -> JoinHandle<()> {
        let sw = self.clone();
        std::thread::Builder::new()
            .name("flowpath-expiry".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(sw.cfg.expire_every);
                    sw.expire();
                }
            })
            .expect("spawn the expiry thread")
    }

    /// Serve control requests on `sock` until `stop` (then call `sock.wake()`).
    pub fn spawn_control(
        self: &Arc<Self>,
        sock: Arc<ControlSocket>,
        stop: Arc<AtomicBool>,
    ) -> JoinHandle<()> {
        let sw = self.clone();
        spawn_control_with(sock, stop, move |req| sw.handle(req))
    }
}

/// Serve control requests on `sock` with `handler` until `stop` (then call `sock.wake()`).
pub fn spawn_control_with(
    sock: Arc<ControlSocket>,
    stop: Arc<AtomicBool>,
    handler: impl Fn(&Request) -> Response + Send + 'static,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("flowpath-control".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match sock.accept() {
                    Ok(Some((req, mut s))) => {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let resp = handler(&req);
                        let _ = reply(&mut s, &resp);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        eprintln!("flowpath: control socket: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })
        .expect("spawn the control thread")
}

/// The selector a parsed flow means for mod/del/dump.
pub fn selector(f: &ParsedFlow, strict: bool) -> Selector {
    Selector {
        table: f.table_given.then_some(f.spec.table),
        matches: f.spec.matches,
        priority: strict.then_some(f.spec.priority),
        cookie: f.spec.cookie,
        cookie_mask: f.cookie_mask,
        out_port: None,
        out_group: None,
    }
}

/// `ovs-ofctl dump-flows` lines for the rules `filter` selects: by table, then highest
/// priority first, then oldest first.
pub fn dump_lines(snap: &Pipeline, filter: &Selector, now: u64) -> Vec<String> {
    let mut rules: Vec<_> = snap.rules().filter(|r| filter.selects(&r.spec)).collect();
    rules.sort_by_key(|r| (r.spec.table, std::cmp::Reverse(r.spec.priority), r.id));
    rules
        .into_iter()
        .map(|r| {
            let (packets, bytes) = r.counters.get();
            let last = r.counters.last_used_ns();
            let stats = DumpStats {
                packets,
                bytes,
                duration: Duration::from_nanos(now.saturating_sub(r.counters.added_ns)),
                idle_age: Some(Duration::from_nanos(now.saturating_sub(last))),
            };
            format_dump_line(&r.spec, &stats)
        })
        .collect()
}
