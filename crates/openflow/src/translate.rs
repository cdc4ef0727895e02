//! Translation between OpenFlow and flowpath's rule types.

/// An OpenFlow error (type, code) to send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OfError {
    pub type_: u16,
    pub code: u16,
}
