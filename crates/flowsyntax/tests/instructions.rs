//! OpenFlow 1.3 instructions in the flow syntax: `group:N`, `write_actions(...)` and
//! `clear_actions` parse, print the way OVS prints them, and read back to the same rule.

use flowpath_flowsyntax::{format_flow, parse_flow, FlowCommand};
use flowpath_packet::Action;

fn round_trip(text: &str) -> flowpath_pipeline::RuleSpec {
    let spec = parse_flow(text, FlowCommand::Add)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .spec;
    let printed = format_flow(&spec);
    let back = parse_flow(&printed, FlowCommand::Add)
        .unwrap_or_else(|e| panic!("{printed}: {e}"))
        .spec;
    assert_eq!(back, spec, "{text} printed as {printed}");
    spec
}

#[test]
fn group_write_and_clear_actions_round_trip() {
    let s = round_trip("table=1,priority=5,ip actions=group:7");
    assert_eq!(s.actions, vec![Action::Group(7)]);

    let s = round_trip(
        "priority=5,ip actions=output:1,clear_actions,write_actions(mod_tp_dst:80,group:3,output:2),goto_table:4",
    );
    assert_eq!(s.actions, vec![Action::Output(1)]);
    assert!(s.clear_actions);
    assert_eq!(
        s.write_actions,
        vec![Action::SetTpDst(80), Action::Group(3), Action::Output(2)]
    );
    assert_eq!(s.goto, Some(4));
    let printed = format_flow(&s);
    assert!(
        printed.ends_with("actions=output:1,clear_actions,write_actions(mod_tp_dst:80,group:3,output:2),goto_table:4"),
        "{printed}"
    );

    let s = round_trip("ip actions=write_actions(2)");
    assert_eq!(s.write_actions, vec![Action::Output(2)]);
    assert!(s.actions.is_empty());
}

#[test]
fn bad_instructions_name_their_column() {
    for (text, want) in [
        (
            "ip actions=write_actions:1",
            "write_actions at column 12 takes its actions in parentheses",
        ),
        (
            "ip actions=write_actions(goto_table:2)",
            "cannot be inside write_actions",
        ),
        (
            "ip actions=goto_table:2,clear_actions",
            "must be the last action",
        ),
        (
            "ip actions=drop,clear_actions",
            "'drop' at column 12 must be the only action",
        ),
        ("ip actions=group:4294967295", "bad value"),
        ("ip actions=write_actions(output:1", "missing ')'"),
    ] {
        let e = parse_flow(text, FlowCommand::Add).unwrap_err().to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
}
