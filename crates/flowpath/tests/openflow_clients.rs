//! `ovs-ofctl` against the switch, the way people run it: add-flow(s), dump-flows,
//! -aggregate, -tables, -ports, groups, refused flows, del-flows (strict or not), and one
//! rule store with flowpath's control socket. os-ken and Faucet: `openflow_controllers.rs`;
//! what both share: `openflow_support/mod.rs`.
//!
//! By default the switch under test is flowpath (`flowpath run --openflow ptcp:...`, no
//! ports). `FLOWPATH_OPENFLOW_PEER=ovs` runs the very same scenario against Open vSwitch
//! (`ovs-vswitchd`, netdev datapath, private run directory) to validate the harness and the
//! expectations: it passes against OVS.
//!
//! Needs root, network namespaces and ovs-ofctl (and Open vSwitch for the OVS peer) from
//! `scripts/setup-openflow-peers.sh`. The test says it skips, naming what is missing, unless
//! `FLOWPATH_OPENFLOW_REQUIRED=1` (CI as root, after that script), where a missing peer fails;
//! `FLOWPATH_OPENFLOW_KEEP` keeps its scratch directory. The switch and ovs-ofctl run in
//! namespace `fpofa-<pid>` (OpenFlow over its loopback), which goes on drop, also when the
//! test fails.

mod common;
mod openflow_support;
use common::harness::{in_ns, need, need_root_netns, out_text, run_ok, serial, Netns};
use openflow_support::*;

// ---- (a) ovs-ofctl ----------------------------------------------------------------------

fn golden_flows() -> Vec<Flow> {
    parse_dump(&std::fs::read_to_string(format!("{DATA}/flows.dump")).unwrap())
}

fn single_flow() -> Flow {
    parse_dump(
        " cookie=0x0, table=0, n_packets=0, n_bytes=0, priority=5,ip,nw_dst=10.0.0.0/8 actions=output:1",
    )
    .remove(0)
}

#[test]
fn ovs_ofctl_programs_and_dumps_the_switch() {
    need!(H, H.need_tools(&["ovs-ofctl"]));
    need!(H, need_root_netns());
    need!(H, need_peer());
    let _serial = serial();
    let tmp = H.scratch(&format!("fpofa-{}", std::process::id()));
    let ns = Netns::new(format!("fpofa-{}", std::process::id()), false);
    let sut = Sut::no_ports(&ns.0, &tmp.0);

    // OVS starts with a NORMAL flow; del-flows without a match empties every table.
    sut.ofctl_ok("del-flows", &[]);
    assert_eq!(sut.dump(), vec![], "no flows after del-flows");

    // add-flow, then add-flows of a file (each flow_mod is followed by a barrier).
    sut.ofctl_ok(
        "add-flow",
        &["table=0,priority=5,ip,nw_dst=10.0.0.0/8,actions=output:1"],
    );
    assert_same_flows(&sut.dump(), &[single_flow()], "after add-flow");
    sut.ofctl_ok("add-flows", &[&format!("{DATA}/flows.txt")]);
    let mut want = golden_flows();
    assert!(want.len() >= 20, "flows.dump holds the file's flows");
    want.push(single_flow());
    let got = sut.dump();
    assert_same_flows(
        &got,
        &want,
        "dump-flows after add-flows (fields as OVS dumps them)",
    );
    assert!(
        got.iter().all(|f| f.n_packets == 0),
        "no traffic: every counter 0"
    );

    let agg = sut.ofctl_ok("dump-aggregate", &[]);
    assert!(
        agg.contains(&format!("flow_count={}", want.len())),
        "dump-aggregate: {agg}"
    );

    let tables = parse_tables(&sut.ofctl_ok("dump-tables", &[]));
    for t in 0..=2u8 {
        let n = want.iter().filter(|f| f.has(&format!("table={t}"))).count() as u64;
        assert_eq!(
            tables.get(&t),
            Some(&n),
            "dump-tables: active flows of table {t}: {tables:?}"
        );
    }
    let pd = sut.ofctl_ok("dump-ports-desc", &[]);
    assert!(pd.contains("OFPST_PORT_DESC reply (OF1.3)"), "{pd}");
    let ps = sut.ofctl_ok("dump-ports", &[]);
    assert!(ps.contains("OFPST_PORT reply (OF1.3)"), "{ps}");

    // Groups: add one, dump it back.
    sut.ofctl_ok(
        "add-group",
        &["group_id=1,type=all,bucket=output:1,bucket=output:2"],
    );
    let g = sut.ofctl_ok("dump-groups", &[]);
    assert!(
        g.contains("group_id=1,type=all,bucket=actions=output:1,bucket=actions=output:2"),
        "dump-groups: {g}"
    );

    // Refused flows: the switch answers with an OpenFlow error and installs nothing.
    // ovs-ofctl checks prerequisites itself, so a bad prerequisite goes in raw.
    let o = sut.ofctl("add-flow", &["table=0,priority=9,actions=group:99"]);
    let t = out_text(&o);
    assert!(
        !o.status.success() && t.contains("OFPT_ERROR") && t.contains("OFPBAC_BAD_OUT_GROUP"),
        "a flow to a missing group is refused with OFPBAC_BAD_OUT_GROUP, which ovs-ofctl prints: {t}"
    );
    let o = run_ok(in_ns(&ns.0, "python3").args([
        &format!("{DATA}/raw_flow_mod.py"),
        "127.0.0.1",
        &LISTEN_PORT.to_string(),
        "bad_prereq",
    ]));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("error xid=2 type=4 code=9") && t.contains("barrier"),
        "tcp_dst without ip_proto=6 is refused with OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ (4/9): {t}"
    );
    assert_same_flows(&sut.dump(), &want, "refused flows left nothing behind");

    // del-flows with a match (non-strict: every flow at least as specific), then strict.
    sut.ofctl_ok("del-flows", &["table=1,tcp"]);
    want.retain(|f| !(f.has("table=1") && f.has("tcp")));
    assert_same_flows(&sut.dump(), &want, "after del-flows table=1,tcp");
    let o = sut.ofctl_opts(&["--strict"], "del-flows", &["table=2,priority=5"]);
    assert!(o.status.success(), "del-flows --strict: {}", out_text(&o));
    want.retain(|f| !(f.has("table=2") && f.has("priority=5")));
    assert_same_flows(
        &sut.dump(),
        &want,
        "after del-flows --strict table=2,priority=5",
    );

    // One rule store: flowpath's control socket and OpenFlow see the same flows.
    if peer() == Peer::Flowpath {
        sut.flows_cli(
            "add",
            Some("table=3,priority=9,udp,tp_dst=4789 actions=output:1"),
        );
        let d = sut.dump();
        assert!(
            d.iter().any(|f| f.has("table=3")
                && f.has("priority=9")
                && f.has("udp")
                && f.has("tp_dst=4789")
                && f.actions == "output:1"),
            "a flow added over the control socket shows in ovs-ofctl dump-flows: {d:?}"
        );
        sut.ofctl_ok(
            "add-flow",
            &["table=4,priority=8,ip,nw_src=10.9.0.0/16,actions=output:2"],
        );
        let cli = sut.flows_cli("dump", None);
        assert!(
            cli.lines()
                .any(|l| l.contains("table=4") && l.contains("10.9.0.0/16")),
            "a flow added by ovs-ofctl shows in `flowpath flows dump`:\n{cli}"
        );
    }

    sut.ofctl_ok("del-flows", &[]);
    assert_eq!(sut.dump(), vec![], "del-flows empties every table");
    let agg = sut.ofctl_ok("dump-aggregate", &[]);
    assert!(agg.contains("flow_count=0"), "{agg}");
}
