//! AF_PACKET port: a TPACKET_V3 memory-mapped receive ring and batched `sendmmsg` transmit
//! on one interface (any interface); optionally in a fanout group shared by several workers.
//!
//! Hand-written over the `libc` crate: no maintained crate gives TPACKET_V3 rings with
//! batch access to the blocks, and the ring protocol is small (see
//! Documentation/networking/packet_mmap.rst in the kernel).

mod setup;

use crate::{PacketBatch, Port, PortInfo, PortStats, FRAME, MAX_FRAME};
pub(crate) use setup::bind_to;
use setup::{bind_promiscuous, map_rx_ring, packet_socket, tx_vectors};
use std::cell::Cell;
use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

/// Receive ring geometry: 16 blocks of 256 KiB (4 MiB), nominal frame 2 KiB.
const BLOCK_SIZE: u32 = 256 << 10;
const BLOCK_NR: u32 = 16;
const FRAME_SIZE: u32 = 2048;
/// A block is handed to user space after this many milliseconds even if not full.
const RETIRE_MS: u32 = 1;
/// Frames `send` queues for one `flush`.
const TXQ: usize = 256;
/// Empty `recv` calls between checks of the socket's pending error (device gone).
const ERROR_CHECK_EVERY: u32 = 16;

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn os_err(what: &str, ifname: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{ifname}: {what}: {e}"))
}

/// Errors that mean the device is gone or down: reported from `recv` / `flush`.
fn device_gone(e: i32) -> bool {
    matches!(e, libc::ENXIO | libc::ENODEV | libc::ENETDOWN)
}

fn setsockopt<T>(fd: i32, level: i32, opt: i32, val: &T) -> i32 {
    // SAFETY: `val` points to a live `T` of the given size.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    }
}

/// Read option `opt` into `val` (a C integer or struct the kernel fills); what
/// `getsockopt(2)` returns.
fn getsockopt<T>(fd: i32, level: i32, opt: i32, val: &mut T) -> i32 {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` points to a live `T` of `len` bytes.
    unsafe { libc::getsockopt(fd, level, opt, (val as *mut T).cast(), &mut len) }
}

/// The mmapped ring; unmapped on drop.
struct Ring {
    base: *mut u8,
    len: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// One AF_PACKET socket on one interface (one queue of an `afpacket` port).
pub struct AfPacketPort {
    name: String,
    ifname: String,
    ifindex: i32,
    fanout: bool,
    ring: Ring,
    /// Block being read (or next to look at).
    block: usize,
    /// Frames of `block` not yet read; 0 when no block is open.
    left: u32,
    /// Offset in `block` of the next frame to read.
    off: usize,
    /// Transmit queue: frame `i` at `tx_buf[i * FRAME..]`, its length in `tx_iov[i]`.
    tx_buf: Box<[u8]>,
    tx_iov: Box<[libc::iovec]>,
    tx_msgs: Box<[libc::mmsghdr]>,
    tx_n: usize,
    /// Longest frame the device takes (MTU + Ethernet header + one VLAN tag).
    max_tx: usize,
    empty_polls: u32,
    /// The device is gone (errno), reported from every later `recv` / `flush`.
    gone: Option<i32>,
    stats: PortStats,
    /// Kernel ring drops (PACKET_STATISTICS resets on read, so they are accumulated).
    kernel_drops: Cell<u64>,
    fd: OwnedFd,
}

// SAFETY: the raw pointers (ring mapping, iovecs into `tx_buf`, msghdrs into `tx_iov`)
// point into memory this value owns exclusively; nothing is shared between threads.
unsafe impl Send for AfPacketPort {}

impl AfPacketPort {
    /// Open a socket on `interface`, set up its receive ring and make the interface
    /// promiscuous (for as long as the socket lives). With `fanout`, join the interface's
    /// PACKET_FANOUT_HASH group so the workers serving it share its traffic by flow.
    pub fn open(name: &str, interface: &str, fanout: bool) -> io::Result<AfPacketPort> {
        let cname = CString::new(interface)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has NUL"))?;
        // SAFETY: a valid C string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(os_err("no such interface", interface));
        }
        let fd = packet_socket(interface)?;
        let raw = fd.as_raw_fd();
        let ring = map_rx_ring(raw, interface)?;
        bind_promiscuous(raw, ifindex, fanout, interface)?;
        let mtu = interface_mtu(interface).unwrap_or(1500);
        let max_tx = (mtu + 14 + 4).min(FRAME);
        let (tx_buf, tx_iov, tx_msgs) = tx_vectors();

        Ok(AfPacketPort {
            name: name.into(),
            ifname: interface.into(),
            ifindex,
            fanout,
            ring,
            block: 0,
            left: 0,
            off: 0,
            tx_buf,
            tx_iov,
            tx_msgs,
            tx_n: 0,
            max_tx,
            empty_polls: 0,
            gone: None,
            stats: PortStats::default(),
            kernel_drops: Cell::new(0),
            fd,
        })
    }

    /// The interface's index (as when opened).
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    fn block_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: `i < BLOCK_NR`, inside the mapping.
        unsafe { self.ring.base.add(i * BLOCK_SIZE as usize) }
    }

    /// Make the next block current if the kernel has handed it over (skipping empty
    /// ones); false when it has not.
    fn open_next_block(&mut self) -> bool {
        loop {
            let status = self.block_status(self.block).load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                return false;
            }
            let bd = self
                .block_ptr(self.block)
                .cast::<libc::tpacket_block_desc>();
            // SAFETY: the block is ours (TP_STATUS_USER) until we hand it back.
            let (num, first) = unsafe {
                let h = &(*bd).hdr.bh1;
                (h.num_pkts, h.offset_to_first_pkt as usize)
            };
            if num == 0 {
                self.release_block();
                continue;
            }
            self.left = num;
            self.off = first;
            return true;
        }
    }

    /// The frame at `off` in the current block: (offset to the next frame, the bytes,
    /// the length on the wire, the packet type, the VLAN tag the kernel took out).
    ///
    /// # Safety
    /// `off` must be a frame offset inside the current block, which must be ours.
    #[allow(clippy::type_complexity)]
    /// The bytes stay valid until the block is handed back (not tied to `&self`, so the
    /// caller can count while it holds them).
    unsafe fn frame_at<'r>(
        &self,
        hdr_len: usize,
    ) -> (usize, &'r [u8], usize, u8, Option<(u16, u16)>) {
        let block = self.block_ptr(self.block);
        // SAFETY: `off` is a frame offset inside the block the kernel wrote (the caller's
        // promise), and the frame's data lies inside the block.
        unsafe {
            let h = &*block.add(self.off).cast::<libc::tpacket3_hdr>();
            let ll = &*block.add(self.off + hdr_len).cast::<libc::sockaddr_ll>();
            let data = std::slice::from_raw_parts(
                block.add(self.off + h.tp_mac as usize),
                h.tp_snaplen as usize,
            );
            // The kernel takes the outer VLAN tag out of the frame on receive
            // (skb_vlan_untag) and reports it here: put it back, so the datapath
            // sees the frame as it was on the wire.
            let vlan = (h.tp_status & TP_STATUS_VLAN_VALID != 0).then(|| {
                let tpid = if h.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                    h.hv1.tp_vlan_tpid
                } else {
                    0x8100
                };
                (tpid, h.hv1.tp_vlan_tci as u16)
            });
            (
                h.tp_next_offset as usize,
                data,
                h.tp_len as usize,
                ll.sll_pkttype,
                vlan,
            )
        }
    }

    /// The block's status word, shared with the kernel.
    fn block_status(&self, i: usize) -> &AtomicU32 {
        let bd = self.block_ptr(i).cast::<libc::tpacket_block_desc>();
        // SAFETY: the block descriptor is in the mapping and 4-byte aligned; the kernel
        // writes it concurrently, so it is only accessed atomically.
        unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*bd).hdr.bh1.block_status)) }
    }

    fn gone_err(&self, e: i32) -> io::Error {
        let os = io::Error::from_raw_os_error(e);
        io::Error::new(os.kind(), format!("{}: device gone: {os}", self.ifname))
    }

    /// Check the socket's pending error (set when the device goes down or away).
    fn check_socket_error(&mut self) -> io::Result<()> {
        let mut err: libc::c_int = 0;
        let r = getsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut err,
        );
        if r < 0 {
            let e = errno();
            self.stats.errors += 1;
            if device_gone(e) || e == libc::EBADF {
                self.gone = Some(e);
                return Err(self.gone_err(e));
            }
            return Ok(());
        }
        if err != 0 {
            self.stats.errors += 1;
            if device_gone(err) {
                self.gone = Some(err);
                return Err(self.gone_err(err));
            }
        }
        Ok(())
    }
}

fn interface_mtu(ifname: &str) -> Option<usize> {
    let mut ifr = ifreq(ifname)?;
    // SAFETY: a datagram socket only for the ioctl, closed on drop.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return None;
    }
    // SAFETY: just created.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: SIOCGIFMTU fills `ifr_mtu` of a valid ifreq.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFMTU as _, &mut ifr) };
    if r != 0 {
        return None;
    }
    // SAFETY: the union member the ioctl wrote.
    Some(unsafe { ifr.ifr_ifru.ifru_mtu } as usize)
}

/// An `ifreq` naming `ifname` (None if the name is too long).
pub(crate) fn ifreq(ifname: &str) -> Option<libc::ifreq> {
    let b = ifname.as_bytes();
    if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) {
        return None;
    }
    // SAFETY: all-zero is a valid ifreq.
    let mut ifr: libc::ifreq = unsafe { zeroed() };
    for (d, &s) in ifr.ifr_name.iter_mut().zip(b) {
        *d = s as libc::c_char;
    }
    Some(ifr)
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        if let Some(e) = self.gone {
            return Err(self.gone_err(e));
        }
        let hdr_len = tpacket_align(size_of::<libc::tpacket3_hdr>());
        let mut n = 0;
        while batch.room() > 0 {
            if self.left == 0 && !self.open_next_block() {
                break;
            }
            // SAFETY: `off` is the offset of one of the `left` frames of the current block.
            let (next, frame, wire_len, pkttype, vlan) = unsafe { self.frame_at(hdr_len) };
            if pkttype != libc::PACKET_OUTGOING {
                if frame.len() < wire_len
                    || frame.len() + 4 * vlan.is_some() as usize > MAX_FRAME
                    || !push_frame(batch, frame, vlan)
                {
                    self.stats.rx_dropped += 1;
                } else {
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += frame.len() as u64;
                    n += 1;
                }
            }
            self.left -= 1;
            self.off += next;
            if self.left == 0 {
                self.release_block();
            }
        }
        if n == 0 {
            self.empty_polls += 1;
            if self.empty_polls >= ERROR_CHECK_EVERY {
                self.empty_polls = 0;
                self.check_socket_error()?;
            }
        } else {
            self.empty_polls = 0;
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        if self.tx_n == TXQ || frame.len() > self.max_tx || self.gone.is_some() {
            self.stats.tx_dropped += 1;
            return false;
        }
        let at = self.tx_n * FRAME;
        self.tx_buf[at..at + frame.len()].copy_from_slice(frame);
        self.tx_iov[self.tx_n].iov_len = frame.len();
        self.tx_n += 1;
        true
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(e) = self.gone {
            return Err(self.gone_err(e));
        }
        let n = self.tx_n;
        if n == 0 {
            return Ok(());
        }
        self.tx_n = 0;
        // SAFETY: the first `n` msghdrs point at iovecs describing queued frames.
        let r = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                self.tx_msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = errno();
            self.stats.tx_dropped += n as u64;
            if e == libc::ENOBUFS || e == libc::EAGAIN || e == libc::EWOULDBLOCK {
                return Ok(());
            }
            self.stats.errors += 1;
            if device_gone(e) {
                self.gone = Some(e);
                return Err(self.gone_err(e));
            }
            // Anything else (e.g. a frame the device refuses) loses this batch only.
            return Ok(());
        }
        let sent = r as usize;
        for iov in &self.tx_iov[..sent] {
            self.stats.tx_bytes += iov.iov_len as u64;
        }
        self.stats.tx_packets += sent as u64;
        // The kernel stopped at frame `sent` (its error is not reported): the rest is lost.
        self.stats.tx_dropped += (n - sent) as u64;
        Ok(())
    }

    fn stats(&self) -> PortStats {
        let mut st: libc::tpacket_stats_v3 = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let r = getsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            &mut st,
        );
        if r == 0 {
            self.kernel_drops
                .set(self.kernel_drops.get() + u64::from(st.tp_drops));
        }
        let mut s = self.stats;
        s.rx_dropped += self.kernel_drops.get();
        s
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "afpacket",
            detail: format!(
                "{}: TPACKET_V3 rx ring ({} x {} KiB blocks), sendmmsg tx{}",
                self.ifname,
                BLOCK_NR,
                BLOCK_SIZE >> 10,
                if self.fanout { ", fanout hash" } else { "" }
            ),
        }
    }
}

impl AfPacketPort {
    /// Hand the current block back to the kernel and move to the next.
    fn release_block(&mut self) {
        self.block_status(self.block)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.left = 0;
        self.block = (self.block + 1) % BLOCK_NR as usize;
    }
}

fn tpacket_align(x: usize) -> usize {
    (x + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1)
}

const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// Append `frame` to `batch`, with the VLAN tag `(tpid, tci)` put back after the MACs.
fn push_frame(batch: &mut PacketBatch, frame: &[u8], vlan: Option<(u16, u16)>) -> bool {
    let Some((tpid, tci)) = vlan else {
        return batch.push(frame);
    };
    if frame.len() < 12 {
        return false;
    }
    let Some(slot) = batch.next_slot() else {
        return false;
    };
    let len = frame.len() + 4;
    slot[..12].copy_from_slice(&frame[..12]);
    slot[12..14].copy_from_slice(&tpid.to_be_bytes());
    slot[14..16].copy_from_slice(&tci.to_be_bytes());
    slot[16..len].copy_from_slice(&frame[12..]);
    batch.commit(len);
    true
}
