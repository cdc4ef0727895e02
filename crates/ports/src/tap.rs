//! TAP port: a VM-facing tap device (created if missing, set up), read and written frame
//! by frame without blocking.

use crate::afpacket::ifreq;
use crate::{PacketBatch, Port, PortInfo, PortStats, MAX_FRAME};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn os_err(what: &str, ifname: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{ifname}: {what}: {e}"))
}

/// Errors that mean the tap is gone (detached from this descriptor, deleted). A write to
/// a tap that is merely down fails with EIO: that is a tx drop, not a dead port.
fn device_gone(e: i32) -> bool {
    matches!(e, libc::EBADFD | libc::ENXIO | libc::ENODEV)
}

/// One tap device opened with `IFF_TAP | IFF_NO_PI`: each read or write is one frame.
pub struct TapPort {
    name: String,
    ifname: String,
    fd: OwnedFd,
    /// A write failed because the device is gone (errno); reported from `flush`.
    gone: Option<i32>,
    stats: PortStats,
}

impl TapPort {
    /// Open (creating it if missing) the tap `ifname`, non-blocking, and set its link up.
    /// A tap created here disappears when the port is dropped.
    pub fn open(name: &str, ifname: &str) -> io::Result<TapPort> {
        let mut ifr = ifreq(ifname).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{ifname}': not a valid interface name"),
            )
        })?;
        // SAFETY: a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(os_err("open /dev/net/tun", ifname));
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        ifr.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads (and writes back the name of) a valid ifreq.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF as _, &mut ifr) } < 0 {
            return Err(os_err("TUNSETIFF tap", ifname));
        }
        set_up(ifname)?;
        Ok(TapPort {
            name: name.into(),
            ifname: ifname.into(),
            fd,
            gone: None,
            stats: PortStats::default(),
        })
    }

    fn gone_err(&self, e: i32) -> io::Error {
        let os = io::Error::from_raw_os_error(e);
        io::Error::new(os.kind(), format!("{}: device gone: {os}", self.ifname))
    }
}

/// Set `IFF_UP` on the interface (SIOCGIFFLAGS, then SIOCSIFFLAGS).
fn set_up(ifname: &str) -> io::Result<()> {
    let mut ifr = ifreq(ifname)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"))?;
    // SAFETY: a datagram socket only for the ioctls.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(os_err("socket for SIOCSIFFLAGS", ifname));
    }
    // SAFETY: just created.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: valid ifreq for SIOCGIFFLAGS / SIOCSIFFLAGS.
    unsafe {
        if libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut ifr) < 0 {
            return Err(os_err("SIOCGIFFLAGS", ifname));
        }
        if ifr.ifr_ifru.ifru_flags & libc::IFF_UP as libc::c_short == 0 {
            ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS as _, &mut ifr) < 0 {
                return Err(os_err("SIOCSIFFLAGS up", ifname));
            }
        }
    }
    Ok(())
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        if let Some(e) = self.gone {
            return Err(self.gone_err(e));
        }
        let mut n = 0;
        while let Some(slot) = batch.next_slot() {
            // SAFETY: reading into a writable slot of MAX_FRAME bytes.
            let r = unsafe { libc::read(self.fd.as_raw_fd(), slot.as_mut_ptr().cast(), MAX_FRAME) };
            if r < 0 {
                let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if e == libc::EAGAIN || e == libc::EWOULDBLOCK {
                    break;
                }
                if e == libc::EINTR {
                    continue;
                }
                self.stats.errors += 1;
                if device_gone(e) {
                    self.gone = Some(e);
                    return Err(self.gone_err(e));
                }
                let os = io::Error::from_raw_os_error(e);
                return Err(io::Error::new(
                    os.kind(),
                    format!("{}: read: {os}", self.ifname),
                ));
            }
            let len = r as usize;
            if len == 0 {
                break;
            }
            batch.commit(len);
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
            n += 1;
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        if self.gone.is_some() {
            self.stats.tx_dropped += 1;
            return false;
        }
        // SAFETY: writing from a valid slice.
        let r = unsafe { libc::write(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
        if r == frame.len() as isize {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += frame.len() as u64;
            return true;
        }
        self.stats.tx_dropped += 1;
        if r < 0 {
            let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if e != libc::EAGAIN && e != libc::EWOULDBLOCK && e != libc::ENOBUFS && e != libc::EIO {
                self.stats.errors += 1;
                if device_gone(e) {
                    self.gone = Some(e);
                }
            }
        }
        false
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.gone {
            Some(e) => Err(self.gone_err(e)),
            None => Ok(()),
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "tap",
            detail: format!(
                "{}: read/write per frame, no packet info header",
                self.ifname
            ),
        }
    }
}
