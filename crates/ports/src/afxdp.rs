//! AF_XDP port: one XDP socket per queue, UMEM on huge pages when possible, fed by the
//! redirect program in xdp.rs (one program per interface, shared by its queue sockets).
//!
//! UMEM layout: [`UMEM_FRAMES`] chunks of [`CHUNK`] bytes; the first half only ever travels
//! fill ring → rx ring → fill ring, the second half is the transmit free-list (tx ring →
//! completion ring → free-list), so the two directions never compete for frames.

use crate::xdp::{XskProgram, XskRegistrar};
use crate::{PacketBatch, Port, PortInfo, PortStats};
use std::ffi::CString;
use std::io;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig};

/// UMEM chunks (frames) per queue.
pub const UMEM_FRAMES: u32 = 4096;
/// Bytes per UMEM chunk.
pub const CHUNK: u32 = 2048;
/// Chunks used for receiving (the rest transmit).
const RX_FRAMES: u32 = UMEM_FRAMES / 2;
/// Entries in each of the four rings.
const RING: u32 = 2048;
/// `setsockopt(SOL_XDP, XDP_MAX_TX_SKB_BUDGET)` (Linux 6.17+): descriptors one copy-mode
/// `sendto` transmits (default 32). Not in older headers, so defined here.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
const SOL_XDP: libc::c_int = 283;
/// Empty polls between checks of the socket's error (device gone).
const IDLE_CHECK: u32 = 1024;

/// How to set up an AF_XDP queue.
#[derive(Clone, Debug, Default)]
pub struct AfXdpOptions {
    pub mode: crate::XdpMode,
    pub zero_copy: bool,
    pub hugepages: bool,
}

/// The UMEM's memory: an anonymous mapping, on huge pages when they could be had.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
    huge: bool,
}

// SAFETY: the mapping is owned by the port and only touched through it.
unsafe impl Send for Area {}

impl Area {
    fn new(len: usize, hugepages: bool) -> io::Result<Area> {
        let map = |extra: libc::c_int| {
            // SAFETY: anonymous private mapping; checked for MAP_FAILED below.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE | extra,
                    -1,
                    0,
                )
            };
            (p != libc::MAP_FAILED).then(|| NonNull::new(p.cast::<u8>()).unwrap())
        };
        if hugepages {
            if let Some(ptr) = map(libc::MAP_HUGETLB) {
                return Ok(Area {
                    ptr,
                    len,
                    huge: true,
                });
            }
        }
        match map(0) {
            Some(ptr) => Ok(Area {
                ptr,
                len,
                huge: false,
            }),
            None => Err(io::Error::last_os_error()),
        }
    }

    fn chunk(&self, addr: u64, len: u32) -> Option<&[u8]> {
        let end = addr.checked_add(u64::from(len))?;
        if end > self.len as u64 {
            return None;
        }
        // SAFETY: in bounds of the mapping; the kernel handed this chunk to the caller via the rx ring
        // and does not write it until we put it back on the fill ring.
        Some(unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr().add(addr as usize), len as usize)
        })
    }

    fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.ptr, self.len)
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: we mapped exactly this range.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// What a successful bind produced.
struct Bound {
    dq: DeviceQueue,
    rx: RingRx,
    tx: RingTx,
    zero_copy: bool,
}

fn errno_io(e: xdpilone::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.get_raw().abs())
}

/// One attempt: a fresh UMEM registration + socket with these bind flags.
fn setup(area: &Area, info: &IfInfo, bind_flags: u16, copy: bool) -> io::Result<Bound> {
    let cfg = UmemConfig {
        fill_size: RING,
        complete_size: RING,
        frame_size: CHUNK,
        headroom: 0,
        flags: 0,
    };
    // SAFETY: the area is page aligned, CHUNK*UMEM_FRAMES long and outlives the port (it is
    // dropped after every ring and socket, see the field order of AfXdpPort).
    let umem = unsafe { Umem::new(cfg, area.as_slice_ptr()) }.map_err(errno_io)?;
    let sock = Socket::with_shared(info, &umem).map_err(errno_io)?;
    let dq = umem.fq_cq(&sock).map_err(errno_io)?;
    let user = umem
        .rx_tx(
            &sock,
            &SocketConfig {
                rx_size: NonZeroU32::new(RING),
                tx_size: NonZeroU32::new(RING),
                bind_flags: bind_flags | SocketConfig::XDP_BIND_NEED_WAKEUP,
            },
        )
        .map_err(errno_io)?;
    let rx = user.map_rx().map_err(errno_io)?;
    let tx = user.map_tx().map_err(errno_io)?;
    if copy {
        // Let one sendto push a whole flush (copy mode transmits in the syscall).
        let budget: u32 = 256;
        // SAFETY: plain setsockopt on our socket; failure (older kernel) is harmless.
        unsafe {
            libc::setsockopt(
                tx.as_raw_fd(),
                SOL_XDP,
                XDP_MAX_TX_SKB_BUDGET,
                (&budget as *const u32).cast(),
                4,
            )
        };
    }
    // Re-binding a queue right after a close can give EBUSY for a while: retry ~3 s.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match umem.bind(&user) {
            Ok(()) => break,
            Err(e) if e.get_raw() == libc::EBUSY && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => return Err(errno_io(e)),
        }
    }
    Ok(Bound {
        dq,
        rx,
        tx,
        zero_copy: !copy,
    })
}

/// One queue of an interface, served through an XDP socket.
pub struct AfXdpPort {
    name: String,
    queue: u32,
    fd: libc::c_int,
    rx: RingRx,
    tx: RingTx,
    dq: DeviceQueue,
    /// Where the socket is registered: the interface's shared redirect program (detached
    /// when the last queue of the interface goes), or an external one (the XDP tier).
    prog: Arc<dyn XskRegistrar>,
    ifindex: u32,
    /// Dropped last: the rings and sockets above point into it.
    area: Area,
    /// Rx chunks to hand back to the kernel (fill ring was full); capacity RX_FRAMES.
    fill_backlog: Vec<u64>,
    /// Free transmit chunks; capacity UMEM_FRAMES - RX_FRAMES.
    tx_free: Vec<u64>,
    /// Descriptors in the tx ring not yet seen back on the completion ring.
    tx_outstanding: u32,
    stats: PortStats,
    idle: u32,
    info: PortInfo,
}

impl AfXdpPort {
    /// Open `queue` of `interface`: attach (or share) the redirect program, build the UMEM
    /// and rings, bind (zero-copy first if asked, else/then copy mode) and register the
    /// socket in the XSKMAP.
    pub fn open(
        name: &str,
        interface: &str,
        queue: u32,
        opts: &AfXdpOptions,
    ) -> io::Result<AfXdpPort> {
        let prog: Arc<dyn XskRegistrar> = XskProgram::get(interface, opts.mode)?;
        Self::open_with(name, interface, queue, opts, prog)
    }

    /// As [`AfXdpPort::open`], but the socket is registered with `prog`, which already has
    /// an XDP program on `interface` that redirects to it (e.g. the XDP tier's), instead of
    /// attaching this crate's `xsk_redirect`; `opts.mode` is then not used.
    pub fn open_with(
        name: &str,
        interface: &str,
        queue: u32,
        opts: &AfXdpOptions,
        prog: Arc<dyn XskRegistrar>,
    ) -> io::Result<AfXdpPort> {
        let ifindex = crate::xdp::ifindex(interface)?;
        let area = Area::new((UMEM_FRAMES * CHUNK) as usize, opts.hugepages)?;
        let mut info = IfInfo::invalid();
        let cname = CString::new(interface).map_err(|_| io::ErrorKind::InvalidInput)?;
        info.from_name(&cname).map_err(errno_io)?;
        info.set_queue(queue);

        let mut b = bind_socket(&area, &info, opts.zero_copy)?;

        // Every rx chunk goes to the fill ring (it is as large as the rx half).
        {
            let mut w = b.dq.fill(RX_FRAMES);
            let n = w.insert((0..RX_FRAMES).map(|i| u64::from(i * CHUNK)));
            w.commit();
            debug_assert_eq!(n, RX_FRAMES);
        }
        let fd = b.rx.as_raw_fd();
        prog.register(ifindex, queue, fd)?;

        let mut tx_free = Vec::with_capacity((UMEM_FRAMES - RX_FRAMES) as usize);
        tx_free.extend((RX_FRAMES..UMEM_FRAMES).rev().map(|i| u64::from(i * CHUNK)));
        let detail = describe(b.zero_copy, &prog.describe(ifindex), &area, opts, queue);
        Ok(AfXdpPort {
            name: name.to_string(),
            queue,
            fd,
            rx: b.rx,
            tx: b.tx,
            dq: b.dq,
            prog,
            ifindex,
            area,
            fill_backlog: Vec::with_capacity(RX_FRAMES as usize),
            tx_free,
            tx_outstanding: 0,
            stats: PortStats::default(),
            idle: 0,
            info: PortInfo {
                kind: "afxdp",
                detail,
            },
        })
    }

    /// Hand rx chunks back to the kernel.
    fn refill(&mut self) {
        if self.fill_backlog.is_empty() {
            return;
        }
        let mut w = self.dq.fill(self.fill_backlog.len() as u32);
        let k = w.insert(self.fill_backlog.iter().rev().copied()) as usize;
        w.commit();
        drop(w);
        let len = self.fill_backlog.len();
        self.fill_backlog.truncate(len - k);
    }

    /// Move completed transmit chunks back to the free-list.
    fn reap(&mut self) {
        if self.tx_outstanding == 0 {
            return;
        }
        let mut r = self.dq.complete(self.tx_outstanding);
        let mut n = 0;
        while let Some(addr) = r.read() {
            self.tx_free.push(addr & !u64::from(CHUNK - 1));
            n += 1;
        }
        r.release();
        drop(r);
        self.tx_outstanding -= n;
    }

    /// The socket's pending error (ENETDOWN once the device is unregistered).
    fn socket_error(&self) -> Option<io::Error> {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt into a local int.
        let r = unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r == 0 && err != 0 {
            Some(io::Error::from_raw_os_error(err))
        } else {
            None
        }
    }
}

fn gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENXIO) | Some(libc::ENODEV) | Some(libc::ENETDOWN)
    )
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let room = batch.room() as u32;
        if room == 0 {
            return Ok(0);
        }
        let mut got = 0usize;
        let mut r = self.rx.receive(room);
        while let Some(d) = r.read() {
            match self.area.chunk(d.addr, d.len) {
                Some(frame) if batch.push(frame) => {
                    got += 1;
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += u64::from(d.len);
                }
                _ => self.stats.rx_dropped += 1,
            }
            self.fill_backlog.push(d.addr & !u64::from(CHUNK - 1));
        }
        r.release();
        drop(r);
        self.refill();
        if got == 0 {
            self.idle = self.idle.wrapping_add(1);
            if self.dq.needs_wakeup() {
                self.dq.wake();
            }
            if self.idle % IDLE_CHECK == 0 {
                if let Some(e) = self.socket_error() {
                    self.stats.errors += 1;
                    return Err(e);
                }
            }
        } else {
            self.idle = 0;
        }
        Ok(got)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        if frame.len() > CHUNK as usize || frame.is_empty() {
            self.stats.tx_dropped += 1;
            return false;
        }
        if self.tx_free.is_empty() {
            self.reap();
        }
        let Some(addr) = self.tx_free.pop() else {
            self.stats.tx_dropped += 1;
            return false;
        };
        let mut w = self.tx.transmit(1);
        if w.capacity() == 0 {
            drop(w);
            self.tx_free.push(addr);
            self.stats.tx_dropped += 1;
            return false;
        }
        // SAFETY: addr is a free tx chunk (not in any ring), CHUNK bytes, in the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.area.ptr.as_ptr().add(addr as usize),
                frame.len(),
            )
        };
        w.insert_once(XdpDesc {
            addr,
            len: frame.len() as u32,
            options: 0,
        });
        w.commit();
        drop(w);
        self.tx_outstanding += 1;
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += frame.len() as u64;
        true
    }

    fn flush(&mut self) -> io::Result<()> {
        // Kick only when something is queued and the kernel asks (copy mode always asks).
        if self.tx.pending() > 0 && self.tx.needs_wakeup() {
            // SAFETY: zero-length sendto on our socket, as the AF_XDP ABI prescribes.
            let r = unsafe {
                libc::sendto(
                    self.fd,
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                    | Some(libc::EINTR) => {}
                    _ if gone(&e) => {
                        self.stats.errors += 1;
                        return Err(e);
                    }
                    _ => self.stats.errors += 1,
                }
            }
        }
        self.reap();
        Ok(())
    }

    fn stats(&self) -> PortStats {
        let mut s = self.stats;
        if let Ok(k) = self.dq.statistics_v2() {
            s.rx_dropped += k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs;
            s.tx_dropped += k.tx_invalid_descs;
        }
        s
    }

    fn info(&self) -> PortInfo {
        self.info.clone()
    }
}

impl Drop for AfXdpPort {
    fn drop(&mut self) {
        // Stop steering to this socket before it closes (closing would remove it anyway).
        self.prog.unregister(self.ifindex, self.queue);
    }
}

/// Bind the socket: zero-copy first when asked (falling back where the driver refuses),
/// else copy mode.
fn bind_socket(area: &Area, info: &IfInfo, zero_copy: bool) -> io::Result<Bound> {
    let mut bound = None;
    if zero_copy {
        match setup(area, info, SocketConfig::XDP_BIND_ZEROCOPY, false) {
            Ok(b) => bound = Some(b),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)
                ) => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("bind: {e}"))),
        }
    }
    let b = match bound {
        Some(b) => b,
        None => setup(area, info, SocketConfig::XDP_BIND_COPY, true)
            .map_err(|e| io::Error::new(e.kind(), format!("bind: {e}")))?,
    };
    Ok(b)
}

/// What `flowpath stats` says about the port: mode, program, pages, queue.
fn describe(zero_copy: bool, prog: &str, area: &Area, opts: &AfXdpOptions, queue: u32) -> String {
    let pages = if area.huge {
        "huge pages"
    } else if opts.hugepages {
        "4 KiB pages (no huge pages free)"
    } else {
        "4 KiB pages"
    };
    let mode = if zero_copy { "zero-copy" } else { "copy mode" };
    format!("{mode}, {prog}, {pages}, queue {queue}")
}
