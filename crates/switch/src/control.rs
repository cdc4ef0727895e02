//! The control protocol: one JSON request per connection on a Unix socket, one JSON
//! response back. The socket is created mode 0600, so only the user running the switch
//! (and root) can program it. What one client can make the switch hold is bounded
//! ([`Limits`]; served by [`crate::control_server`]).

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a request asks the switch to do (the `flowpath flows` subcommands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    Add,
    Mod,
    ModStrict,
    Del,
    DelStrict,
    Replace,
    Dump,
    /// Worker and port counters (`flowpath stats`; only `flowpath switch` answers it).
    Stats,
    /// Trace a packet through the rules (`flowpath trace`): the text is a JSON
    /// `TraceRequest`, the answer's data a `Trace`.
    Trace,
    /// The workers' cached megaflows (`flowpath dump-megaflows`): the text is a JSON
    /// `MegaflowFilter` (or empty), the answer's data a list of `WorkerMegaflows`.
    Megaflows,
    /// The tracker's connections (`flowpath conntrack dump`): the text is a JSON
    /// `ZoneRequest` (or empty), the lines OVS's `dump-conntrack`, the data `ConnJson`s.
    CtDump,
    /// Remove connections (`flowpath conntrack flush`): the text is a JSON `ZoneRequest`.
    CtFlush,
    /// The tracker's counters (`flowpath conntrack stats`): the data a `StatsAnswer`.
    CtStats,
    /// Show (and with a JSON `LimitsRequest`, change) the connection limits (`flowpath
    /// conntrack limits`): the data a `LimitsAnswer`.
    CtLimits,
}

impl Op {
    /// Does the operation change the switch (so that a lost answer leaves it unknown
    /// whether it was applied)?
    pub fn changes(self) -> bool {
        matches!(
            self,
            Op::Add | Op::Mod | Op::ModStrict | Op::Del | Op::DelStrict | Op::Replace
        ) || matches!(self, Op::CtFlush | Op::CtLimits)
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Mod => "mod",
            Op::ModStrict => "mod-strict",
            Op::Del => "del",
            Op::DelStrict => "del-strict",
            Op::Replace => "replace",
            Op::Dump => "dump",
            Op::Stats => "stats",
            Op::Trace => "trace",
            Op::Megaflows => "megaflows",
            Op::CtDump => "ct-dump",
            Op::CtFlush => "ct-flush",
            Op::CtStats => "ct-stats",
            Op::CtLimits => "ct-limits",
        }
    }
}

/// A request: the operation and its flows, as text in flow syntax (one flow per line, `#`
/// comments and blank lines allowed), so that errors can name the line and column.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    pub op: Op,
    pub text: String,
}

/// The switch's answer.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Response {
    /// `None` on success; otherwise one line saying what was refused and why. A refused
    /// request changed nothing.
    pub error: Option<String>,
    /// One line for people ("replaced: 100000 flows, 3 kept ...").
    pub summary: String,
    /// Dump lines (`ovs-ofctl dump-flows` format).
    pub lines: Vec<String>,
    /// The rule-set version after the request.
    pub version: u64,
    /// Structured answer where there is one (`stats`, `trace`, `megaflows`, the `ct-*`
    /// operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl Response {
    /// A refusal. The message is kept to one printable line: control characters a quote of
    /// the request holds show escaped (`\n`, `\0`, `\u{1b}`; a flow with an unclosed `(`
    /// runs on past a newline, found by fuzzing).
    pub fn error(e: impl Into<String>) -> Response {
        let e = flowpath_base::text::escape_controls(&e.into());
        Response {
            error: Some(e),
            ..Response::default()
        }
    }
}

/// Send `req` to the switch listening on `socket` and wait for its answer. A switch that
/// closes the connection without a whole answer (it stopped or crashed) is an error that
/// says so, and whether the request may have been applied.
pub fn call(socket: &Path, req: &Request, timeout: Duration) -> io::Result<Response> {
    let mut s = UnixStream::connect(socket).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot reach the switch at {}: {e} (is `flowpath run` running? --control names the socket)",
                socket.display()
            ),
        )
    })?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    // A switch that refuses the request (too large, too many clients) answers and closes
    // before reading all of it: the write fails, and the answer is still there to read.
    let sent = serde_json::to_writer(&mut s, req)
        .map_err(io::Error::from)
        .and_then(|()| s.shutdown(std::net::Shutdown::Write));
    let mut buf = Vec::new();
    let read = read_answer(&mut s, &mut buf);
    if let Ok(resp) = serde_json::from_slice::<Response>(&buf) {
        return Ok(resp);
    }
    let timed_out = |e: &io::Error| {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
    };
    match (&sent, &read) {
        (_, Err(e)) if timed_out(e) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the switch did not answer within {timeout:?}{}",
                unknown_outcome(req.op)
            ),
        )),
        (Err(e), _) if timed_out(e) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the switch did not take the request within {timeout:?}{}",
                unknown_outcome(req.op)
            ),
        )),
        _ if buf.is_empty() => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "the switch closed the connection before replying (it may have stopped or \
                 crashed){}",
                unknown_outcome(req.op)
            ),
        )),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the switch's answer stopped or is not one (after {} bytes: {}){}",
                buf.len(),
                serde_json::from_slice::<Response>(&buf)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default(),
                unknown_outcome(req.op)
            ),
        )),
    }
}

/// What a lost answer means for `op`.
fn unknown_outcome(op: Op) -> &'static str {
    if op.changes() {
        "; the change may or may not have been applied: check with `flowpath flows dump`"
    } else {
        ""
    }
}

/// Read the answer into `buf` until the switch closes; a reset after some bytes (the
/// switch closed with part of the request unread) ends the answer like a close.
fn read_answer(s: &mut UnixStream, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// A bound control socket (mode 0600). Dropping it removes the socket file.
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
    limits: Limits,
}

/// Bounds on what control clients can make the switch hold and wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest request taken, in bytes; a larger one is answered with an error and
    /// its connection closed, without reading the rest.
    pub max_request: usize,
    /// Clients served at once; one more is answered with an error and closed.
    pub max_clients: usize,
    /// Request bytes held for all clients together; a client whose next bytes would pass
    /// it is answered with an error and closed (so memory for requests is bounded by this,
    /// not by `max_clients` times `max_request`).
    pub max_buffered: usize,
    /// The time a client has to send its whole request (however it paces its bytes).
    pub request_deadline: Duration,
    /// The time a client has to take its answer.
    pub reply_timeout: Duration,
}

/// [`Limits::max_request`] by default: `flows replace` of the 100,000 routes `flowpath
/// bench --replace` uses is 6.4 MB; this leaves room for flows five times as long.
pub const MAX_REQUEST: usize = 32 << 20;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_request: MAX_REQUEST,
            max_clients: 32,
            max_buffered: 2 * MAX_REQUEST,
            request_deadline: Duration::from_secs(30),
            reply_timeout: Duration::from_secs(30),
        }
    }
}

impl ControlSocket {
    /// Bind `path`. A stale socket file (no one listening) is replaced; a live one is an
    /// error, so two switches never share a socket.
    pub fn bind(path: &Path) -> io::Result<ControlSocket> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                crate::state::create_private_dir(dir)?;
            }
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running switch", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(ControlSocket {
            listener,
            path: path.to_path_buf(),
            limits: Limits::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bounds this socket serves clients with.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Serve clients with `limits` instead of [`Limits::default`].
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Accept one connection (its request is read by [`crate::control_server`]).
    pub fn accept_stream(&self) -> io::Result<UnixStream> {
        Ok(self.listener.accept()?.0)
    }

    /// Make a blocked `accept` return (used to stop the server thread): connect to it, or
    /// where the socket's file is gone (removed under a stopping switch, as a script's
    /// cleanup does), shut the listener down, which makes `accept` fail at once. Before,
    /// a switch stopped that way waited in `accept` forever.
    pub fn wake(&self) {
        if UnixStream::connect(&self.path).is_err() {
            use std::os::fd::AsRawFd;
            // SAFETY: shutdown(2) on the listener this value owns; no memory is involved.
            unsafe {
                libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR);
            }
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Write `resp` to the client.
pub fn reply(s: &mut UnixStream, resp: &Response) -> io::Result<()> {
    serde_json::to_writer(&mut *s, resp)?;
    s.flush()
}

/// Where the control socket is when `--control` is not given: `$FLOWPATH_CONTROL`, else
/// `/run/flowpath/control.sock` for root, else `$XDG_RUNTIME_DIR/flowpath/control.sock`,
/// else `/tmp/flowpath-<uid>/control.sock`.
pub fn default_socket() -> PathBuf {
    if let Some(p) = std::env::var_os("FLOWPATH_CONTROL") {
        return p.into();
    }
    let uid = current_uid();
    if uid == 0 {
        return "/run/flowpath/control.sock".into();
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        return Path::new(&d).join("flowpath/control.sock");
    }
    PathBuf::from(format!("/tmp/flowpath-{uid}/control.sock"))
}

/// Where the flow state is kept when `--state` is not given: `$FLOWPATH_STATE`, else
/// `/var/lib/flowpath/flows.state` for root, else `$XDG_STATE_HOME/flowpath/flows.state`,
/// else `~/.local/state/flowpath/flows.state`.
pub fn default_state() -> PathBuf {
    if let Some(p) = std::env::var_os("FLOWPATH_STATE") {
        return p.into();
    }
    if current_uid() == 0 {
        return "/var/lib/flowpath/flows.state".into();
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME") {
        return Path::new(&d).join("flowpath/flows.state");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    Path::new(&home).join(".local/state/flowpath/flows.state")
}

fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}
