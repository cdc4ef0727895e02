//! Operator's tools, like OVS's `ofproto/trace`, `dpctl/dump-flows` and `ofp-parse-pcap`:
//! a frame's parsed key (or parse drop), its walk through the tables, and cached megaflows.
//!
//! Everything here names fields as the flow syntax does (`dl_type`, `nw_src`, `tp_dst`),
//! so any key or megaflow it prints can be pasted back into `flowpath trace` or a flow.

pub mod ctnext;
pub mod explain;
pub mod fields;
pub mod hex;
pub mod megaflows;
pub mod render;
pub mod trace;

pub use ctnext::{parse_ct_next, DEFAULT_CT_NEXT, MAX_PASSES};
pub use explain::{explain_frame, Explained, FrameOutcome};
pub use fields::{format_key, key_fields, FieldValue};
pub use hex::parse_hex;
pub use megaflows::{MegaflowFilter, MegaflowRecord, RawMegaflow, WorkerMegaflows};
pub use render::format_megaflow_match;
pub use trace::{
    trace, trace_passes, trace_request, Trace, TraceInput, TracePass, TraceRequest, TraceStep,
};
