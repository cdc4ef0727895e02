//! `flowpath trace`, `explain` and `dump-megaflows` as a user runs them: offline answers
//! on a generated capture, and every kind of bad input answered by a clear error that
//! names the position (column, character, record and byte, frame), exit status 1 or 2,
//! never a panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A failure with a message containing `want` (and no panic).
fn fails_with(args: &[&str], want: &str) {
    let o = run(args);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{args:?} succeeded: {out}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert!(err.contains(want), "{args:?}: wanted '{want}' in: {err}");
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fp-inspect-cli-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn capture(d: &Path) -> PathBuf {
    let p = d.join("tcp.pcap");
    let o = run(&[
        "gen",
        "--flows",
        "4",
        "--proto",
        "tcp",
        "--dport",
        "80",
        "--packets",
        "4",
        "--out",
        p.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{:?}", text(&o));
    p
}

const FLOWS: &str = "table=0,priority=100,ip,nw_dst=192.168.0.0/16 actions=dec_ttl,goto_table:1
table=0,priority=0 actions=drop
table=1,priority=10,tcp,tp_dst=80 actions=output:2
";

/// A scratch directory for `test` holding a generated capture and FLOWS: (directory,
/// capture, flows file).
fn inputs(test: &str) -> (PathBuf, PathBuf, PathBuf) {
    let d = dir(test);
    let pcap = capture(&d);
    let flows = d.join("flows.txt");
    std::fs::write(&flows, FLOWS).unwrap();
    (d, pcap, flows)
}

#[test]
fn explain_and_trace_answer_offline() {
    let (d, pcap, flows) = inputs("offline");
    let (p, f) = (pcap.to_str().unwrap(), flows.to_str().unwrap());

    let o = run(&["explain", p]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert_eq!(out.lines().count(), 4);
    assert!(out.starts_with("frame 1 (60 bytes): in_port=1,"), "{out}");
    assert!(
        out.contains("nw_proto=6") && out.contains("tp_dst=80"),
        "{out}"
    );

    let o = run(&[
        "explain",
        p,
        "--json",
        "--classify",
        "--flows",
        f,
        "--frame",
        "2",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["frame"], 2);
    assert_eq!(v["tp_dst"], 80);
    assert_eq!(v["actions"], "dec_ttl,output:2");
    assert_eq!(v["rules"].as_array().unwrap().len(), 2);

    // The line explain prints is a packet trace takes; trace --pcap gives the same.
    let line = text(&run(&["explain", p, "--frame", "1"])).0;
    let flow = line.trim().split_once(": ").unwrap().1.to_string();
    let by_flow = text(&run(&["trace", "--flows", f, &flow, "--json"])).0;
    let by_frame = text(&run(&[
        "trace", "--flows", f, "--pcap", p, "--frame", "1", "--json",
    ]))
    .0;
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&by_flow).unwrap(),
        serde_json::from_str(&by_frame).unwrap(),
    );
    assert_eq!(a, b);
    assert_eq!(a["actions"], "dec_ttl,output:2");
    assert_eq!(a["steps"].as_array().unwrap().len(), 2);

    let o = run(&["trace", "--flows", f, "arp"]);
    let (out, _) = text(&o);
    assert!(
        out.contains("Result: dropped by the rules' actions (drop)"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_gets_an_error_that_names_the_position() {
    let (d, pcap, flows) = inputs("bad");
    let (p, f) = (pcap.to_str().unwrap(), flows.to_str().unwrap());
    let bytes = std::fs::read(&pcap).unwrap();
    let cut = d.join("cut.pcap");
    std::fs::write(&cut, &bytes[..150]).unwrap();
    let c = cut.to_str().unwrap();
    let bad_flows = d.join("bad-flows.txt");
    std::fs::write(
        &bad_flows,
        "priority=1 actions=drop\nip,nw_sr=1.2.3.4 actions=drop\n",
    )
    .unwrap();

    // Cut short inside record 2: record 1 is explained, after a warning naming where.
    let o = run(&["explain", c]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("cut short") && err.contains("record 2 at byte 100"),
        "{err}"
    );
    assert_eq!(out.lines().count(), 1, "{out}");
    fails_with(&["explain", p, "--frame", "9"], "--frame 9: no such frame");
    fails_with(&["explain", "/nonexistent.pcap"], "No such file");
    fails_with(
        &[
            "explain",
            p,
            "--classify",
            "--flows",
            bad_flows.to_str().unwrap(),
        ],
        "line 2",
    );
    fails_with(&["trace", "--flows", f, "tcp,nw_sr=10.0.0.1"], "column");
    fails_with(
        &["trace", "--flows", f, "--packet", "0200 00zz"],
        "character 8",
    );
    fails_with(&["trace", "--flows", f, "--packet", "020"], "odd");
    fails_with(
        &["trace", "--flows", f, "--pcap", p, "--frame", "0"],
        "no such frame",
    );
    fails_with(
        &["trace", "--flows", f, "--pcap", c, "--frame", "2"],
        "record 2 at byte 100",
    );
    fails_with(
        &["trace", "--flows", f, "--pcap", c, "--frame", "2"],
        "no such frame",
    );
    fails_with(&["trace", "--flows", f, "tcp,tp_dst=1-5"], "not a range");
    fails_with(&["trace", "--flows", "/nonexistent", "tcp"], "/nonexistent");
    // Without a switch: the socket is named.
    let sock = d.join("none.sock");
    fails_with(
        &["dump-megaflows", "--control", sock.to_str().unwrap()],
        "none.sock",
    );
    fails_with(
        &["trace", "--control", sock.to_str().unwrap(), "tcp"],
        "none.sock",
    );
    // A frame too short to parse is traced to its drop reason, not refused.
    let o = run(&["trace", "--flows", f, "--packet", "0200000000020200"]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(out.contains("Parse: dropped (eth_truncated)"), "{out}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A stateful firewall in two zones: each `ct(table=T)` starts a pass of its own.
const CT_FLOWS: &str = "table=0,priority=10,ip,ct_state=-trk actions=ct(table=1,zone=1)
table=1,priority=10,ip,ct_state=+trk+new actions=ct(commit,zone=1),ct(table=2,zone=2)
table=1,priority=10,ip,ct_state=+trk+est actions=output:2
table=2,priority=10,ip,ct_state=+trk+est actions=output:3
table=2,priority=0 actions=drop
";

#[test]
fn trace_follows_ct_into_further_passes_with_ct_next() {
    let d = dir("ct");
    let flows = d.join("fw.txt");
    std::fs::write(&flows, CT_FLOWS).unwrap();
    let f = flows.to_str().unwrap();
    let udp = "udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,tp_dst=53";

    // Three passes: the flags in the order given, in either of OVS's forms.
    let args = [
        "trace",
        "--flows",
        f,
        "--ct-next",
        "trk,new",
        "--ct-next",
        "+trk+est",
        udp,
    ];
    let o = run(&args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let want = [
        "Datapath actions: ct(table=1,zone=1)",
        "Pass 2 (recirculated to table 1, ct_state=+new+trk, ct_zone=1)",
        "from pass 1, table 0: ct(table=1,zone=1)",
        "table 1: priority=10,ct_state=+new+trk,ip",
        "Datapath actions: ct(commit,zone=1),ct(table=2,zone=2)",
        "Pass 3 (recirculated to table 2, ct_state=+est+trk, ct_zone=2)",
        "from pass 2, table 1: ct(table=2,zone=2)",
        "table 2: priority=10,ct_state=+est+trk,ip",
        "Datapath actions: output:3",
        "Result: sent to port 3",
    ];
    let mut at = 0;
    for w in want {
        let i = out[at..]
            .find(w)
            .unwrap_or_else(|| panic!("'{w}' missing (in this order) from:\n{out}"));
        at += i + w.len();
    }

    // No --ct-next: OVS's default, trk,new, for every pass.
    let out = text(&run(&["trace", "--flows", f, udp])).0;
    assert!(
        out.contains("Pass 3 (recirculated to table 2, ct_state=+new+trk, ct_zone=2)"),
        "{out}"
    );
    assert!(out.contains("ct_state +new+trk: the default"), "{out}");
    assert!(
        out.ends_with("Result: dropped by the rules' actions (drop)\n"),
        "{out}"
    );

    // --json carries the passes.
    let json = text(&run(&[
        "trace",
        "--flows",
        f,
        "--ct-next",
        "trk,est",
        udp,
        "--json",
    ]))
    .0;
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["passes"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(v["passes"][0]["ct_state"], "+est+trk");
    assert_eq!(v["passes"][0]["actions"], "output:2");

    // Bad flags are named, offline and before a switch is asked.
    fails_with(
        &["trace", "--flows", f, "--ct-next", "trk,nwe", udp],
        "--ct-next 'trk,nwe': unknown ct_state flag 'nwe'",
    );
    let sock = d.join("none.sock");
    fails_with(
        &[
            "trace",
            "--control",
            sock.to_str().unwrap(),
            "--ct-next",
            "est",
            udp,
        ],
        "without trk",
    );
    let _ = std::fs::remove_dir_all(&d);
}
