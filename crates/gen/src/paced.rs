//! [`PacedPort`]: a port that offers its traffic at a fixed rate, the way a NIC queue fed
//! by a wire does: packets "arrive" with the TSC, a receive takes what has arrived (up to
//! a batch), and arrivals beyond the ring's capacity are lost (counted) while the reader
//! is busy elsewhere. The in-memory measurements use it to offer established traffic at a
//! chosen rate next to an unpaced attacker.

use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_base::{PacketBatch, Port, PortInfo, PortStats};
use std::io;

/// `inner`'s traffic at `rate` packets per second.
pub struct PacedPort<P> {
    inner: P,
    per_cycle: f64,
    start: u64,
    /// Packets that arrived so far and were taken or lost.
    taken: f64,
    ring: f64,
    /// Arrivals lost because the ring was full.
    pub overflow: u64,
}

impl<P: Port> PacedPort<P> {
    /// `inner` offered at `rate_pps`, with a receive ring of `ring` packets.
    pub fn new(inner: P, rate_pps: f64, ring: usize) -> PacedPort<P> {
        PacedPort {
            inner,
            per_cycle: rate_pps / tsc_hz(),
            start: 0,
            taken: 0.0,
            ring: ring.max(1) as f64,
            overflow: 0,
        }
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    /// Start arrivals now (from an empty ring).
    pub fn restart(&mut self) {
        self.start = rdtsc();
        self.taken = 0.0;
        self.overflow = 0;
    }

    /// Offer `rate_pps` from now on (0: nothing arrives; infinite: unpaced, every receive
    /// gets a full batch), from an empty ring.
    pub fn set_rate(&mut self, rate_pps: f64) {
        self.per_cycle = rate_pps / tsc_hz();
        self.restart();
    }
}

impl<P: Port> Port for PacedPort<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        if self.per_cycle.is_infinite() {
            return self.inner.recv(batch);
        }
        if self.per_cycle <= 0.0 {
            return Ok(0);
        }
        let now = rdtsc();
        if self.start == 0 {
            self.start = now;
        }
        let mut due = (now - self.start) as f64 * self.per_cycle - self.taken;
        if due > self.ring {
            let lost = (due - self.ring).floor();
            self.overflow += lost as u64;
            self.taken += lost;
            due -= lost;
        }
        let n = (due.floor() as usize).min(batch.room());
        if n == 0 {
            return Ok(0);
        }
        batch.limit(batch.len() + n);
        let got = self.inner.recv(batch)?;
        self.taken += got as f64;
        Ok(got)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        self.inner.send(frame)
    }

    fn send_batch(&mut self, frames: &[&[u8]]) -> usize {
        self.inner.send_batch(frames)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn stats(&self) -> PortStats {
        let mut s = self.inner.stats();
        s.rx_dropped += self.overflow;
        s
    }

    fn info(&self) -> PortInfo {
        let mut i = self.inner.info();
        i.detail = format!("{} (paced, ring {})", i.detail, self.ring);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build, FrameSpec, GeneratedPort, InMemorySource};
    use std::net::Ipv4Addr;

    #[test]
    fn arrivals_follow_the_clock_and_a_full_ring_loses_the_rest() {
        let f = build(&FrameSpec::udp4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            1,
            2,
            64,
        ));
        let port = GeneratedPort::new("g", InMemorySource::new(vec![f]));
        // A million packets a second into a ring of 64.
        let mut p = PacedPort::new(port, 1e6, 64);
        let mut b = PacketBatch::new();
        assert_eq!(p.recv(&mut b).unwrap(), 0, "nothing has arrived yet");
        std::thread::sleep(std::time::Duration::from_millis(20));
        // ~20,000 arrived: the ring kept 64, the rest are lost.
        let mut got = 0;
        loop {
            b.clear();
            let n = p.recv(&mut b).unwrap();
            got += n;
            if n < flowpath_base::BATCH {
                break;
            }
        }
        assert!(
            (64..=64 + 2 * flowpath_base::BATCH).contains(&got),
            "took {got}"
        );
        assert!(p.overflow > 10_000, "lost only {}", p.overflow);
        assert_eq!(p.stats().rx_dropped, p.overflow);
    }
}
