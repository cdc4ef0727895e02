//! The control socket's bounds: an oversized request is refused with a clear answer
//! without being read in full, a client that sends a byte at a time holds only itself up
//! (others are answered meanwhile) and is cut off at the request deadline, clients beyond
//! the limit are refused with a clear answer; and the client side turns a switch that
//! closes without answering into a message that says so (never a JSON parser's error).

use flowpath_switch::control::{call, Limits, Op, Request, Response};
use flowpath_switch::{spawn_control_with, ControlSocket};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

struct Server {
    dir: PathBuf,
    sock: Arc<ControlSocket>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// A control socket whose handler answers with the request's length.
    fn start(name: &str, limits: Limits) -> Server {
        let dir = std::env::temp_dir().join(format!("fp-ctl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut sock = ControlSocket::bind(&dir.join("ctl.sock")).unwrap();
        sock.set_limits(limits);
        let sock = Arc::new(sock);
        let stop = Arc::new(AtomicBool::new(false));
        let thread =
            spawn_control_with(sock.clone(), stop.clone(), move |req: &Request| Response {
                summary: format!("{} bytes", req.text.len()),
                ..Response::default()
            });
        Server {
            dir,
            sock,
            stop,
            thread: Some(thread),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }

    fn ask(&self, text: &str) -> Response {
        call(&self.path(), &req(Op::Dump, text), T).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.sock.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn req(op: Op, text: &str) -> Request {
    Request {
        op,
        text: text.into(),
    }
}

#[test]
fn a_64_mib_request_is_refused_clearly_and_the_socket_serves_on() {
    let s = Server::start("big", Limits::default());
    let big = "x".repeat(64 << 20);
    let r = call(&s.path(), &req(Op::Replace, &big), T).unwrap();
    let e = r.error.expect("refused");
    assert!(
        e.contains("request larger than the limit") && e.contains("32 MiB"),
        "{e}"
    );
    // A request at the limit's side is served.
    let ok = "y".repeat(8 << 20);
    assert_eq!(s.ask(&ok).summary, format!("{} bytes", ok.len()));
}

/// A client that sends one byte of a request every 50 ms until `done` or until the
/// switch closes; the answer it got.
fn slow_client(path: PathBuf, done: Arc<AtomicBool>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut c = UnixStream::connect(&path).unwrap();
        c.set_read_timeout(Some(T)).unwrap();
        let text = serde_json::to_vec(&req(Op::Dump, &"z".repeat(100_000))).unwrap();
        for b in &text[..text.len() - 1] {
            if done.load(Ordering::Relaxed) {
                return String::new();
            }
            // The switch closed: its answer is there to read.
            if c.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        answer
    })
}

#[test]
fn a_byte_at_a_time_writer_holds_only_itself() {
    // A deadline far away: the slow client stays connected, still writing, until the
    // others are done; a server that read it in line would answer none of them.
    let limits = Limits {
        request_deadline: Duration::from_secs(600),
        ..Limits::default()
    };
    let s = Server::start("slow", limits);
    let done = Arc::new(AtomicBool::new(false));
    let slow = slow_client(s.path(), done.clone());
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..20 {
        assert_eq!(s.ask(&"a".repeat(i)).summary, format!("{i} bytes"));
    }
    done.store(true, Ordering::Relaxed);
    slow.join().unwrap();
}

#[test]
fn a_byte_at_a_time_writer_is_cut_off_at_the_deadline() {
    let limits = Limits {
        request_deadline: Duration::from_millis(500),
        ..Limits::default()
    };
    let s = Server::start("cut", limits);
    let answer = slow_client(s.path(), Arc::new(AtomicBool::new(false)))
        .join()
        .unwrap();
    let answer: Response = serde_json::from_str(&answer).unwrap();
    let e = answer.error.unwrap();
    assert!(e.contains("did not arrive in full within 500ms"), "{e}");
}

#[test]
fn clients_beyond_the_limit_are_refused_clearly() {
    let limits = Limits {
        max_clients: 4,
        ..Limits::default()
    };
    let s = Server::start("many", limits);
    // Four clients that have sent part of a request hold the four places (connections are
    // accepted in order, so they are in before the fifth).
    let held: Vec<UnixStream> = (0..4)
        .map(|_| {
            let mut c = UnixStream::connect(s.path()).unwrap();
            c.write_all(b"{\"op\":").unwrap();
            c
        })
        .collect();
    let r = call(&s.path(), &req(Op::Dump, ""), T).unwrap();
    let e = r.error.expect("refused");
    assert!(
        e.contains("too many control clients") && e.contains("limit is 4"),
        "{e}"
    );
    // Gone, they give their places back.
    drop(held);
    let back = loop {
        let r = call(&s.path(), &req(Op::Dump, "abc"), T).unwrap();
        if r.error.is_none() {
            break r;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(back.summary, "3 bytes");
}

#[test]
fn the_bytes_held_for_all_clients_together_are_bounded() {
    let limits = Limits {
        max_request: 1 << 20,
        max_buffered: 3 << 19,
        request_deadline: Duration::from_secs(2),
        ..Limits::default()
    };
    let s = Server::start("budget", limits);
    // Two clients each send most of a 1 MiB request and wait: together they pass the
    // 1.5 MiB held at once, so one of them is told to try again (the other, at its
    // deadline, that its request never finished).
    let part = vec![b' '; 1000 << 10];
    let clients: Vec<UnixStream> = (0..2)
        .map(|_| {
            let mut c = UnixStream::connect(s.path()).unwrap();
            c.set_read_timeout(Some(T)).unwrap();
            let _ = c.write_all(&part);
            c
        })
        .collect();
    let answers: Vec<String> = clients
        .into_iter()
        .map(|mut c| {
            let mut a = String::new();
            let _ = c.read_to_string(&mut a);
            a
        })
        .collect();
    assert!(
        answers
            .iter()
            .any(|a| a.contains("other large requests (at most 1.5 MiB at once)")),
        "{answers:?}"
    );
    // Given back: a request is served again.
    assert_eq!(s.ask("abc").summary, "3 bytes");
}

#[test]
fn many_concurrent_clients_are_all_answered_within_the_limit() {
    let s = Arc::new(Server::start("concurrent", Limits::default()));
    let threads: Vec<_> = (0..24)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..20 {
                    let text = "q".repeat(t * 100 + i);
                    let r = call(&s.path(), &req(Op::Dump, &text), T).unwrap();
                    // Refusals (more than 32 at once) are allowed; wrong answers are not.
                    if r.error.is_none() {
                        assert_eq!(r.summary, format!("{} bytes", text.len()));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// A fake switch that accepts, reads the request and closes (or answers half a reply).
fn fake_switch(name: &str, answer: &'static [u8]) -> (PathBuf, JoinHandle<()>) {
    let dir = std::env::temp_dir().join(format!("fp-ctl-fake-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ctl.sock");
    let l = UnixListener::bind(&path).unwrap();
    let h = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        let _ = c.write_all(answer);
        let _ = std::fs::remove_dir_all(&dir);
    });
    (path, h)
}

#[test]
fn a_switch_that_closes_without_answering_is_named_so() {
    let (path, h) = fake_switch("eof", b"");
    let e = call(&path, &req(Op::Add, "actions=drop"), T).unwrap_err();
    h.join().unwrap();
    let m = e.to_string();
    assert!(m.contains("closed the connection before replying"), "{m}");
    assert!(
        m.contains("may or may not have been applied") && m.contains("flows dump"),
        "{m}"
    );
    assert!(!m.contains("EOF while parsing"), "{m}");
    // A request that changes nothing does not talk about a change.
    let (path, h) = fake_switch("eof-dump", b"");
    let m = call(&path, &req(Op::Dump, ""), T).unwrap_err().to_string();
    h.join().unwrap();
    assert!(
        m.contains("closed the connection") && !m.contains("applied"),
        "{m}"
    );
    // Half an answer: said so, with how much came.
    let (path, h) = fake_switch("half", b"{\"error\":null,\"summ");
    let m = call(&path, &req(Op::Replace, ""), T)
        .unwrap_err()
        .to_string();
    h.join().unwrap();
    assert!(
        m.contains("after 19 bytes") && m.contains("may or may not"),
        "{m}"
    );
}
