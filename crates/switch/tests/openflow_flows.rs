//! The OpenFlow channel over a real TCP connection, with a minimal client built on the
//! codec: flow_mods (one rule set shared with the control socket, batched adds, modify,
//! delete with FLOW_REMOVED), roles, an active connection that reconnects under each fail
//! mode, and OpenFlow changes kept in the state file. Needs nothing but loopback TCP.

mod common;

use common::dump;
use common::openflow::{add, start, start_with, stop, with_channel, Client};
use flowpath_openflow::consts::*;
use flowpath_openflow::{FlowMod, Instruction, Message, OfAction, Oxm, OxmField, Role};
use flowpath_switch::openflow::{OpenFlowConfig, Target};
use flowpath_switch::{Op, Request, Switch, SwitchConfig};
use std::io::Write;
use std::time::Duration;

/// A TCP port nothing listens on (for now).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn flow_mods_share_the_rule_set_with_the_control_socket() {
    with_channel(|sw, addr| {
        let mut c = Client::connect(addr);
        c.send(&add(
            0,
            100,
            vec![
                Oxm::exact(OxmField::EthType, 0x0800),
                Oxm::exact(OxmField::IpProto, 6),
                Oxm::masked(OxmField::Ipv4Dst, 0x0a00_0000, 0xff00_0000),
                Oxm::exact(OxmField::TcpDst, 80),
            ],
            vec![OfAction::output(2)],
        ));
        assert!(c.barrier().is_empty(), "no error expected");
        let lines = dump(sw);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("priority=100")
                && lines[0].contains("tcp")
                && lines[0].contains("nw_dst=10.0.0.0/8")
                && lines[0].contains("tp_dst=80")
                && lines[0].contains("actions=output:2"),
            "{}",
            lines[0]
        );
        // And the other way: a flow added on the control socket is in the flow stats.
        let r = sw.handle(&Request {
            op: Op::Add,
            text: "table=1,priority=7,udp,tp_src=53 actions=drop".into(),
        });
        assert!(r.error.is_none(), "{:?}", r.error);
        let stats = c.flow_stats();
        assert_eq!(stats.len(), 2);
        let t1 = stats.iter().find(|f| f.table_id == 1).unwrap();
        assert_eq!(t1.priority, 7);
        assert!(t1.match_.contains(&Oxm::exact(OxmField::UdpSrc, 53)));
        let t0 = stats.iter().find(|f| f.table_id == 0).unwrap();
        assert!(t0
            .match_
            .contains(&Oxm::masked(OxmField::Ipv4Dst, 0x0a00_0000, 0xff00_0000)));
        assert_eq!(
            t0.instructions,
            vec![Instruction::ApplyActions(vec![OfAction::output(2)])]
        );
    });
}

#[test]
fn a_stream_of_adds_is_applied_in_few_batches_and_all_arrive() {
    with_channel(|sw, addr| {
        let mut c = Client::connect(addr);
        let v0 = sw.store().version();
        let n = 20_000u32;
        let mut bytes = Vec::new();
        for i in 0..n {
            let m = add(
                0,
                100,
                vec![
                    Oxm::exact(OxmField::EthType, 0x0800),
                    Oxm::exact(OxmField::Ipv4Dst, 0x0a00_0000 + i as u128),
                ],
                vec![OfAction::output(1 + i % 4)],
            );
            bytes.extend(m.encode(i));
        }
        c.s.write_all(&bytes).unwrap();
        assert!(c.barrier().is_empty());
        assert_eq!(sw.store().snapshot().rules().count(), n as usize);
        let versions = sw.store().version() - v0;
        assert!(
            versions < n as u64 / 10,
            "{n} adds took {versions} rule-set versions: they were not batched"
        );
    });
}

#[test]
fn delete_sends_flow_removed_to_who_asked_and_modify_keeps_counters() {
    with_channel(|sw, addr| {
        let mut c = Client::connect(addr);
        let mut fm = FlowMod {
            command: OFPFC_ADD,
            priority: 5,
            cookie: 0xabc,
            idle_timeout: 60,
            flags: OFPFF_SEND_FLOW_REM,
            match_: vec![Oxm::exact(OxmField::InPort, 3)],
            instructions: vec![Instruction::ApplyActions(vec![OfAction::output(1)])],
            ..FlowMod::default()
        };
        c.send(&Message::FlowMod(fm.clone()));
        // One without the flag: no FLOW_REMOVED for it.
        c.send(&add(0, 6, vec![Oxm::exact(OxmField::InPort, 4)], vec![]));
        assert!(c.barrier().is_empty());
        // Modify (non-strict, by cookie): new actions, same rule.
        fm.command = OFPFC_MODIFY;
        fm.cookie_mask = u64::MAX;
        fm.match_ = Vec::new();
        fm.instructions = vec![Instruction::ApplyActions(vec![OfAction::output(9)])];
        c.send(&Message::FlowMod(fm.clone()));
        assert!(c.barrier().is_empty());
        let lines = dump(sw);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("in_port=3") && l.contains("output:9")),
            "{lines:?}"
        );
        // Delete everything.
        c.send(&Message::FlowMod(FlowMod {
            command: OFPFC_DELETE,
            table_id: OFPTT_ALL,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            ..FlowMod::default()
        }));
        let got = c.barrier();
        assert_eq!(got.len(), 1, "{got:?}");
        match &got[0].1 {
            Message::FlowRemoved(r) => {
                assert_eq!((r.cookie, r.priority, r.reason), (0xabc, 5, OFPRR_DELETE));
                assert!(r.match_.contains(&Oxm::exact(OxmField::InPort, 3)));
            }
            other => panic!("{other:?}"),
        }
        assert!(dump(sw).is_empty());
    });
}

#[test]
fn a_slave_cannot_change_flows_and_a_stale_master_is_refused() {
    with_channel(|sw, addr| {
        let mut a = Client::connect(addr);
        let mut b = Client::connect(addr);
        let x = a.send(&Message::RoleRequest(Role {
            role: OFPCR_ROLE_MASTER,
            generation_id: 10,
        }));
        assert_eq!(
            a.recv(),
            (
                x,
                Message::RoleReply(Role {
                    role: OFPCR_ROLE_MASTER,
                    generation_id: 10
                })
            )
        );
        // b asks with an older generation: stale.
        let x = b.send(&Message::RoleRequest(Role {
            role: OFPCR_ROLE_MASTER,
            generation_id: 9,
        }));
        match b.recv() {
            (xid, Message::Error { type_, code, .. }) => {
                assert_eq!((xid, type_, code), (x, et::ROLE_REQUEST_FAILED, 1))
            }
            other => panic!("{other:?}"),
        }
        // b becomes master with a newer one: a is now a slave and may not add flows.
        let x = b.send(&Message::RoleRequest(Role {
            role: OFPCR_ROLE_MASTER,
            generation_id: 11,
        }));
        assert!(matches!(b.recv(), (xid, Message::RoleReply(_)) if xid == x));
        let x = a.send(&add(0, 1, vec![], vec![]));
        let errs = a.barrier();
        assert!(
            matches!(errs.as_slice(), [(xid, Message::Error { type_, code, .. })] if *xid == x && *type_ == et::BAD_REQUEST && *code == brc::IS_SLAVE),
            "{errs:?}"
        );
        assert!(dump(sw).is_empty());
    });
}

/// Accept the switch's active connection on `l` and do the HELLO exchange.
fn accept_switch(l: &std::net::TcpListener) -> Client {
    Client::hello(l.accept().unwrap().0, 500)
}

fn fail_open_flows(sw: &Switch) -> usize {
    dump(sw)
        .iter()
        .filter(|l| l.contains("actions=NORMAL") && l.contains("priority=0"))
        .count()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_active_connection_reconnects_and_standalone_mode_learns_while_no_controller_is_there() {
    use flowpath_switch::openflow::FailMode;
    // The controller is not there yet.
    let port = free_port();
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let cfg = OpenFlowConfig {
        targets: vec![Target::parse(&format!("tcp:127.0.0.1:{port}")).unwrap()],
        fail_mode: FailMode::Standalone,
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        ..OpenFlowConfig::default()
    };
    let (ch, stop_flag) = start_with(&sw, cfg);
    // No controller: a learning switch (one NORMAL flow), and connect attempts counted.
    assert_eq!(fail_open_flows(&sw), 1);
    wait_for("a failed connect", || ch.counters().connect_failures > 0);
    // The controller comes up: the switch connects, and the fail-open flow goes.
    let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let mut c = accept_switch(&l);
    wait_for("the fail-open flow to go", || fail_open_flows(&sw) == 0);
    let x = c.send(&Message::FeaturesRequest);
    assert!(matches!(c.recv(), (xid, Message::FeaturesReply(_)) if xid == x));
    // The controller goes away: standalone again, and the switch comes back by itself.
    drop(c);
    wait_for("the fail-open flow to return", || fail_open_flows(&sw) == 1);
    let mut c = accept_switch(&l);
    wait_for("the fail-open flow to go again", || {
        fail_open_flows(&sw) == 0
    });
    assert!(c.barrier().is_empty());
    stop(ch, stop_flag);
}

#[test]
fn secure_mode_keeps_the_flows_while_the_controller_is_away() {
    let port = free_port();
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let cfg = OpenFlowConfig {
        targets: vec![Target::parse(&format!("tcp:127.0.0.1:{port}")).unwrap()],
        backoff_min: Duration::from_millis(20),
        ..OpenFlowConfig::default()
    };
    let (ch, stop_flag) = start_with(&sw, cfg);
    let mut c = accept_switch(&l);
    c.send(&add(0, 9, vec![], vec![OfAction::output(1)]));
    assert!(c.barrier().is_empty());
    drop(c);
    drop(l);
    std::thread::sleep(Duration::from_millis(300));
    let lines = dump(&sw);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("output:1"));
    stop(ch, stop_flag);
}

#[test]
fn openflow_changes_reach_the_state_file_and_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("flowpath-of-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = SwitchConfig {
        state: Some(dir.join("flows.state")),
        ..SwitchConfig::default()
    };
    {
        let sw = Switch::open(cfg.clone()).unwrap();
        let (ch, st, addr) = start(&sw);
        let mut c = Client::connect(addr);
        // As ovs-ofctl add-flows does: a barrier after every flow_mod.
        for i in 0..50u32 {
            c.send(&add(
                0,
                100,
                vec![
                    Oxm::exact(OxmField::EthType, 0x0800),
                    Oxm::exact(OxmField::Ipv4Dst, 0x0a00_0000 + i as u128),
                ],
                vec![OfAction::output(1)],
            ));
            assert!(c.barrier().is_empty());
        }
        c.send(&Message::GroupMod(flowpath_openflow::GroupMod {
            command: OFPGC_ADD,
            group_type: OFPGT_ALL,
            group_id: 5,
            buckets: vec![flowpath_openflow::Bucket {
                weight: 0,
                watch_port: OFPP_ANY,
                watch_group: OFPG_ANY,
                actions: vec![OfAction::output(2)],
            }],
        }));
        c.send(&add(0, 200, vec![], vec![OfAction::Group(5)]));
        assert!(c.barrier().is_empty());
        drop(c);
        stop(ch, st);
    }
    let sw = Switch::open(cfg).unwrap();
    let snap = sw.store().snapshot();
    assert_eq!(snap.rules().count(), 51);
    assert!(snap.groups().get(5).is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}
