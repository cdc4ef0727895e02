//! The OpenFlow channel over a real TCP connection, with a minimal client built on the
//! codec: version negotiation, features, flow_mods (batched adds, modify, delete with
//! FLOW_REMOVED), errors with the right type and code that leave nothing half-applied,
//! multipart replies, barrier, echo, roles; and one rule set shared with the control
//! socket. (`crates/flowpath/tests/openflow_clients.rs` drives it with ovs-ofctl,
//! os-ken and Faucet.)

mod common;

use common::dump;
use flowpath_openflow::consts::*;
use flowpath_openflow::{
    decode, message_len, FlowMod, FlowStatsRequest, Instruction, Message, MultipartReply,
    MultipartRequest, OfAction, Oxm, OxmField, Role,
};
use flowpath_switch::openflow::{NoPacketIo, NoPorts, OpenFlowChannel, OpenFlowConfig, Target};
use flowpath_switch::{Op, Request, Switch, SwitchConfig};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

struct Client {
    s: TcpStream,
    buf: Vec<u8>,
    xid: u32,
}

impl Client {
    fn connect(addr: std::net::SocketAddr) -> Client {
        Client::hello(TcpStream::connect(addr).unwrap(), 100)
    }

    /// Do the HELLO exchange on `s`; the client's xids count up from `xid`.
    fn hello(s: TcpStream, xid: u32) -> Client {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut c = Client {
            s,
            buf: Vec::new(),
            xid,
        };
        c.send(&Message::hello());
        match c.recv() {
            (_, Message::Hello(_)) => {}
            other => panic!("expected HELLO, got {other:?}"),
        }
        c
    }

    fn send(&mut self, m: &Message) -> u32 {
        self.xid += 1;
        self.s.write_all(&m.encode(self.xid)).unwrap();
        self.xid
    }

    fn recv(&mut self) -> (u32, Message) {
        loop {
            if let Ok(Some(n)) = message_len(&self.buf) {
                if self.buf.len() >= n {
                    let raw: Vec<u8> = self.buf.drain(..n).collect();
                    let (h, m) = decode(&raw).expect("the switch sends valid messages");
                    return (h.xid, m);
                }
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).expect("read from the switch");
            assert!(n > 0, "the switch closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Send a barrier and collect everything up to its reply.
    fn barrier(&mut self) -> Vec<(u32, Message)> {
        let x = self.send(&Message::BarrierRequest);
        let mut got = Vec::new();
        loop {
            let (xid, m) = self.recv();
            if xid == x && matches!(m, Message::BarrierReply) {
                return got;
            }
            got.push((xid, m));
        }
    }

    fn flow_stats(&mut self) -> Vec<flowpath_openflow::FlowStats> {
        let x = self.send(&Message::MultipartRequest {
            flags: 0,
            body: MultipartRequest::Flow(FlowStatsRequest::default()),
        });
        let mut all = Vec::new();
        loop {
            let (xid, m) = self.recv();
            assert_eq!(xid, x);
            match m {
                Message::MultipartReply {
                    flags,
                    body: MultipartReply::Flow(f),
                } => {
                    all.extend(f);
                    if flags & OFPMPF_REPLY_MORE == 0 {
                        return all;
                    }
                }
                other => panic!("expected a flow stats reply, got {other:?}"),
            }
        }
    }
}

/// A channel on `sw` with no ports, run as `cfg` says.
fn start_with(sw: &Arc<Switch>, cfg: OpenFlowConfig) -> (OpenFlowChannel, Arc<AtomicBool>) {
    let stop = Arc::new(AtomicBool::new(false));
    let ch = OpenFlowChannel::start(
        sw.clone(),
        Arc::new(NoPorts),
        Arc::new(NoPacketIo),
        cfg,
        stop.clone(),
    )
    .unwrap();
    (ch, stop)
}

/// A channel listening on a free port of 127.0.0.1.
fn start(sw: &Arc<Switch>) -> (OpenFlowChannel, Arc<AtomicBool>, std::net::SocketAddr) {
    let cfg = OpenFlowConfig {
        targets: vec![Target::Listen("127.0.0.1:0".parse().unwrap())],
        ..OpenFlowConfig::default()
    };
    let (ch, stop) = start_with(sw, cfg);
    let addr = ch.listening[0];
    (ch, stop, addr)
}

/// A TCP port nothing listens on (for now).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Run `f` with a switch of the default config and a channel on it listening at `addr`;
/// the channel stops after.
fn with_channel(f: impl FnOnce(&Arc<Switch>, std::net::SocketAddr)) {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let (ch, st, addr) = start(&sw);
    f(&sw, addr);
    stop(ch, st);
}

fn stop(ch: OpenFlowChannel, stop: Arc<AtomicBool>) {
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    ch.join();
}

fn add(table: u8, priority: u16, m: Vec<Oxm>, actions: Vec<OfAction>) -> Message {
    Message::FlowMod(FlowMod {
        table_id: table,
        command: OFPFC_ADD,
        priority,
        match_: m,
        instructions: vec![Instruction::ApplyActions(actions)],
        ..FlowMod::default()
    })
}

#[test]
fn handshake_features_echo_and_desc() {
    with_channel(|_, addr| {
        let mut c = Client::connect(addr);
        let x = c.send(&Message::FeaturesRequest);
        match c.recv() {
            (xid, Message::FeaturesReply(f)) => {
                assert_eq!(xid, x);
                assert_eq!(f.datapath_id, OpenFlowConfig::default().datapath_id);
                assert_eq!(f.n_buffers, 0);
                assert!(f.n_tables >= 64);
            }
            other => panic!("{other:?}"),
        }
        let x = c.send(&Message::EchoRequest(b"ping".to_vec()));
        assert_eq!(c.recv(), (x, Message::EchoReply(b"ping".to_vec())));
        let x = c.send(&Message::MultipartRequest {
            flags: 0,
            body: MultipartRequest::Desc,
        });
        match c.recv() {
            (
                xid,
                Message::MultipartReply {
                    body: MultipartReply::Desc(d),
                    ..
                },
            ) => {
                assert_eq!(xid, x);
                assert!(d.sw_desc.starts_with("flowpath"));
            }
            other => panic!("{other:?}"),
        }
        // A message type that only switches send is refused with BAD_TYPE, and the
        // connection stays up.
        let x = c.send(&Message::BarrierReply);
        match c.recv() {
            (xid, Message::Error { type_, code, .. }) => {
                assert_eq!((xid, type_, code), (x, et::BAD_REQUEST, brc::BAD_TYPE));
            }
            other => panic!("{other:?}"),
        }
        assert!(c.barrier().is_empty());
    });
}

#[test]
fn a_client_offering_only_openflow_1_0_is_refused_with_hello_failed() {
    with_channel(|_, addr| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // An OpenFlow 1.0 HELLO: version 1, no elements.
        s.write_all(&[1, 0, 0, 8, 0, 0, 0, 7]).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        // Our HELLO, then an error HELLO_FAILED/INCOMPATIBLE, then the close.
        let n = message_len(&got).unwrap().unwrap();
        let rest = &got[n..];
        assert_eq!(rest[1], msg::ERROR, "{got:?}");
        assert_eq!(u16::from_be_bytes([rest[8], rest[9]]), et::HELLO_FAILED);
        assert_eq!(u16::from_be_bytes([rest[10], rest[11]]), hfc::INCOMPATIBLE);
    });
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
fn refused_flow_mods_answer_with_the_error_and_change_nothing() {
    with_channel(|sw, addr| {
        let mut c = Client::connect(addr);
        // A good add, then one whose tcp_dst lacks its ip_proto prerequisite, then a good
        // one: the bad one is refused alone, with BAD_MATCH/BAD_PREREQ and its xid.
        c.send(&add(0, 10, vec![], vec![OfAction::output(1)]));
        let bad = c.send(&add(
            0,
            20,
            vec![
                Oxm::exact(OxmField::EthType, 0x0800),
                Oxm::exact(OxmField::TcpDst, 80),
            ],
            vec![OfAction::output(1)],
        ));
        c.send(&add(0, 30, vec![], vec![OfAction::output(3)]));
        // goto_table backwards: BAD_INSTRUCTION/BAD_TABLE_ID.
        let back = c.send(&Message::FlowMod(FlowMod {
            table_id: 5,
            command: OFPFC_ADD,
            instructions: vec![Instruction::GotoTable(2)],
            ..FlowMod::default()
        }));
        // write_metadata of a bit above the 24 flowpath keeps.
        let meta = c.send(&Message::FlowMod(FlowMod {
            command: OFPFC_ADD,
            instructions: vec![Instruction::WriteMetadata {
                metadata: 1 << 30,
                mask: 1 << 30,
            }],
            ..FlowMod::default()
        }));
        let errs = c.barrier();
        let codes: Vec<(u32, u16, u16)> = errs
            .iter()
            .map(|(x, m)| match m {
                Message::Error { type_, code, .. } => (*x, *type_, *code),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            codes,
            vec![
                (bad, et::BAD_MATCH, bmc::BAD_PREREQ),
                (back, et::BAD_INSTRUCTION, bic::BAD_TABLE_ID),
                (meta, et::BAD_INSTRUCTION, bic::UNSUP_METADATA),
            ]
        );
        let lines = dump(sw);
        assert_eq!(lines.len(), 2, "{lines:?}");
        // CHECK_OVERLAP: an overlapping add at the same priority is refused.
        let ov = c.send(&Message::FlowMod(FlowMod {
            command: OFPFC_ADD,
            priority: 10,
            flags: OFPFF_CHECK_OVERLAP,
            match_: vec![Oxm::exact(OxmField::InPort, 4)],
            ..FlowMod::default()
        }));
        let errs = c.barrier();
        assert!(
            matches!(errs.as_slice(), [(x, Message::Error { type_, code, .. })] if *x == ov && *type_ == et::FLOW_MOD_FAILED && *code == fmfc::OVERLAP),
            "{errs:?}"
        );
        assert_eq!(dump(sw).len(), 2);
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

#[test]
fn garbage_gets_an_error_and_a_broken_length_closes_cleanly() {
    with_channel(|sw, addr| {
        let mut c = Client::connect(addr);
        // A flow_mod cut short inside its match: BAD_LEN-class error, connection kept.
        let full = add(
            0,
            1,
            vec![Oxm::exact(OxmField::EthType, 0x0800)],
            vec![OfAction::output(1)],
        )
        .encode(77);
        let mut cut = full[..60].to_vec();
        cut[2..4].copy_from_slice(&60u16.to_be_bytes());
        c.s.write_all(&cut).unwrap();
        let errs = c.barrier();
        assert!(
            matches!(errs.as_slice(), [(77, Message::Error { .. })]),
            "{errs:?}"
        );
        assert!(dump(sw).is_empty(), "nothing half-applied");
        // A header whose length is below 8: the framing is lost, the switch says so and
        // closes; it keeps serving others.
        c.s.write_all(&[4, 14, 0, 3, 0, 0, 0, 1]).unwrap();
        let mut rest = Vec::new();
        let _ = c.s.read_to_end(&mut rest);
        let mut d = Client::connect(addr);
        assert!(d.barrier().is_empty());
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
