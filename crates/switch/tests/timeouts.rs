//! Timeouts and counters with traffic flowing: a worker runs generated packets through
//! the datapath while the switch expires rules. The rule that carries traffic keeps its
//! idle timeout from firing and shows live counts in `dump`; the rule that sees nothing
//! idles out; the hard-timed rule goes when its time is up; and once a rule is gone, its
//! megaflows are gone too (its packets take the next rule).

mod common;

use common::dump;
use flowpath_gen::FrameSpec;
use flowpath_switch::{Op, Request, Switch, SwitchConfig};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn field(line: &str, name: &str) -> u64 {
    let v = line
        .split([',', ' '])
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    v.trim_end_matches('s').parse::<f64>().unwrap() as u64
}

#[test]
fn timeouts_expire_rules_and_dump_shows_live_counts() {
    let sw = Switch::open(SwitchConfig {
        expire_every: Duration::from_millis(100),
        ..SwitchConfig::default()
    })
    .unwrap();
    let flows = "\
table=0,priority=300,udp,nw_dst=10.0.0.1,idle_timeout=1 actions=output:2
table=0,priority=300,udp,nw_dst=10.0.0.99,idle_timeout=1 actions=output:3
table=0,priority=200,udp,nw_dst=10.0.0.1,hard_timeout=2 actions=output:4
table=0,priority=100,ip actions=output:9
";
    let r = sw.handle(&Request {
        op: Op::Add,
        text: flows.into(),
    });
    assert!(r.error.is_none(), "{:?}", r.error);

    let frame = flowpath_gen::build(&FrameSpec::udp4(
        Ipv4Addr::new(192, 168, 1, 1),
        Ipv4Addr::new(10, 0, 0, 1),
        1234,
        53,
        64,
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = common::paced_worker(&sw, vec![frame], &stop);
    let expiry = sw.spawn_expiry(stop.clone());

    // Counts are live: two dumps a little apart show the busy rule's count growing.
    std::thread::sleep(Duration::from_millis(300));
    let first = dump(&sw);
    std::thread::sleep(Duration::from_millis(300));
    let second = dump(&sw);
    let busy = |d: &[String]| {
        d.iter()
            .find(|l| l.contains("nw_dst=10.0.0.1 ") && l.contains("idle_timeout=1"))
            .cloned()
            .unwrap()
    };
    let (p1, p2) = (
        field(&busy(&first), "n_packets"),
        field(&busy(&second), "n_packets"),
    );
    assert!(p1 > 0 && p2 > p1, "n_packets {p1} then {p2}");
    assert_eq!(
        field(&busy(&second), "n_bytes"),
        p2 * 60,
        "64-byte frames are 60 bytes without FCS"
    );

    // After 2.5 s: the idle rule that saw no packet is gone, the busy one stays, and the
    // hard-timed one is gone.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(2_500) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = dump(&sw);
    assert!(after.iter().all(|l| !l.contains("10.0.0.99")), "{after:#?}");
    assert!(
        after.iter().all(|l| !l.contains("hard_timeout")),
        "{after:#?}"
    );
    assert!(
        after.iter().any(|l| l.contains("nw_dst=10.0.0.1 ")),
        "{after:#?}"
    );
    assert_eq!(after.len(), 2, "{after:#?}");

    // Delete the busy rule: its packets must now take the catch-all (port 9) rule, which
    // only happens if the megaflow of the deleted rule went with it.
    let r = sw.handle(&Request {
        op: Op::DelStrict,
        text: "table=0,priority=300,udp,nw_dst=10.0.0.1".into(),
    });
    assert!(r.error.is_none(), "{:?}", r.error);
    std::thread::sleep(Duration::from_millis(300));
    let last = dump(&sw);
    assert_eq!(last.len(), 1, "{last:#?}");
    assert!(field(&last[0], "n_packets") > 0, "{last:#?}");

    stop.store(true, Ordering::Relaxed);
    worker.thread.join().unwrap();
    expiry.join().unwrap();
}
