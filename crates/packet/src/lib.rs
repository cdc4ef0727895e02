//! Packets as flowpath sees them: zero-copy parsing into a fixed-layout [`FlowKey`] with
//! named drop reasons, the header rewrites and encapsulation actions perform (with the
//! underlay hop they leave by), and the checksum arithmetic they share with the generator.

pub mod action;
pub mod checksum;
pub mod encap;
pub mod hop;
pub mod key;
pub use flowpath_base::packet;
pub mod parse;
pub mod rewrite;

pub use action::{packet_in_reason, Action, CONTROLLER_NO_BUFFER};
pub use key::{
    Field, FlowKey, MaskLanes, SubtableMask, WordSet, KEY_BYTES, KEY_WORDS, NARROW_WORDS,
};
pub use packet::Packet;
pub use parse::{parse, parse_into, parse_into_hashed, DropReason, PacketMeta, ParseOptions};
