//! The corpus in `tests/data/`: `good.flows` must parse and round-trip line by line,
//! `bad.flows` must fail with exactly the recorded messages.

use flowpath_flowsyntax::{
    format_dump_line, format_flow, parse_flow, parse_flows_file, DumpStats, FileError, FlowCommand,
};
use std::time::Duration;

const GOOD: &str = include_str!("data/good.flows");
const BAD: &str = include_str!("data/bad.flows");

fn flow_lines(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| (i + 1, l))
        .collect()
}

#[test]
fn good_flows_parse_and_round_trip() {
    let flows = parse_flows_file(GOOD, FlowCommand::Add).unwrap_or_else(|e| panic!("{e}"));
    let lines = flow_lines(GOOD);
    assert_eq!(flows.len(), lines.len());
    assert!(flows.len() >= 60, "only {} flows", flows.len());
    for ((n, line), f) in lines.iter().zip(&flows) {
        assert_eq!(&parse_flow(line, FlowCommand::Add).unwrap(), f, "line {n}");
        let text = format_flow(&f.spec);
        let back = parse_flow(&text, FlowCommand::Add)
            .unwrap_or_else(|e| panic!("line {n}: {line}\n  printed {text}\n  {e}"));
        assert_eq!(back.spec, f.spec, "line {n}: {line}\n  printed {text}");
        assert_eq!(format_flow(&back.spec), text, "line {n}");
        // A dump-flows line of the rule parses back to it too.
        let stats = DumpStats {
            packets: 3,
            bytes: 180,
            duration: Duration::from_millis(1500),
            idle_age: Some(Duration::from_secs(1)),
        };
        let dump = format_dump_line(&f.spec, &stats);
        assert_eq!(
            parse_flow(&dump, FlowCommand::Add).unwrap().spec,
            f.spec,
            "{dump}"
        );
    }
}

/// `(line number, command, flow, expected message)` from `bad.flows`.
fn bad_cases() -> Vec<(usize, FlowCommand, &'static str, &'static str)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, FlowCommand, &str)> = None;
    for (i, line) in BAD.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(msg) = line.strip_prefix("! ") {
            let (n, cmd, flow) = pending.take().expect("message without a flow");
            out.push((n, cmd, flow, msg));
            continue;
        }
        assert!(pending.is_none(), "line {}: flow without a message", i + 1);
        let (cmd, flow) = match line.split_once("] ") {
            Some((c, rest)) if line.starts_with('[') => {
                let cmd = match &c[1..] {
                    "del" => FlowCommand::Delete,
                    "del_strict" => FlowCommand::DeleteStrict,
                    "mod" => FlowCommand::Modify,
                    "mod_strict" => FlowCommand::ModifyStrict,
                    other => panic!("unknown command {other}"),
                };
                (cmd, rest)
            }
            _ => (FlowCommand::Add, line),
        };
        pending = Some((i + 1, cmd, flow));
    }
    assert!(pending.is_none(), "last flow has no message");
    out
}

#[test]
fn bad_flows_fail_with_their_messages() {
    let cases = bad_cases();
    assert!(cases.len() >= 30, "only {} cases", cases.len());
    for (n, cmd, flow, msg) in cases {
        let e = match parse_flow(flow, cmd) {
            Ok(f) => panic!("line {n}: {flow} parsed: {}", format_flow(&f.spec)),
            Err(e) => e,
        };
        assert_eq!(e.message, msg, "line {n}: {flow}");
        assert_eq!(e.to_string(), msg);
        assert!(
            msg.contains(&format!("column {}", e.column)),
            "line {n}: column {} not in the message",
            e.column
        );
        assert!(
            e.column >= 1 && e.column <= flow.chars().count() + 1,
            "line {n}"
        );
    }
}

#[test]
fn file_errors_name_the_line() {
    let text = "# header\n\nip actions=drop\r\n   # indented comment\nip,tp_dst=1 actions=drop\n";
    let e = parse_flows_file(text, FlowCommand::Add).unwrap_err();
    assert_eq!(
        e,
        FileError {
            line: 5,
            column: 4,
            message: "tp_dst at column 4 requires tcp, udp, tcp6 or udp6, but the flow matches ip"
                .into(),
        }
    );
    assert_eq!(
        e.to_string(),
        "line 5: tp_dst at column 4 requires tcp, udp, tcp6 or udp6, but the flow matches ip"
    );
    // The good corpus with one bad line appended fails on exactly that line.
    let n = GOOD.lines().count();
    let text = format!("{GOOD}ip actions=local\n");
    let e = parse_flows_file(&text, FlowCommand::Add).unwrap_err();
    assert_eq!((e.line, e.column), (n + 1, 12));
    assert!(e
        .to_string()
        .starts_with(&format!("line {}: action 'local'", n + 1)));
    // Blank and comment-only files hold no flows; a delete file holds no actions.
    assert!(parse_flows_file("\n# x\n \n", FlowCommand::Add)
        .unwrap()
        .is_empty());
    let dels = parse_flows_file("ip\ntcp,tp_dst=80\r\n", FlowCommand::Delete).unwrap();
    assert_eq!(dels.len(), 2);
}
