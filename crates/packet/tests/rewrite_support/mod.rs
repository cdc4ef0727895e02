//! What the rewrite tests share: frames built with etherparse together with the
//! `PacketMeta` the parser would report for them (`frames`), and the independent oracles
//! the results are held to (`oracles`): the headers read back with etherparse and compared
//! with a tiny model of each action, and every checksum verified by a full recomputation
//! written here (receiver-style sum) as well as by etherparse's own checksum functions.
//!
//! The parser is not used: each test knows where it put the headers and builds the
//! `PacketMeta` itself.

// Each rewrite test binary includes this module and uses a part of it.
#![allow(dead_code)]

pub mod frames;
pub mod oracles;
