//! Serving the control socket: each client on its own thread, at most
//! [`Limits::max_clients`] at once (one more is answered with an error and closed); a
//! request read with a bound on its size, on the bytes held for all clients' requests
//! together, and a deadline for the whole of it (a client that sends a byte at a time is
//! cut off at the deadline and holds only its own thread); the requests themselves handled
//! one at a time (behind a lock), and each answer written by its client's thread with a
//! timeout, so a client that does not read cannot hold up the next one. No datapath
//! worker takes part in any of it.

use crate::control::{reply, ControlSocket, Limits, Request, Response};
use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a client's thread looks at the stop flag while it waits for bytes.
const TICK: Duration = Duration::from_millis(100);

/// Serve requests on `sock` with `handler` until `stop` (then call `sock.wake()`): the
/// accepting thread, which ends after the clients' threads.
pub fn spawn(
    sock: Arc<ControlSocket>,
    stop: Arc<AtomicBool>,
    handler: impl Fn(&Request) -> Response + Send + 'static,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("flowpath-control".into())
        .spawn(move || serve(&sock, &stop, Arc::new(Mutex::new(handler))))
        .expect("spawn the control thread")
}

type Handler = Arc<Mutex<dyn Fn(&Request) -> Response + Send>>;

fn serve(sock: &ControlSocket, stop: &Arc<AtomicBool>, handler: Handler) {
    let limits = sock.limits();
    let active = Arc::new(AtomicUsize::new(0));
    let buffered = Arc::new(AtomicUsize::new(0));
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let s = match sock.accept_stream() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("flowpath: control socket: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if stop.load(Ordering::Relaxed) {
            break;
        }
        clients.retain(|c| !c.is_finished());
        if active.load(Ordering::Acquire) >= limits.max_clients {
            refuse(
                s,
                &format!(
                    "too many control clients at once (the limit is {}); try again",
                    limits.max_clients
                ),
            );
            continue;
        }
        let slot = Slot::take(&active);
        let (stop, handler) = (stop.clone(), handler.clone());
        let held = Held {
            total: buffered.clone(),
            mine: 0,
        };
        let spawned = std::thread::Builder::new()
            .name("flowpath-control-client".into())
            .spawn(move || {
                let _slot = slot;
                serve_one(s, &limits, &stop, &handler, held);
            });
        match spawned {
            Ok(h) => clients.push(h),
            // The closure (with the stream, which closes) is gone: the client sees the
            // connection close without an answer.
            Err(e) => eprintln!("flowpath: control socket: cannot start a client thread: {e}"),
        }
    }
    for c in clients {
        let _ = c.join();
    }
}

/// One of the `max_clients` places, given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(active: &Arc<AtomicUsize>) -> Slot {
        active.fetch_add(1, Ordering::AcqRel);
        Slot(active.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Answer `why` and close, without reading the request.
fn refuse(mut s: UnixStream, why: &str) {
    let _ = s.set_write_timeout(Some(TICK));
    let _ = reply(&mut s, &Response::error(why));
}

/// Request bytes held by every client's thread together, against
/// [`Limits::max_buffered`]; one client's share is given back when its `Held` is dropped.
struct Held {
    total: Arc<AtomicUsize>,
    mine: usize,
}

impl Held {
    /// Count `n` more bytes; false if that takes the total past `max`.
    fn take(&mut self, n: usize, max: usize) -> bool {
        self.mine += n;
        self.total.fetch_add(n, Ordering::AcqRel) + n <= max
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.total.fetch_sub(self.mine, Ordering::AcqRel);
    }
}

fn serve_one(
    mut s: UnixStream,
    limits: &Limits,
    stop: &AtomicBool,
    handler: &Handler,
    mut held: Held,
) {
    let resp = match read_request(&mut s, limits, stop, &mut held) {
        Ok(req) => {
            let h = handler.lock().unwrap_or_else(|e| e.into_inner());
            if stop.load(Ordering::Relaxed) {
                return;
            }
            h(&req)
        }
        Err(why) => Response::error(why),
    };
    let _ = s.set_write_timeout(Some(limits.reply_timeout));
    let _ = reply(&mut s, &resp);
}

/// Read one request: at most `limits.max_request` bytes (and no more than what
/// `limits.max_buffered` leaves beside the other clients' requests), all of them within
/// `limits.request_deadline`; the error says which bound was hit.
fn read_request(
    s: &mut UnixStream,
    limits: &Limits,
    stop: &AtomicBool,
    held: &mut Held,
) -> Result<Request, String> {
    let deadline = Instant::now() + limits.request_deadline;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the request did not arrive in full within {:?} ({} bytes came); closed",
                limits.request_deadline,
                buf.len()
            ));
        }
        s.set_read_timeout(Some(left.min(TICK)))
            .map_err(|e| format!("reading the request: {e}"))?;
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) if buf.len() + n > limits.max_request => {
                return Err(format!(
                    "request larger than the limit of {} bytes ({} MiB); closed without \
                     reading the rest (split a large change into several requests)",
                    limits.max_request,
                    mib(limits.max_request)
                ))
            }
            Ok(n) if !held.take(n, limits.max_buffered) => {
                return Err(format!(
                    "the switch is reading other large requests (at most {} MiB at once); \
                     closed, try again",
                    mib(limits.max_buffered)
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::Relaxed) {
                    return Err("the switch is stopping".into());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the request: {e}")),
        }
    }
    serde_json::from_slice(&buf).map_err(|e| format!("bad request: {e}"))
}

/// `n` bytes in MiB, as `32` or `1.5`.
fn mib(n: usize) -> f64 {
    n as f64 / (1u64 << 20) as f64
}
