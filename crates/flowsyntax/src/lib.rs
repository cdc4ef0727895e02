//! Open vSwitch's `ovs-ofctl` flow syntax for flowpath: flows parsed into `RuleSpec`s
//! with column-exact errors, and rules printed back as flows and `dump-flows` lines.

mod actions;
mod classbench;
mod error;
mod format;
mod format_ct;
mod lex;
mod names;
mod parse;
mod value;

pub use classbench::{is_classbench, parse_classbench};
pub use error::{FileError, SyntaxError};
pub use format::{format_actions, format_dump_line, format_flow, format_match, DumpStats};
pub use parse::{parse_flow, parse_flows_file, FlowCommand, ParsedFlow, DEFAULT_PRIORITY};

#[cfg(test)]
mod tests {
    use crate::names::{ALL_FIELDS, FIELDS, PROTOCOLS};

    #[test]
    fn all_fields_is_in_declaration_order_and_every_field_has_a_name() {
        for (i, f) in ALL_FIELDS.iter().enumerate() {
            assert_eq!(*f as usize, i, "{f:?}");
            assert!(FIELDS.iter().any(|(_, g)| g == f), "{f:?} has no name");
        }
    }

    #[test]
    fn names_are_unique() {
        let mut all: Vec<&str> = FIELDS.iter().map(|(n, _)| *n).collect();
        all.extend(PROTOCOLS.iter().map(|(n, _, _)| *n));
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
