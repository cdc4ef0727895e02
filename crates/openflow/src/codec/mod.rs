//! OpenFlow 1.3 messages: [`Header`], [`Message`] with [`Message::encode`] and [`decode`],
//! and [`message_len`], which frames a byte stream into messages.
//!
//! `frame` holds the header and the framing (a message to and from bytes, a long multipart
//! reply as several messages); `message` the [`Message`] enum and the dispatch on its type.
//! The bodies live by family: `hello` (hello elements and version negotiation),
//! `switch` (features, config, role, async config, port_mod), `flow` (packet_in,
//! packet_out, flow_mod, flow_removed) and `group` (group_mod, meter_mod).

mod flow;
mod frame;
mod group;
mod hello;
mod message;
mod switch;

pub use crate::common::{Bucket, Port};
pub use flow::{FlowMod, FlowRemoved, PacketIn, PacketOut};
pub use frame::{
    decode, encode_multipart_reply, encode_multipart_reply_max, message_len, Header, TooLong,
};
pub use group::{GroupMod, MeterBand, MeterMod};
pub use hello::{negotiate_version, HelloElement};
pub use message::Message;
pub use switch::{AsyncConfig, Features, PortMod, Role, SwitchConfig};
