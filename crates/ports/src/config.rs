//! A port as the switch's TOML config describes it, and how to open one queue of it.

use crate::fault::FaultConfig;
use crate::Port;
use serde::Deserialize;
use std::net::IpAddr;
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
    /// A VXLAN tunnel port: no device of its own; packets arrive encapsulated on an
    /// underlay port and leave encapsulated by one (`remote_ip`, `local_ip`, `key`,
    /// `dst_port`; optionally a static hop: `underlay_port`, `next_hop_mac`, `local_mac`).
    Vxlan,
}

/// Where the XDP program is attached (the attach crate's, shared with the XDP tier).
pub use flowpath_xdpattach::XdpMode;

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
    /// vxlan: the remote VTEP's IPv4 or IPv6 address, or `"flow"` (a flow sets it with
    /// `set_field:…->tun_dst`; packets from any remote are received).
    pub remote_ip: Option<String>,
    /// vxlan: the local VTEP address (outer source; received packets must be sent to it).
    /// Default: any, and the source address of the route to the remote.
    pub local_ip: Option<String>,
    /// vxlan: the VNI (0..=16777215), or `"flow"` (sent with the packet's `tun_id`; any
    /// VNI received). Default 0.
    pub key: Option<TunnelKeyConfig>,
    /// vxlan: UDP destination port, default 4789.
    pub dst_port: Option<u16>,
    /// vxlan, static underlay: the port number encapsulated packets leave by. With
    /// `next_hop_mac` no kernel route or neighbour lookup is made.
    pub underlay_port: Option<u32>,
    /// vxlan, static underlay: the next hop's MAC (`aa:bb:cc:dd:ee:ff`).
    pub next_hop_mac: Option<String>,
    /// vxlan, static underlay: the outer source MAC (default 02:00:00:00:00:01).
    pub local_mac: Option<String>,
}

/// `key = 42` or `key = "flow"`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum TunnelKeyConfig {
    Vni(u64),
    Word(String),
}

/// A vxlan port's settings, checked ([`PortConfig::vxlan`]). `None` means `"flow"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VxlanSettings {
    pub remote: Option<IpAddr>,
    pub local: Option<IpAddr>,
    pub key: Option<u32>,
    pub dst_port: u16,
    /// `(underlay_port, next_hop_mac, local_mac)` when the config gives the hop.
    pub static_hop: Option<(u32, [u8; 6], [u8; 6])>,
}

/// `(underlay_port, next_hop_mac, local_mac)` of [`VxlanSettings::static_hop`].
type StaticHop = (u32, [u8; 6], [u8; 6]);

/// Default outer source MAC of a static underlay hop.
pub const DEFAULT_LOCAL_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// `aa:bb:cc:dd:ee:ff` (or with `-`).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut n = 0;
    for part in s.split([':', '-']) {
        if n == 6 || part.is_empty() || part.len() > 2 {
            return None;
        }
        out[n] = u8::from_str_radix(part, 16).ok()?;
        n += 1;
    }
    (n == 6).then_some(out)
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
            PortKind::Vxlan => {
                self.vxlan()
                    .map_err(|e| format!("port '{}': {e}", self.name))?;
            }
        }
        if self.kind != PortKind::Vxlan {
            for (field, given) in [
                ("remote_ip", self.remote_ip.is_some()),
                ("local_ip", self.local_ip.is_some()),
                ("key", self.key.is_some()),
                ("dst_port", self.dst_port.is_some()),
                ("underlay_port", self.underlay_port.is_some()),
                ("next_hop_mac", self.next_hop_mac.is_some()),
                ("local_mac", self.local_mac.is_some()),
            ] {
                if given {
                    return Err(format!(
                        "port '{}': '{field}' is only for type vxlan",
                        self.name
                    ));
                }
            }
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

    /// A vxlan port's settings, checked; the error starts with the field's name
    /// (`remote_ip: ...`). `Ok(None)` for other kinds.
    pub fn vxlan(&self) -> Result<Option<VxlanSettings>, String> {
        if self.kind != PortKind::Vxlan {
            return Ok(None);
        }
        let (remote, local) = self.vxlan_addresses()?;
        let key = match &self.key {
            None => Some(0),
            Some(TunnelKeyConfig::Vni(v)) if *v <= 0x00ff_ffff => Some(*v as u32),
            Some(TunnelKeyConfig::Vni(v)) => {
                return Err(format!("key: {v} is not a VNI (0..=16777215)"))
            }
            Some(TunnelKeyConfig::Word(w)) if w == "flow" => None,
            Some(TunnelKeyConfig::Word(w)) => {
                return Err(format!(
                    "key: '{w}' is not a VNI (0..=16777215) or \"flow\""
                ))
            }
        };
        let dst_port = self.dst_port.unwrap_or(4789);
        if dst_port == 0 {
            return Err("dst_port: must be 1..=65535".into());
        }
        let static_hop = self.vxlan_static_hop(local.is_some())?;
        Ok(Some(VxlanSettings {
            remote,
            local,
            key,
            dst_port,
            static_hop,
        }))
    }

    /// A vxlan port's `remote_ip` (`None`: "flow") and `local_ip`, checked: unicast, and of
    /// one address family.
    fn vxlan_addresses(&self) -> Result<(Option<IpAddr>, Option<IpAddr>), String> {
        let remote = match self.remote_ip.as_deref() {
            None => {
                return Err("remote_ip: a vxlan port needs one (an address, or \"flow\")".into())
            }
            Some("flow") => None,
            Some(s) => Some(s.parse::<IpAddr>().map_err(|_| {
                format!("remote_ip: '{s}' is not an IPv4 or IPv6 address (or \"flow\")")
            })?),
        };
        if let Some(r) = remote {
            if r.is_unspecified() || r.is_multicast() {
                return Err(format!(
                    "remote_ip: {r} is not a unicast address (multicast VXLAN is not supported)"
                ));
            }
        }
        let local = match self.local_ip.as_deref() {
            None => None,
            Some(s) => Some(
                s.parse::<IpAddr>()
                    .map_err(|_| format!("local_ip: '{s}' is not an IPv4 or IPv6 address"))?,
            ),
        };
        if let (Some(r), Some(l)) = (remote, local) {
            if r.is_ipv4() != l.is_ipv4() {
                return Err(format!(
                    "local_ip: {l} and remote_ip {r} are not of the same address family"
                ));
            }
        }
        Ok((remote, local))
    }

    /// A vxlan port's static underlay hop `(underlay_port, next_hop_mac, local_mac)`, if the
    /// config gives one (it needs `local_ip`: `has_local`).
    fn vxlan_static_hop(&self, has_local: bool) -> Result<Option<StaticHop>, String> {
        let mac = |field: &str, v: &Option<String>| -> Result<Option<[u8; 6]>, String> {
            match v {
                None => Ok(None),
                Some(s) => parse_mac(s).map(Some).ok_or_else(|| {
                    format!("{field}: '{s}' is not a MAC address (aa:bb:cc:dd:ee:ff)")
                }),
            }
        };
        let next_hop = mac("next_hop_mac", &self.next_hop_mac)?;
        let local_mac = mac("local_mac", &self.local_mac)?;
        match (self.underlay_port, next_hop) {
            (Some(p), Some(m)) => {
                if p == 0 || p > 0xff00 {
                    return Err(format!(
                        "underlay_port: {p} is not a usable OpenFlow port number (1..=65280)"
                    ));
                }
                if !has_local {
                    return Err(
                        "local_ip: a static hop (underlay_port, next_hop_mac) needs the local address"
                            .into(),
                    );
                }
                Ok(Some((p, m, local_mac.unwrap_or(DEFAULT_LOCAL_MAC))))
            }
            (None, None) if local_mac.is_none() => Ok(None),
            (None, _) => Err("underlay_port: a static hop needs it (with next_hop_mac)".into()),
            (Some(_), None) => {
                Err("next_hop_mac: a static hop needs it (with underlay_port)".into())
            }
        }
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
            PortKind::Vxlan => {
                return Err(format!(
                    "port '{}': a vxlan port has no device to open (the datapath serves it)",
                    self.name
                ))
            }
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
