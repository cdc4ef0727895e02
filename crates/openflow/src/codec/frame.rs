//! Framing: the `ofp_header` ([`Header`]), the length that cuts a byte stream into
//! messages ([`message_len`]), one message to and from bytes ([`Message::encode`],
//! [`decode`]), and a multipart reply as as many messages as it takes
//! ([`encode_multipart_reply`]).

use super::message::{decode_body, Message};
use crate::consts::*;
use crate::multipart::MultipartReply;
use crate::wire::{DecodeError, Reader, Writer};

/// `ofp_header`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    pub version: u8,
    pub type_: u8,
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// Read the header at the start of `buf` (no checks beyond there being 8 bytes).
    pub fn peek(buf: &[u8]) -> Option<Header> {
        let b: &[u8; 8] = buf.get(..8)?.try_into().ok()?;
        Some(Header {
            version: b[0],
            type_: b[1],
            length: u16::from_be_bytes([b[2], b[3]]),
            xid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// How many bytes the message at the start of `buf` takes: `Ok(None)` while fewer than
/// the 4 bytes that hold its length have arrived, `Ok(Some(n))` once they have (the caller
/// waits for `n` bytes, then passes exactly those to [`decode`]), and an error for a length
/// below the 8-byte header (the stream cannot be framed any more: close the connection).
/// The length is 16 bits, so a reader waiting for a whole message holds at most 65,535
/// bytes of it: a peer cannot make it buffer more.
pub fn message_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u16::from_be_bytes([buf[2], buf[3]]) as usize;
    if len < OFP_HEADER_LEN {
        return Err(DecodeError::BadLen);
    }
    Ok(Some(len))
}

impl Message {
    /// Encode with this xid. The caller keeps messages within 65,535 bytes (a packet_in's
    /// data cut to max_len; long multipart replies through [`encode_multipart_reply`]); a
    /// longer one has its length field saturated, which [`Message::encoded_len`] lets the
    /// caller avoid.
    pub fn encode(&self, xid: u32) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(OFP_VERSION);
        w.u8(self.type_());
        w.u16(0);
        w.u32(xid);
        self.encode_body(&mut w);
        let len = w.len().min(OFP_MAX_MSG_LEN) as u16;
        w.set_u16(2, len);
        w.buf
    }

    /// Size of the encoded message.
    pub fn encoded_len(&self) -> usize {
        // Bodies are small next to the copy this saves for the common case.
        self.encode(0).len()
    }
}

/// Decode one whole message: `buf` is exactly the bytes [`message_len`] framed. A message
/// that is not version 0x04 is refused (BAD_VERSION) unless it is a HELLO, which decodes
/// whatever its version so that the caller can negotiate. Every length inside is checked;
/// trailing bytes a fixed-size message does not use are a length error.
pub fn decode(buf: &[u8]) -> Result<(Header, Message), DecodeError> {
    let h = Header::peek(buf).ok_or(DecodeError::BadLen)?;
    if (h.length as usize) < OFP_HEADER_LEN || h.length as usize != buf.len() {
        return Err(DecodeError::BadLen);
    }
    if h.version != OFP_VERSION && h.type_ != msg::HELLO {
        return Err(DecodeError::BadVersion(h.version));
    }
    let mut r = Reader::new(&buf[OFP_HEADER_LEN..], DecodeError::BadLen);
    let m = decode_body(h.type_, &mut r)?;
    if !r.is_empty() {
        return Err(DecodeError::BadLen);
    }
    Ok((h, m))
}

/// Why a reply could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong {
    /// Index of the item that does not fit in one message by itself.
    pub item: usize,
}

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "multipart reply item {} is longer than a message",
            self.item
        )
    }
}

impl std::error::Error for TooLong {}

/// Encode a multipart reply as one or more messages, each at most 65,535 bytes, all but
/// the last flagged [`OFPMPF_REPLY_MORE`], all with `xid`.
pub fn encode_multipart_reply(xid: u32, body: &MultipartReply) -> Result<Vec<Vec<u8>>, TooLong> {
    encode_multipart_reply_max(xid, body, OFP_MAX_MSG_LEN)
}

/// [`encode_multipart_reply`] with a smaller message size limit (tests, small buffers).
pub fn encode_multipart_reply_max(
    xid: u32,
    body: &MultipartReply,
    max_msg: usize,
) -> Result<Vec<Vec<u8>>, TooLong> {
    let parts = body
        .split(max_msg.min(OFP_MAX_MSG_LEN))
        .map_err(|item| TooLong { item })?;
    let n = parts.len();
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            let flags = if i + 1 < n { OFPMPF_REPLY_MORE } else { 0 };
            Message::MultipartReply { flags, body }.encode(xid)
        })
        .collect())
}
