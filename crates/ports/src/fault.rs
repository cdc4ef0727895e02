//! `FaultInjector`: wraps any port and drops, corrupts or delays a share of its packets,
//! deterministically from a seed.

use crate::{PacketBatch, Port, PortInfo, PortStats};
use flowpath_base::SplitMix64;
use serde::Deserialize;
use std::collections::VecDeque;
use std::io;

/// Shares are probabilities in 0..=1, applied to received and sent packets.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    #[serde(default)]
    pub drop: f64,
    #[serde(default)]
    pub corrupt: f64,
    #[serde(default)]
    pub delay: f64,
    /// How many polls a delayed packet is held back.
    #[serde(default)]
    pub delay_polls: u32,
    #[serde(default)]
    pub seed: u64,
}

impl FaultConfig {
    /// Error names the field (without the `fault.` prefix).
    pub fn validate(&self) -> Result<(), String> {
        for (n, v) in [
            ("drop", self.drop),
            ("corrupt", self.corrupt),
            ("delay", self.delay),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{n}: must be a share between 0 and 1, not {v}"));
            }
        }
        Ok(())
    }
}

/// Frames held back at most; further delayed frames are dropped (and counted).
const MAX_HELD: usize = 1 << 16;

/// Flip one random bit of one random byte of `frame`.
fn flip_bit(rng: &mut SplitMix64, frame: &mut [u8]) {
    if frame.is_empty() {
        return;
    }
    let r = rng.next();
    let byte = ((r >> 3) % frame.len() as u64) as usize;
    frame[byte] ^= 1 << (r & 7);
}

/// Wraps a port and injects faults. Received frames (after the inner `recv`), each
/// decided independently: dropped with probability `drop`; otherwise corrupted (one bit
/// flipped) with probability `corrupt`, then held back for `delay_polls` `recv` calls
/// (at least one) with probability `delay`. Sent frames: dropped or corrupted before the
/// inner `send`. Injected drops add to the inner port's `rx_dropped` / `tx_dropped`.
pub struct FaultInjector<P: Port> {
    inner: P,
    cfg: FaultConfig,
    rng: SplitMix64,
    /// `recv` calls so far.
    poll: u64,
    /// Delayed frames in arrival order with the poll they are due at.
    held: VecDeque<(u64, Vec<u8>)>,
    /// Buffers of delivered delayed frames, for reuse.
    spare: Vec<Vec<u8>>,
    /// A sent frame being corrupted.
    scratch: Vec<u8>,
    rx_dropped: u64,
    tx_dropped: u64,
    rx_corrupted: u64,
    tx_corrupted: u64,
    delayed: u64,
}

impl<P: Port> FaultInjector<P> {
    pub fn new(inner: P, cfg: FaultConfig) -> FaultInjector<P> {
        FaultInjector {
            inner,
            rng: SplitMix64(cfg.seed),
            cfg,
            poll: 0,
            held: VecDeque::new(),
            spare: Vec::new(),
            scratch: Vec::new(),
            rx_dropped: 0,
            tx_dropped: 0,
            rx_corrupted: 0,
            tx_corrupted: 0,
            delayed: 0,
        }
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    /// Frames currently held back.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Injected faults so far: (rx dropped, tx dropped, rx corrupted, tx corrupted, delayed).
    pub fn injected(&self) -> (u64, u64, u64, u64, u64) {
        (
            self.rx_dropped,
            self.tx_dropped,
            self.rx_corrupted,
            self.tx_corrupted,
            self.delayed,
        )
    }
}

impl<P: Port> Port for FaultInjector<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        self.poll += 1;
        let start = batch.len();
        // Frames whose delay is over go first, in the order they arrived.
        while batch.room() > 0 && self.held.front().is_some_and(|h| h.0 <= self.poll) {
            let (_, f) = self.held.pop_front().expect("checked");
            batch.push(&f);
            self.spare.push(f);
        }
        let first = batch.len();
        self.inner.recv(batch)?;
        let c = &self.cfg;
        let mut i = first;
        while i < batch.len() {
            if self.rng.chance(c.drop) {
                batch.remove(i);
                self.rx_dropped += 1;
                continue;
            }
            if self.rng.chance(c.corrupt) {
                flip_bit(&mut self.rng, batch.frame_mut(i));
                self.rx_corrupted += 1;
            }
            if self.rng.chance(c.delay) {
                if self.held.len() >= MAX_HELD {
                    self.rx_dropped += 1;
                } else {
                    let mut buf = self.spare.pop().unwrap_or_default();
                    buf.clear();
                    buf.extend_from_slice(batch.frame(i));
                    let due = self.poll + u64::from(c.delay_polls.max(1));
                    self.held.push_back((due, buf));
                    self.delayed += 1;
                }
                batch.remove(i);
                continue;
            }
            i += 1;
        }
        Ok(batch.len() - start)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        if self.rng.chance(self.cfg.drop) {
            self.tx_dropped += 1;
            return false;
        }
        if self.rng.chance(self.cfg.corrupt) {
            self.tx_corrupted += 1;
            self.scratch.clear();
            self.scratch.extend_from_slice(frame);
            flip_bit(&mut self.rng, &mut self.scratch);
            return self.inner.send(&self.scratch);
        }
        self.inner.send(frame)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn stats(&self) -> PortStats {
        let mut s = self.inner.stats();
        s.rx_dropped += self.rx_dropped;
        s.tx_dropped += self.tx_dropped;
        s
    }

    fn info(&self) -> PortInfo {
        let mut i = self.inner.info();
        let c = &self.cfg;
        i.detail = format!(
            "{}, faults: drop {}, corrupt {}, delay {} for {} polls, seed {}",
            i.detail, c.drop, c.corrupt, c.delay, c.delay_polls, c.seed
        );
        i
    }
}
