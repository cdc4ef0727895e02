//! The switch's connection tracker as the operator reaches it: the `[conntrack]` config
//! section (good values taken, bad ones refused naming the field), the `ct-*` control
//! operations through the control socket of a daemon started in this process, and the
//! `flowpath_conntrack_*` metrics families. Connections are made by running frames
//! through the switch's tracker with `ct(commit,zone=N)`.

use flowpath_gen::FrameSpec;
use flowpath_packet::ct::CtZoneSrc;
use flowpath_packet::{CtSpec, FlowKey, ParseOptions};
use flowpath_switch::conntrack::{
    Census, ConnJson, CtMetrics, LimitsAnswer, LimitsRequest, StatsAnswer, ZoneLimit, ZoneRequest,
};
use flowpath_switch::{call, Daemon, DaemonConfig, Op, Request, Response, Switch};
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

const PORT: &str = "[[port]]\nname = \"a\"\nnumber = 1\ntype = \"generator\"\n";

#[test]
fn conntrack_section_sets_limits_and_timeouts() {
    let text = format!(
        "[conntrack]\nmax_connections = 5000\ndefault_zone_limit = 100\n\
         zone_limits = {{ 1 = 10, 7 = 50 }}\n\
         [conntrack.timeouts]\ntcp_established = 3600\nudp = 20\nudp_stream = 90\nicmp = 5\n{PORT}"
    );
    let ct = DaemonConfig::parse(&text)
        .unwrap()
        .conntrack
        .ct_config()
        .unwrap();
    assert_eq!(ct.max_connections, 5000);
    assert_eq!(ct.default_zone_limit, 100);
    assert_eq!(
        ct.zone_limits.into_iter().collect::<Vec<_>>(),
        [(1, 10), (7, 50)]
    );
    assert_eq!(ct.timeouts.tcp_established, 3600);
    assert_eq!(ct.timeouts.udp, 20);
    assert_eq!(ct.timeouts.udp_stream, 90);
    assert_eq!(ct.timeouts.icmp, 5);
    // Left out: Linux's defaults.
    let d = flowpath_conntrack::Timeouts::default();
    assert_eq!(ct.timeouts.tcp_syn_sent, d.tcp_syn_sent);
    assert_eq!(ct.timeouts.generic, d.generic);

    // No section at all: the tracker's defaults.
    let ct = DaemonConfig::parse(PORT)
        .unwrap()
        .conntrack
        .ct_config()
        .unwrap();
    assert_eq!(ct, flowpath_conntrack::CtConfig::default());
}

#[test]
fn bad_conntrack_values_name_the_field() {
    let cases = [
        (
            "[conntrack]\nmax_connections = 0\n",
            "conntrack.max_connections: 0",
        ),
        (
            "[conntrack]\nmax_connections = 100000000\n",
            "conntrack.max_connections: 100000000",
        ),
        ("[conntrack]\nmax_conections = 5\n", "max_conections"),
        (
            "[conntrack]\nmax_connections = \"lots\"\n",
            "max_connections",
        ),
        ("[conntrack]\nmax_connections = -1\n", "max_connections"),
        (
            "[conntrack]\nzone_limits = { abc = 5 }\n",
            "conntrack.zone_limits.abc: 'abc' is not a zone",
        ),
        (
            "[conntrack]\nzone_limits = { 70000 = 5 }\n",
            "conntrack.zone_limits.70000",
        ),
        ("[conntrack]\nzone_limits = { 1 = -5 }\n", "zone_limits"),
        (
            "[conntrack.timeouts]\nudp = 0\n",
            "conntrack.timeouts.udp: 0 s",
        ),
        (
            "[conntrack.timeouts]\ntcp_established = 99999999\n",
            "conntrack.timeouts.tcp_established: 99999999 s",
        ),
        (
            "[conntrack.timeouts]\ntcp_establised = 5\n",
            "tcp_establised",
        ),
        ("[conntrack.timeouts]\nicmp = 1.5\n", "icmp"),
    ];
    for (section, want) in cases {
        let text = format!("{section}{PORT}");
        match DaemonConfig::parse(&text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => assert!(
                e.contains(want),
                "for\n{text}\nthe error\n  {e}\ndoes not say {want:?}"
            ),
        }
    }
}

/// Commit a UDP connection `src:sport -> 10.0.0.1:53` in `zone` in the switch's tracker.
fn commit_udp(sw: &Switch, src: u8, sport: u16, zone: u16) -> u8 {
    let mut frame = flowpath_gen::build(&FrameSpec::udp4(
        Ipv4Addr::new(192, 168, 1, src),
        Ipv4Addr::new(10, 0, 0, 1),
        sport,
        53,
        64,
    ));
    let mut key = FlowKey::default();
    let meta = flowpath_packet::parse(&frame, 1, &ParseOptions::default(), &mut key).unwrap();
    let spec = CtSpec {
        commit: true,
        zone: CtZoneSrc::Value(zone),
        ..CtSpec::new()
    };
    let t = sw.tracker();
    t.execute(&mut frame, &meta, &mut key, &spec, t.now_ms())
}

fn ask(sock: &Path, op: Op, text: String) -> Response {
    call(sock, &Request { op, text }, Duration::from_secs(5)).unwrap()
}

fn ok(r: Response) -> Response {
    assert!(r.error.is_none(), "{:?}", r.error);
    r
}

fn data<T: serde::de::DeserializeOwned>(r: &Response) -> T {
    serde_json::from_value(r.data.clone().expect("data")).unwrap()
}

fn zone(z: Option<u16>) -> String {
    serde_json::to_string(&ZoneRequest { zone: z }).unwrap()
}

/// A daemon with a `[conntrack]` section, one generator port and its control socket
/// and metrics endpoint in a fresh directory.
fn start_daemon(dir: &Path) -> Daemon {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let text = format!(
        "[switch]\nstate = \"{d}/state\"\ncontrol = \"{d}/ctl.sock\"\nmetrics = \"127.0.0.1:0\"\n\
         [conntrack]\nmax_connections = 1000\ndefault_zone_limit = 500\nzone_limits = {{ 1 = 10 }}\n\
         [[port]]\nname = \"gen\"\nnumber = 1\ntype = \"pcap\"\ntx_pcap = \"{d}/out.pcap\"\n",
        d = dir.display()
    );
    let cfg = DaemonConfig::parse(&text).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    Daemon::start(&cfg, dir.join("x"), dir.join("y"), stop).unwrap()
}

#[test]
fn conntrack_operations_through_the_control_socket() {
    let dir = std::env::temp_dir().join(format!("fp-ct-ops-{}", std::process::id()));
    let d = start_daemon(&dir);
    let sock = dir.join("ctl.sock");
    let sw = d.switch.clone();
    for (src, z) in [(1, 1), (2, 1), (3, 2)] {
        let st = commit_udp(&sw, src, 1000 + src as u16, z);
        assert_ne!(st & flowpath_packet::ct::state::NEW, 0, "state {st:#x}");
    }

    // dump: OVS's lines, and the same connections as JSON.
    let r = ok(ask(&sock, Op::CtDump, String::new()));
    assert_eq!(r.lines.len(), 3, "{:?}", r.lines);
    assert!(
        r.lines.iter().any(|l| l.starts_with(
            "udp,orig=(src=192.168.1.3,dst=10.0.0.1,sport=1003,dport=53),reply=(src=10.0.0.1,dst=192.168.1.3,sport=53,dport=1003),zone=2"
        )),
        "{:?}",
        r.lines
    );
    let conns: Vec<ConnJson> = data(&r);
    assert_eq!(conns.len(), 3);
    let c = conns.iter().find(|c| c.zone == 2).unwrap();
    assert_eq!(
        (c.proto.as_str(), c.orig.src.as_str()),
        ("udp", "192.168.1.3")
    );
    assert_eq!(
        (c.orig.sport, c.orig.dport, c.reply.sport),
        (Some(1003), Some(53), Some(53))
    );
    let r = ok(ask(&sock, Op::CtDump, zone(Some(1))));
    assert_eq!(r.lines.len(), 2, "{:?}", r.lines);
    assert!(
        r.lines.iter().all(|l| l.contains("zone=1")),
        "{:?}",
        r.lines
    );

    // stats: counters and the count by zone and state.
    let r = ok(ask(&sock, Op::CtStats, String::new()));
    let s: StatsAnswer = data(&r);
    assert_eq!((s.connections, s.created), (3, 3));
    assert_eq!(s.zones.into_iter().collect::<Vec<_>>(), [(1, 2), (2, 1)]);
    assert_eq!(s.states.get("udp"), Some(&3));
    assert_eq!(
        s.invalid.len(),
        flowpath_conntrack::InvalidReason::ALL.len()
    );
    assert!(r.lines[0].starts_with("Connections: 3"), "{:?}", r.lines);

    // limits: the config's, with each limited zone's count.
    let r = ok(ask(&sock, Op::CtLimits, String::new()));
    let l: LimitsAnswer = data(&r);
    assert_eq!(
        (l.max_connections, l.default_limit, l.connections),
        (1000, 500, 3)
    );
    assert_eq!(l.zones.len(), 1);
    assert_eq!(
        (l.zones[0].zone, l.zones[0].limit, l.zones[0].count),
        (1, 10, 2)
    );
    assert!(
        r.lines.contains(&"zone=1,limit=10,count=2".to_string()),
        "{:?}",
        r.lines
    );

    limits_changes(&sock, &l);

    // A bad request names its operation and changes nothing.
    let r = ask(&sock, Op::CtFlush, "{\"zone\": \"x\"}".into());
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .starts_with("ct-flush: bad request"),
        "{r:?}"
    );
    // flush: one zone, then the rest.
    let r = ok(ask(&sock, Op::CtFlush, zone(Some(1))));
    assert_eq!(r.summary, "flushed 2 connections of zone 1");
    assert_eq!(ok(ask(&sock, Op::CtDump, String::new())).lines.len(), 1);
    let r = ok(ask(&sock, Op::CtFlush, String::new()));
    assert_eq!(r.summary, "flushed 1 connections");
    assert!(ok(ask(&sock, Op::CtDump, String::new())).lines.is_empty());
    d.join();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ct-limits` with changes: the tracker takes them and shows them.
fn limits_changes(sock: &Path, before: &LimitsAnswer) {
    let req = LimitsRequest {
        set: vec!["zone=3,limit=7".parse::<ZoneLimit>().unwrap()],
        default: Some(9),
    };
    let r = ask(sock, Op::CtLimits, serde_json::to_string(&req).unwrap());
    let now: LimitsAnswer = data(&ok(ask(sock, Op::CtLimits, String::new())));
    assert_eq!(r.error, None);
    assert_eq!(now.default_limit, 9);
    assert!(now.zones.iter().any(|z| (z.zone, z.limit) == (3, 7)));
    assert_eq!(now.max_connections, before.max_connections);
}

#[test]
fn metrics_show_the_trackers_families() {
    let dir = std::env::temp_dir().join(format!("fp-ct-metrics-{}", std::process::id()));
    let d = start_daemon(&dir);
    let sw = d.switch.clone();
    commit_udp(&sw, 1, 1001, 4);
    commit_udp(&sw, 2, 1002, 4);
    // The census the expiry thread takes every few seconds, taken now.
    sw.ct_census().set(Census::take(sw.tracker()));
    let body = http_get(d.metrics_addr.unwrap());
    for want in [
        "flowpath_conntrack_connections{zone=\"4\"} 2",
        "flowpath_conntrack_connections_by_state{state=\"udp\"} 2",
        "flowpath_conntrack_created_total 2",
        "flowpath_conntrack_expired_total 0",
        "flowpath_conntrack_early_drops_total 0",
        "flowpath_conntrack_limit_hits_total 0",
        "flowpath_conntrack_invalid_total{reason=\"fragment\"} 0",
        "flowpath_conntrack_invalid_total{reason=\"nat_exhausted\"} 0",
        "flowpath_worker_packets_total",
    ] {
        assert!(body.contains(want), "no {want:?} in\n{body}");
    }
    // The same collector outside the daemon.
    let mut reg = prometheus_client::registry::Registry::with_prefix("flowpath");
    CtMetrics::read(sw.tracker(), sw.ct_census()).register(&mut reg);
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &reg).unwrap();
    assert!(
        text.contains("flowpath_conntrack_connections{zone=\"4\"} 2"),
        "{text}"
    );
    d.join();
    let _ = std::fs::remove_dir_all(&dir);
}

fn http_get(addr: std::net::SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Zone labels stay bounded: with 100 zones in use, the 64 fullest are listed by number
/// and the other 36 summed as `other`.
#[test]
fn census_lists_the_fullest_zones_and_sums_the_rest() {
    let sw = Switch::open(flowpath_switch::SwitchConfig::default()).unwrap();
    // Zone z holds z + 1 connections.
    for z in 0..100u16 {
        for i in 0..=z {
            commit_udp(&sw, (i % 250) as u8 + 1, 1000 + i, z);
        }
    }
    let c = Census::take(sw.tracker());
    assert_eq!(c.zones.len(), 100);
    assert_eq!(c.states.get("udp"), Some(&5050));
    let labels = c.zone_labels();
    assert_eq!(
        labels.len(),
        flowpath_switch::conntrack::MAX_ZONE_LABELS + 1
    );
    assert_eq!(labels[0], ("99".to_string(), 100));
    assert_eq!(labels[63], ("36".to_string(), 37));
    // Zones 0..=35 hold 1 + 2 + ... + 36 connections.
    assert_eq!(labels[64], ("other".to_string(), 666));
    let total: u64 = labels.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 5050);
}
