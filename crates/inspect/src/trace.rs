//! `flowpath trace`: one packet's walk through the tables, like `ovs-appctl ofproto/trace`:
//! per table the rule it met, the actions as they accumulate, what they changed in the
//! key, the goto; then the megaflow the datapath would install and the final actions.
//!
//! The walk is [`Pipeline::translate_traced`], the slow path's own, so a trace always
//! tells what the datapath does. A `ct(table=T)` starts another pass, traced after the
//! first like `ofproto/trace --ct-next` (the `ct_state` of each from the request's
//! `ct_next`, see [`crate::ctnext`]), at most [`MAX_PASSES`] in all.

use crate::ctnext::{
    nat_note, parse_ct_next, recirculations, Recirculation, DEFAULT_CT_NEXT, MAX_PASSES,
};
use crate::fields::{ct_state_flags, format_key, key_fields};
use crate::hex::parse_hex;
use crate::render::{describe_ending, format_action_list, format_megaflow_match, sent_to};
use flowpath_flowsyntax::{format_actions, format_match, parse_flow, FlowCommand};
use flowpath_packet::parse::{parse, ParseOptions};
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_pipeline::{Pipeline, TableVisit};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What to trace: a packet described by flow-syntax match fields, or a frame's bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceInput {
    /// `in_port=1,tcp,nw_src=10.0.0.1,tp_dst=80`: fields not given are zero.
    Flow(String),
    /// A whole Ethernet frame, in hex.
    Packet(String),
}

/// A trace request (also the control socket's `trace` request, as JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceRequest {
    pub input: TraceInput,
    /// The ingress port for a frame, or for a flow that gives no `in_port` (default 1).
    #[serde(default)]
    pub in_port: Option<u32>,
    /// `--ct-next`: the `ct_state` flags each recirculated pass gets, in the order the
    /// passes are traced (`trk,new` or `+trk+new`); when they run out, `trk,new`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ct_next: Vec<String>,
}

impl TraceRequest {
    /// A request for `input` on the default port, with no `--ct-next` flags.
    pub fn new(input: TraceInput) -> TraceRequest {
        TraceRequest {
            input,
            in_port: None,
            ct_next: Vec::new(),
        }
    }
}

/// The port a packet is traced on when nothing says otherwise.
pub const DEFAULT_IN_PORT: u32 = 1;

/// A rule as a trace shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceRule {
    pub priority: u16,
    pub cookie: u64,
    /// The match in flow syntax (`priority=...` first, as `dump-flows` prints it).
    #[serde(rename = "match")]
    pub matches: String,
    pub actions: String,
}

/// One table the packet met.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceStep {
    pub table: u8,
    /// `None`: no rule matched (table-miss: the packet is dropped here).
    pub rule: Option<TraceRule>,
    /// Fields the rule's actions changed, as they are now (`nw_ttl=63`).
    pub set: Vec<String>,
    /// Every action collected so far, in execution order.
    pub actions_so_far: String,
    /// The table the rule sends the packet to next.
    pub goto: Option<u8>,
    /// The tables the rule's `ct(table=T)` actions recirculate the packet to, after the
    /// connection tracker (each a pass of its own; the actions after a `ct` run on the
    /// packet as it was before tracking).
    #[serde(default)]
    pub recirculate: Vec<u8>,
    /// What the rule's `ct` actions with NAT would rewrite (a trace does not run NAT).
    #[serde(default)]
    pub nat: Vec<String>,
}

/// A whole trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// The packet's key in flow syntax (what the tables see).
    pub flow: String,
    /// The parser's drop reason: the packet never reached the tables.
    pub parse_drop: Option<String>,
    /// The rule set version traced against.
    pub rule_version: u64,
    pub steps: Vec<TraceStep>,
    /// The megaflow the datapath would install (flow syntax, masked fields as `value/mask`).
    pub megaflow: Option<String>,
    /// The final actions (`drop` when none).
    pub actions: String,
    /// What happens to the packet, in words.
    pub verdict: String,
    /// Whether the packet is dropped (sent nowhere).
    pub dropped: bool,
    /// The passes after this one (the first): one per `ct(table=T)` met, first in first
    /// traced, as OVS's trace takes them.
    #[serde(default)]
    pub passes: Vec<TracePass>,
    /// Recirculations left untraced: the trace stopped at [`MAX_PASSES`] passes.
    #[serde(default)]
    pub untraced: usize,
}

/// A pass after a `ct(table=T)`: the packet back from the tracker (not run: its
/// `ct_state` is the request's next `ct_next`), through the tables from table T.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TracePass {
    /// Its number: 2 for the first recirculation.
    pub pass: usize,
    /// The pass whose actions recirculated it, and the table whose rule had the `ct`.
    pub from_pass: usize,
    pub from_table: u8,
    /// The `ct` action, in flow syntax.
    pub ct: String,
    /// The table it resumes in.
    pub table: u8,
    /// The `ct_state` it was given (`+new+trk`).
    pub ct_state: String,
    /// Whether that is the default (`trk,new`: no `ct_next` flags were left).
    pub default_ct_state: bool,
    pub ct_zone: u16,
    /// What the `ct`'s NAT would rewrite (not simulated).
    pub nat: Option<String>,
    /// The key it starts with, in flow syntax.
    pub flow: String,
    pub steps: Vec<TraceStep>,
    pub megaflow: Option<String>,
    pub actions: String,
    pub verdict: String,
    pub dropped: bool,
}

/// Turn a request into a key (or the parse drop of its frame); an error names what is
/// wrong with the request (the flow syntax's column, the hex digit's position).
pub fn resolve(req: &TraceRequest) -> Result<Result<FlowKey, String>, String> {
    match &req.input {
        TraceInput::Flow(text) => {
            let f = parse_flow(text, FlowCommand::Delete).map_err(|e| e.to_string())?;
            let m = &f.spec.matches;
            if m.has_ranges() {
                return Err(
                    "a packet has one port, not a range: give tp_src/tp_dst exactly".into(),
                );
            }
            let mut key = m.value;
            if m.mask.get(Field::InPort) == 0 {
                key.set(
                    Field::InPort,
                    req.in_port.unwrap_or(DEFAULT_IN_PORT) as u128,
                );
            }
            Ok(Ok(key))
        }
        TraceInput::Packet(hex) => {
            let frame = parse_hex(hex)?;
            let mut key = FlowKey::ZERO;
            let in_port = req.in_port.unwrap_or(DEFAULT_IN_PORT);
            Ok(parse(&frame, in_port, &ParseOptions::default(), &mut key)
                .map(|_| key)
                .map_err(|r| r.name().to_string()))
        }
    }
}

/// [`resolve`] then [`trace_passes`] with the request's `ct_next` flags (a parse drop is
/// a trace with no steps); bad flags are an error that quotes them.
pub fn trace_request(pipeline: &Pipeline, req: &TraceRequest) -> Result<Trace, String> {
    let ct_next = req
        .ct_next
        .iter()
        .map(|f| parse_ct_next(f))
        .collect::<Result<Vec<u8>, String>>()?;
    Ok(match resolve(req)? {
        Ok(key) => trace_passes(pipeline, &key, &ct_next),
        Err(drop) => Trace {
            flow: match &req.input {
                TraceInput::Flow(t) | TraceInput::Packet(t) => t.clone(),
            },
            parse_drop: Some(drop.clone()),
            rule_version: pipeline.version(),
            steps: Vec::new(),
            megaflow: None,
            actions: "drop".into(),
            verdict: format!("dropped by the parser: {drop} (it never reaches the tables)"),
            dropped: true,
            passes: Vec::new(),
            untraced: 0,
        },
    })
}

/// Trace `key` through `pipeline`, and its recirculations with the default `ct_state`.
pub fn trace(pipeline: &Pipeline, key: &FlowKey) -> Trace {
    trace_passes(pipeline, key, &[])
}

/// Trace `key` through `pipeline`, then every pass its `ct(table=T)` actions start, first
/// in first traced (OVS's order), each with the next of `ct_next` as its `ct_state`
/// ([`DEFAULT_CT_NEXT`] when they run out), at most [`MAX_PASSES`] passes in all.
pub fn trace_passes(pipeline: &Pipeline, key: &FlowKey, ct_next: &[u8]) -> Trace {
    let (first, recircs) = walk(pipeline, key);
    let mut queue: VecDeque<(usize, u8, Recirculation)> =
        recircs.into_iter().map(|(t, r)| (1, t, r)).collect();
    let mut flags = ct_next.iter().copied();
    let mut passes = Vec::new();
    while passes.len() + 1 < MAX_PASSES {
        let Some((from_pass, from_table, r)) = queue.pop_front() else {
            break;
        };
        let next = flags.next();
        let state = next.unwrap_or(DEFAULT_CT_NEXT);
        let (w, more) = walk(pipeline, &r.resumed_key(state));
        let pass = passes.len() + 2;
        queue.extend(more.into_iter().map(|(t, m)| (pass, t, m)));
        passes.push(TracePass {
            pass,
            from_pass,
            from_table,
            ct: format_action_list(&[Action::Ct(r.ct)]),
            table: r.table,
            ct_state: ct_state_flags(state),
            default_ct_state: next.is_none(),
            ct_zone: r.zone(),
            nat: r.nat_note(),
            flow: w.flow,
            steps: w.steps,
            megaflow: w.megaflow,
            actions: w.actions,
            verdict: w.verdict,
            dropped: w.dropped,
        });
    }
    Trace {
        flow: first.flow,
        parse_drop: None,
        rule_version: pipeline.version(),
        steps: first.steps,
        megaflow: first.megaflow,
        actions: first.actions,
        verdict: first.verdict,
        dropped: first.dropped,
        passes,
        untraced: queue.len(),
    }
}

/// One pass as a trace shows it.
struct Walk {
    flow: String,
    steps: Vec<TraceStep>,
    megaflow: Option<String>,
    actions: String,
    verdict: String,
    dropped: bool,
}

/// One pass of `key` through the tables, and the recirculations its actions start (each
/// with the table of the rule that added its `ct`).
fn walk(pipeline: &Pipeline, key: &FlowKey) -> (Walk, Vec<(u8, Recirculation)>) {
    let mut visits: Vec<TableVisit> = Vec::new();
    let tr = pipeline.translate_traced(key, |v| visits.push(*v));
    let steps = visits
        .iter()
        .map(|v| {
            let rule = v.rule.map(|r| pipeline.rule(r));
            TraceStep {
                table: v.table,
                rule: rule.map(|r| TraceRule {
                    priority: r.spec.priority,
                    cookie: r.spec.cookie,
                    matches: format_match(&r.spec),
                    actions: format_actions(&r.spec),
                }),
                set: changed(&v.key_before, &v.key_after),
                actions_so_far: format_action_list(&tr.actions[..v.actions_after]),
                goto: rule.and_then(|r| r.spec.goto),
                recirculate: rule.map_or_else(Vec::new, |r| recirculated_tables(&r.spec.actions)),
                nat: rule.map_or_else(Vec::new, |r| nat_notes(&r.spec.actions)),
            }
        })
        .collect();
    let recircs = recirculations(key, &tr.actions)
        .into_iter()
        .map(|r| {
            let from = visits
                .iter()
                .find(|v| v.actions_after > r.at)
                .map_or(0, |v| v.table);
            (from, r)
        })
        .collect();
    let in_port = key.get(Field::InPort) as u32;
    let walk = Walk {
        flow: format_key(key),
        steps,
        megaflow: Some(format_megaflow_match(&key.and(&tr.mask), &tr.mask)),
        actions: format_action_list(&tr.actions),
        verdict: describe_ending(&tr.actions, tr.ending, in_port),
        dropped: sent_to(&tr.actions, in_port).is_empty(),
    };
    (walk, recircs)
}

/// The tables the `ct(table=T)` actions among `actions` send the packet to.
fn recirculated_tables(actions: &[Action]) -> Vec<u8> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Ct(id) => id.spec().table,
            _ => None,
        })
        .collect()
}

/// What the `ct` actions with NAT among `actions` would do, in words.
fn nat_notes(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Ct(id) => nat_note(id.spec()),
            _ => None,
        })
        .collect()
}

/// Fields whose value differs after the actions (or that appeared, e.g. a pushed VLAN).
fn changed(before: &FlowKey, after: &FlowKey) -> Vec<String> {
    let old = key_fields(before);
    key_fields(after)
        .into_iter()
        .filter(|(n, v)| !old.iter().any(|(m, w)| m == n && w == v))
        .map(|(n, v)| format!("{n}={v}"))
        .collect()
}

impl Trace {
    /// The trace for people, `ofproto/trace` style: the first pass, then each
    /// recirculated pass under its own heading.
    pub fn text(&self) -> String {
        let mut s = format!("Flow: {}\n", self.flow);
        if let Some(d) = &self.parse_drop {
            s.push_str(&format!(
                "\nParse: dropped ({d}): the packet never reaches the tables\n"
            ));
        }
        write_pass(
            &mut s,
            &self.steps,
            self.megaflow.as_deref(),
            &self.actions,
            &self.verdict,
        );
        for p in &self.passes {
            p.write(&mut s);
        }
        if self.untraced > 0 {
            s.push_str(&format!(
                "\n{} more recirculation(s) not traced: a trace follows at most {MAX_PASSES} passes\n",
                self.untraced
            ));
        }
        s
    }
}

impl TracePass {
    /// `Pass N (recirculated to table T, ct_state=..., ct_zone=Z)`, where it came from,
    /// then the pass as the first one prints.
    fn write(&self, s: &mut String) {
        let head = format!(
            "Pass {} (recirculated to table {}, ct_state={}, ct_zone={})",
            self.pass, self.table, self.ct_state, self.ct_zone
        );
        s.push_str(&format!("\n{head}\n{}\n", "=".repeat(head.len())));
        s.push_str(&format!(
            "from pass {}, table {}: {}\n",
            self.from_pass, self.from_table, self.ct
        ));
        if self.default_ct_state {
            s.push_str(&format!(
                "ct_state {}: the default, no --ct-next flags left (give --ct-next to choose)\n",
                self.ct_state
            ));
        } else {
            s.push_str(&format!("ct_state {}: from --ct-next\n", self.ct_state));
        }
        if let Some(n) = &self.nat {
            s.push_str(&format!("NAT: {n}\n"));
        }
        s.push_str(&format!("\nFlow: {}\n", self.flow));
        write_pass(
            s,
            &self.steps,
            self.megaflow.as_deref(),
            &self.actions,
            &self.verdict,
        );
    }
}

/// One pass's tables, megaflow, actions and result.
fn write_pass(
    s: &mut String,
    steps: &[TraceStep],
    megaflow: Option<&str>,
    actions: &str,
    verdict: &str,
) {
    for st in steps {
        s.push('\n');
        write_step(s, st);
    }
    s.push('\n');
    if let Some(m) = megaflow {
        s.push_str(&format!("Megaflow: {m}\n"));
    }
    s.push_str(&format!("Datapath actions: {actions}\n"));
    s.push_str(&format!("Result: {verdict}\n"));
}

/// One table: the rule, its actions, what they changed, where the packet goes next.
fn write_step(s: &mut String, st: &TraceStep) {
    let Some(r) = &st.rule else {
        s.push_str(&format!(
            "table {}: no rule matched: table-miss, the packet is dropped\n",
            st.table
        ));
        return;
    };
    s.push_str(&format!("table {}: {}", st.table, r.matches));
    if r.cookie != 0 {
        s.push_str(&format!(", cookie={:#x}", r.cookie));
    }
    s.push_str(&format!("\n    rule actions: {}\n", r.actions));
    if !st.set.is_empty() {
        s.push_str(&format!("    key now: {}\n", st.set.join(",")));
    }
    s.push_str(&format!("    actions so far: {}\n", st.actions_so_far));
    for t in &st.recirculate {
        s.push_str(&format!(
            "    ct(table={t}): the packet goes through the connection tracker and is recirculated to table {t} (a new pass, with its ct_state)\n"
        ));
    }
    for n in &st.nat {
        s.push_str(&format!("    nat: {n}\n"));
    }
    if let Some(g) = st.goto {
        s.push_str(&format!("    goto_table:{g}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_flowsyntax::parse_flows_file;
    use flowpath_pipeline::{Backend, RuleStore};

    fn pipeline(flows: &str) -> std::sync::Arc<Pipeline> {
        let store = RuleStore::new(Backend::TupleSpace);
        let specs = parse_flows_file(flows, FlowCommand::Add).unwrap();
        store.add(specs.into_iter().map(|f| f.spec)).unwrap();
        store.snapshot()
    }

    fn flow(t: &str) -> TraceRequest {
        TraceRequest::new(TraceInput::Flow(t.into()))
    }

    fn packet(hex: &str) -> TraceRequest {
        TraceRequest::new(TraceInput::Packet(hex.into()))
    }

    const FLOWS: &str = "\
        table=0,priority=100,ip,nw_dst=10.0.0.0/8 actions=dec_ttl,goto_table:1\n\
        table=0,priority=0 actions=drop\n\
        table=1,priority=10,tcp,tp_dst=80 actions=mod_tp_dst:8080,output:2\n";

    #[test]
    fn a_packet_walks_two_tables_and_the_megaflow_holds_what_was_looked_at() {
        let p = pipeline(FLOWS);
        let t = trace_request(&p, &flow("tcp,nw_dst=10.1.2.3,nw_ttl=64,tp_dst=80")).unwrap();
        assert_eq!(t.steps.len(), 2, "{}", t.text());
        assert_eq!(t.steps[0].rule.as_ref().unwrap().priority, 100);
        assert_eq!(t.steps[0].goto, Some(1));
        assert_eq!(t.steps[0].set, vec!["nw_ttl=63"]);
        assert_eq!(t.steps[1].set, vec!["tp_dst=8080"]);
        assert_eq!(t.actions, "dec_ttl,mod_tp_dst:8080,output:2");
        assert_eq!(t.verdict, "sent to port 2");
        assert!(!t.dropped);
        let mf = t.megaflow.as_deref().unwrap();
        assert!(mf.contains("in_port=1"), "{mf}");
        assert!(mf.contains("nw_ttl=64"), "dec_ttl reads the TTL: {mf}");
        assert!(mf.contains("tp_dst=80"), "{mf}");
        let text = t.text();
        assert!(
            text.contains("table 1: priority=10,tcp,tp_dst=80"),
            "{text}"
        );
    }

    #[test]
    fn a_table_miss_and_a_drop_rule_are_told_apart() {
        let p = pipeline(FLOWS);
        let miss = trace_request(&p, &flow("udp,nw_dst=10.1.2.3,nw_ttl=9,tp_dst=53")).unwrap();
        assert!(miss.dropped);
        assert_eq!(miss.steps.last().unwrap().rule, None);
        assert!(miss.verdict.contains("table-miss"), "{}", miss.verdict);
        let drop = trace_request(&p, &flow("arp")).unwrap();
        assert!(drop.dropped);
        assert_eq!(drop.steps.len(), 1);
        assert!(drop.verdict.contains("actions (drop)"), "{}", drop.verdict);
        let ttl = trace_request(&p, &flow("tcp,nw_dst=10.1.2.3,nw_ttl=1")).unwrap();
        assert!(ttl.verdict.contains("dec_ttl"), "{}", ttl.verdict);
    }

    #[test]
    fn a_trace_of_ct_table_says_the_packet_is_recirculated() {
        let p = pipeline(
            "ip,ct_state=-trk actions=ct(table=1,zone=1)\n\
             table=1,ct_state=+trk+est,ip actions=output:2\n\
             table=1,priority=1 actions=drop\n",
        );
        let t = trace_request(&p, &flow("udp,nw_dst=10.0.0.2")).unwrap();
        assert_eq!(t.steps[0].recirculate, vec![1]);
        assert_eq!(t.actions, "ct(table=1,zone=1)");
        assert!(!t.dropped);
        assert!(
            t.verdict.contains("table 1 after the connection tracker"),
            "{}",
            t.verdict
        );
        let text = t.text();
        assert!(text.contains("is recirculated to table 1"), "{text}");
        // The second pass: a tracked, recirculated key starts in table 1.
        let mut k = resolve(&flow("ct_state=+est+trk,udp,nw_dst=10.0.0.2"))
            .unwrap()
            .unwrap();
        k.set(Field::RecircId, flowpath_packet::ct::recirc_id(1) as u128);
        let t2 = trace(&p, &k);
        assert_eq!(t2.steps[0].table, 1);
        assert_eq!(t2.actions, "output:2");
        assert!(t2.flow.starts_with("ct_state=+est+trk,"), "{}", t2.flow);
        let mf = t2.megaflow.unwrap();
        assert!(mf.starts_with("recirc_id=0x2,ct_state=+est+trk"), "{mf}");
    }

    #[test]
    fn bad_requests_name_the_position() {
        let p = pipeline(FLOWS);
        let e = trace_request(&p, &flow("tcp,nw_sr=10.0.0.1")).unwrap_err();
        assert!(e.contains("column"), "{e}");
        let e = trace_request(&p, &packet("02 00 0g")).unwrap_err();
        assert!(e.contains("character 8"), "{e}");
        let short = trace_request(&p, &packet("020000000002")).unwrap();
        assert_eq!(short.parse_drop.as_deref(), Some("eth_truncated"));
        assert!(short.dropped);
    }
}

#[cfg(test)]
mod ct_tests;
