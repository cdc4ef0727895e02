//! Fast traffic transmission for `flowpath gen --tx`: XDP live frames where the kernel runs
//! them for this process, else a packet socket sending the same frames and flows ([`FrameTx`]
//! picks). The parts:
//! - [`live`]: [`LiveFrameTx`], the live-frame transmitter running `bpf/gen_tx.bpf.c`, and
//!   the kernel behaviour it is built around;
//! - `socket`: [`PacketSocketTx`], the packet-socket fallback;
//! - `plan`: what to send ([`TxPlan`], [`Vary`], [`FlowOrder`]) and what was sent
//!   ([`TxReport`]);
//! - `template`: the template frames' flow fields and the program's configuration for them,
//!   and the program's flow variation in Rust for the packet socket;
//! - `pace`: rate pacing, by the program itself or by bursts with sleeps between them.

use std::io;

pub use crate::xdp::{attach_xdp_drop, attach_xdp_pass, XdpGuard};
pub use live::LiveFrameTx;
pub use pace::KERNEL_PACE_FROM;
pub use plan::{FlowOrder, TxPlan, TxReport, Vary};
pub use socket::PacketSocketTx;
pub use template::MAX_TEMPLATES;

pub mod live;
mod pace;
mod plan;
mod socket;
mod template;

/// The transmitter of `flowpath gen --tx`: XDP live frames where the kernel runs them for
/// this process, else a packet socket sending the same frames and flows (slower).
pub enum FrameTx {
    LiveFrames(Box<LiveFrameTx>),
    PacketSocket(PacketSocketTx),
}

impl FrameTx {
    /// Live frames on `ifname`, or the packet socket when the live-frame program cannot
    /// be loaded (the refusal is kept for the report).
    pub fn open(ifname: &str) -> io::Result<FrameTx> {
        match LiveFrameTx::open(ifname) {
            Ok(t) => Ok(FrameTx::LiveFrames(Box::new(t))),
            Err(e) => Ok(FrameTx::PacketSocket(PacketSocketTx::open(
                ifname,
                format!("the live-frame program: {e}"),
            )?)),
        }
    }

    /// [`LiveFrameTx::run`]; if the kernel refuses the first live-frame call (EPERM,
    /// EACCES: nothing was sent), the packet socket runs the plan instead, from then on.
    pub fn run<T: AsRef<[u8]>>(&mut self, templates: &[T], plan: &TxPlan) -> io::Result<TxReport> {
        if let FrameTx::LiveFrames(t) = self {
            match t.run(templates, plan) {
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied && t.packets() == 0 => {
                    let s = PacketSocketTx::open(t.interface(), e.to_string())?;
                    *self = FrameTx::PacketSocket(s);
                }
                r => return r,
            }
        }
        match self {
            FrameTx::PacketSocket(s) => s.run(templates, plan),
            FrameTx::LiveFrames(_) => unreachable!("replaced above"),
        }
    }

    /// `xdp-live-frames` or `packet-socket`.
    pub fn kind(&self) -> &'static str {
        match self {
            FrameTx::LiveFrames(_) => "xdp-live-frames",
            FrameTx::PacketSocket(_) => "packet-socket",
        }
    }

    /// Why live frames were not used (None while they are).
    pub fn why_not_live(&self) -> Option<&str> {
        match self {
            FrameTx::LiveFrames(_) => None,
            FrameTx::PacketSocket(s) => Some(s.why()),
        }
    }

    /// Whether kernel calls are cheap ([`LiveFrameTx::fast_calls`]; a socket's always are).
    pub fn fast_calls(&self) -> bool {
        match self {
            FrameTx::LiveFrames(t) => t.fast_calls(),
            FrameTx::PacketSocket(_) => true,
        }
    }
}

#[cfg(test)]
mod tests;
