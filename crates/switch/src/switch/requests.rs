//! The control socket's requests as the [`Switch`] answers them: flow changes in
//! `ovs-ofctl` syntax (applied and saved together, or not at all), `dump`, `trace` and
//! `megaflows`; and the thread that serves them.

use super::Switch;
use crate::control::{ControlSocket, Op, Request, Response};
use flowpath_flowsyntax::{
    format_dump_line, parse_flow, parse_flows_file, DumpStats, FlowCommand, ParsedFlow,
};
use flowpath_inspect::{trace_request, MegaflowFilter, TraceRequest};
use flowpath_pipeline::{now_ns, Change, Pipeline, RuleSpec, Selector};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

impl Switch {
    /// Carry out one control request.
    pub fn handle(&self, req: &Request) -> Response {
        match req.op {
            Op::Dump => self.dump(&req.text),
            Op::Stats => Response::error(
                "stats: this switch has no port workers (`flowpath switch --config` has)",
            ),
            Op::Trace => self.trace(&req.text),
            Op::Megaflows => self.megaflows(&req.text),
            Op::CtDump | Op::CtFlush | Op::CtStats | Op::CtLimits => {
                self.conntrack(req.op, &req.text)
            }
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

    /// A flow change: parse it, apply it, save it; on a failed save, undo it.
    fn configure(&self, op: Op, text: &str) -> Response {
        match changes(op, text) {
            Ok(changes) => self.apply_and_save(op, changes),
            Err(e) => Response::error(e),
        }
    }

    /// Apply `changes` and save the state file before answering; a change the file
    /// cannot take is undone, so the running switch and the file agree.
    fn apply_and_save(&self, op: Op, changes: Vec<Change>) -> Response {
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
        let summary = format!(
            "{}: {} added, {} modified, {} removed; {n} flows installed (version {})",
            op.name(),
            done.added.len(),
            done.modified,
            done.removed,
            done.version
        );
        let version = done.version;
        // The store noted the batch when it applied it, and a trim may have come before
        // the save and these were freed: note it again now that they are.
        let churn = done.added.len() + done.modified + done.removed;
        drop((done, before));
        flowpath_pipeline::memory::note_churn(churn);
        Response {
            error: None,
            summary,
            lines: Vec::new(),
            version,
            data: None,
        }
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

/// The rule store changes a flow request's text asks for (an error says why none).
fn changes(op: Op, text: &str) -> Result<Vec<Change>, String> {
    let cmd = match op {
        Op::Add | Op::Replace => FlowCommand::Add,
        Op::Mod => FlowCommand::Modify,
        Op::ModStrict => FlowCommand::ModifyStrict,
        Op::Del => FlowCommand::Delete,
        Op::DelStrict => FlowCommand::DeleteStrict,
        _ => unreachable!("not a flow change"),
    };
    let flows = parse_flows_file(text, cmd).map_err(|e| e.to_string())?;
    Ok(match op {
        Op::Add => flows.into_iter().map(|f| Change::Add(f.spec)).collect(),
        Op::Replace => vec![Change::Replace(flows.into_iter().map(|f| f.spec).collect())],
        Op::Mod | Op::ModStrict => {
            if flows.is_empty() {
                return Err(format!("{}: no flow given", op.name()));
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
                    return Err("del-strict: no flow given".into());
                }
                vec![Change::DeleteWhere(Selector::all())]
            } else {
                flows
                    .into_iter()
                    .map(|f| Change::DeleteWhere(selector(&f, op == Op::DelStrict)))
                    .collect()
            }
        }
        _ => unreachable!("not a flow change"),
    })
}

/// Serve control requests on `sock` with `handler` until `stop` (then call `sock.wake()`),
/// within the socket's [`Limits`](crate::control::Limits) (see [`crate::control_server`]).
pub fn spawn_control_with(
    sock: Arc<ControlSocket>,
    stop: Arc<AtomicBool>,
    handler: impl Fn(&Request) -> Response + Send + 'static,
) -> JoinHandle<()> {
    crate::control_server::spawn(sock, stop, handler)
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
