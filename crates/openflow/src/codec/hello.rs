//! The hello's elements ([`HelloElement`]) and the version two hellos agree on
//! ([`negotiate_version`]).

use crate::consts::*;
use crate::wire::{pad8, DecodeError, Reader, Writer};

/// A hello element.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HelloElement {
    /// The versions the sender supports: bit `v` of word `v / 32` for wire version `v`.
    VersionBitmap(Vec<u32>),
    /// Another element type, kept as it came (without its padding).
    Unknown { type_: u16, data: Vec<u8> },
}

/// The highest version both sides support, from the peer's hello (its header version and
/// bitmap, as OF 1.3 §6.3.1 says) and our own bitmap of versions.
pub fn negotiate_version(peer_version: u8, elements: &[HelloElement], ours: u32) -> Option<u8> {
    let theirs = elements.iter().find_map(|e| match e {
        HelloElement::VersionBitmap(words) => Some(words.first().copied().unwrap_or(0)),
        HelloElement::Unknown { .. } => None,
    });
    let common = match theirs {
        Some(bits) => bits & ours,
        // No bitmap: the lower of the two highest versions.
        None => {
            let our_max = 31 - ours.leading_zeros();
            let v = (peer_version as u32).min(our_max);
            if v < 32 && ours & (1 << v) != 0 {
                1 << v
            } else {
                0
            }
        }
    };
    (common != 0).then(|| (31 - common.leading_zeros()) as u8)
}

/// Encode a hello's elements, each padded to 8 bytes.
pub(super) fn encode_hello(w: &mut Writer, elems: &[HelloElement]) {
    for e in elems {
        let start = w.len();
        match e {
            HelloElement::VersionBitmap(words) => {
                w.u16(OFPHET_VERSIONBITMAP);
                w.u16((4 + 4 * words.len()).min(0xffff) as u16);
                for x in words {
                    w.u32(*x);
                }
            }
            HelloElement::Unknown { type_, data } => {
                w.u16(*type_);
                w.u16((4 + data.len()).min(0xffff) as u16);
                w.bytes(data);
            }
        }
        w.pad_from(start);
    }
}

/// Decode a hello's elements until `r` is empty.
pub(super) fn decode_hello(r: &mut Reader) -> Result<Vec<HelloElement>, DecodeError> {
    let e = DecodeError::BadLen;
    let mut elems = Vec::new();
    while !r.is_empty() {
        let ty = r.u16()?;
        let len = r.u16()? as usize;
        if len < 4 {
            return Err(e);
        }
        let body = r.bytes(len - 4)?;
        // Elements are padded to 8 bytes; tolerate a last one that is not.
        let pad = pad8(len).min(r.remaining());
        r.skip(pad)?;
        if ty == OFPHET_VERSIONBITMAP {
            if body.len() % 4 != 0 {
                return Err(e);
            }
            let words = body
                .chunks_exact(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            elems.push(HelloElement::VersionBitmap(words));
        } else {
            elems.push(HelloElement::Unknown {
                type_: ty,
                data: body.to_vec(),
            });
        }
    }
    Ok(elems)
}
