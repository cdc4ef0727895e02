//! Property tests: random valid flows written the many ways the syntax allows round-trip
//! through `format_flow`; arbitrary and damaged input never panics and always gets a
//! column inside the text, in a message with no control character.

mod flow_gen;

use flow_gen::{add_text, gen_flow, join_clauses, Rng};
use flowpath_base::SplitMix64;
use flowpath_flowsyntax::{format_flow, parse_flow, FlowCommand, ParsedFlow, SyntaxError};
use proptest::prelude::*;

fn check_round_trip(text: &str) -> Result<ParsedFlow, TestCaseError> {
    let f1 = parse_flow(text, FlowCommand::Add)
        .map_err(|e| TestCaseError::fail(format!("generated flow refused: {text}\n  {e}")))?;
    let t1 = format_flow(&f1.spec);
    let f2 = parse_flow(&t1, FlowCommand::Add).map_err(|e| {
        TestCaseError::fail(format!(
            "printed flow refused: {text}\n  printed {t1}\n  {e}"
        ))
    })?;
    prop_assert_eq!(&f2.spec, &f1.spec, "{}\n  printed {}", text, t1);
    let t2 = format_flow(&f2.spec);
    prop_assert_eq!(&t2, &t1, "{}", text);
    Ok(f1)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    /// parse(format(parse(s))) == parse(s) and format is a fixed point, for random valid
    /// flows over every field, alias, value form and action.
    #[test]
    fn valid_flows_round_trip(seed in any::<u64>()) {
        let g = gen_flow(seed);
        let text = add_text(seed, &g);
        let f = check_round_trip(&text)?;
        // Modify reads the same flow (without a cookie mask) the same way, but a plain
        // cookie sets rather than selects.
        let m = parse_flow(&text, FlowCommand::Modify).unwrap();
        prop_assert_eq!(&m.spec, &f.spec);
        // The match part alone: refused by add ("missing actions" at the end), and as a
        // delete it selects the same match.
        let r = &mut Rng(SplitMix64::new(seed));
        let del = join_clauses(r, &g.clauses);
        check_any(&del)?;
        if !g.add_only {
            let d = parse_flow(&del, FlowCommand::DeleteStrict)
                .map_err(|e| TestCaseError::fail(format!("{del}: {e}")))?;
            prop_assert_eq!(d.spec.matches, f.spec.matches, "{}", del);
            prop_assert_eq!((d.spec.table, d.spec.priority), (f.spec.table, f.spec.priority));
            prop_assert!(d.spec.actions.is_empty() && d.spec.goto.is_none());
        }
    }
}

/// Every error has a column inside the text (or just past its end) that its message
/// names; every accepted flow round-trips.
fn check_any(text: &str) -> Result<(), TestCaseError> {
    let len = text.chars().count();
    for cmd in [
        FlowCommand::Add,
        FlowCommand::Modify,
        FlowCommand::ModifyStrict,
        FlowCommand::Delete,
        FlowCommand::DeleteStrict,
    ] {
        match parse_flow(text, cmd) {
            Err(SyntaxError { column, message }) => {
                prop_assert!(
                    (1..=len + 1).contains(&column),
                    "{:?}: column {} outside 1..={}: {}",
                    text,
                    column,
                    len + 1,
                    message
                );
                let needle = format!("column {column}");
                prop_assert!(message.contains(&needle), "{:?}: {}", text, message);
                // Input is quoted escaped: the message is one line of printable text.
                prop_assert!(
                    !message.chars().any(char::is_control),
                    "{:?}: a control character in {:?}",
                    text,
                    message
                );
            }
            Ok(f) => {
                let printed = format_flow(&f.spec);
                let back = parse_flow(&printed, FlowCommand::Add).map_err(|e| {
                    TestCaseError::fail(format!(
                        "{text:?} accepted, printed {printed:?} refused: {e}"
                    ))
                })?;
                prop_assert_eq!(&back.spec, &f.spec, "{:?} printed {:?}", text, printed);
            }
        }
    }
    Ok(())
}

/// Characters flows are made of, so that fuzzing gets past the first token.
const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz_0123456789xX=:,./()+->| \t[]ACNOPT";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        check_any(&s)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..160)) {
        check_any(&String::from_utf8_lossy(&b))?;
    }

    #[test]
    fn flow_alphabet_never_panics(b in prop::collection::vec(prop::sample::select(ALPHABET), 0..100)) {
        check_any(std::str::from_utf8(&b).unwrap())?;
    }

    /// Valid flows with random damage: deleted, inserted, swapped characters (including
    /// multi-byte ones, to check that columns count characters).
    #[test]
    fn damaged_flows_never_panic(seed in any::<u64>(), edits in prop::collection::vec(any::<(u16, u16, u8)>(), 1..5)) {
        let g = gen_flow(seed);
        let mut chars: Vec<char> = add_text(seed, &g).chars().collect();
        for (pos, len, what) in edits {
            let at = pos as usize % (chars.len() + 1);
            match what % 4 {
                0 => {
                    let end = (at + len as usize % 6).min(chars.len());
                    chars.drain(at..end);
                }
                1 => chars.insert(at, ALPHABET[len as usize % ALPHABET.len()] as char),
                2 => chars.insert(at, ['é', '名', '\u{1F600}', '\0'][len as usize % 4]),
                _ if chars.len() > 1 => {
                    let other = len as usize % chars.len();
                    let at = at.min(chars.len() - 1);
                    chars.swap(at, other);
                }
                _ => {}
            }
        }
        let text: String = chars.into_iter().collect();
        check_any(&text)?;
    }
}

/// Quoted input is escaped and cut: a NUL or an escape sequence in a flow shows as `\0`
/// or `\u{1b}`, a huge word as its start and `…`.
#[test]
fn errors_quote_input_escaped_and_bounded() {
    let e = parse_flow("ip,nw_src=1.2.3.4\0,actions=drop", FlowCommand::Add).unwrap_err();
    assert!(e.message.contains("1.2.3.4\\0"), "{}", e.message);
    let e = parse_flow("ip,\x1b[31mred=1,actions=drop", FlowCommand::Add).unwrap_err();
    assert!(e.message.contains("\\u{1b}[31mred"), "{}", e.message);
    assert!(!e.message.contains('\x1b'), "{}", e.message);
    let long = "x".repeat(100_000);
    let e = parse_flow(&format!("ip,{long}=1,actions=drop"), FlowCommand::Add).unwrap_err();
    assert!(
        e.message.len() < 300,
        "{} bytes: {}",
        e.message.len(),
        e.message
    );
    assert!(e.message.contains('…'), "{}", e.message);
    let e = parse_flow(&format!("ip,nw_src={long},actions=drop"), FlowCommand::Add).unwrap_err();
    assert!(e.message.len() < 300, "{} bytes", e.message.len());
    let e = parse_flow(&format!("actions=output:{long}"), FlowCommand::Add).unwrap_err();
    assert!(
        e.message.len() < 300,
        "{} bytes: {}",
        e.message.len(),
        e.message
    );
}
