//! The `control_request` check: any bytes as what a client sends the control socket,
//! answered by an in-memory switch, as `flowpath run` answers it (shared with a stable test).
//!
//! Compiled twice: by the fuzz crate (`fuzz/fuzz_targets/control_request.rs`) and, through
//! `#[path]`, by `crates/switch/tests/fuzz_corpus.rs`, so it only uses the switch crate.

use flowpath_switch::{Op, Request, Response, Switch, SwitchConfig};

/// Flows text longer than this is cut (at a character boundary): a `replace` of a
/// megabyte of flows is a fine request, but not one a fuzzer should spend its time on.
const MAX_TEXT: usize = 4096;
/// Requests answered from one input (they share one switch).
const MAX_REQUESTS: usize = 8;

/// What a switch made of an input.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The input as one request, the way the control socket reads a connection
    /// (`serde_json::from_slice`): did it decode?
    pub request: bool,
    /// Requests answered from the input read as a stream of JSON requests.
    pub answered: usize,
    /// Of those, the ones refused with an error.
    pub refused: usize,
    /// The rule-set version at the end.
    pub version: u64,
}

/// Decode `data` as requests and have a fresh in-memory switch answer each; panics when
/// an invariant breaks (or the switch does).
pub fn check(data: &[u8]) -> Outcome {
    let mut out = Outcome {
        request: serde_json::from_slice::<Request>(data).is_ok(),
        ..Outcome::default()
    };
    // A fresh switch per input, so an input means the same whenever it runs.
    let sw = Switch::open(SwitchConfig::default()).expect("an in-memory switch opens");
    let stream = serde_json::Deserializer::from_slice(data).into_iter::<Request>();
    for req in stream.take(MAX_REQUESTS) {
        let Ok(mut req) = req else { break };
        if req.text.len() > MAX_TEXT {
            let mut at = MAX_TEXT;
            while !req.text.is_char_boundary(at) {
                at -= 1;
            }
            req.text.truncate(at);
        }
        let before = sw.store().version();
        let rules_before = sw.store().snapshot().rules().count();
        let resp = sw.handle(&req);
        let after = sw.store().version();
        out.answered += 1;
        match &resp.error {
            Some(e) => {
                out.refused += 1;
                assert!(!e.is_empty(), "{:?}: an empty error", req.op);
                // One printable line, as `Response::error` promises (a dump whose flow quoted
                // text across a newline broke it: fuzz/regressions/control_request/).
                assert!(
                    !e.chars().any(char::is_control),
                    "{:?}: error {e:?}",
                    req.op
                );
                // "A refused request changed nothing."
                assert_eq!(
                    after, before,
                    "{:?} refused ({e}) but changed the version",
                    req.op
                );
                let rules = sw.store().snapshot().rules().count();
                assert_eq!(
                    rules, rules_before,
                    "{:?} refused ({e}) but changed the rules",
                    req.op
                );
            }
            None => {
                assert_eq!(resp.version, after, "{:?}: answered version", req.op);
                match req.op {
                    Op::Dump => {
                        assert_eq!(after, before);
                        assert!(resp.lines.len() <= rules_before);
                    }
                    _ => assert!(!resp.summary.is_empty() && resp.lines.is_empty()),
                }
            }
        }
        // The answer goes back as JSON and decodes on the client's side.
        let json = serde_json::to_vec(&resp).expect("a response serialises");
        let back: Response = serde_json::from_slice(&json).expect("a response decodes");
        assert_eq!(
            (back.error, back.lines, back.version),
            (resp.error, resp.lines, resp.version)
        );
    }
    out.version = sw.store().version();
    out
}
