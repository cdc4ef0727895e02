//! The fallback transmitter of `flowpath gen --tx`: a packet socket (AF_PACKET, transmit
//! only, the qdisc bypassed) sending batches with `sendmmsg`, each frame varied in user
//! space exactly as `gen_tx` varies it in the kernel ([`GenCfg::vary`]). For kernels (or
//! security modules) that refuse XDP live frames to this process, as a Linux 6.18 VM can,
//! whose `BPF_PROG_RUN` answers EPERM to `BPF_F_TEST_XDP_LIVE_FRAMES` while plain test runs
//! work. Slower (a copy and a system call per batch), the same packets.
//!
//! Hand-written over `libc` like the AF_PACKET port: a send-only socket is a few calls.

use super::pace::{next_burst, Burst};
use super::plan::{TxPlan, TxReport};
use super::template::{config_for, GenCfg, MAX_TEMPLATES};
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

/// Frames per `sendmmsg`.
const BURST: usize = 64;
/// Largest frame sent (the templates' sizes are checked against it).
const MAX_FRAME: usize = 9216;
/// Packets of one template before the next takes its turn (as the live frames' chunks).
const TURN: u64 = 4096;

/// A send-only packet socket bound to one interface.
pub struct PacketSocketTx {
    fd: OwnedFd,
    ifname: String,
    /// Why live frames were not used (the refusal), for the report.
    why: String,
    /// Packets sent since `open` (the flow counter, as the program's `gen_ctr`).
    counter: u64,
}

impl PacketSocketTx {
    /// A packet socket transmitting out of `ifname`; `why` says why it is used.
    pub fn open(ifname: &str, why: String) -> io::Result<PacketSocketTx> {
        let err = |what: &str| {
            let e = io::Error::last_os_error();
            io::Error::new(e.kind(), format!("{ifname}: {what}: {e}"))
        };
        let index = crate::xdp::ifindex(ifname)?;
        // Protocol 0: the socket receives nothing.
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(err("socket(AF_PACKET)"));
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Protocol 0 again: bound for sending only.
        crate::afpacket::bind_to(raw, index as i32, 0, ifname)?;
        // Straight to the driver, as the live frames go (harmless if refused).
        let one: libc::c_int = 1;
        // SAFETY: `one` is a live c_int of the given size.
        unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_QDISC_BYPASS,
                (&one as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        Ok(PacketSocketTx {
            fd,
            ifname: ifname.to_string(),
            why,
            counter: 0,
        })
    }

    /// Why live frames were not used.
    pub fn why(&self) -> &str {
        &self.why
    }

    pub fn interface(&self) -> &str {
        &self.ifname
    }

    /// Cycle through `templates` (each its turn of `TURN` packets) until the plan's
    /// duration or packet count, pacing when it has a rate: what
    /// [`LiveFrameTx::run`](super::LiveFrameTx::run) does, through the socket.
    pub fn run<T: AsRef<[u8]>>(&mut self, templates: &[T], plan: &TxPlan) -> io::Result<TxReport> {
        if templates.is_empty() || templates.len() > MAX_TEMPLATES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} templates, 1 to {MAX_TEMPLATES}", templates.len()),
            ));
        }
        let cfgs: Vec<GenCfg> = templates
            .iter()
            .map(|t| config_for(t.as_ref(), &plan.vary))
            .collect::<io::Result<_>>()?;
        if let Some(t) = templates.iter().find(|t| t.as_ref().len() > MAX_FRAME) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a {}-byte template, at most {MAX_FRAME}", t.as_ref().len()),
            ));
        }
        // The staging, laid out once: a buffer, an iovec and a message header per frame of a
        // burst, each pointing at the one before (one `sendmmsg` sends a burst).
        let mut bufs = vec![[0u8; MAX_FRAME]; BURST];
        let mut iov: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: 0,
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: all-zero is a valid mmsghdr (null name and control).
                let mut m: libc::mmsghdr = unsafe { zeroed() };
                m.msg_hdr.msg_iov = v;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        let burst = match plan.rate_pps {
            // ~200 µs of traffic per burst.
            Some(r) => (r / 5000).clamp(1, BURST as u64) as usize,
            None => BURST,
        };
        let limit = plan.packets.unwrap_or(u64::MAX);
        let start = Instant::now();
        let (mut sent, mut turn_left, mut i) = (0u64, TURN, 0usize);
        while sent < limit {
            match next_burst(plan, start, sent) {
                Burst::Stop => break,
                Burst::Waited => continue,
                Burst::Due => {}
            }
            let n = (burst as u64).min(limit - sent).min(turn_left) as usize;
            let t = templates[i].as_ref();
            for (k, (buf, v)) in bufs.iter_mut().zip(iov.iter_mut()).take(n).enumerate() {
                buf[..t.len()].copy_from_slice(t);
                v.iov_len = t.len();
                if !cfgs[i].vary(self.counter + k as u64, &mut buf[..t.len()]) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "a template shorter than the fields its flows vary",
                    ));
                }
            }
            let done = self.send(&mut msgs[..n])?;
            // The flow counter advances by what was sent: a frame the device refused is
            // built again, for the same flow, next time.
            self.counter += done;
            sent += done;
            turn_left -= done;
            if turn_left == 0 {
                (turn_left, i) = (TURN, (i + 1) % templates.len());
            }
        }
        Ok(TxReport::since(start, sent))
    }

    /// One `sendmmsg` of `msgs`: the frames the kernel took. A full device queue
    /// (ENOBUFS, EAGAIN) takes none and yields the CPU once.
    fn send(&self, msgs: &mut [libc::mmsghdr]) -> io::Result<u64> {
        // SAFETY: each mmsghdr points at one live iovec describing a live buffer.
        let r = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as libc::c_uint,
                0,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR) => {
                    std::thread::yield_now();
                    Ok(0)
                }
                _ => Err(io::Error::new(
                    e.kind(),
                    format!("{}: sendmmsg: {e}", self.ifname),
                )),
            };
        }
        Ok(r as u64)
    }
}
