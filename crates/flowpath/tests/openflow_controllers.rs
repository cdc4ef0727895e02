//! Real OpenFlow 1.3 controllers against the switch: os-ken running a learning-switch app,
//! and Faucet with a VLAN pipeline, each connecting two hosts the way people run them.
//! ovs-ofctl: `openflow_clients.rs`; what both share: `openflow_support/mod.rs`.
//!
//! By default the switch under test is flowpath (`flowpath switch --config` with `[switch]
//! openflow = [...]` and AF_PACKET ports p1, p2). `FLOWPATH_OPENFLOW_PEER=ovs` runs the very
//! same scenarios against Open vSwitch to validate the harness and the expectations: every
//! scenario passes against OVS.
//!
//! Needs root, network namespaces, ovs-ofctl, ping, ss, and os-ken or Faucet in the Python
//! environment `$FLOWPATH_OPENFLOW_VENV` (default /opt/flowpath-venv), all from
//! `scripts/setup-openflow-peers.sh`. Each test says it skips, naming what is missing,
//! unless `FLOWPATH_OPENFLOW_REQUIRED=1` (CI as root, after that script), where a missing
//! peer fails; `FLOWPATH_OPENFLOW_KEEP` keeps the scratch directories. Namespaces
//! `fpofb-<pid>` (os-ken) and `fpofc-<pid>` (Faucet) hold the switch and its controller,
//! with hosts in `-h1` and `-h2`; they go on drop, also when a test fails.

mod common;
mod openflow_support;
use common::harness::{in_ns, need, need_root_netns, serial, tail, wait_for, Proc};
use openflow_support::*;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

// ---- (b) os-ken -------------------------------------------------------------------------

fn packet_ins(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("packet in "))
        .count()
}

#[test]
fn os_ken_learning_switch_connects_two_hosts() {
    need!(H, need_root_netns());
    need!(H, H.need_tools(&["ovs-ofctl", "ping", "ss"]));
    need!(H, need_peer());
    need!(H, venv_bin("osken-manager"));
    let manager = venv_bin("osken-manager").unwrap();
    let _serial = serial();
    let tmp = H.scratch(&format!("fpofb-{}", std::process::id()));
    let topo = Topo::new("b");

    let log = tmp.0.join("osken.log");
    let mut c = in_ns(&topo.sw.0, &manager);
    c.args([
        "--ofp-listen-host",
        "127.0.0.1",
        "--ofp-tcp-listen-port",
        &CONTROLLER_PORT.to_string(),
        &format!("{DATA}/simple_switch_13.py"),
    ]);
    let mut osken = Proc::spawn(c, "osken-manager", &log);
    wait_listening(&topo.sw.0, CONTROLLER_PORT, &mut osken, &log);
    let sut = Sut::with_controller(&topo.sw.0, &tmp.0);

    // The app's table-miss flow: everything to the controller, unbuffered.
    wait_for(
        "os-ken installs its table-miss flow",
        Duration::from_secs(30),
        || {
            sut.dump()
                .iter()
                .any(|f| f.has("priority=0") && f.actions == "CONTROLLER:65535")
        },
    );
    topo.first_ping(&sut, &log);
    assert_eq!(topo.ping(0, 3), 3, "h1 -> h2");
    assert_eq!(topo.ping(1, 3), 3, "h2 -> h1");

    let flows = sut.dump();
    let learned = |from: u8, to: u8| {
        flows.iter().find(|f| {
            f.has("table=0")
                && f.has("priority=1")
                && f.has(&format!("in_port={from}"))
                && f.has(&format!("dl_src=02:00:00:00:00:0{from}"))
                && f.has(&format!("dl_dst=02:00:00:00:00:0{to}"))
                && f.actions == format!("output:{to}")
        })
    };
    assert!(
        learned(1, 2).is_some() && learned(2, 1).is_some(),
        "the app's flows show in dump-flows: {flows:#?}"
    );

    // Established: the next ping goes through the datapath, with no packet_in.
    let before = packet_ins(&log);
    let n_before = learned(1, 2).unwrap().n_packets;
    assert_eq!(topo.ping(0, 3), 3, "h1 -> h2 again");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        packet_ins(&log),
        before,
        "the second ping caused packet_ins:\n{}",
        tail(&log, 20)
    );
    wait_for(
        "the learned flow counts the second ping",
        Duration::from_secs(5),
        || {
            let d = sut.dump();
            let n = d
                .iter()
                .find(|f| f.has("priority=1") && f.has("in_port=1") && f.actions == "output:2")
                .map(|f| f.n_packets)
                .unwrap_or(0);
            n >= n_before + 3
        },
    );
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("Traceback"),
        "os-ken raised:\n{}",
        tail(&log, 40)
    );
}

// ---- (c) Faucet -------------------------------------------------------------------------

const FAUCET_YAML: &str = "\
vlans:
  office:
    vid: 100
dps:
  sw1:
    dp_id: 0x1
    hardware: \"Open vSwitch\"
    interfaces:
      1:
        name: \"h1\"
        native_vlan: office
      2:
        name: \"h2\"
        native_vlan: office
";

#[test]
fn faucet_vlan_pipeline_connects_two_hosts() {
    need!(H, need_root_netns());
    need!(H, H.need_tools(&["ovs-ofctl", "ping", "ss"]));
    need!(H, need_peer());
    need!(H, venv_bin("faucet"));
    let faucet = venv_bin("faucet").unwrap();
    let _serial = serial();
    let tmp = H.scratch(&format!("fpofc-{}", std::process::id()));
    let topo = Topo::new("c");

    let d = &tmp.0;
    std::fs::write(d.join("faucet.yaml"), FAUCET_YAML).unwrap();
    let flog = d.join("faucet.log");
    let exlog = d.join("faucet_exception.log");
    let out = d.join("faucet.out");
    let mut c = in_ns(&topo.sw.0, &faucet);
    // faucet execs osken-manager from PATH.
    let path = format!(
        "{}:{}",
        faucet.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    c.env("PATH", path)
        .env("FAUCET_CONFIG", d.join("faucet.yaml"))
        .env("FAUCET_LOG", &flog)
        .env("FAUCET_EXCEPTION_LOG", &exlog)
        .env("FAUCET_PROMETHEUS_ADDR", "127.0.0.1")
        .env("FAUCET_PROMETHEUS_PORT", "9302")
        .args([
            "--ryu-ofp-listen-host",
            "127.0.0.1",
            "--ryu-ofp-tcp-listen-port",
            &CONTROLLER_PORT.to_string(),
        ]);
    let mut fc = Proc::spawn(c, "faucet", &out);
    wait_listening(&topo.sw.0, CONTROLLER_PORT, &mut fc, &out);
    let sut = Sut::with_controller(&topo.sw.0, &tmp.0);

    // Faucet's pipeline: vlan (0), eth_src (1), eth_dst (2), flood (3).
    wait_for(
        "Faucet installs its pipeline (tables 0-3)",
        Duration::from_secs(40),
        || {
            let f = sut.dump();
            let tables: BTreeSet<&str> = ["table=0", "table=1", "table=2", "table=3"]
                .into_iter()
                .filter(|t| f.iter().any(|x| x.has(t)))
                .collect();
            tables.len() == 4 && f.len() >= 15
        },
    );
    topo.first_ping(&sut, &flog);
    assert_eq!(topo.ping(0, 3), 3, "h1 -> h2");
    assert_eq!(topo.ping(1, 3), 3, "h2 -> h1");

    let flows = sut.dump();
    let show = || flows.iter().map(Flow::key).collect::<Vec<_>>().join("\n  ");
    for port in [1, 2] {
        assert!(
            flows.iter().any(|f| f.has("table=0")
                && f.has(&format!("in_port={port}"))
                && f.actions == "push_vlan:0x8100,set_field:4196->vlan_vid,goto_table:1"),
            "port {port}'s untagged frames get VLAN 100 in table 0:\n  {}",
            show()
        );
        assert!(
            flows.iter().any(|f| f.has("table=1")
                && f.has(&format!("dl_src=02:00:00:00:00:0{port}"))
                && f.has("dl_vlan=100")),
            "h{port}'s MAC learned in table 1:\n  {}",
            show()
        );
        assert!(
            flows.iter().any(|f| f.has("table=2")
                && f.has(&format!("dl_dst=02:00:00:00:00:0{port}"))
                && f.actions == format!("pop_vlan,output:{port}")),
            "h{port}'s MAC forwarded in table 2:\n  {}",
            show()
        );
    }
    assert!(
        flows.iter().any(|f| f.has("table=3")
            && f.has("dl_vlan=100")
            && f.actions == "pop_vlan,output:1,output:2"),
        "VLAN 100 floods in table 3:\n  {}",
        show()
    );

    // No OpenFlow error came back (Faucet logs each as "OFError type: ... code: ..."), and
    // nothing else went wrong. "send_flow_msgs: DP not up" is Faucet's own start-up race
    // (logged against OVS too).
    let log = std::fs::read_to_string(&flog).unwrap_or_default();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("OFError") || (l.contains("ERROR") && !l.contains("DP not up")))
        .collect();
    assert!(bad.is_empty(), "Faucet logged errors:\n{}", bad.join("\n"));
    let ex = std::fs::read_to_string(&exlog).unwrap_or_default();
    assert!(ex.trim().is_empty(), "Faucet's exception log:\n{ex}");
}
