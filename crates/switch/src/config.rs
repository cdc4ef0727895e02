//! The `flowpath switch` config file: its sections, defaults, and the checks that name the
//! field at fault.

use flowpath_datapath::{
    DatapathConfig, MissLimits, TunnelKey, TunnelPort, TunnelRemote, UnderlayHop,
};
use flowpath_ports::{PortConfig, PortKind};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The whole config file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    #[serde(default)]
    pub switch: SwitchSection,
    #[serde(default)]
    pub datapath: DatapathSection,
    #[serde(default, rename = "worker")]
    pub workers: Vec<WorkerSection>,
    #[serde(default, rename = "port")]
    pub ports: Vec<PortConfig>,
    #[serde(default)]
    pub conntrack: crate::conntrack::CtSection,
}

/// `[switch]`
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSection {
    /// The state file (flows survive restarts); default `flowpath run`'s.
    pub state: Option<PathBuf>,
    /// The control socket; default `flowpath run`'s.
    pub control: Option<PathBuf>,
    /// A flows file (ovs-ofctl syntax) installed on the first start, when there is no
    /// state file yet. Afterwards the state file is what the switch restores.
    pub flows: Option<PathBuf>,
    /// `host:port` for the Prometheus text endpoint (keep it on localhost).
    pub metrics: Option<String>,
    /// OpenFlow 1.3 targets: `ptcp:[IP:]PORT` listens (IP defaults to 127.0.0.1) for
    /// clients such as `ovs-ofctl`; `tcp:HOST:PORT` connects to a controller; `pssl:` and
    /// `ssl:` do the same over TLS.
    #[serde(default)]
    pub openflow: Vec<String>,
    /// TLS for `ssl:`/`pssl:` targets (PEM files): the switch's private key and
    /// certificate, and the CA certificate every peer's certificate must chain to.
    pub openflow_private_key: Option<PathBuf>,
    pub openflow_certificate: Option<PathBuf>,
    pub openflow_ca_cert: Option<PathBuf>,
    /// Most OpenFlow connections open at once (default 64); listeners refuse more.
    pub openflow_max_connections: Option<usize>,
    /// `secure` (default: keep flows while no controller is connected) or `standalone`
    /// (act as a learning switch meanwhile).
    #[serde(default)]
    pub openflow_fail_mode: crate::openflow::FailMode,
    /// The datapath id controllers see, in hex (default: derived from the first port).
    pub datapath_id: Option<String>,
    /// Packet-ins per second per ingress port (default 1000); the rest are dropped and
    /// counted, so a miss storm cannot flood the controller.
    pub packet_in_rate: Option<u32>,
    /// The slow path's classifier: `tss` (default: tuple-space search with prefix tries,
    /// as OVS's prefix tracking), `tss-whole-masks` (without them: each probed mask goes
    /// whole into the megaflow, as OVS with `prefixes=none`), `tree` or `linear`.
    pub classifier: Option<String>,
}

impl SwitchSection {
    /// The TLS files: all three or none (the error names what is missing).
    fn openflow_tls(&self) -> Result<Option<crate::openflow::TlsFiles>, String> {
        crate::openflow::TlsFiles::from_parts(
            self.openflow_private_key.as_deref(),
            self.openflow_certificate.as_deref(),
            self.openflow_ca_cert.as_deref(),
            [
                "switch.openflow_private_key",
                "openflow_certificate",
                "openflow_ca_cert",
            ],
        )
    }
}

/// `[datapath]`; a field left out takes its value from [`DatapathSection::default`].
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatapathSection {
    pub emc: bool,
    /// Insert one flow in N into the exact-match cache.
    pub emc_insert_inv_prob: u32,
    /// Signature-match cache entries per worker (0 = off); it runs while it pays.
    pub smc_entries: usize,
    /// Most megaflows per worker. Each worker allocates and faults in 256 bytes for each
    /// at start (16 MB for the default 65,536), so a flood finds the memory in place; at
    /// most 4,194,304 (1 GB), and all workers' tables must fit in the available memory.
    pub megaflow_max: usize,
    /// Most megaflow subtables (distinct masks) per worker.
    pub max_masks: usize,
    /// A revalidation slower than this (ms) shrinks the flow limit; 0 = never.
    pub revalidate_target_ms: f64,
    /// Largest share of a worker's core the slow path takes while hits are being served,
    /// shared by the ports with misses; 1.0 = no miss budget.
    pub slow_path_share: f64,
    /// New megaflow masks one port may create per second (0 = no limit).
    pub new_masks_per_sec: u32,
    /// Cycle-fair polling quantum (TSC cycles per port per round; 0 = plain round robin).
    pub poll_quantum_cycles: u64,
    /// Longest idle nap of a worker in microseconds; 0 = never sleep (pure busy poll).
    pub idle_sleep_max_us: u64,
    /// Run the XDP tier: one `flow_tier` program on every afxdp port's interface answers
    /// cached flows in the kernel (docs/xdp-tier.md). Other port types do not take part.
    pub xdp_tier: bool,
    /// Entries the XDP tier holds (all workers together; new megaflows are not offered
    /// while it is full).
    pub xdp_tier_max: u32,
    /// NORMAL's MAC learning table: most (VLAN, MAC) entries (default 8192) and how long
    /// an entry lives unseen (default 300 s), as in Open vSwitch.
    pub mac_table_size: usize,
    pub mac_aging_secs: u64,
}

impl Default for DatapathSection {
    fn default() -> Self {
        let dp = DatapathConfig::default();
        let miss = MissLimits::default();
        let mac = flowpath_datapath::MacLearningConfig::default();
        DatapathSection {
            emc: true,
            emc_insert_inv_prob: 100,
            smc_entries: dp.smc_entries,
            megaflow_max: 65536,
            max_masks: dp.max_masks,
            revalidate_target_ms: dp.revalidate_target_ms,
            slow_path_share: miss.slow_path_share,
            new_masks_per_sec: miss.new_masks_per_sec,
            poll_quantum_cycles: miss.poll_quantum_cycles,
            idle_sleep_max_us: 500,
            xdp_tier: false,
            xdp_tier_max: 65536,
            mac_table_size: mac.max_entries,
            mac_aging_secs: mac.aging.as_secs(),
        }
    }
}

/// `[[worker]]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSection {
    /// The CPU this worker is pinned to.
    pub core: Option<usize>,
}

/// A parser's message, which quotes the offending line under its own: each line with its
/// control characters escaped (a NUL in the file shows as `\0`), the lines kept.
fn shown_lines(m: &str) -> String {
    let lines: Vec<String> = m
        .lines()
        .map(flowpath_base::text::escape_controls)
        .collect();
    lines.join("\n")
}

impl DaemonConfig {
    /// Read and check a config file; errors name the file and the field.
    pub fn load(path: &Path) -> Result<DaemonConfig, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("config {}: {e}", path.display()))?;
        DaemonConfig::parse(&text).map_err(|e| format!("config {}: {e}", path.display()))
    }

    /// Parse and check config text.
    pub fn parse(text: &str) -> Result<DaemonConfig, String> {
        let cfg: DaemonConfig =
            toml::from_str(text).map_err(|e| shown_lines(e.to_string().trim()))?;
        // The checks quote names and addresses from the file.
        cfg.validate().map_err(|e| shown_lines(&e))?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), String> {
        if self.ports.is_empty() {
            return Err("no [[port]]: a switch needs at least one port".into());
        }
        self.validate_workers()?;
        self.validate_ports()?;
        if self.datapath.xdp_tier {
            self.validate_tier()?;
        }
        if self.datapath.emc_insert_inv_prob == 0 {
            return Err("datapath.emc_insert_inv_prob: must be at least 1".into());
        }
        if let Some(name) = &self.switch.classifier {
            name.parse::<flowpath_pipeline::Backend>()
                .map_err(|e| format!("switch.classifier: {e}"))?;
        }
        let d = &self.datapath;
        if !(d.slow_path_share > 0.0 && d.slow_path_share <= 1.0) {
            return Err(format!(
                "datapath.slow_path_share: {} is not in (0, 1] (1 turns the miss budget off)",
                d.slow_path_share
            ));
        }
        // The table sizes, as the datapath bounds them (its fields are named as here).
        self.datapath_config()
            .check()
            .map_err(|e| format!("datapath.{e}"))?;
        self.validate_memory()?;
        if d.mac_table_size == 0 {
            return Err("datapath.mac_table_size: must be at least 1".into());
        }
        if d.mac_aging_secs == 0 {
            return Err("datapath.mac_aging_secs: must be at least 1 second".into());
        }
        if !(d.revalidate_target_ms >= 0.0 && d.revalidate_target_ms.is_finite()) {
            return Err(format!(
                "datapath.revalidate_target_ms: {} is not a duration in ms (0 = never shrink)",
                d.revalidate_target_ms
            ));
        }
        if let Some(m) = &self.switch.metrics {
            m.parse::<SocketAddr>()
                .map_err(|e| format!("switch.metrics: '{m}' is not host:port ({e})"))?;
        }
        self.openflow_config()?;
        self.conntrack.ct_config()?;
        Ok(())
    }

    /// The OpenFlow channel's settings; errors name the field.
    pub fn openflow_config(&self) -> Result<crate::openflow::OpenFlowConfig, String> {
        use crate::openflow::{parse_datapath_id, OpenFlowConfig, Target};
        let mut cfg = OpenFlowConfig {
            fail_mode: self.switch.openflow_fail_mode,
            ..OpenFlowConfig::default()
        };
        for (i, t) in self.switch.openflow.iter().enumerate() {
            cfg.targets
                .push(Target::parse(t).map_err(|e| format!("switch.openflow[{i}]: {e}"))?);
        }
        match &self.switch.datapath_id {
            Some(d) => {
                cfg.datapath_id =
                    parse_datapath_id(d).map_err(|e| format!("switch.datapath_id: {e}"))?
            }
            None => {
                // OVS derives it from a MAC; use the first port's number and name hash so
                // two flowpath switches on one host differ when their ports do.
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for p in &self.ports {
                    for b in p.name.bytes().chain(p.number.to_be_bytes()) {
                        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
                    }
                }
                cfg.datapath_id = h & 0x0000_ffff_ffff_ffff;
            }
        }
        if let Some(r) = self.switch.packet_in_rate {
            if r == 0 {
                return Err(
                    "switch.packet_in_rate: must be at least 1 packet-in per second per port"
                        .into(),
                );
            }
            cfg.packet_in_rate = r;
        }
        if let Some(n) = self.switch.openflow_max_connections {
            if n == 0 {
                return Err("switch.openflow_max_connections: must be at least 1".into());
            }
            cfg.max_connections = n;
        }
        cfg.tls = self.switch.openflow_tls()?;
        Ok(cfg)
    }

    /// The workers' tables, allocated whole when the switch starts, fit in the memory the
    /// host has available; otherwise the start would be killed for memory part-way.
    fn validate_memory(&self) -> Result<(), String> {
        match std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| mem_available(&m))
        {
            Some(available) => self.check_memory(available),
            None => Ok(()),
        }
    }

    /// [`DaemonConfig::validate_memory`] against `available` bytes.
    fn check_memory(&self, available: u64) -> Result<(), String> {
        let workers = self.workers.len().max(1) as u64;
        let per_worker = self.datapath_config().memory_at_start();
        let need = workers * per_worker;
        if need > available {
            let mb = |b: u64| b.div_ceil(1 << 20);
            return Err(format!(
                "datapath.megaflow_max: {workers} worker(s) × {} MB of tables made at start \
                 (megaflow_max {} × {} B, smc_entries {}, the EMC) = {} MB, more than the {} MB \
                 this host has available; lower datapath.megaflow_max or datapath.smc_entries",
                mb(per_worker),
                self.datapath.megaflow_max,
                flowpath_datapath::MegaflowCache::bytes_for(1),
                self.datapath.smc_entries,
                mb(need),
                mb(available)
            ));
        }
        Ok(())
    }

    /// Pinned cores exist and are not shared.
    fn validate_workers(&self) -> Result<(), String> {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let online = online_cpus().unwrap_or(cpus);
        for (i, w) in self.workers.iter().enumerate() {
            if let Some(c) = w.core {
                if c >= online {
                    return Err(format!(
                        "worker[{i}].core: CPU {c} does not exist (this machine has CPUs 0..{})",
                        online - 1
                    ));
                }
                if self.workers[..i].iter().any(|o| o.core == Some(c)) {
                    return Err(format!("worker[{i}].core: CPU {c} already has a worker"));
                }
            }
        }
        Ok(())
    }

    /// Each port is well formed, named and numbered once, with a queue per worker.
    fn validate_ports(&self) -> Result<(), String> {
        let workers = self.workers.len().max(1) as u32;
        let mut vxlan_dst_port = None;
        for (i, p) in self.ports.iter().enumerate() {
            if let Some(v) = p.vxlan().map_err(|e| format!("port[{i}].{e}"))? {
                // The parser decapsulates one UDP port.
                match vxlan_dst_port {
                    Some((d, j)) if d != v.dst_port => {
                        return Err(format!(
                            "port[{i}].dst_port: {} but port[{j}] uses {d}; all vxlan ports \
                             share one UDP port",
                            v.dst_port
                        ))
                    }
                    _ => vxlan_dst_port = Some((v.dst_port, i)),
                }
                if let Some((u, _, _)) = v.static_hop {
                    if !self
                        .ports
                        .iter()
                        .any(|o| o.number == u && o.kind != PortKind::Vxlan)
                    {
                        return Err(format!(
                            "port[{i}].underlay_port: {u} is not the number of a (non-vxlan) port"
                        ));
                    }
                }
            }
            p.validate().map_err(|e| format!("port[{i}]: {e}"))?;
            if p.number == 0 || p.number > 0xff00 {
                return Err(format!(
                    "port[{i}].number: {} is not a usable OpenFlow port number (1..=65280)",
                    p.number
                ));
            }
            if let Some(o) = self.ports[..i].iter().find(|o| o.name == p.name) {
                return Err(format!(
                    "port[{i}].name: '{}' is used twice (also number {})",
                    p.name, o.number
                ));
            }
            if let Some(o) = self.ports[..i].iter().find(|o| o.number == p.number) {
                return Err(format!(
                    "port[{i}].number: {} is already port '{}'",
                    p.number, o.name
                ));
            }
            if p.queues < workers && p.kind != PortKind::Vxlan {
                return Err(format!(
                    "port[{i}].queues: {} queue(s) but {workers} workers; every worker needs a queue \
                     of every port to transmit on without locks (set queues = {workers})",
                    p.queues
                ));
            }
        }
        Ok(())
    }

    /// The XDP tier has afxdp ports to serve, within its limits.
    fn validate_tier(&self) -> Result<(), String> {
        {
            let max = flowpath_xdptier::MAX_FLOWS;
            if self.datapath.xdp_tier_max == 0 || self.datapath.xdp_tier_max > max {
                return Err(format!("datapath.xdp_tier_max: must be 1..={max}"));
            }
            if !self.ports.iter().any(|p| p.kind == PortKind::Afxdp) {
                return Err(
                    "datapath.xdp_tier: no port of type afxdp (only those take part)".into(),
                );
            }
            let queues: u32 = self
                .ports
                .iter()
                .filter(|p| p.kind == PortKind::Afxdp)
                .map(|p| p.queues)
                .sum();
            if queues > flowpath_xdptier::MAX_XSKS {
                return Err(format!(
                    "datapath.xdp_tier: the afxdp ports have {queues} queues together; the XDP \
                     tier serves at most {}",
                    flowpath_xdptier::MAX_XSKS
                ));
            }
        }
        Ok(())
    }

    /// The vxlan ports as the datapath takes them, each with its static hop when the
    /// config gives one (`underlay_port` + `next_hop_mac`): (port, remote, hop).
    pub fn tunnel_ports(&self) -> Vec<(TunnelPort, Option<UnderlayHop>)> {
        let mut out = Vec::new();
        for p in &self.ports {
            let Ok(Some(v)) = p.vxlan() else { continue };
            let port = TunnelPort {
                number: p.number,
                name: p.name.clone(),
                remote: v.remote.map_or(TunnelRemote::Flow, TunnelRemote::Fixed),
                local: v.local,
                key: v.key.map_or(TunnelKey::Flow, TunnelKey::Fixed),
                dst_port: v.dst_port,
            };
            let hop = v.static_hop.and_then(|(underlay, next_hop, local_mac)| {
                Some(UnderlayHop {
                    port: underlay,
                    src_mac: local_mac,
                    dst_mac: next_hop,
                    src_ip: v.local?,
                })
            });
            out.push((port, hop));
        }
        out
    }

    pub(crate) fn datapath_config(&self) -> DatapathConfig {
        DatapathConfig {
            emc: self.datapath.emc,
            emc_insert_inv_prob: self.datapath.emc_insert_inv_prob,
            smc_entries: self.datapath.smc_entries,
            megaflow_max: self.datapath.megaflow_max,
            max_masks: self.datapath.max_masks,
            revalidate_target_ms: self.datapath.revalidate_target_ms,
            miss: MissLimits {
                slow_path_share: self.datapath.slow_path_share,
                new_masks_per_sec: self.datapath.new_masks_per_sec,
                poll_quantum_cycles: self.datapath.poll_quantum_cycles,
                ..MissLimits::default()
            },
            mac_learning: flowpath_datapath::MacLearningConfig {
                max_entries: self.datapath.mac_table_size,
                aging: std::time::Duration::from_secs(self.datapath.mac_aging_secs),
            },
            ..DatapathConfig::default()
        }
    }
}

/// `MemAvailable` of a `/proc/meminfo`, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(n * 1024),
        None => Some(n),
        Some(_) => None,
    }
}

fn online_cpus() -> Option<usize> {
    // /sys/devices/system/cpu/online looks like "0-1" or "0,2-3".
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    let mut max = 0;
    for part in s.trim().split(',') {
        let hi = part.rsplit('-').next()?.parse::<usize>().ok()?;
        max = max.max(hi);
    }
    Some(max + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_reads_kilobytes() {
        let m =
            "MemTotal:       24609072 kB\nMemFree:         1000 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(mem_available(m), Some(20_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots kB\n"), None);
    }

    #[test]
    fn tables_that_do_not_fit_name_the_field_and_the_sizes() {
        let text = "[datapath]\nmegaflow_max = 1048576\nsmc_entries = 0\n\
                    [[port]]\nname = \"a\"\nnumber = 1\ntype = \"generator\"\n";
        let cfg = DaemonConfig::parse(text).expect("fits this host");
        // 1,048,576 megaflows × their entry's bytes, and the EMC.
        let entry = flowpath_datapath::MegaflowCache::bytes_for(1);
        let e = cfg.check_memory(200 << 20).unwrap_err();
        let want = cfg.datapath_config().memory_at_start().div_ceil(1 << 20);
        assert!(want > entry, "{want} MB for 1,048,576 entries of {entry} B");
        assert!(
            e.starts_with(&format!("datapath.megaflow_max: 1 worker(s) × {want} MB")),
            "{e}"
        );
        assert!(e.contains(&format!("× {entry} B")), "{e}");
        assert!(e.contains("more than the 200 MB"), "{e}");
        assert!(cfg.check_memory(want << 21).is_ok());
    }

    #[test]
    fn openflow_tls_and_connection_limit_keys() {
        let port = "[[port]]\nname = \"a\"\nnumber = 1\ntype = \"generator\"\n";
        let text = format!(
            "[switch]\nopenflow = [\"pssl:6653\", \"ssl:10.0.0.9\"]\n\
             openflow_private_key = \"k.pem\"\nopenflow_certificate = \"c.pem\"\n\
             openflow_ca_cert = \"ca.pem\"\nopenflow_max_connections = 5\n{port}"
        );
        let of = DaemonConfig::parse(&text)
            .unwrap()
            .openflow_config()
            .unwrap();
        assert_eq!(of.max_connections, 5);
        let tls = of.tls.unwrap();
        assert_eq!(tls.ca_cert, Path::new("ca.pem"));
        assert_eq!(of.targets[1].to_string(), "ssl:10.0.0.9:6653");
        let e = DaemonConfig::parse(&format!(
            "[switch]\nopenflow_private_key = \"k.pem\"\n{port}"
        ))
        .unwrap_err();
        assert!(
            e.contains("switch.openflow_private_key") && e.contains("all three"),
            "{e}"
        );
        let e = DaemonConfig::parse(&format!("[switch]\nopenflow_max_connections = 0\n{port}"))
            .unwrap_err();
        assert!(e.contains("switch.openflow_max_connections"), "{e}");
    }
}
