//! flowpath under test in the bench's own process: a switch and its OpenFlow channel
//! listening on an ephemeral loopback port.

use flowpath_switch::openflow::{
    ChannelCounters, NoPacketIo, NoPorts, OpenFlowChannel, OpenFlowConfig, PacketIo, Target,
};
use flowpath_switch::{Switch, SwitchConfig};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// flowpath in this process: a switch and its OpenFlow channel on ptcp:127.0.0.1:0.
pub struct InProcess {
    pub sw: Arc<Switch>,
    ch: Option<OpenFlowChannel>,
    stop: Arc<AtomicBool>,
    pub addr: SocketAddr,
}

impl InProcess {
    /// A fresh switch (its state file `state_dir/flows.state` if given), no ports,
    /// no packet I/O.
    pub fn start(state_dir: Option<&Path>) -> Result<InProcess, String> {
        let sw = Switch::open(SwitchConfig {
            state: state_dir.map(|d| d.join("flows.state")),
            ..SwitchConfig::default()
        })?;
        InProcess::start_with(sw, Arc::new(NoPacketIo), OpenFlowConfig::default())
    }

    pub fn start_with(
        sw: Arc<Switch>,
        io: Arc<dyn PacketIo>,
        cfg: OpenFlowConfig,
    ) -> Result<InProcess, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let cfg = OpenFlowConfig {
            targets: vec![Target::Listen(SocketAddr::from(([127, 0, 0, 1], 0)))],
            ..cfg
        };
        let ch = OpenFlowChannel::start(sw.clone(), Arc::new(NoPorts), io, cfg, stop.clone())?;
        let addr = ch.listening[0];
        Ok(InProcess {
            sw,
            ch: Some(ch),
            stop,
            addr,
        })
    }

    pub fn counters(&self) -> ChannelCounters {
        self.ch.as_ref().map(|c| c.counters()).unwrap_or_default()
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(c) = self.ch.take() {
            c.join();
        }
    }
}
