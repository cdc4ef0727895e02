//! The template frames and the program's configuration for them: where a frame's flow
//! fields and checksums are ([`config_for`]), `struct gen_cfg` as the program reads it, and
//! the same flow choice and rewrites in Rust ([`GenCfg::vary`]) for the packet socket.

use super::plan::{FlowOrder, Vary};
use std::io;

/// gen_cfg entries (templates per run); must match GEN_TEMPLATES in the program.
pub const MAX_TEMPLATES: usize = 1024;
/// First word of the metadata that marks a frame as ours; must match GEN_MAGIC.
const GEN_MAGIC: u32 = 0x6670_6774;

/// Configuration the program reads; must match `struct gen_cfg` in `bpf/gen_tx.bpf.c`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct GenCfg {
    pub(super) mode: u32,
    pub(super) flows: u32,
    pub(super) new_share: u32,
    pub(super) port_span: u32,
    pub(super) base_src: u32,
    pub(super) base_src_raw: u32,
    pub(super) ip_off: u16,
    pub(super) src_off: u16,
    pub(super) port_off: u16,
    pub(super) l4_csum_off: u16,
    pub(super) base_port: u16,
    pub(super) base_port_raw: u16,
    pub(super) base_ip_csum_raw: u16,
    pub(super) base_l4_csum_raw: u16,
    pub(super) ip_ver: u8,
    pub(super) l4_pseudo: u8,
    pub(super) order: u8,
    pub(super) pad: [u8; 5],
}

// SAFETY: plain C struct of integers without padding holes that matter to the kernel.
unsafe impl aya::Pod for GenCfg {}

const _: () = assert!(std::mem::size_of::<GenCfg>() == 48);

impl GenCfg {
    /// What `gen_tx` does to the frame it sends as packet number `c` (the program's
    /// counter): the same flow choice and the same field and checksum rewrites, for a
    /// transmitter without the program ([`PacketSocketTx`](super::PacketSocketTx)). False
    /// where the program would abort (an offset past the frame). The program is the reference: a test runs
    /// both over the same frames and counters (`vary_matches_the_program`).
    pub(super) fn vary(&self, c: u64, f: &mut [u8]) -> bool {
        self.mode == 0 || self.rewrite(self.flow_of(c), f)
    }

    /// The flow of packet number `c`: new flows spread evenly (from `flows` up), the
    /// recurring ones in turn or at random.
    fn flow_of(&self, c: u64) -> u32 {
        let flows = self.flows.max(1);
        let share = u64::from(self.new_share);
        let (a, b) = (
            c.wrapping_mul(share) >> 24,
            (c + 1).wrapping_mul(share) >> 24,
        );
        if a != b {
            flows.wrapping_add(b as u32)
        } else {
            let k = if self.order != 0 { mix64(c - a) } else { c - a };
            (k % u64::from(flows)) as u32
        }
    }

    /// Rewrite the template `f` into flow `flow`: the source address and port, and the
    /// checksums from the template's originals (RFC 1624).
    pub(super) fn rewrite(&self, flow: u32, f: &mut [u8]) -> bool {
        let span = self.port_span.max(1);
        let src = self.base_src.wrapping_add(flow / span);
        let port = self.base_port.wrapping_add((flow % span) as u16);
        // The program's stores are of network-order values; its checksum sums are over
        // the raw (memory-order) halves, which one's complement does not mind.
        let src_raw = u32::from_ne_bytes(src.to_be_bytes());
        let port_raw = u16::from_ne_bytes(port.to_be_bytes());
        let put = |f: &mut [u8], off: u16, bytes: &[u8]| -> bool {
            let off = usize::from(off & 0x1ff);
            match f.get_mut(off..off + bytes.len()) {
                Some(d) => {
                    d.copy_from_slice(bytes);
                    true
                }
                None => false,
            }
        };
        if !put(f, self.src_off, &src_raw.to_ne_bytes()) {
            return false;
        }
        if self.ip_ver == 4 {
            let s = add32(
                !u32::from(self.base_ip_csum_raw) & 0xffff,
                self.base_src_raw,
                src_raw,
            );
            let ck = !fold(s) as u16;
            if !put(f, self.ip_off.wrapping_add(10), &ck.to_ne_bytes()) {
                return false;
            }
        }
        if self.port_off != 0 && !put(f, self.port_off, &port_raw.to_ne_bytes()) {
            return false;
        }
        if self.l4_csum_off != 0 {
            let mut s = !u32::from(self.base_l4_csum_raw) & 0xffff;
            if self.l4_pseudo != 0 {
                s = add32(s, self.base_src_raw, src_raw);
            }
            if self.port_off != 0 {
                s += (!u32::from(self.base_port_raw) & 0xffff) + u32::from(port_raw);
            }
            let r = !fold(s) as u16;
            let ck = if r == 0 { 0xffff } else { r };
            if !put(f, self.l4_csum_off, &ck.to_ne_bytes()) {
                return false;
            }
        }
        true
    }
}

/// The program's `fold`: a 32-bit one's complement sum folded to 16 bits.
fn fold(mut s: u32) -> u32 {
    s = (s & 0xffff) + (s >> 16);
    (s & 0xffff) + (s >> 16)
}

/// The program's `add32`: replace the raw 32-bit field `old` by `new` in the sum.
fn add32(sum: u32, old: u32, new: u32) -> u32 {
    sum + (!old & 0xffff) + (!old >> 16) + (new & 0xffff) + (new >> 16)
}

/// The program's `mix64` (splitmix64's finaliser).
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Bytes of XDP metadata in front of each frame: GEN_MAGIC and the gen_cfg index.
pub(super) const META: usize = 8;

pub(super) fn with_meta(frame: &[u8], slot: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(META + frame.len());
    v.extend_from_slice(&GEN_MAGIC.to_ne_bytes());
    v.extend_from_slice(&slot.to_ne_bytes());
    v.extend_from_slice(frame);
    v
}

pub(super) fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

fn raw16(f: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([f[at], f[at + 1]])
}

fn unvaried(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("cannot vary flows of this template: {what}"),
    )
}

/// What the program needs to rewrite `frame`'s flow (offsets and original field values).
pub(super) fn config_for(frame: &[u8], vary: &Vary) -> io::Result<GenCfg> {
    if frame.len() < 14 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "template frame shorter than an Ethernet header",
        ));
    }
    let (flows, new_share, order) = match *vary {
        Vary::AsIs => return Ok(GenCfg::default()),
        Vary::Flows {
            flows,
            new_share,
            order,
        } => (flows.max(1), new_share, order),
    };
    if !(0.0..=1.0).contains(&new_share) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("new-flow share {new_share} is outside 0..=1"),
        ));
    }
    let mut off = 12;
    let mut ethertype = be16(frame, off);
    while matches!(ethertype, 0x8100 | 0x88a8) && frame.len() >= off + 6 {
        off += 4;
        ethertype = be16(frame, off);
    }
    let ip = off + 2;
    let mut c = GenCfg {
        mode: 1,
        flows,
        new_share: (new_share * f64::from(1u32 << 24)).round() as u32,
        order: u8::from(order == FlowOrder::Random),
        ip_off: ip as u16,
        ..GenCfg::default()
    };
    let (proto, l4) = config_ip(frame, ethertype, ip, &mut c)?;
    config_l4(frame, proto, l4, &mut c)?;
    if [c.src_off, c.port_off, c.l4_csum_off]
        .iter()
        .any(|&o| usize::from(o) + 4 > 0x200)
    {
        return Err(unvaried("headers deeper than 508 bytes"));
    }
    Ok(c)
}

/// Fill in the IP header's part of `c` (the header of `ethertype` at `ip`): version,
/// source address and IPv4 header checksum. Returns the transport protocol (0 for an IPv4
/// fragment) and the transport header's offset.
fn config_ip(frame: &[u8], ethertype: u16, ip: usize, c: &mut GenCfg) -> io::Result<(u8, usize)> {
    let (proto, l4) = match ethertype {
        0x0800 => {
            if frame.len() < ip + 20 {
                return Err(unvaried("truncated IPv4 header"));
            }
            let ihl = usize::from(frame[ip] & 0xf) * 4;
            c.ip_ver = 4;
            c.src_off = (ip + 12) as u16;
            c.base_ip_csum_raw = raw16(frame, ip + 10);
            let frag = be16(frame, ip + 6) & 0x3fff;
            (if frag != 0 { 0 } else { frame[ip + 9] }, ip + ihl)
        }
        0x86dd => {
            if frame.len() < ip + 40 {
                return Err(unvaried("truncated IPv6 header"));
            }
            c.ip_ver = 6;
            c.src_off = (ip + 8 + 12) as u16;
            (frame[ip + 6], ip + 40)
        }
        t => return Err(unvaried(&format!("ethertype {t:#06x} is not IPv4/IPv6"))),
    };
    let so = usize::from(c.src_off);
    c.base_src = u32::from_be_bytes(frame[so..so + 4].try_into().unwrap());
    c.base_src_raw = u32::from_ne_bytes(frame[so..so + 4].try_into().unwrap());
    Ok((proto, l4))
}

/// Fill in the transport header's part of `c` (protocol `proto` at `l4`): the port and
/// the checksum the program fixes, and how many source ports there are to cycle through.
fn config_l4(frame: &[u8], proto: u8, l4: usize, c: &mut GenCfg) -> io::Result<()> {
    let need = |n: usize| {
        if frame.len() < l4 + n {
            Err(unvaried("truncated transport header"))
        } else {
            Ok(())
        }
    };
    match proto {
        17 => {
            need(8)?;
            c.port_off = l4 as u16;
            let ck = raw16(frame, l4 + 6);
            // IPv4 UDP without a checksum stays without one.
            if c.ip_ver == 6 || ck != 0 {
                c.l4_csum_off = (l4 + 6) as u16;
                c.base_l4_csum_raw = ck;
                c.l4_pseudo = 1;
            }
        }
        6 => {
            need(20)?;
            c.port_off = l4 as u16;
            c.l4_csum_off = (l4 + 16) as u16;
            c.base_l4_csum_raw = raw16(frame, l4 + 16);
            c.l4_pseudo = 1;
        }
        58 if c.ip_ver == 6 => {
            need(4)?;
            c.l4_csum_off = (l4 + 2) as u16;
            c.base_l4_csum_raw = raw16(frame, l4 + 2);
            c.l4_pseudo = 1;
        }
        // ICMPv4, fragments, anything else: only the address changes (IPv4 header checksum
        // fixed; nothing else covers it).
        _ if c.ip_ver == 4 => {}
        p => return Err(unvaried(&format!("IPv6 next header {p}"))),
    }
    if c.port_off != 0 {
        c.base_port = be16(frame, l4);
        c.base_port_raw = raw16(frame, l4);
        c.port_span = (65536 - u32::from(c.base_port)).max(1);
    } else {
        c.port_span = 1;
    }
    Ok(())
}
