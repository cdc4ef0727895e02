//! A port as the switch's TOML config describes it, and how to open one queue of it.

use crate::fault::FaultConfig;
use crate::Port;
use serde::Deserialize;
use std::path::PathBuf;

/// Which kind of port.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PortKind {
    /// An AF_XDP socket per queue on `interface` (copy mode on veth, zero-copy where the
    /// driver allows), fed by a minimal XDP program that redirects to the socket.
    Afxdp,
    /// An AF_PACKET socket with a TPACKET_V3 receive ring: works on any interface.
    Afpacket,
    /// A TAP device (created if missing) for a VM-facing port.
    Tap,
    /// Frames read from `rx_pcap` (once) and written to `tx_pcap`.
    Pcap,
    /// In-memory generated traffic (`flows` UDP flows of `frame_size` bytes); transmit
    /// only counts. Needs no privileges.
    Generator,
}

/// Where the XDP program is attached.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Driver (native) mode where the interface supports it, generic otherwise.
    #[default]
    Auto,
    Native,
    Generic,
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

/// One `[[port]]` table of the config.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Name shown in stats and logs.
    pub name: String,
    /// The OpenFlow port number flows use (`in_port=`, `output:`).
    pub number: u32,
    #[serde(rename = "type")]
    pub kind: PortKind,
    /// The network interface (afxdp, afpacket, tap).
    pub interface: Option<String>,
    /// Receive queues to serve; workers share them out round-robin.
    #[serde(default = "one")]
    pub queues: u32,
    #[serde(default)]
    pub xdp_mode: XdpMode,
    /// Try AF_XDP zero-copy before falling back to copy mode.
    #[serde(default = "yes")]
    pub zero_copy: bool,
    /// Put the AF_XDP UMEM on huge pages when they can be reserved.
    #[serde(default = "yes")]
    pub hugepages: bool,
    pub rx_pcap: Option<PathBuf>,
    pub tx_pcap: Option<PathBuf>,
    /// Generator ports: flows and frame size.
    pub flows: Option<u32>,
    pub frame_size: Option<u32>,
    /// Record everything received and sent on this port to a pcap file.
    pub trace: Option<PathBuf>,
    /// Drop / corrupt / delay a share of this port's packets (testing).
    pub fault: Option<FaultConfig>,
}

impl PortConfig {
    /// Check the fields this kind needs; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let need = |field: &str, present: bool| {
            if present {
                Ok(())
            } else {
                Err(format!(
                    "port '{}': type {:?} needs '{field}'",
                    self.name, self.kind
                ))
            }
        };
        if self.name.is_empty() {
            return Err("port: 'name' must not be empty".into());
        }
        if self.queues == 0 || self.queues > 64 {
            return Err(format!(
                "port '{}': 'queues' must be 1..=64, not {}",
                self.name, self.queues
            ));
        }
        match self.kind {
            PortKind::Afxdp | PortKind::Afpacket | PortKind::Tap => {
                need("interface", self.interface.is_some())?
            }
            PortKind::Pcap => need(
                "rx_pcap' or 'tx_pcap",
                self.rx_pcap.is_some() || self.tx_pcap.is_some(),
            )?,
            PortKind::Generator => {}
        }
        if self.kind != PortKind::Afxdp && self.queues != 1 && self.kind != PortKind::Afpacket {
            return Err(format!(
                "port '{}': 'queues' > 1 needs type afxdp or afpacket",
                self.name
            ));
        }
        if let Some(f) = &self.fault {
            f.validate()
                .map_err(|e| format!("port '{}': fault.{e}", self.name))?;
        }
        Ok(())
    }

    /// Open queue `queue` of this port, wrapped in its tracer and fault injector if asked.
    pub fn open(&self, queue: u32) -> Result<Box<dyn Port>, String> {
        self.validate()?;
        let ctx = |e: std::io::Error| format!("port '{}' queue {queue}: {e}", self.name);
        let name = self.name.clone();
        let iface = || self.interface.clone().unwrap_or_default();
        let mut port: Box<dyn Port> = match self.kind {
            PortKind::Afxdp => Box::new(
                crate::afxdp::AfXdpPort::open(
                    &name,
                    &iface(),
                    queue,
                    &crate::afxdp::AfXdpOptions {
                        mode: self.xdp_mode,
                        zero_copy: self.zero_copy,
                        hugepages: self.hugepages,
                    },
                )
                .map_err(ctx)?,
            ),
            PortKind::Afpacket => Box::new(
                crate::afpacket::AfPacketPort::open(&name, &iface(), self.queues > 1)
                    .map_err(ctx)?,
            ),
            PortKind::Tap => Box::new(crate::tap::TapPort::open(&name, &iface()).map_err(ctx)?),
            PortKind::Pcap => Box::new(
                crate::pcap::PcapPort::open(
                    &name,
                    self.rx_pcap.as_deref(),
                    self.tx_pcap.as_deref(),
                )
                .map_err(ctx)?,
            ),
            PortKind::Generator => {
                let flows = self.flows.unwrap_or(1000);
                let size = self.frame_size.unwrap_or(64);
                open_generator(&name, flows, size).map_err(ctx)?
            }
        };
        if let Some(f) = &self.fault {
            port = Box::new(crate::fault::FaultInjector::new(port, f.clone()));
        }
        if let Some(path) = &self.trace {
            let path = if self.queues > 1 {
                path.with_extension(format!("q{queue}.pcap"))
            } else {
                path.clone()
            };
            port = Box::new(crate::trace::PcapTracer::new(port, &path).map_err(ctx)?);
        }
        Ok(port)
    }
}

/// Opens a generator port: `(name, flows, frame size)`. Generated traffic is built by the
/// traffic generator, a crate above this one, so it registers its opener here
/// ([`register_generator`]) instead of this crate depending on it.
pub type GeneratorOpener = fn(&str, u32, u32) -> Box<dyn Port>;

static GENERATOR: std::sync::OnceLock<GeneratorOpener> = std::sync::OnceLock::new();

/// Make `type = "generator"` ports openable (the `flowpath` binary does this at start).
/// The first registration wins; later ones are ignored.
pub fn register_generator(open: GeneratorOpener) {
    let _ = GENERATOR.set(open);
}

fn open_generator(name: &str, flows: u32, frame_size: u32) -> std::io::Result<Box<dyn Port>> {
    match GENERATOR.get() {
        Some(open) => Ok(open(name, flows, frame_size)),
        None => Err(std::io::Error::other(
            "generator ports need the traffic generator, which this program did not register \
             (flowpath_ports::register_generator)",
        )),
    }
}
