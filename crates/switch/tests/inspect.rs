//! `trace` and `megaflows` over the control protocol, with a worker forwarding generated
//! traffic: the dump shows exactly the megaflows the worker cached (match, counters, age,
//! actions), its filter selects by overlap, and a trace against the running switch names
//! the rule and gives the same megaflow as the dump; after a rule change both follow.

mod common;

use flowpath_gen::FrameSpec;
use flowpath_inspect::{MegaflowFilter, Trace, TraceInput, TraceRequest, WorkerMegaflows};
use flowpath_switch::{Op, Request, Switch, SwitchConfig};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn ask(sw: &Switch, op: Op, text: String) -> flowpath_switch::Response {
    let r = sw.handle(&Request { op, text });
    assert!(r.error.is_none(), "{:?}", r.error);
    r
}

fn megaflows(sw: &Switch, filter: MegaflowFilter) -> Vec<WorkerMegaflows> {
    let r = ask(sw, Op::Megaflows, serde_json::to_string(&filter).unwrap());
    serde_json::from_value(r.data.expect("data")).unwrap()
}

fn trace(sw: &Switch, flow: &str) -> Trace {
    let req = TraceRequest::new(TraceInput::Flow(flow.into()));
    let r = ask(sw, Op::Trace, serde_json::to_string(&req).unwrap());
    serde_json::from_value(r.data.expect("data")).unwrap()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn dump_and_trace_show_what_the_worker_cached() {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    ask(
        &sw,
        Op::Add,
        "priority=100,udp,nw_dst=10.0.0.1 actions=output:2\n\
         priority=50,ip,nw_dst=10.0.0.0/24 actions=output:3\n\
         priority=0 actions=drop\n"
            .into(),
    );
    let frames = (1..=4u8)
        .map(|d| {
            flowpath_gen::build(&FrameSpec::udp4(
                Ipv4Addr::new(192, 168, 1, 1),
                Ipv4Addr::new(10, 0, 0, d),
                1234,
                53,
                64,
            ))
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = common::paced_worker(&sw, frames, &stop);

    // 10.0.0.1 takes the udp rule; 10.0.0.2-4 the /24 rule (each its own megaflow: the
    // udp rule's exact nw_dst is in every megaflow's mask).
    wait_until("four megaflows", || {
        megaflows(&sw, MegaflowFilter::default())[0].megaflows == 4
    });
    let all = megaflows(&sw, MegaflowFilter::default());
    assert_eq!(all.len(), 1);
    let w = &all[0];
    assert_eq!((w.worker, w.shown, w.flows.len()), (0, 4, 4));
    assert_eq!(w.xdp_entries, 0, "{w:?}");
    for f in &w.flows {
        assert!(f.packets > 0 && f.bytes >= 60 * f.packets, "{f:?}");
        assert!(f.used.is_some_and(|u| u < 5.0), "{f:?}");
        assert_eq!(f.tier, "megaflow");
    }
    let one = w
        .flows
        .iter()
        .find(|f| f.matches.contains("nw_dst=10.0.0.1,") || f.matches.ends_with("nw_dst=10.0.0.1"))
        .unwrap_or_else(|| panic!("no megaflow for 10.0.0.1: {:?}", w.flows));
    assert_eq!(one.actions, "output:2");

    // The filter: overlap with the given fields; counts only; a bad filter names its column.
    let f = megaflows(
        &sw,
        MegaflowFilter {
            flow: Some("ip,nw_dst=10.0.0.3".into()),
            ..Default::default()
        },
    );
    assert_eq!(f[0].flows.len(), 1, "{:?}", f[0].flows);
    assert_eq!(f[0].flows[0].actions, "output:3");
    let c = megaflows(
        &sw,
        MegaflowFilter {
            count_only: true,
            ..Default::default()
        },
    );
    assert!(c[0].flows.is_empty() && c[0].shown == 4);
    let bad = sw.handle(&Request {
        op: Op::Megaflows,
        text: r#"{"flow":"ip,nw_dts=1.2.3.4"}"#.into(),
    });
    assert!(bad.error.unwrap().contains("column"));

    // A trace against the running switch: the rule, and the megaflow the dump shows.
    let t = trace(
        &sw,
        "udp,nw_src=192.168.1.1,nw_dst=10.0.0.1,tp_src=1234,tp_dst=53",
    );
    assert_eq!(t.steps.len(), 1);
    assert_eq!(t.steps[0].rule.as_ref().unwrap().priority, 100);
    assert_eq!(t.actions, "output:2");
    assert_eq!(t.megaflow.as_deref(), Some(one.matches.as_str()));

    // After a rule change the trace and the cache both follow the new rules.
    ask(&sw, Op::Mod, "udp,nw_dst=10.0.0.1 actions=output:7".into());
    assert_eq!(trace(&sw, "udp,nw_dst=10.0.0.1").actions, "output:7");
    wait_until("the cached megaflow follows the change", || {
        megaflows(
            &sw,
            MegaflowFilter {
                flow: Some("udp,nw_dst=10.0.0.1".into()),
                ..Default::default()
            },
        )[0]
        .flows
        .iter()
        .all(|f| f.actions == "output:7")
    });

    stop.store(true, Ordering::Relaxed);
    worker.thread.join().unwrap();
    // No workers left: an empty answer, not a hang.
    assert!(megaflows(&sw, MegaflowFilter::default()).is_empty());
}

/// `--ct-next` against the running switch: the request carries the flags, the switch
/// traces every pass and sends them back; bad flags come back as an error naming them.
#[test]
fn a_trace_follows_ct_into_its_passes_on_the_switch() {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    ask(
        &sw,
        Op::Add,
        "ip,ct_state=-trk actions=ct(table=1,zone=1)\n\
         table=1,ip,ct_state=+trk+est actions=output:3\n\
         table=1,ip,ct_state=+trk+new actions=ct(commit,zone=1),output:2\n"
            .into(),
    );
    let req = |flags: &[&str]| TraceRequest {
        ct_next: flags.iter().map(|f| f.to_string()).collect(),
        ..TraceRequest::new(TraceInput::Flow("udp,nw_dst=10.0.0.2".into()))
    };
    let r = ask(
        &sw,
        Op::Trace,
        serde_json::to_string(&req(&["+trk+est"])).unwrap(),
    );
    assert!(
        r.lines
            .iter()
            .any(|l| l == "Pass 2 (recirculated to table 1, ct_state=+est+trk, ct_zone=1)"),
        "{:?}",
        r.lines
    );
    let t: Trace = serde_json::from_value(r.data.expect("data")).unwrap();
    assert_eq!(t.passes.len(), 1);
    assert_eq!(t.passes[0].actions, "output:3");
    let bad = sw.handle(&Request {
        op: Op::Trace,
        text: serde_json::to_string(&req(&["trk,bogus"])).unwrap(),
    });
    assert!(bad.error.unwrap().contains("'bogus'"));
}
