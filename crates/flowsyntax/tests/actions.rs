//! One explicit case per action and spelling: the actions and goto each produces, the
//! canonical printed form, and the round trip; and goto_table's rule that the target
//! table is a later one.

use flowpath_flowsyntax::{format_actions, format_flow, parse_flow, FlowCommand};
use flowpath_packet::Action;

/// (actions text, expected actions, expected goto, canonical printed form).
fn action_cases() -> Vec<(&'static str, Vec<Action>, Option<u8>, &'static str)> {
    use Action as A;
    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0xab, 0x01];
    let v6: [u8; 16] = ((0x2001_0db8u128 << 96) | 0x10).to_be_bytes();
    vec![
        ("output:3", vec![A::Output(3)], None, "output:3"),
        ("5", vec![A::Output(5)], None, "output:5"),
        ("output(port=9)", vec![A::Output(9)], None, "output:9"),
        (
            "OUTPUT:4294967295",
            vec![A::Output(u32::MAX)],
            None,
            "output:4294967295",
        ),
        ("in_port", vec![A::InPort], None, "IN_PORT"),
        ("IN_PORT", vec![A::InPort], None, "IN_PORT"),
        ("output:in_port", vec![A::InPort], None, "IN_PORT"),
        (
            "controller",
            vec![A::controller(65535)],
            None,
            "CONTROLLER:65535",
        ),
        (
            "controller:128",
            vec![A::controller(128)],
            None,
            "CONTROLLER:128",
        ),
        ("CONTROLLER:0", vec![A::controller(0)], None, "CONTROLLER:0"),
        (
            "controller(max_len=64)",
            vec![A::controller(64)],
            None,
            "CONTROLLER:64",
        ),
        (
            "output:controller",
            vec![A::controller(65535)],
            None,
            "CONTROLLER:65535",
        ),
        ("drop", vec![], None, "drop"),
        ("", vec![], None, "drop"),
        ("goto_table:3", vec![], Some(3), "goto_table:3"),
        ("resubmit(,4)", vec![], Some(4), "goto_table:4"),
        ("resubmit(in_port,254)", vec![], Some(254), "goto_table:254"),
        (
            "mod_dl_src:02:00:00:00:ab:01",
            vec![A::SetEthSrc(MAC)],
            None,
            "mod_dl_src:02:00:00:00:ab:01",
        ),
        (
            "mod_dl_dst:2:0:0:0:AB:1",
            vec![A::SetEthDst(MAC)],
            None,
            "mod_dl_dst:02:00:00:00:ab:01",
        ),
        (
            "mod_nw_src:10.0.0.1",
            vec![A::SetIpv4Src([10, 0, 0, 1])],
            None,
            "mod_nw_src:10.0.0.1",
        ),
        (
            "mod_nw_dst:10.0.0.2",
            vec![A::SetIpv4Dst([10, 0, 0, 2])],
            None,
            "mod_nw_dst:10.0.0.2",
        ),
        (
            "mod_nw_tos:184",
            vec![A::SetNwTos(184)],
            None,
            "mod_nw_tos:184",
        ),
        (
            "mod_tp_src:1000",
            vec![A::SetTpSrc(1000)],
            None,
            "mod_tp_src:1000",
        ),
        (
            "mod_tp_dst:0x50",
            vec![A::SetTpDst(80)],
            None,
            "mod_tp_dst:80",
        ),
        (
            "set_field:02:00:00:00:ab:01->eth_src",
            vec![A::SetEthSrc(MAC)],
            None,
            "mod_dl_src:02:00:00:00:ab:01",
        ),
        (
            "set_field:02:00:00:00:ab:01->dl_src",
            vec![A::SetEthSrc(MAC)],
            None,
            "mod_dl_src:02:00:00:00:ab:01",
        ),
        (
            "set_field:02:00:00:00:ab:01->eth_dst",
            vec![A::SetEthDst(MAC)],
            None,
            "mod_dl_dst:02:00:00:00:ab:01",
        ),
        (
            "set_field:02:00:00:00:ab:01->dl_dst",
            vec![A::SetEthDst(MAC)],
            None,
            "mod_dl_dst:02:00:00:00:ab:01",
        ),
        (
            "set_field:1.2.3.4->ipv4_src",
            vec![A::SetIpv4Src([1, 2, 3, 4])],
            None,
            "mod_nw_src:1.2.3.4",
        ),
        (
            "set_field:1.2.3.4->ip_src",
            vec![A::SetIpv4Src([1, 2, 3, 4])],
            None,
            "mod_nw_src:1.2.3.4",
        ),
        (
            "set_field:1.2.3.4->nw_src",
            vec![A::SetIpv4Src([1, 2, 3, 4])],
            None,
            "mod_nw_src:1.2.3.4",
        ),
        (
            "set_field:1.2.3.5->ipv4_dst",
            vec![A::SetIpv4Dst([1, 2, 3, 5])],
            None,
            "mod_nw_dst:1.2.3.5",
        ),
        (
            "set_field:1.2.3.5->ip_dst",
            vec![A::SetIpv4Dst([1, 2, 3, 5])],
            None,
            "mod_nw_dst:1.2.3.5",
        ),
        (
            "set_field:1.2.3.5->nw_dst",
            vec![A::SetIpv4Dst([1, 2, 3, 5])],
            None,
            "mod_nw_dst:1.2.3.5",
        ),
        (
            "set_field:2001:db8::10->ipv6_src",
            vec![A::SetIpv6Src(v6)],
            None,
            "set_field:2001:db8::10->ipv6_src",
        ),
        (
            "set_field:2001:db8::10->ipv6_dst",
            vec![A::SetIpv6Dst(v6)],
            None,
            "set_field:2001:db8::10->ipv6_dst",
        ),
        (
            "set_field:184->nw_tos",
            vec![A::SetNwTos(184)],
            None,
            "mod_nw_tos:184",
        ),
        (
            "set_field:46->ip_dscp",
            vec![A::SetNwTos(184)],
            None,
            "mod_nw_tos:184",
        ),
        (
            "set_field:22->tp_src",
            vec![A::SetTpSrc(22)],
            None,
            "mod_tp_src:22",
        ),
        (
            "set_field:22->tcp_src",
            vec![A::SetTpSrc(22)],
            None,
            "mod_tp_src:22",
        ),
        (
            "set_field:22->udp_src",
            vec![A::SetTpSrc(22)],
            None,
            "mod_tp_src:22",
        ),
        (
            "set_field:23->tp_dst",
            vec![A::SetTpDst(23)],
            None,
            "mod_tp_dst:23",
        ),
        (
            "set_field:23->tcp_dst",
            vec![A::SetTpDst(23)],
            None,
            "mod_tp_dst:23",
        ),
        (
            "set_field:23->udp_dst",
            vec![A::SetTpDst(23)],
            None,
            "mod_tp_dst:23",
        ),
        (
            "set_field:100->vlan_vid",
            vec![A::SetVlanVid(100)],
            None,
            "mod_vlan_vid:100",
        ),
        (
            "set_field:0x1064->vlan_vid",
            vec![A::SetVlanVid(100)],
            None,
            "mod_vlan_vid:100",
        ),
        (
            "set_field:6->vlan_pcp",
            vec![A::SetVlanPcp(6)],
            None,
            "mod_vlan_pcp:6",
        ),
        (
            "set_field:0xabcde->tun_id",
            vec![A::SetTunnel(0xabcde)],
            None,
            "set_tunnel:0xabcde",
        ),
        (
            "set_field:9->tunnel_id",
            vec![A::SetTunnel(9)],
            None,
            "set_tunnel:0x9",
        ),
        (
            "push_vlan:0x8100",
            vec![A::PushVlan { tpid: 0x8100 }],
            None,
            "push_vlan:0x8100",
        ),
        (
            "push_vlan:0x88a8",
            vec![A::PushVlan { tpid: 0x88a8 }],
            None,
            "push_vlan:0x88a8",
        ),
        ("strip_vlan", vec![A::PopVlan], None, "strip_vlan"),
        ("pop_vlan", vec![A::PopVlan], None, "strip_vlan"),
        (
            "mod_vlan_vid:4095",
            vec![A::SetVlanVid(4095)],
            None,
            "mod_vlan_vid:4095",
        ),
        (
            "mod_vlan_pcp:5",
            vec![A::SetVlanPcp(5)],
            None,
            "mod_vlan_pcp:5",
        ),
        ("dec_ttl", vec![A::DecTtl], None, "dec_ttl"),
        (
            "set_tunnel:0x5",
            vec![A::SetTunnel(5)],
            None,
            "set_tunnel:0x5",
        ),
        ("set_tunnel:0", vec![A::SetTunnel(0)], None, "set_tunnel:0"),
        (
            "set_tunnel64:0xffffff",
            vec![A::SetTunnel(0xff_ffff)],
            None,
            "set_tunnel:0xffffff",
        ),
        (
            "mod_dl_dst:02:00:00:00:ab:01 output:3, goto_table:4",
            vec![A::SetEthDst(MAC), A::Output(3)],
            Some(4),
            "mod_dl_dst:02:00:00:00:ab:01,output:3,goto_table:4",
        ),
        (
            "dec_ttl,1,2,controller,resubmit(,9)",
            vec![A::DecTtl, A::Output(1), A::Output(2), A::controller(65535)],
            Some(9),
            "dec_ttl,output:1,output:2,CONTROLLER:65535,goto_table:9",
        ),
    ]
}

#[test]
fn every_action() {
    for (text, actions, goto, printed) in action_cases() {
        let line = format!("table=0,ip actions={text}");
        let f = parse_flow(&line, FlowCommand::Add).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(f.spec.actions, actions, "{line}");
        assert_eq!(f.spec.goto, goto, "{line}");
        assert_eq!(format_actions(&f.spec), printed, "{line}");
        let back = parse_flow(&format_flow(&f.spec), FlowCommand::Add).unwrap();
        assert_eq!(back.spec, f.spec, "{line}");
        // Modify takes the same actions.
        let m = parse_flow(&line, FlowCommand::Modify).unwrap();
        assert_eq!(m.spec, f.spec, "{line}");
    }
}

#[test]
fn goto_must_be_later_than_the_table() {
    assert_eq!(
        parse_flow("table=7 actions=goto_table:8", FlowCommand::Add)
            .unwrap()
            .spec
            .goto,
        Some(8)
    );
    let e = parse_flow("table=7 actions=goto_table:7", FlowCommand::Add).unwrap_err();
    assert_eq!(
        e.message,
        "goto_table:7 at column 17 must name a later table than this flow's table 7"
    );
    assert_eq!(e.column, 17);
}
