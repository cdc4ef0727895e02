//! Connection tracking over the OpenFlow channel with the real client: `ovs-ofctl -O
//! OpenFlow13 add-flows` installs a security-group flow set with `ct` actions and ct_state
//! matches (recirculation, commit with a ct_mark write, NAT, ct_clear), and `dump-flows`
//! shows every flow as OVS prints the same flow text (`ovs-ofctl parse-flow`, OVS's own
//! encoding and formatting), compared field by field. Loopback TCP only; skips with a
//! message where ovs-ofctl is missing.

mod common;

use common::openflow::{start, stop};
use flowpath_switch::{Switch, SwitchConfig};
use std::collections::BTreeMap;
use std::process::Command;

/// The flow set: a stateful firewall in zone 1 with a DNAT'd web service.
const FLOWS: &[&str] = &[
    "table=0,ip,ct_state=-trk,actions=ct(table=1,zone=1)",
    "table=0,priority=5,ip,ct_state=+trk,actions=ct_clear,output:4",
    "table=1,ip,ct_state=+trk+new,actions=ct(commit,zone=1,exec(set_field:0x1->ct_mark)),output:2",
    "table=1,ip,ct_state=+trk+est,actions=output:2",
    "table=1,priority=200,tcp,ct_state=+trk+new,tp_dst=80,actions=ct(commit,zone=1,nat(dst=10.0.0.10:8080)),output:3",
    "table=1,priority=50,ip,ct_state=+trk+est+rpl,ct_mark=0x1,actions=ct(table=2,zone=1,nat),output:1",
    "table=1,priority=40,ip,ct_state=+trk+new,actions=ct(commit,zone=1,nat(src=192.168.0.1-192.168.0.9:1024-2048,random)),output:2",
    "table=1,priority=300,ip,ct_state=+trk+inv,actions=drop",
];

fn have_ovs_ofctl() -> bool {
    Command::new("ovs-ofctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn ofctl(args: &[&str]) -> String {
    let out = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "--no-names"])
        .args(args)
        .output()
        .expect("runs ovs-ofctl");
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A flow as OVS prints it, in fields: `table`, `priority`, each match field (`ip`,
/// `ct_state`, ...) and `actions`, without the counters and ages a dump adds.
fn fields(line: &str) -> BTreeMap<String, String> {
    let line = line.trim();
    let (m, actions) = line.split_once(" actions=").expect("a flow with actions");
    let mut out = BTreeMap::from([
        ("table".to_string(), "0".to_string()),
        ("priority".to_string(), "32768".to_string()),
        ("actions".to_string(), actions.to_string()),
    ]);
    let skip = [
        "cookie",
        "duration",
        "n_packets",
        "n_bytes",
        "idle_age",
        "hard_age",
    ];
    for f in m.split([',', ' ']).filter(|f| !f.is_empty()) {
        let (k, v) = f.split_once(['=', ':']).unwrap_or((f, ""));
        if !skip.contains(&k) {
            out.insert(k.to_string(), v.to_string());
        }
    }
    out
}

/// What OVS makes of `flow`: `ovs-ofctl parse-flow` prints the flow_mod it would send,
/// formatted from its own encoding.
fn as_ovs_prints(flow: &str) -> BTreeMap<String, String> {
    let out = ofctl(&["parse-flow", flow]);
    let line = out.lines().last().expect("parse-flow prints the flow_mod");
    let (_, body) = line.split_once(": ADD ").expect("an ADD");
    fields(body)
}

#[test]
fn ovs_ofctl_adds_and_dumps_a_security_group_with_ct() {
    if !have_ovs_ofctl() {
        eprintln!("skipped: ovs-ofctl is not installed (apt install openvswitch-common)");
        return;
    }
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let (ch, st, addr) = start(&sw);
    let target = format!("tcp:{addr}");
    let dir = std::env::temp_dir().join(format!("flowpath-ct-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("flows.txt");
    std::fs::write(&file, FLOWS.join("\n") + "\n").unwrap();
    ofctl(&["add-flows", &target, file.to_str().unwrap()]);
    let dump = ofctl(&["dump-flows", &target]);
    eprintln!("{dump}");
    stop(ch, st);
    let _ = std::fs::remove_dir_all(&dir);

    let mut got: Vec<BTreeMap<String, String>> = dump
        .lines()
        .filter(|l| l.contains(" actions="))
        .map(fields)
        .collect();
    let mut want: Vec<BTreeMap<String, String>> = FLOWS.iter().map(|f| as_ovs_prints(f)).collect();
    assert_eq!(got.len(), want.len(), "dump:\n{dump}");
    let key = |f: &BTreeMap<String, String>| format!("{:?}", f);
    got.sort_by_key(key);
    want.sort_by_key(key);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "dump:\n{dump}");
    }
    // One of them spelled out, as the operator sees it.
    let commit = FLOWS[2];
    let w = as_ovs_prints(commit);
    assert_eq!(w["ct_state"], "+new+trk");
    assert_eq!(
        w["actions"],
        "ct(commit,zone=1,exec(set_field:0x1->ct_mark)),output:2"
    );
    assert!(got.contains(&w), "dump:\n{dump}");
}
