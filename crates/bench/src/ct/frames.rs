//! The ct cases' frames, written straight into a batch slot as a port receives them:
//! TCP/IPv4 segments with real sequence numbers and UDP/IPv4 datagrams, checksums
//! computed in full (a connection's frames differ per packet, so there is no template to
//! patch incrementally as the generator's new-flow stamps do). Written by hand rather than
//! with etherparse's builders, which serialise into a new buffer: these run per packet
//! inside the timed loop and write into the batch's own slot, allocating nothing.

use flowpath_packet::checksum::{finish, sum16, sum_words};

/// Ethernet + IPv4 + TCP headers, and Ethernet + IPv4 + UDP.
const TCP_HDRS: usize = 14 + 20 + 20;
const UDP_HDRS: usize = 14 + 20 + 8;
/// The shortest Ethernet frame without its FCS.
const MIN_FRAME: usize = 60;
const MAC_CLIENT: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const MAC_SERVER: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// One connection's addresses and ports, original direction (client to server).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoints {
    pub client: [u8; 4],
    pub server: [u8; 4],
    pub cport: u16,
    pub sport: u16,
}

impl Endpoints {
    /// Connection number `n`: client `10.0.0.0 + n mod 2^24`, port `1024 + (n >> 24) mod
    /// 50,000`, to 192.168.0.1:80 (TCP) or :5001 (UDP). Distinct for the first 8·10^11 `n`;
    /// every connection below 2^24 has its own client address.
    pub fn nth(n: u64, server_port: u16) -> Endpoints {
        let host = (n & 0xff_ffff) as u32;
        Endpoints {
            client: (0x0a00_0000 | host).to_be_bytes(),
            server: [192, 168, 0, 1],
            cport: 1024 + ((n >> 24) % 50_000) as u16,
            sport: server_port,
        }
    }

    /// (source, destination, source port, destination port) in direction `reply`.
    fn dir(&self, reply: bool) -> ([u8; 4], [u8; 4], u16, u16) {
        if reply {
            (self.server, self.client, self.sport, self.cport)
        } else {
            (self.client, self.server, self.cport, self.sport)
        }
    }
}

/// One TCP segment's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    /// Payload bytes.
    pub len: u16,
}

/// TCP flag bits.
pub mod tcp {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

/// Ethernet and IPv4 headers (DF, TTL 64, id 0) for `l4_len` bytes of `proto` from `src`
/// to `dst`, checksummed; the frame is zero-padded to the Ethernet minimum. Returns the
/// frame length (without FCS).
fn eth_ip4(
    buf: &mut [u8],
    reply: bool,
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    l4_len: usize,
) -> usize {
    let (smac, dmac) = if reply {
        (MAC_SERVER, MAC_CLIENT)
    } else {
        (MAC_CLIENT, MAC_SERVER)
    };
    buf[0..6].copy_from_slice(&dmac);
    buf[6..12].copy_from_slice(&smac);
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut buf[14..34];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
    ip[4..8].copy_from_slice(&[0, 0, 0x40, 0]);
    ip[8] = 64;
    ip[9] = proto;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let c = !sum_words(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let len = 34 + l4_len;
    if len < MIN_FRAME {
        buf[len..MIN_FRAME].fill(0);
    }
    len.max(MIN_FRAME)
}

/// The pseudo-header's sum for an L4 checksum.
fn pseudo(src: [u8; 4], dst: [u8; 4], proto: u8, l4_len: usize) -> u64 {
    sum16(&dst, sum16(&src, 0)) + proto as u64 + l4_len as u64
}

/// Write a TCP/IPv4 frame of connection `e` in direction `reply` into `buf` (at least
/// 60 + `seg.len` bytes); the payload is `seg.len` zero bytes. Returns the frame length.
pub fn tcp4(buf: &mut [u8], e: &Endpoints, reply: bool, seg: &Segment) -> usize {
    let (src, dst, sp, dp) = e.dir(reply);
    let l4_len = 20 + seg.len as usize;
    let len = eth_ip4(buf, reply, src, dst, 6, l4_len);
    let t = &mut buf[34..34 + l4_len];
    t[0..2].copy_from_slice(&sp.to_be_bytes());
    t[2..4].copy_from_slice(&dp.to_be_bytes());
    t[4..8].copy_from_slice(&seg.seq.to_be_bytes());
    t[8..12].copy_from_slice(&seg.ack.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = seg.flags;
    t[14..16].copy_from_slice(&65535u16.to_be_bytes());
    t[16..20].fill(0);
    t[20..].fill(0);
    let c = finish(sum_words(t) as u64 + pseudo(src, dst, 6, l4_len));
    t[16..18].copy_from_slice(&c.to_be_bytes());
    len
}

/// Write a UDP/IPv4 datagram of `payload` zero bytes from `src:sp` to `dst:dp` into
/// `buf`, as connection traffic in direction `reply` (which only picks the MACs).
/// Returns the frame length.
pub fn udp4(
    buf: &mut [u8],
    (src, dst, sp, dp): ([u8; 4], [u8; 4], u16, u16),
    reply: bool,
    payload: usize,
) -> usize {
    let l4_len = 8 + payload;
    let len = eth_ip4(buf, reply, src, dst, 17, l4_len);
    let u = &mut buf[34..34 + l4_len];
    u[0..2].copy_from_slice(&sp.to_be_bytes());
    u[2..4].copy_from_slice(&dp.to_be_bytes());
    u[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
    u[6..].fill(0);
    let mut c = finish(sum_words(u) as u64 + pseudo(src, dst, 17, l4_len));
    if c == 0 {
        c = 0xffff;
    }
    u[6..8].copy_from_slice(&c.to_be_bytes());
    len
}

/// Payload bytes that make a TCP or UDP frame `frame_size` bytes with its FCS (none
/// below the minimum frame).
pub fn payload_for(frame_size: usize, tcp: bool) -> usize {
    let hdrs = if tcp { TCP_HDRS } else { UDP_HDRS };
    frame_size.saturating_sub(4 + hdrs)
}

/// One UDP connection direction as the ports send it: source, destination, ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Udp4 {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub sport: u16,
    pub dport: u16,
    /// Sent by the server side (picks the MACs).
    pub reply: bool,
}

impl Udp4 {
    /// Connection `e`'s datagrams in direction `reply`.
    pub fn of(e: &Endpoints, reply: bool) -> Udp4 {
        let (src, dst, sport, dport) = e.dir(reply);
        Udp4 {
            src,
            dst,
            sport,
            dport,
            reply,
        }
    }

    /// Write this datagram into `buf` with `payload` bytes; returns the frame length.
    #[inline]
    pub fn write(&self, buf: &mut [u8], payload: usize) -> usize {
        udp4(
            buf,
            (self.src, self.dst, self.sport, self.dport),
            self.reply,
            payload,
        )
    }
}
