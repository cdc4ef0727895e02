//! Byte-level reading and writing: a bounds-checked big-endian reader that fails with the
//! error of the structure being read, a writer with 8-byte padding, and [`DecodeError`].

use crate::consts::*;
use std::fmt;

/// Why a message could not be decoded, and which OpenFlow error answers it
/// ([`DecodeError::to_of_error`]). Decoding never panics: every length is checked against
/// the bytes that are there before anything is read or allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// `ofp_header.version` is not 0x04 (on a message other than HELLO).
    BadVersion(u8),
    /// The message's length is wrong for its type, or a list inside it overruns it.
    BadLen,
    /// Unknown or unsupported message type.
    BadType(u8),
    /// Unknown or unsupported multipart type.
    BadMultipart(u16),
    /// A match's type is not OFPMT_OXM.
    BadMatchType(u16),
    /// A match, or an OXM inside it, has a bad length (truncated, overrunning, or not the
    /// field's size).
    BadMatchLen,
    /// Unknown instruction type.
    BadInstruction(u16),
    /// An instruction's length is wrong.
    BadInstructionLen,
    /// Unknown action type.
    BadAction(u16),
    /// An action's length is wrong (not a multiple of 8, too short, overruns its list).
    BadActionLen,
    /// A set_field action's OXM has a bad length.
    BadSetLen,
    /// A set_field action's OXM carries a mask.
    BadSetArgument,
    /// A Nicira experimenter action of a subtype flowpath does not know.
    BadExperimenterType,
    /// An action's arguments are wrong (a Nicira NAT range its length does not hold).
    BadArgument,
    /// A group_mod bucket's length is wrong.
    BadBucket,
    /// A table features property's length is wrong.
    BadTableFeaturesLen,
}

impl DecodeError {
    /// The OpenFlow error (type, code) that answers this decoding failure.
    pub fn to_of_error(self) -> (u16, u16) {
        match self {
            DecodeError::BadVersion(_) => (et::BAD_REQUEST, brc::BAD_VERSION),
            DecodeError::BadLen => (et::BAD_REQUEST, brc::BAD_LEN),
            DecodeError::BadType(_) => (et::BAD_REQUEST, brc::BAD_TYPE),
            DecodeError::BadMultipart(_) => (et::BAD_REQUEST, brc::BAD_MULTIPART),
            DecodeError::BadMatchType(_) => (et::BAD_MATCH, bmc::BAD_TYPE),
            DecodeError::BadMatchLen => (et::BAD_MATCH, bmc::BAD_LEN),
            DecodeError::BadInstruction(_) => (et::BAD_INSTRUCTION, bic::UNKNOWN_INST),
            DecodeError::BadInstructionLen => (et::BAD_INSTRUCTION, bic::BAD_LEN),
            DecodeError::BadAction(_) => (et::BAD_ACTION, bac::BAD_TYPE),
            DecodeError::BadActionLen => (et::BAD_ACTION, bac::BAD_LEN),
            DecodeError::BadSetLen => (et::BAD_ACTION, bac::BAD_SET_LEN),
            DecodeError::BadSetArgument => (et::BAD_ACTION, bac::BAD_SET_ARGUMENT),
            DecodeError::BadExperimenterType => (et::BAD_ACTION, bac::BAD_EXP_TYPE),
            DecodeError::BadArgument => (et::BAD_ACTION, bac::BAD_ARGUMENT),
            DecodeError::BadBucket => (et::GROUP_MOD_FAILED, gmfc::BAD_BUCKET),
            DecodeError::BadTableFeaturesLen => (et::TABLE_FEATURES_FAILED, tffc::BAD_LEN),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::BadVersion(v) => write!(f, "unsupported OpenFlow version {v:#04x}"),
            DecodeError::BadLen => f.write_str("bad message length"),
            DecodeError::BadType(t) => write!(f, "unsupported message type {t}"),
            DecodeError::BadMultipart(t) => write!(f, "unsupported multipart type {t}"),
            DecodeError::BadMatchType(t) => write!(f, "unsupported match type {t}"),
            DecodeError::BadMatchLen => f.write_str("bad match or OXM length"),
            DecodeError::BadInstruction(t) => write!(f, "unknown instruction type {t}"),
            DecodeError::BadInstructionLen => f.write_str("bad instruction length"),
            DecodeError::BadAction(t) => write!(f, "unknown action type {t}"),
            DecodeError::BadActionLen => f.write_str("bad action length"),
            DecodeError::BadSetLen => f.write_str("bad set_field length"),
            DecodeError::BadSetArgument => f.write_str("set_field with a mask"),
            DecodeError::BadExperimenterType => f.write_str("unknown Nicira action subtype"),
            DecodeError::BadArgument => f.write_str("bad action argument"),
            DecodeError::BadBucket => f.write_str("bad group bucket length"),
            DecodeError::BadTableFeaturesLen => f.write_str("bad table features length"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A big-endian reader over a slice; running out of bytes fails with `err`, the error of
/// the structure being read.
#[derive(Clone, Copy)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    err: DecodeError,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], err: DecodeError) -> Reader<'a> {
        Reader { buf, pos: 0, err }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.err);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// What is left, consuming the reader.
    pub(crate) fn rest_copy(self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    /// A sub-reader over the next `n` bytes, failing with `err`.
    pub(crate) fn sub(&mut self, n: usize, err: DecodeError) -> Result<Reader<'a>, DecodeError> {
        Ok(Reader::new(self.bytes(n)?, err))
    }

    /// The next record of a list whose records start with their own 16-bit length:
    /// `len_ok` checks that length; the record's reader (failing with `e`) starts after
    /// it. A length that is short of bytes or refused fails with `e`.
    pub(crate) fn record(
        &mut self,
        e: DecodeError,
        len_ok: impl Fn(usize) -> bool,
    ) -> Result<Reader<'a>, DecodeError> {
        let len = self.peek_u16(0).map_err(|_| e)? as usize;
        if !len_ok(len) {
            return Err(e);
        }
        let mut b = self.sub(len, e).map_err(|_| e)?;
        b.skip(2)?;
        Ok(b)
    }

    /// Peek a big-endian u16 at `off` bytes ahead without consuming.
    pub(crate) fn peek_u16(&self, off: usize) -> Result<u16, DecodeError> {
        if off + 2 > self.remaining() {
            return Err(self.err);
        }
        let p = self.pos + off;
        Ok(u16::from_be_bytes([self.buf[p], self.buf[p + 1]]))
    }

    /// Read items with `one` until nothing is left.
    pub(crate) fn list<T>(
        &mut self,
        mut one: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let mut out = Vec::new();
        while !self.is_empty() {
            out.push(one(self)?);
        }
        Ok(out)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// A fixed-size NUL-terminated string field: up to the first NUL; bytes that are not
    /// UTF-8 become `?` one for one (so the string keeps its byte length).
    pub(crate) fn string(&mut self, n: usize) -> Result<String, DecodeError> {
        let b = self.bytes(n)?;
        // The last byte is the terminator the spec requires: a field without a NUL is
        // read as its first n - 1 bytes, which is what encoding writes back.
        let b = &b[..n.saturating_sub(1)];
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        let b = &b[..end];
        Ok(match std::str::from_utf8(b) {
            Ok(s) => s.to_string(),
            Err(_) => b
                .iter()
                .map(|&c| if c < 0x80 { c as char } else { '?' })
                .collect(),
        })
    }
}

/// Bytes to add to `len` to reach a multiple of 8.
pub(crate) fn pad8(len: usize) -> usize {
    (8 - len % 8) % 8
}

/// A big-endian writer.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    pub(crate) fn zeros(&mut self, n: usize) {
        self.buf.resize(self.buf.len() + n, 0);
    }
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }
    /// Pad with zeros to a multiple of 8 counted from `start`.
    pub(crate) fn pad_from(&mut self, start: usize) {
        let n = pad8(self.buf.len() - start);
        self.zeros(n);
    }
    /// A NUL-padded string field of `n` bytes (cut at a character boundary to leave at
    /// least one NUL).
    pub(crate) fn string(&mut self, s: &str, n: usize) {
        let mut end = s.len().min(n.saturating_sub(1));
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        // A NUL inside the string would end it early on decode: stop there.
        let b = &s.as_bytes()[..end];
        let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
        self.bytes(b);
        self.zeros(n - b.len());
    }
    /// Write a u16 at `at` (a length filled in after the fact).
    pub(crate) fn set_u16(&mut self, at: usize, v: u16) {
        self.buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
}
