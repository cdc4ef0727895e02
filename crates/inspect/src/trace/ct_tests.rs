//! Traces that follow `ct(table=T)` into further passes (`--ct-next`).

use super::*;
use flowpath_flowsyntax::parse_flows_file;
use flowpath_pipeline::{Backend, RuleStore};

fn pipeline(flows: &str) -> std::sync::Arc<Pipeline> {
    let store = RuleStore::new(Backend::TupleSpace);
    let specs = parse_flows_file(flows, FlowCommand::Add).unwrap();
    store.add(specs.into_iter().map(|f| f.spec)).unwrap();
    store.snapshot()
}

fn traced(flows: &str, packet: &str, ct_next: &[&str]) -> Trace {
    let req = TraceRequest {
        ct_next: ct_next.iter().map(|s| s.to_string()).collect(),
        ..TraceRequest::new(TraceInput::Flow(packet.into()))
    };
    trace_request(&pipeline(flows), &req).unwrap()
}

/// A firewall: track in zone 1, commit new connections, pass established ones.
const TWO_PASS: &str = "\
    table=0,priority=10,ip,ct_state=-trk actions=ct(table=1,zone=1)\n\
    table=0,priority=0 actions=drop\n\
    table=1,priority=10,ip,ct_state=+trk+new actions=ct(commit,zone=1),output:2\n\
    table=1,priority=10,ip,ct_state=+trk+est actions=output:3\n\
    table=1,priority=0 actions=drop\n";

const UDP: &str = "udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,tp_dst=53";

#[test]
fn a_ct_table_is_followed_into_a_second_pass_with_the_given_state() {
    let t = traced(TWO_PASS, UDP, &["trk,est"]);
    assert_eq!(t.actions, "ct(table=1,zone=1)");
    assert_eq!(t.passes.len(), 1, "{}", t.text());
    let p = &t.passes[0];
    assert_eq!((p.pass, p.from_pass, p.from_table, p.table), (2, 1, 0, 1));
    assert_eq!((p.ct_state.as_str(), p.ct_zone), ("+est+trk", 1));
    assert!(!p.default_ct_state);
    assert_eq!(p.ct, "ct(table=1,zone=1)");
    assert_eq!(p.steps.len(), 1);
    assert_eq!(p.steps[0].table, 1);
    assert!(p.steps[0].rule.as_ref().unwrap().matches.contains("+est"));
    assert_eq!(p.actions, "output:3");
    assert_eq!(p.verdict, "sent to port 3");
    assert!(!p.dropped);
    assert!(
        p.flow.starts_with("ct_state=+est+trk,ct_zone=1,"),
        "{}",
        p.flow
    );
    let mf = p.megaflow.as_deref().unwrap();
    assert!(
        mf.starts_with("recirc_id=0x2,ct_state=-new+est+trk,"),
        "{mf}"
    );
    assert_eq!(t.untraced, 0);

    let text = t.text();
    assert!(
        text.contains("\nPass 2 (recirculated to table 1, ct_state=+est+trk, ct_zone=1)\n"),
        "{text}"
    );
    assert!(
        text.contains("from pass 1, table 0: ct(table=1,zone=1)"),
        "{text}"
    );
    assert!(text.contains("ct_state +est+trk: from --ct-next"), "{text}");
    assert!(text.contains("Datapath actions: output:3"), "{text}");
    // Both passes' final actions, in order.
    let first = text.find("Datapath actions: ct(table=1,zone=1)").unwrap();
    assert!(first < text.find("Pass 2").unwrap(), "{text}");

    // Each form of the flags gives the same pass.
    let plus = traced(TWO_PASS, UDP, &["+trk+est"]);
    assert_eq!(plus, t);
}

#[test]
fn without_ct_next_a_pass_resumes_as_trk_new() {
    let t = traced(TWO_PASS, UDP, &[]);
    assert_eq!(t.passes.len(), 1);
    let p = &t.passes[0];
    assert_eq!(p.ct_state, "+new+trk");
    assert!(p.default_ct_state);
    assert_eq!(p.actions, "ct(commit,zone=1),output:2");
    assert!(t.text().contains("the default, no --ct-next flags left"));
    // The plain `trace` does the same.
    let key = resolve(&TraceRequest::new(TraceInput::Flow(UDP.into())))
        .unwrap()
        .unwrap();
    assert_eq!(trace(&pipeline(TWO_PASS), &key), t);
    // An invalid state goes to the table's drop rule.
    let inv = traced(TWO_PASS, UDP, &["trk,inv"]);
    assert!(inv.passes[0].dropped);
    assert_eq!(inv.passes[0].actions, "drop");
}

#[test]
fn three_passes_take_the_flags_in_order_and_keep_their_zones() {
    let flows = "\
        table=0,ip,ct_state=-trk actions=ct(table=1,zone=1)\n\
        table=1,ip,ct_state=+trk+est actions=ct(table=2,zone=2)\n\
        table=1,ip,ct_state=+trk+new actions=ct(commit,zone=1),output:2\n\
        table=2,ip,ct_state=+trk+new actions=ct(commit,zone=2),output:4\n\
        table=2,ip,ct_state=+trk+est actions=output:5\n";
    let t = traced(flows, UDP, &["trk,est", "trk,new"]);
    assert_eq!(t.passes.len(), 2, "{}", t.text());
    let (p2, p3) = (&t.passes[0], &t.passes[1]);
    assert_eq!(
        (p2.table, p2.ct_zone, p2.ct_state.as_str()),
        (1, 1, "+est+trk")
    );
    assert_eq!(p2.actions, "ct(table=2,zone=2)");
    assert_eq!((p3.pass, p3.from_pass, p3.from_table), (3, 2, 1));
    assert_eq!(
        (p3.table, p3.ct_zone, p3.ct_state.as_str()),
        (2, 2, "+new+trk")
    );
    assert_eq!(p3.actions, "ct(commit,zone=2),output:4");
    assert!(t
        .text()
        .contains("Pass 3 (recirculated to table 2, ct_state=+new+trk, ct_zone=2)"));
    // Flags run out: the third pass takes the default.
    let short = traced(flows, UDP, &["trk,est"]);
    assert!(short.passes[1].default_ct_state);
    assert_eq!(short.passes[1].actions, "ct(commit,zone=2),output:4");
}

#[test]
fn two_recirculations_of_one_pass_are_traced_first_in_first_out() {
    let flows = "\
        ip actions=mod_nw_dst:10.0.0.9,ct(table=1,zone=1),mod_nw_dst:10.0.0.7,ct(table=2,zone=2)\n\
        table=1,ip actions=output:2\n\
        table=2,ip actions=output:3\n";
    let t = traced(flows, UDP, &["trk,new", "trk,est"]);
    let tables: Vec<(u8, &str)> = t
        .passes
        .iter()
        .map(|p| (p.table, p.ct_state.as_str()))
        .collect();
    assert_eq!(tables, [(1, "+new+trk"), (2, "+est+trk")]);
    // Each pass starts from the key as the actions before its ct left it.
    assert!(
        t.passes[0].flow.contains("nw_dst=10.0.0.9"),
        "{}",
        t.passes[0].flow
    );
    assert!(
        t.passes[1].flow.contains("nw_dst=10.0.0.7"),
        "{}",
        t.passes[1].flow
    );
}

#[test]
fn a_ct_without_table_starts_no_pass() {
    let t = traced("ip actions=ct(commit,zone=3),output:2\n", UDP, &["trk,est"]);
    assert!(t.passes.is_empty());
    assert_eq!(t.actions, "ct(commit,zone=3),output:2");
    assert!(!t.text().contains("Pass 2"), "{}", t.text());
    // Its NAT is named in the step, and not applied.
    let nat = traced(
        "ip actions=ct(commit,nat(src=10.9.9.9)),output:2\n",
        UDP,
        &[],
    );
    assert!(nat.passes.is_empty());
    let text = nat.text();
    assert!(
        text.contains(
            "    nat: source NAT would rewrite the packet's source (+snat); not simulated"
        ),
        "{text}"
    );
}

#[test]
fn a_recirculation_loop_stops_at_the_pass_limit() {
    let t = traced("ip actions=ct(table=0)\n", UDP, &[]);
    assert_eq!(t.passes.len(), MAX_PASSES - 1);
    assert_eq!(t.untraced, 1);
    assert_eq!(t.passes.last().unwrap().pass, MAX_PASSES);
    assert!(t
        .text()
        .contains("1 more recirculation(s) not traced: a trace follows at most 8 passes"));
}

#[test]
fn nat_is_named_and_not_simulated() {
    let flows = "\
        ip actions=ct(commit,table=1,zone=1,nat(dst=10.0.0.9))\n\
        table=1,ip actions=output:2\n";
    let t = traced(flows, UDP, &["trk,new,dnat"]);
    let p = &t.passes[0];
    assert_eq!(p.ct_state, "+new+trk+dnat");
    let nat = p.nat.as_deref().unwrap();
    assert!(
        nat.contains("destination NAT") && nat.contains("not simulated"),
        "{nat}"
    );
    assert!(p.flow.contains("nw_dst=10.0.0.2"), "unchanged: {}", p.flow);
    assert!(t.text().contains("NAT: destination NAT"), "{}", t.text());
    assert!(
        t.steps[0].nat[0].contains("destination NAT"),
        "{:?}",
        t.steps[0]
    );
    assert!(t.passes[0].steps[0].nat.is_empty());
}

#[test]
fn bad_ct_next_flags_are_named() {
    let p = pipeline(TWO_PASS);
    for (flags, want) in [
        ("trk,nwe", "unknown ct_state flag 'nwe'"),
        ("est", "without trk"),
        ("+trk-new", "'-new'"),
        ("trk,new,est", "new and est"),
    ] {
        let req = TraceRequest {
            ct_next: vec!["trk,new".into(), flags.into()],
            ..TraceRequest::new(TraceInput::Flow(UDP.into()))
        };
        let e = trace_request(&p, &req).unwrap_err();
        assert!(e.contains(&format!("--ct-next '{flags}'")), "{e}");
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn the_passes_survive_json() {
    let t = traced(TWO_PASS, UDP, &["trk,est"]);
    let json = serde_json::to_string(&t).unwrap();
    assert!(json.contains("\"passes\":[{\"pass\":2"), "{json}");
    let back: Trace = serde_json::from_str(&json).unwrap();
    assert_eq!(back, t);
    // A request without ct_next reads (and writes) as before.
    let req: TraceRequest = serde_json::from_str(r#"{"input":{"flow":"ip"}}"#).unwrap();
    assert!(req.ct_next.is_empty());
    assert!(!serde_json::to_string(&req).unwrap().contains("ct_next"));
}
