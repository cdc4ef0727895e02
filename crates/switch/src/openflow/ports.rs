//! The switch's ports as OpenFlow sees them: descriptions (number, name, MAC, link state)
//! for PORT_DESC and PORT_STATUS, and counters for PORT_STATS, from the daemon's port
//! config and its workers' snapshots.

use crate::pmd::WorkerSnapshot;
use flowpath_ports::{PortConfig, PortKind};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One port, as PORT_DESC describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortDesc {
    pub number: u32,
    pub name: String,
    pub hw_addr: [u8; 6],
    /// Carrier present (the interface's operstate is up, or it has no carrier notion).
    pub link_up: bool,
    /// The worker gave up on it after an error (PORT_DOWN config bit).
    pub down: bool,
    /// Current speed in kb/s (0: unknown).
    pub speed_kbps: u32,
}

/// One port's counters, summed over its queues.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub number: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub errors: u64,
    /// Seconds and nanoseconds the port has been up.
    pub duration: std::time::Duration,
}

/// What the OpenFlow channel needs to know about ports.
pub trait SwitchPorts: Send + Sync {
    fn describe(&self) -> Vec<PortDesc>;
    fn counters(&self) -> Vec<PortCounters>;
}

/// A switch without ports (`flowpath run`): empty answers.
pub struct NoPorts;

impl SwitchPorts for NoPorts {
    fn describe(&self) -> Vec<PortDesc> {
        Vec::new()
    }
    fn counters(&self) -> Vec<PortCounters> {
        Vec::new()
    }
}

/// The daemon's ports: its `[[port]]` entries and the workers' latest snapshots.
pub struct DaemonPorts {
    ports: Vec<PortConfig>,
    snapshots: Vec<Arc<Mutex<WorkerSnapshot>>>,
    started: Instant,
}

impl DaemonPorts {
    pub fn new(ports: Vec<PortConfig>, snapshots: Vec<Arc<Mutex<WorkerSnapshot>>>) -> DaemonPorts {
        DaemonPorts {
            ports,
            snapshots,
            started: Instant::now(),
        }
    }
}

impl SwitchPorts for DaemonPorts {
    fn describe(&self) -> Vec<PortDesc> {
        // Ports a worker gave up on (read under each snapshot's lock, not copied out: the
        // port watcher asks four times a second).
        let mut down: Vec<u32> = Vec::new();
        for s in &self.snapshots {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            down.extend(
                s.ports
                    .iter()
                    .filter(|q| q.down.is_some())
                    .map(|q| q.number),
            );
        }
        self.ports
            .iter()
            .map(|p| {
                let dev = p.interface.as_deref().filter(|_| has_netdev(p.kind));
                let down = down.contains(&p.number);
                PortDesc {
                    number: p.number,
                    name: p.name.clone(),
                    hw_addr: dev
                        .and_then(read_mac)
                        .unwrap_or_else(|| local_mac(p.number)),
                    link_up: dev.map(link_up).unwrap_or(true),
                    down,
                    speed_kbps: dev.and_then(speed_kbps).unwrap_or(0),
                }
            })
            .collect()
    }

    fn counters(&self) -> Vec<PortCounters> {
        let mut out: Vec<PortCounters> = self
            .ports
            .iter()
            .map(|p| PortCounters {
                number: p.number,
                duration: self.started.elapsed(),
                ..PortCounters::default()
            })
            .collect();
        for s in &self.snapshots {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            for q in &s.ports {
                if let Some(c) = out.iter_mut().find(|c| c.number == q.number) {
                    c.rx_packets += q.stats.rx_packets;
                    c.tx_packets += q.stats.tx_packets;
                    c.rx_bytes += q.stats.rx_bytes;
                    c.tx_bytes += q.stats.tx_bytes;
                    c.rx_dropped += q.stats.rx_dropped;
                    c.tx_dropped += q.stats.tx_dropped;
                    c.errors += q.stats.errors;
                }
            }
        }
        out
    }
}

fn has_netdev(kind: PortKind) -> bool {
    matches!(kind, PortKind::Afxdp | PortKind::Afpacket | PortKind::Tap)
}

fn sys(dev: &str, leaf: &str) -> Option<String> {
    std::fs::read_to_string(Path::new("/sys/class/net").join(dev).join(leaf))
        .ok()
        .map(|s| s.trim().to_string())
}

fn read_mac(dev: &str) -> Option<[u8; 6]> {
    let s = sys(dev, "address")?;
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(m)
}

/// An interface is up unless the kernel says its carrier is down (`unknown`, as veth in
/// some states and tap devices report, counts as up, the way OVS reads it).
fn link_up(dev: &str) -> bool {
    match sys(dev, "operstate").as_deref() {
        Some("down") | Some("lowerlayerdown") | Some("notpresent") => false,
        Some(_) => true,
        None => false,
    }
}

fn speed_kbps(dev: &str) -> Option<u32> {
    let mbps: i64 = sys(dev, "speed")?.parse().ok()?;
    (mbps > 0).then(|| (mbps as u64 * 1000).min(u32::MAX as u64) as u32)
}

/// A locally administered MAC for a port with no interface (pcap, generator ports).
pub fn local_mac(number: u32) -> [u8; 6] {
    let n = number.to_be_bytes();
    [0x02, 0xf1, n[0], n[1], n[2], n[3]]
}
