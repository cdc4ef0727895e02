//! `dump-flows` lines and the printed forms of whole rules.

use flowpath_flowsyntax::{
    format_actions, format_dump_line, format_flow, format_match, parse_flow, DumpStats, FlowCommand,
};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Match, RuleSpec};
use std::time::Duration;

fn rule() -> RuleSpec {
    let m = Match::any()
        .exact(Field::EthType, 0x0800)
        .prefix(Field::Ipv4Dst, 0x0a00_0000, 8);
    let mut r = RuleSpec::new(0, 100, m).actions([Action::Output(2)]);
    r.idle_timeout = 10;
    r
}

#[test]
fn dump_line_like_ovs() {
    let stats = DumpStats {
        packets: 12,
        bytes: 720,
        duration: Duration::new(3, 204_999_999),
        idle_age: Some(Duration::from_millis(2_900)),
    };
    assert_eq!(
        format_dump_line(&rule(), &stats),
        " cookie=0x0, duration=3.204s, table=0, n_packets=12, n_bytes=720, idle_timeout=10, idle_age=2, priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2"
    );
}

#[test]
fn dump_line_durations_counters_and_optional_parts() {
    let mut r = RuleSpec::new(3, 7, Match::any());
    r.cookie = 0xabc;
    r.hard_timeout = 60;
    let stats = DumpStats {
        packets: u64::MAX,
        bytes: 0,
        duration: Duration::ZERO,
        idle_age: None,
    };
    assert_eq!(
        format_dump_line(&r, &stats),
        " cookie=0xabc, duration=0.000s, table=3, n_packets=18446744073709551615, n_bytes=0, hard_timeout=60, priority=7 actions=drop"
    );
    let stats = DumpStats {
        packets: 1,
        bytes: 64,
        duration: Duration::from_secs(86_400),
        idle_age: Some(Duration::ZERO),
    };
    assert_eq!(
        format_dump_line(&r, &stats),
        " cookie=0xabc, duration=86400.000s, table=3, n_packets=1, n_bytes=64, hard_timeout=60, idle_age=0, priority=7 actions=drop"
    );
    let stats = DumpStats {
        duration: Duration::from_micros(1_999),
        ..stats
    };
    assert!(format_dump_line(&r, &stats).contains(" duration=0.001s, "));
    let stats = DumpStats {
        duration: Duration::from_millis(59_050),
        idle_age: Some(Duration::from_millis(59_999)),
        ..stats
    };
    let line = format_dump_line(&r, &stats);
    assert!(line.contains(" duration=59.050s, "), "{line}");
    assert!(line.contains(" idle_age=59, "), "{line}");
}

#[test]
fn dump_lines_parse_back() {
    let stats = DumpStats {
        packets: 5,
        bytes: 300,
        duration: Duration::from_millis(1234),
        idle_age: Some(Duration::from_secs(4)),
    };
    let mut r = rule();
    r.table = 2;
    r.cookie = 0x99;
    r.goto = Some(4);
    let line = format_dump_line(&r, &stats);
    assert_eq!(parse_flow(&line, FlowCommand::Add).unwrap().spec, r);
}

#[test]
fn flow_match_and_actions_forms() {
    let mut r = rule();
    assert_eq!(format_match(&r), "priority=100,ip,nw_dst=10.0.0.0/8");
    assert_eq!(format_actions(&r), "output:2");
    assert_eq!(
        format_flow(&r),
        "idle_timeout=10, priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2"
    );
    r.table = 1;
    r.idle_timeout = 0;
    assert_eq!(
        format_flow(&r),
        "table=1, priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2"
    );
    r.actions = vec![Action::SetEthDst([2, 0, 0, 0, 0, 1]), Action::Output(3)];
    r.goto = Some(3);
    assert_eq!(
        format_actions(&r),
        "mod_dl_dst:02:00:00:00:00:01,output:3,goto_table:3"
    );
    r.actions.clear();
    assert_eq!(format_actions(&r), "goto_table:3");
    r.goto = None;
    assert_eq!(format_actions(&r), "drop");
}

/// What the syntax cannot say is still printed (documented in `format.rs`).
#[test]
fn unrepresentable_matches_print_their_nearest_form() {
    let m = Match::any()
        .with(Field::InPort, 5, 0xff)
        .with(Field::NwTos, 0x10, 0xf0)
        .exact(Field::TpDst, 80);
    let r = RuleSpec::new(0, 1, m).actions([Action::SetNwTos(0xb9)]);
    assert_eq!(format_match(&r), "priority=1,in_port=5,nw_tos=16,tp_dst=80");
    assert_eq!(format_actions(&r), "mod_nw_tos:184");
    let m = Match::any()
        .exact(Field::EthType, 0x0800)
        .with(Field::Ipv6Src, 1, 1);
    let r = RuleSpec::new(0, 1, m);
    assert_eq!(format_match(&r), "priority=1,ip,ipv6_src=::1/::1");
}
