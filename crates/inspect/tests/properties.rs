//! Properties of the operator's tools against the pipeline itself: a key printed by
//! `explain` parses back (as `trace` reads it) to the same key, and a trace ends exactly as
//! the slow path's translation does, through the same rules, for random rules and packets.

use flowpath_inspect::render::format_action_list;
use flowpath_inspect::trace::resolve;
use flowpath_inspect::{format_key, trace, TraceInput, TraceRequest};
use flowpath_pipeline::testing::{arb_headers, arb_rules, key_of};
use flowpath_pipeline::{Backend, Ending, RuleStore};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_printed_key_reads_back_as_the_same_key(h in arb_headers()) {
        let key = key_of(&h);
        let text = format_key(&key);
        let req = TraceRequest::new(TraceInput::Flow(text.clone()));
        let back = resolve(&req).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert!(back == Ok(key), "{}", text);
    }

    #[test]
    fn a_trace_ends_as_the_translation_does(
        rules in arb_rules(3, 24, 4),
        hs in prop::collection::vec(arb_headers(), 1..16),
    ) {
        let store = RuleStore::new(Backend::TupleSpace);
        store.add(rules).unwrap();
        let p = store.snapshot();
        for h in &hs {
            let key = key_of(h);
            let tr = p.translate(&key);
            let t = trace(&p, &key);
            let met: Vec<_> = t.steps.iter().filter(|s| s.rule.is_some()).collect();
            prop_assert_eq!(met.len(), tr.path.len());
            for (s, r) in met.iter().zip(&tr.path) {
                prop_assert_eq!(s.table, r.table);
                prop_assert_eq!(s.rule.as_ref().unwrap().priority, p.rule(*r).spec.priority);
            }
            prop_assert_eq!(t.actions.clone(), format_action_list(&tr.actions));
            let last = t.steps.last().unwrap();
            prop_assert_eq!(matches!(tr.ending, Ending::TableMiss(_)), last.rule.is_none());
        }
    }
}
