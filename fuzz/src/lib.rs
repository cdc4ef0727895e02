//! flowpath's fuzz checks: one plain function per fuzz target, which the libFuzzer (or
//! AFL++) targets in `fuzz_targets/` call and the owning crates' stable tests also run.
//!
//! Each module uses only the crate it checks, so that `crates/<crate>/tests/fuzz_corpus.rs`
//! can include the same file with `#[path]` and replay the checked-in corpus through it.

pub mod control_request;
pub mod ct_nat;
pub mod ct_tcp;
pub mod flow_syntax;
pub mod openflow_decode;
pub mod packet_parse;
pub mod pcap_read;
pub mod replay;
