//! OpenFlow 1.3 for flowpath: the wire codec (messages, OXM matches, instructions, actions)
//! and the translation between OpenFlow flow_mods and flowpath's rules, with OF error codes;
//! the Nicira extensions for connection tracking (`nx`: `ct`, `nat`, `ct_clear`, and the
//! NXM ct match fields in `translate`).

pub mod actions;
pub mod codec;
mod common;
pub mod consts;
pub mod multipart;
pub mod nx;
pub mod oxm;
pub mod translate;
mod wire;

pub use actions::{Instruction, OfAction};
pub use codec::{
    decode, encode_multipart_reply, encode_multipart_reply_max, message_len, negotiate_version,
    AsyncConfig, Bucket, Features, FlowMod, FlowRemoved, GroupMod, Header, HelloElement, Message,
    MeterBand, MeterMod, PacketIn, PacketOut, Port, PortMod, Role, SwitchConfig, TooLong,
};
pub use multipart::{
    Desc, FlowStats, FlowStatsRequest, GroupDesc, GroupStats, MultipartReply, MultipartRequest,
    PortStats, TableFeatureProp, TableFeatures, TableStats,
};
pub use oxm::{Oxm, OxmField};
pub use translate::OfError;
pub use wire::DecodeError;
