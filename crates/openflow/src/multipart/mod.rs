//! Multipart (statistics) requests and replies: DESC, FLOW, AGGREGATE, TABLE, PORT_STATS,
//! PORT_DESC, GROUP, GROUP_DESC and TABLE_FEATURES, and the split of a long reply into
//! bodies that each fit in a message ([`MultipartReply::split`]; the messages themselves
//! are [`crate::encode_multipart_reply`]'s).
//!
//! `request` holds [`MultipartRequest`], `reply` [`MultipartReply`], `stats` the records
//! replies list (flow, table, port and group statistics, group descriptions, the switch
//! description) and `table_features` the table features that both carry.

mod reply;
mod request;
mod stats;
mod table_features;

pub use reply::MultipartReply;
pub use request::{FlowStatsRequest, MultipartRequest};
pub use stats::{Desc, FlowStats, GroupDesc, GroupStats, PortStats, TableStats};
pub use table_features::{TableFeatureProp, TableFeatures};
