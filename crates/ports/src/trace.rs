//! `PcapTracer`: wraps any port and records every frame it receives and every frame handed
//! to it to send, in order and time-stamped, to one pcap file.

use crate::pcap::{now, PcapSink};
use crate::{PacketBatch, Port, PortInfo, PortStats};
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// Buffered trace bytes; a full buffer goes to the file at once.
const BUFFER: usize = 1 << 20;
/// `flush` writes the buffer through when it holds at least this much...
const FLUSH_BYTES: usize = 256 << 10;
/// ...or when this long has passed since the last write-through.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Records received frames (as the inner port delivered them) and frames passed to `send`
/// (whether or not the inner port accepted them). Classic pcap has no direction field:
/// read the file in order. Written through on `flush` at most every ~100 ms or when the
/// buffer is large, and on drop.
pub struct PcapTracer<P: Port> {
    inner: P,
    sink: PcapSink,
    last_flush: Instant,
    /// Trace write failures (added to the port's `errors`).
    errors: u64,
}

impl<P: Port> PcapTracer<P> {
    pub fn new(inner: P, path: &Path) -> io::Result<PcapTracer<P>> {
        Ok(PcapTracer {
            inner,
            sink: PcapSink::create(path, BUFFER)?,
            last_flush: Instant::now(),
            errors: 0,
        })
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }
}

impl<P: Port> Port for PcapTracer<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let first = batch.len();
        let n = self.inner.recv(batch)?;
        if n > 0 {
            let ts = now();
            for i in first..batch.len() {
                if self.sink.write(ts, batch.frame(i)).is_err() {
                    self.errors += 1;
                }
            }
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        if self.sink.write(now(), frame).is_err() {
            self.errors += 1;
        }
        self.inner.send(frame)
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.inner.flush();
        let buffered = self.sink.buffered();
        if buffered > 0 && (buffered >= FLUSH_BYTES || self.last_flush.elapsed() >= FLUSH_EVERY) {
            if self.sink.flush().is_err() {
                self.errors += 1;
            }
            self.last_flush = Instant::now();
        }
        r
    }

    fn stats(&self) -> PortStats {
        let mut s = self.inner.stats();
        s.errors += self.errors;
        s
    }

    fn info(&self) -> PortInfo {
        let mut i = self.inner.info();
        i.detail = format!("{}, traced to {}", i.detail, self.sink.path().display());
        i
    }
}

impl<P: Port> Drop for PcapTracer<P> {
    fn drop(&mut self) {
        let _ = self.sink.flush();
    }
}
