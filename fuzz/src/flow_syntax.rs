//! The `flow_syntax` check: any bytes as flows text through every parser of the flow
//! syntax, with the promises they make (errors name their column; accepted flows print back).
//!
//! Compiled twice: by the fuzz crate (`fuzz/fuzz_targets/flow_syntax.rs`) and, through
//! `#[path]`, by `crates/flowsyntax/tests/fuzz_corpus.rs`, so it only uses the flowsyntax crate.

use flowpath_flowsyntax::{
    format_dump_line, format_flow, is_classbench, parse_classbench, parse_flow, parse_flows_file,
    DumpStats, FlowCommand, SyntaxError,
};
use std::time::Duration;

/// Add and delete first (see `check`).
const COMMANDS: [FlowCommand; 5] = [
    FlowCommand::Add,
    FlowCommand::Delete,
    FlowCommand::Modify,
    FlowCommand::ModifyStrict,
    FlowCommand::DeleteStrict,
];

/// Lines of one input parsed on their own, for every command.
const MAX_LINES: usize = 16;

/// Parse each line of `data` (lossily decoded as UTF-8) as a flow for every command, and
/// all of it as a flows file; panics when an invariant breaks. Returns the file's outcome
/// as an `add`: the number of flows, or the (line, column) of the first error.
pub fn check(data: &[u8]) -> Result<usize, (usize, usize)> {
    let text = String::from_utf8_lossy(data);
    // Each line on its own, the way a flows file reads it (the first few distinct ones: a
    // refused line computes its "did you mean", which is what an input's time goes on).
    let mut seen: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        if seen.len() == MAX_LINES {
            break;
        }
        if seen.contains(&line) {
            continue;
        }
        // Every command for the first line; add and delete (with and without actions)
        // for the others, since each refused parse costs a suggestion search.
        let cmds = if seen.is_empty() {
            &COMMANDS[..]
        } else {
            &COMMANDS[..2]
        };
        seen.push(line);
        for &cmd in cmds {
            check_flow(line, cmd);
        }
    }
    let file = parse_flows_file(&text, FlowCommand::Add);
    let lines = text.split('\n').count();
    match &file {
        Ok(flows) => {
            for f in flows {
                // A dump line parses back to the same rule (its statistics are ignored).
                let stats = DumpStats {
                    packets: 7,
                    bytes: 420,
                    duration: Duration::from_millis(1234),
                    idle_age: Some(Duration::from_secs(1)),
                };
                let line = format_dump_line(&f.spec, &stats);
                match parse_flow(&line, FlowCommand::Add) {
                    Ok(back) => assert_eq!(back.spec, f.spec, "dump line {line:?}"),
                    Err(e) => panic!("dump line {line:?} refused: {e}"),
                }
            }
        }
        Err(e) => {
            assert!((1..=lines).contains(&e.line), "{e:?}: {lines} lines");
            let line = text.split('\n').nth(e.line - 1).unwrap_or_default();
            let line = line.strip_suffix('\r').unwrap_or(line);
            assert!(
                e.column >= 1 && e.column <= line.chars().count() + 1,
                "{e:?}"
            );
            assert!(e.to_string().starts_with(&format!("line {}: ", e.line)));
        }
    }
    // ClassBench filter sets are the other rules text the switch reads.
    if is_classbench(&text) {
        if let Err(e) = parse_classbench(&text, 0) {
            assert!(
                (1..=lines).contains(&e.line),
                "classbench {e:?}: {lines} lines"
            );
        }
    }
    file.map(|f| f.len()).map_err(|e| (e.line, e.column))
}

/// One flow for one command: an error names a column inside the text (or one past its
/// end), in its message too; an accepted flow prints as a flow that parses to the same rule.
fn check_flow(text: &str, cmd: FlowCommand) {
    match parse_flow(text, cmd) {
        Err(SyntaxError { column, message }) => {
            let len = text.chars().count();
            assert!(
                (1..=len + 1).contains(&column),
                "{text:?} ({cmd:?}): column {column} outside 1..={}: {message}",
                len + 1
            );
            assert!(
                message.contains(&format!("column {column}")),
                "{text:?} ({cmd:?}): the message does not name column {column}: {message}"
            );
        }
        Ok(f) => {
            let printed = format_flow(&f.spec);
            match parse_flow(&printed, FlowCommand::Add) {
                Ok(back) => {
                    assert_eq!(back.spec, f.spec, "{text:?} ({cmd:?}) printed {printed:?}");
                    assert_eq!(
                        format_flow(&back.spec),
                        printed,
                        "format is not a fixed point"
                    );
                }
                Err(e) => panic!("{text:?} ({cmd:?}) accepted, printed {printed:?} refused: {e}"),
            }
        }
    }
}
