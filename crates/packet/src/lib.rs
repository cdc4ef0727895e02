//! Packets as flowpath sees them: parsing once into a fixed-layout [`FlowKey`] with named
//! drop reasons, and the rewrites, encapsulation (with its underlay hop) and checksums.

pub mod action;
pub mod checksum;
pub mod ct;
pub mod encap;
pub mod hop;
pub mod key;
pub use flowpath_base::packet;
pub mod parse;
pub mod rewrite;

pub use action::{packet_in_reason, Action, CONTROLLER_NO_BUFFER};
pub use ct::{CtId, CtSpec};
pub use key::{
    Field, FlowKey, MaskLanes, SubtableMask, WordSet, KEY_BYTES, KEY_WORDS, NARROW_WORDS,
};
pub use packet::Packet;
pub use parse::{parse, parse_into, parse_into_hashed, DropReason, PacketMeta, ParseOptions};
