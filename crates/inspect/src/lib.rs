//! Operator's tools, like OVS's `ofproto/trace`, `dpctl/dump-flows` and `ofp-parse-pcap`:
//! a frame's parsed key (or parse drop), its walk through the tables, and cached megaflows.
//!
//! Everything here names fields as the flow syntax does (`dl_type`, `nw_src`, `tp_dst`),
//! so any key or megaflow it prints can be pasted back into `flowpath trace` or a flow.

pub mod explain;
pub mod fields;
pub mod megaflows;
pub mod trace;

pub use explain::{explain_frame, parse_hex, Explained, FrameOutcome};
pub use fields::{format_key, key_fields, FieldValue};
pub use megaflows::{
    format_megaflow_match, MegaflowFilter, MegaflowRecord, RawMegaflow, WorkerMegaflows,
};
pub use trace::{trace, trace_request, Trace, TraceInput, TraceRequest, TraceStep};
