//! One connection's socket, plain TCP or TLS, owned by the connection's thread: the only
//! code that reads or writes it. The socket is non-blocking; the thread waits in
//! [`Stream::wait`] for input, room to write, or a wake from its output queue. Bytes to
//! send go through a small staging buffer (and, for TLS, rustls's own buffer, limited
//! too), so what a connection holds for a peer is bounded by its queue plus these.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Most bytes staged between the queue and the socket.
pub(super) const STAGE: usize = 256 << 10;

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Got {
    /// This many bytes of OpenFlow.
    Data(usize),
    /// Nothing now.
    Empty,
    /// The peer closed the connection (or it broke).
    Closed,
    /// TLS failed; `true` when during the handshake (the peer was refused).
    TlsError(String, bool),
}

pub(super) struct Stream {
    sock: TcpStream,
    tls: Option<rustls::Connection>,
    /// Taken from the queue, not yet written (to the socket, or into rustls).
    stage: Vec<u8>,
    off: usize,
}

impl Stream {
    /// Own `sock` (made non-blocking), speaking TLS through `tls` when given.
    pub(super) fn new(sock: TcpStream, tls: Option<rustls::Connection>) -> std::io::Result<Self> {
        sock.set_nodelay(true)?;
        sock.set_nonblocking(true)?;
        let mut tls = tls;
        if let Some(t) = &mut tls {
            // rustls holds at most this much to send (plaintext waiting for the handshake
            // and records not yet written); the rest stays staged here.
            t.set_buffer_limit(Some(64 << 10));
        }
        Ok(Stream {
            sock,
            tls,
            stage: Vec::new(),
            off: 0,
        })
    }

    /// Bytes staged or inside rustls waiting for the socket?
    pub(super) fn has_unsent(&self) -> bool {
        self.off < self.stage.len() || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// Room in the staging buffer for more of the queue?
    pub(super) fn stage_room(&self) -> bool {
        self.stage.len() - self.off < STAGE
    }

    /// The staging buffer, to append queued messages to.
    pub(super) fn stage(&mut self) -> &mut Vec<u8> {
        if self.off > 0 && self.off == self.stage.len() {
            self.stage.clear();
            self.off = 0;
        }
        &mut self.stage
    }

    /// Write what can be written now without blocking; the bytes written to the socket
    /// (TLS: plaintext taken), or the error that broke it.
    pub(super) fn flush(&mut self) -> std::io::Result<usize> {
        let mut moved = 0;
        loop {
            let before = (self.off, moved);
            match &mut self.tls {
                None => {
                    if self.off < self.stage.len() {
                        match self.sock.write(&self.stage[self.off..]) {
                            Ok(n) => {
                                self.off += n;
                                moved += n;
                            }
                            Err(e) if would_block(&e) => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                Some(t) => {
                    if self.off < self.stage.len() {
                        let n = t.writer().write(&self.stage[self.off..])?;
                        self.off += n;
                        moved += n;
                    }
                    while t.wants_write() {
                        match t.write_tls(&mut self.sock) {
                            Ok(0) => break,
                            Ok(_) => {}
                            Err(e) if would_block(&e) => break,
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
            if (self.off, moved) == before || self.off == self.stage.len() {
                break;
            }
        }
        if self.off == self.stage.len() {
            self.stage.clear();
            self.off = 0;
        }
        Ok(moved)
    }

    /// Read what is there into `buf` without blocking.
    pub(super) fn read(&mut self, buf: &mut [u8]) -> Got {
        let Some(t) = &mut self.tls else {
            return match self.sock.read(buf) {
                Ok(0) => Got::Closed,
                Ok(n) => Got::Data(n),
                Err(e) if would_block(&e) => Got::Empty,
                Err(_) => Got::Closed,
            };
        };
        loop {
            match t.reader().read(buf) {
                Ok(0) => return Got::Closed, // close_notify
                Ok(n) => return Got::Data(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => return Got::Closed,
            }
            match t.read_tls(&mut self.sock) {
                Ok(0) => return Got::Closed,
                Ok(_) => {}
                Err(e) if would_block(&e) => return Got::Empty,
                Err(_) => return Got::Closed,
            }
            let handshaking = t.is_handshaking();
            if let Err(e) = t.process_new_packets() {
                // Send the alert that says why, if the socket takes it.
                let _ = t.write_tls(&mut self.sock);
                return Got::TlsError(e.to_string(), handshaking);
            }
        }
    }

    /// Is more input waiting (on the socket, or decrypted inside rustls)?
    pub(super) fn more_waiting(&mut self) -> bool {
        if let Some(t) = &mut self.tls {
            if let Ok(st) = t.process_new_packets() {
                if st.plaintext_bytes_to_read() > 0 {
                    return true;
                }
            }
        }
        poll(&[(self.sock.as_raw_fd(), libc::POLLIN)], Duration::ZERO)[0]
    }

    /// Wait up to `timeout` for input, for room to write (when there is something to
    /// write), or for `wake` to be signalled; whether `wake` was.
    pub(super) fn wait(&self, wake: RawFd, timeout: Duration) -> bool {
        let mut ev = libc::POLLIN;
        if self.has_unsent() {
            ev |= libc::POLLOUT;
        }
        let r = poll(
            &[(self.sock.as_raw_fd(), ev), (wake, libc::POLLIN)],
            timeout,
        );
        r[1]
    }

    /// Wait up to `timeout` until the socket takes more bytes.
    pub(super) fn wait_writable(&self, timeout: Duration) -> bool {
        poll(&[(self.sock.as_raw_fd(), libc::POLLOUT)], timeout)[0]
    }

    /// Say goodbye (TLS close_notify, best effort) and shut the socket.
    pub(super) fn close(&mut self) {
        if let Some(t) = &mut self.tls {
            t.send_close_notify();
            let _ = t.write_tls(&mut self.sock);
        }
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}

/// poll(2) on `fds`: which had any event (an error or hang-up counts, so the caller's next
/// read or write finds it).
fn poll(fds: &[(RawFd, libc::c_short)], timeout: Duration) -> Vec<bool> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `p` is a live array of `p.len()` pollfds.
    let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    if n <= 0 {
        return vec![false; fds.len()];
    }
    p.iter().map(|x| x.revents != 0).collect()
}
