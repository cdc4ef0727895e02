//! Progress on stderr: on a terminal one line redrawn in place (`\r`); elsewhere (a log, a
//! pipe, CI) at most one plain line every [`LOG_EVERY`], never a carriage return.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The shortest time between two progress lines written to something not a terminal.
pub const LOG_EVERY: Duration = Duration::from_secs(5);

/// A progress line: [`Progress::update`] as work goes on, [`Progress::done`] at the end.
#[derive(Debug)]
pub struct Progress {
    tty: bool,
    /// Characters the redrawn line is padded to (so a shorter one covers a longer one).
    width: usize,
    /// When the last plain line was written (not a terminal).
    last: Option<Instant>,
    /// Something is on the terminal's line to clear.
    drawn: bool,
}

impl Progress {
    /// Progress for stderr, redrawn in place if stderr is a terminal; lines `width` wide.
    pub fn stderr(width: usize) -> Progress {
        Progress::new(std::io::stderr().is_terminal(), width)
    }

    /// Progress for an output that is a terminal (`tty`) or not.
    pub fn new(tty: bool, width: usize) -> Progress {
        Progress {
            tty,
            width,
            last: None,
            drawn: false,
        }
    }

    /// What to write for `msg` at `now`, or nothing: on a terminal `msg` over the line
    /// (`\r`, padded); else `msg` and a newline if [`LOG_EVERY`] has passed since the last
    /// line written (or none was), otherwise nothing.
    pub fn frame(&mut self, msg: &str, now: Instant) -> Option<String> {
        if self.tty {
            self.drawn = true;
            return Some(format!("\r{msg:<w$}", w = self.width));
        }
        if self
            .last
            .is_some_and(|l| now.saturating_duration_since(l) < LOG_EVERY)
        {
            return None;
        }
        self.last = Some(now);
        Some(format!("{}\n", msg.trim()))
    }

    /// What to write when the work is done: on a terminal, blank the line and return to
    /// its start (if anything was drawn); elsewhere nothing.
    pub fn end_frame(&mut self) -> Option<String> {
        if !std::mem::take(&mut self.drawn) {
            return None;
        }
        Some(format!("\r{:w$}\r", "", w = self.width))
    }

    /// Write [`Progress::frame`] for `msg` to stderr.
    pub fn update(&mut self, msg: &str) {
        if let Some(s) = self.frame(msg, Instant::now()) {
            let mut e = std::io::stderr().lock();
            let _ = e.write_all(s.as_bytes());
            let _ = e.flush();
        }
    }

    /// Write [`Progress::end_frame`] to stderr.
    pub fn done(&mut self) {
        if let Some(s) = self.end_frame() {
            let _ = std::io::stderr().lock().write_all(s.as_bytes());
        }
    }
}

/// The process's one progress line on stderr, [`LINE_WIDTH`] wide.
static STDERR: Mutex<Option<Progress>> = Mutex::new(None);

/// The width of the process's progress line.
pub const LINE_WIDTH: usize = 72;

fn with_stderr(f: impl FnOnce(&mut Progress)) {
    let mut g = STDERR.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(|| Progress::stderr(LINE_WIDTH)));
}

/// Show `msg` on the process's progress line ([`Progress::update`]).
pub fn line(msg: &str) {
    with_stderr(|p| p.update(msg));
}

/// Clear the process's progress line ([`Progress::done`]).
pub fn clear() {
    with_stderr(Progress::done);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_a_terminal_gets_plain_lines_a_few_seconds_apart() {
        let mut p = Progress::new(false, 60);
        let t0 = Instant::now();
        let mut out = String::new();
        for ms in (0..12_000).step_by(100) {
            if let Some(s) = p.frame(&format!("run {ms}   "), t0 + Duration::from_millis(ms)) {
                out += &s;
            }
        }
        out += &p.end_frame().unwrap_or_default();
        assert!(!out.contains('\r'), "{out:?}");
        assert_eq!(out, "run 0\nrun 5000\nrun 10000\n");
    }

    #[test]
    fn a_terminal_gets_the_line_redrawn_and_cleared() {
        let mut p = Progress::new(true, 10);
        let t0 = Instant::now();
        assert_eq!(p.frame("a", t0).as_deref(), Some("\ra         "));
        assert_eq!(p.frame("b", t0).as_deref(), Some("\rb         "));
        assert_eq!(p.end_frame().as_deref(), Some("\r          \r"));
        assert_eq!(p.end_frame(), None, "cleared once");
    }
}
