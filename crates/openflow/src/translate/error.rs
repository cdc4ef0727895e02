//! [`OfError`]: the (type, code) pair of an OpenFlow error to send back.

use crate::consts::*;
use crate::wire::DecodeError;
use std::fmt;

/// An OpenFlow error (type, code) to send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OfError {
    pub type_: u16,
    pub code: u16,
}

impl OfError {
    pub const fn new(type_: u16, code: u16) -> OfError {
        OfError { type_, code }
    }
    pub(super) const fn bad_match(code: u16) -> OfError {
        OfError::new(et::BAD_MATCH, code)
    }
    pub(super) const fn bad_action(code: u16) -> OfError {
        OfError::new(et::BAD_ACTION, code)
    }
    pub(super) const fn bad_inst(code: u16) -> OfError {
        OfError::new(et::BAD_INSTRUCTION, code)
    }
    /// As the (type, code) pair [`crate::Message::error`] takes.
    pub fn pair(self) -> (u16, u16) {
        (self.type_, self.code)
    }
}

impl From<DecodeError> for OfError {
    fn from(e: DecodeError) -> OfError {
        let (type_, code) = e.to_of_error();
        OfError { type_, code }
    }
}

impl fmt::Display for OfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenFlow error type {} code {}", self.type_, self.code)
    }
}

impl std::error::Error for OfError {}
