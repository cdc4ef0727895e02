//! `FaultInjector`: wraps any port and drops, corrupts or delays a share of its packets.
//! (stub: helper fills in)

use crate::{Port, PortInfo, PortStats, RxBatch};
use serde::Deserialize;
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

pub struct FaultInjector<P: Port> {
    inner: P,
    #[allow(dead_code)]
    cfg: FaultConfig,
}

impl<P: Port> FaultInjector<P> {
    pub fn new(inner: P, cfg: FaultConfig) -> FaultInjector<P> {
        FaultInjector { inner, cfg }
    }
}

impl<P: Port> Port for FaultInjector<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        self.inner.recv(batch)
    }
    fn send(&mut self, frame: &[u8]) -> bool {
        self.inner.send(frame)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
    fn info(&self) -> PortInfo {
        self.inner.info()
    }
}
