//! The poll-mode worker and the `flowpath switch` daemon, without root: in-memory and pcap
//! ports. Packets must leave exactly as the datapath (checked against a reference run of
//! the same frames) says; config errors must name the field; a restart restores flows.

use flowpath_datapath::{CaptureSink, Datapath, DatapathConfig};
use flowpath_gen::{build, FrameSpec};
use flowpath_ports::{MemoryPort, Port};
use flowpath_switch::{
    prometheus_text, spawn_worker, Daemon, DaemonConfig, Op, Request, Switch, SwitchConfig,
    WorkerConfig, WorkerPort,
};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FLOWS: &str = "\
table=0,priority=10,in_port=1,udp,tp_dst=53 actions=drop
table=0,priority=5,in_port=1,ip,nw_dst=192.168.0.0/24 actions=mod_dl_dst:02:00:00:00:00:02,dec_ttl,output:2
table=0,priority=5,in_port=1,ip,nw_dst=192.168.1.0/24 actions=mod_vlan_vid:7,output:3
table=0,priority=1,in_port=2 actions=output:1
";

fn frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for i in 0..300u32 {
        let src = Ipv4Addr::from(0x0a00_0001 + i);
        let dst = match i % 4 {
            0 | 1 => Ipv4Addr::new(192, 168, 0, (i % 200) as u8 + 1),
            2 => Ipv4Addr::new(192, 168, 1, 9),
            _ => Ipv4Addr::new(172, 16, 0, 1), // no rule: table miss
        };
        let dport = if i % 10 == 0 { 53 } else { 5001 };
        v.push(build(&FrameSpec::udp4(
            src,
            dst,
            1024 + i as u16,
            dport,
            64 + (i as usize % 5) * 100,
        )));
    }
    v
}

/// A switch holding `flows`.
fn switch_with(flows: &str) -> Arc<Switch> {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let r = sw.handle(&Request {
        op: Op::Add,
        text: flows.into(),
    });
    assert!(r.error.is_none(), "{:?}", r.error);
    sw
}

/// Worker 0 on `ports`, on no particular core, napping at most `idle_sleep_max`, until
/// `stop`.
fn worker(
    sw: &Arc<Switch>,
    ports: Vec<WorkerPort>,
    idle_sleep_max: Duration,
    stop: &Arc<AtomicBool>,
) -> flowpath_switch::pmd::WorkerHandle {
    let cfg = WorkerConfig {
        id: 0,
        core: None,
        datapath: DatapathConfig::default(),
        idle_sleep_max,
        pace: None,
        ..WorkerConfig::default()
    };
    spawn_worker(sw, cfg, ports, stop.clone()).unwrap()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn worker_forwards_exactly_as_the_datapath_says() {
    let sw = switch_with(FLOWS);

    // The reference: the same frames through a datapath straight into a capture.
    let mut reference = CaptureSink::default();
    let mut dp = Datapath::new(sw.store().clone(), DatapathConfig::default());
    for f in frames() {
        let mut buf = vec![0u8; 256 + f.len()];
        buf[128..128 + f.len()].copy_from_slice(&f);
        let mut p = [flowpath_packet::Packet::new(&mut buf, 128, f.len())];
        dp.process(1, &mut p, &mut reference);
    }
    assert!(
        reference.packets.len() > 100,
        "the flows forward most frames"
    );

    let (p1, h1) = MemoryPort::new("p1");
    let (p2, h2) = MemoryPort::new("p2");
    let (p3, h3) = MemoryPort::new("p3");
    let stop = Arc::new(AtomicBool::new(false));
    let ports = vec![
        WorkerPort::new(1, 0, Box::new(p1)),
        WorkerPort::new(2, 0, Box::new(p2)),
        WorkerPort::new(3, 0, Box::new(p3)),
    ];
    let w = worker(&sw, ports, Duration::from_micros(200), &stop);
    let all = frames();
    // In bursts, so batches of several sizes happen.
    for chunk in all.chunks(37) {
        h1.inject_many(chunk.iter().map(|f| f.as_slice()));
        std::thread::sleep(Duration::from_millis(1));
    }
    let want2: Vec<Vec<u8>> = reference
        .packets
        .iter()
        .filter(|(p, _)| *p == 2)
        .map(|(_, d)| d.clone())
        .collect();
    let want3: Vec<Vec<u8>> = reference
        .packets
        .iter()
        .filter(|(p, _)| *p == 3)
        .map(|(_, d)| d.clone())
        .collect();
    let mut got2 = Vec::new();
    let mut got3 = Vec::new();
    wait_until("every forwarded frame", || {
        got2.extend(h2.take_sent());
        got3.extend(h3.take_sent());
        got2.len() >= want2.len() && got3.len() >= want3.len()
    });
    stop.store(true, Ordering::Relaxed);
    let fin = w.thread.join().unwrap();
    got2.extend(h2.take_sent());
    got3.extend(h3.take_sent());
    assert_eq!(
        got2, want2,
        "port 2 got exactly the reference's frames, in order"
    );
    assert_eq!(
        got3, want3,
        "port 3 got exactly the reference's frames, in order"
    );
    assert!(h1.take_sent().is_empty(), "nothing goes back to port 1");
    assert_eq!(fin.packets, all.len() as u64);
    assert_eq!(fin.tx_packets, (want2.len() + want3.len()) as u64);
    assert!(
        fin.drops > 0,
        "the drop rule and the table miss are counted"
    );
    assert_eq!(fin.ports.len(), 3);
    assert_eq!(fin.ports[0].stats.rx_packets, all.len() as u64);
    assert_eq!(fin.ports[1].stats.tx_packets, want2.len() as u64);
    assert!(fin.busy_cycles > 0 && fin.batches > 0 && fin.avg_batch() >= 1.0);
    let prom = prometheus_text(std::slice::from_ref(&fin));
    assert!(prom.contains(&format!(
        "flowpath_worker_packets_total{{worker=\"0\",core=\"\"}} {}",
        all.len()
    )));
    assert!(prom.contains(
        "flowpath_port_tx_packets_total{port=\"p2\",number=\"2\",queue=\"0\",worker=\"0\"}"
    ));
    // Every limit of the miss-storm defence is exposed, with its level.
    assert_eq!(fin.guard.max_masks, 512);
    assert!(fin.guard.megaflows > 0 && fin.guard.megaflows <= fin.guard.flow_limit);
    assert!(fin.guard.subtables > 0 && fin.guard.subtables <= fin.guard.max_masks);
    assert!(prom.contains("# TYPE flowpath_worker_megaflow_max_masks gauge"));
    assert!(prom.contains("flowpath_worker_megaflow_max_masks{worker=\"0\",core=\"\"} 512"));
    assert!(prom.contains("flowpath_worker_miss_budget_drops_total{worker=\"0\",core=\"\"} 0"));
    let upcalls_p1 = format!(
        "flowpath_port_upcalls_total{{port=\"p1\",number=\"1\",queue=\"0\",worker=\"0\"}} {}",
        fin.ports[0].miss.upcalls
    );
    assert!(
        fin.ports[0].miss.upcalls > 0 && prom.contains(&upcalls_p1),
        "{prom}"
    );
    let text = flowpath_switch::format_stats(&[fin]);
    assert!(
        text.contains("masks:") && text.contains("limit 512"),
        "{text}"
    );
    assert!(text.contains("miss budget drops:"), "{text}");
}

#[test]
fn a_failing_port_is_dropped_and_the_others_carry_on() {
    struct Broken;
    impl Port for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        fn recv(&mut self, _b: &mut flowpath_ports::PacketBatch) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(ENXIO))
        }
        fn send(&mut self, _f: &[u8]) -> bool {
            false
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn stats(&self) -> flowpath_ports::PortStats {
            Default::default()
        }
        fn info(&self) -> flowpath_ports::PortInfo {
            Default::default()
        }
    }
    let sw = switch_with("in_port=1 actions=output:2\n");
    let (p1, h1) = MemoryPort::new("p1");
    let (p2, h2) = MemoryPort::new("p2");
    let stop = Arc::new(AtomicBool::new(false));
    let ports = vec![
        WorkerPort::new(3, 0, Box::new(Broken)),
        WorkerPort::new(1, 0, Box::new(p1)),
        WorkerPort::new(2, 0, Box::new(p2)),
    ];
    let w = worker(&sw, ports, Duration::from_micros(100), &stop);
    let f = build(&FrameSpec::udp4(
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        1,
        2,
        64,
    ));
    h1.inject_many((0..10).map(|_| f.as_slice()));
    let mut got = 0;
    wait_until("frames past the broken port", || {
        got += h2.take_sent().len();
        got == 10
    });
    stop.store(true, Ordering::Relaxed);
    let fin = w.thread.join().unwrap();
    assert!(
        fin.ports[0].down.is_some(),
        "the broken port is marked down"
    );
    assert!(fin.ports[1].down.is_none() && fin.ports[2].down.is_none());
}

/// "No such device or address": what a port reports when its interface is gone.
const ENXIO: i32 = 6;

#[test]
fn config_errors_name_the_field() {
    let base = "[[port]]\nname = \"a\"\nnumber = 1\ntype = \"generator\"\n";
    assert!(DaemonConfig::parse(base).is_ok());
    for name in ["tss", "tss-whole-masks", "tree", "linear"] {
        let text = format!("{base}[switch]\nclassifier = \"{name}\"\n");
        assert!(DaemonConfig::parse(&text).is_ok(), "{name}");
    }
    let cases: &[(&str, &str)] = &[
        ("", "no [[port]]"),
        (
            "[[port]]\nname = \"a\"\nnumber = 1\ntype = \"afxdp\"\n",
            "needs 'interface'",
        ),
        (
            "[[port]]\nname = \"a\"\nnumber = 1\ntype = \"carrier-pigeon\"\n",
            "unknown variant `carrier-pigeon`",
        ),
        (
            "[[port]]\nname = \"a\"\nnumber = 1\ntype = \"generator\"\nspeed = 3\n",
            "unknown field `speed`",
        ),
        (
            &format!("{base}[[port]]\nname = \"b\"\nnumber = 1\ntype = \"generator\"\n"),
            "port[1].number: 1 is already port 'a'",
        ),
        (
            &format!("{base}[[port]]\nname = \"a\"\nnumber = 2\ntype = \"generator\"\n"),
            "port[1].name: 'a' is used twice",
        ),
        (
            &format!("{base}[[worker]]\ncore = 4096\n"),
            "worker[0].core: CPU 4096 does not exist",
        ),
        (
            &format!("{base}[[worker]]\ncore = 0\n[[worker]]\ncore = 0\n"),
            "worker[1].core: CPU 0 already has a worker",
        ),
        (
            &format!("{base}[[worker]]\n[[worker]]\n"),
            "port[0].queues: 1 queue(s) but 2 workers",
        ),
        (
            &format!("{base}[switch]\nmetrics = \"localhost\"\n"),
            "switch.metrics",
        ),
        (
            &format!("{base}[switch]\nclassifier = \"hash\"\n"),
            "switch.classifier: unknown classifier 'hash'",
        ),
        (&format!("{base}fault = {{ drop = 1.5 }}\n"), "fault.drop"),
        (
            &format!("[datapath]\nemc_insert_inv_prob = 0\n{base}"),
            "datapath.emc_insert_inv_prob",
        ),
        (
            &format!("[datapath]\nslow_path_share = 1.5\n{base}"),
            "datapath.slow_path_share",
        ),
        (
            &format!("[datapath]\nmax_masks = 0\n{base}"),
            "datapath.max_masks",
        ),
        (
            &format!("[datapath]\nrevalidate_target_ms = -1\n{base}"),
            "datapath.revalidate_target_ms",
        ),
        (
            &format!("[datapath]\nsmc_entries = 100000000\n{base}"),
            "datapath.smc_entries",
        ),
        (
            &format!("[datapath]\nmegaflow_max = 0\n{base}"),
            "datapath.megaflow_max: 0 is not in 1..=4194304",
        ),
        (
            &format!("[datapath]\nmegaflow_max = 100000000000\n{base}"),
            "datapath.megaflow_max: 100000000000 is not in",
        ),
        (
            "[[port]]\nname = \"a\"\nnumber = 0\ntype = \"generator\"\n",
            "port[0].number: 0",
        ),
    ];
    for (text, want) in cases {
        match DaemonConfig::parse(text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => assert!(
                e.contains(want),
                "for\n{text}\nthe error\n  {e}\ndoes not say {want:?}"
            ),
        }
    }
}

/// The daemon from a config with a generated-traffic port and a pcap port: packets flow,
/// stats come back through the control socket, and a restart restores the flows (and does
/// not re-read the flows file once a state exists).
#[test]
fn daemon_runs_from_config_and_restores_flows() {
    let dir = std::env::temp_dir().join(format!("fp-daemon-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("flows.txt"),
        "in_port=1,ip actions=mod_nw_tos:32,output:2\n",
    )
    .unwrap();
    let text = format!(
        "[switch]\nstate = \"{d}/state\"\ncontrol = \"{d}/ctl.sock\"\nflows = \"{d}/flows.txt\"\nmetrics = \"127.0.0.1:0\"\n\
         [datapath]\nidle_sleep_max_us = 100\n\
         [[port]]\nname = \"gen\"\nnumber = 1\ntype = \"generator\"\nflows = 50\nframe_size = 64\n\
         [[port]]\nname = \"cap\"\nnumber = 2\ntype = \"pcap\"\ntx_pcap = \"{d}/out.pcap\"\n",
        d = dir.display()
    );
    let cfg = DaemonConfig::parse(&text).unwrap();
    register_generator();
    let stop = Arc::new(AtomicBool::new(false));
    let d = Daemon::start(&cfg, dir.join("x"), dir.join("y"), stop.clone()).unwrap();
    assert_eq!(d.restored_flows, 1, "first start installs the flows file");
    wait_until("traffic through the daemon", || {
        d.stats().iter().map(|w| w.tx_packets).sum::<u64>() > 1000
    });
    let resp = flowpath_switch::call(
        &dir.join("ctl.sock"),
        &Request {
            op: Op::Stats,
            text: String::new(),
        },
        Duration::from_secs(5),
    )
    .unwrap();
    assert!(resp.error.is_none());
    assert!(
        resp.lines.iter().any(|l| l.contains("exact-match hits")),
        "{:?}",
        resp.lines
    );
    assert!(resp.data.is_some());
    let addr = d.metrics_addr.unwrap();
    let body = http_get(addr);
    assert!(
        body.contains("flowpath_worker_packets_total{worker=\"0\""),
        "{body}"
    );
    // Change the flows through the switch: they are saved.
    let r = d.switch.handle(&Request {
        op: Op::Replace,
        text: "in_port=1 actions=output:2\nin_port=2 actions=output:1\n".into(),
    });
    assert!(r.error.is_none());
    let fin = d.join();
    assert!(fin[0].packets > 1000 && fin[0].emc_hits + fin[0].megaflow_hits > 0);
    // Every frame written to the pcap went through the worker's tx.
    let written = flowpath_gen::read_capture_file(dir.join("out.pcap"))
        .unwrap()
        .frames;
    assert!(!written.is_empty());
    assert_eq!(written.len() as u64, fin[0].ports[1].stats.tx_packets);

    // Restart: the two flows from the state, not the flows file.
    let stop = Arc::new(AtomicBool::new(false));
    let d = Daemon::start(&cfg, dir.join("x"), dir.join("y"), stop).unwrap();
    assert_eq!(
        d.restored_flows, 2,
        "the state file wins over the flows file after the first start"
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

/// Generator ports come from the traffic generator, which registers its opener with the
/// ports crate (the binary does this at start; so does this test).
fn register_generator() {
    flowpath_ports::register_generator(|name, flows, size| {
        let src = flowpath_gen::InMemorySource::udp4_flows(flows as usize, size as usize);
        Box::new(flowpath_gen::GeneratedPort::new(name, src))
    });
}

/// A switch told to stop after its control socket's file was removed (a script's cleanup
/// removing its directory) still stops: the accept loop is woken without the path.
#[test]
fn the_control_thread_stops_even_when_its_socket_file_is_gone() {
    let dir = std::env::temp_dir().join(format!("flowpath-wake-{}", std::process::id()));
    let path = dir.join("ctl.sock");
    let sock = Arc::new(flowpath_switch::ControlSocket::bind(&path).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let h = flowpath_switch::switch::spawn_control_with(sock.clone(), stop.clone(), |_| {
        flowpath_switch::Response::default()
    });
    std::thread::sleep(Duration::from_millis(50));
    std::fs::remove_dir_all(&dir).unwrap();
    stop.store(true, Ordering::Relaxed);
    sock.wake();
    wait_until("the control thread to stop", || h.is_finished());
    h.join().unwrap();
}
