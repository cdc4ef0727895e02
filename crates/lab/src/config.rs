//! What a lab run is asked to do: the cases, the generator, the systems and CPUs, and the
//! checks before anything is set up.

use crate::peers::{XdpBuild, SETUP_SCRIPT};
use crate::{sh, systems};
use std::path::{Path, PathBuf};

/// The two workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// Established flows (`--flows`, default 1,000): every packet a cache hit.
    Hit,
    /// Every packet a new flow (a new source address).
    Miss,
}

impl Case {
    pub fn name(self) -> &'static str {
        match self {
            Case::Hit => "hit",
            Case::Miss => "miss",
        }
    }

    pub fn parse(s: &str) -> Result<Case, String> {
        match s.trim() {
            "hit" => Ok(Case::Hit),
            "miss" => Ok(Case::Miss),
            o => Err(format!("unknown case '{o}' (hit, miss)")),
        }
    }
}

/// The traffic class: what the frames are and what the switch does with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// UDP over IPv4, forwarded as it is (the lab's original traffic).
    Ipv4,
    /// UDP over IPv6, forwarded as it is.
    Ipv6,
    /// VXLAN over IPv4 (UDP 4789, VNI [`VXLAN_VNI`]) carrying UDP/IPv4 in on swin,
    /// decapsulated through a VXLAN tunnel port; the inner frame goes out of swout.
    VxlanDecap,
    /// UDP/IPv4 in on swin, output to a VXLAN tunnel port whose underlay is swout: every
    /// frame leaves encapsulated (50 bytes more).
    VxlanEncap,
    /// The IPv4 class's frames through a stateful firewall: connection tracking in zone 1,
    /// new connections from swin committed, established ones let through (the security-group
    /// flows of [`crate::systems::FLOWS_CT`]; Linux: nftables `ct state`). In `hit` every
    /// packet belongs to a tracked connection; in `miss` every packet starts a new one.
    Ipv4Ct,
}

/// The VNI of the VXLAN classes' tunnel.
pub const VXLAN_VNI: u32 = 42;
/// Bytes VXLAN over IPv4 puts in front of a frame: Ethernet, IPv4, UDP, VXLAN.
pub const VXLAN4_OVERHEAD: u64 = 14 + 20 + 8 + 8;

impl Class {
    pub const ALL: [Class; 5] = [
        Class::Ipv4,
        Class::Ipv6,
        Class::VxlanDecap,
        Class::VxlanEncap,
        Class::Ipv4Ct,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Ipv4 => "ipv4",
            Class::Ipv6 => "ipv6",
            Class::VxlanDecap => "vxlan_decap",
            Class::VxlanEncap => "vxlan_encap",
            Class::Ipv4Ct => "ipv4_ct",
        }
    }

    pub fn parse(s: &str) -> Result<Class, String> {
        let s = s.trim();
        Class::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                format!("unknown class '{s}' (ipv4, ipv6, vxlan_decap, vxlan_encap, ipv4_ct)")
            })
    }

    /// Does the switch track connections for it (so only a stateful switch can do it)?
    pub fn is_stateful(self) -> bool {
        self == Class::Ipv4Ct
    }

    /// The class whose frames the generator sends for this one (the stateful class sends
    /// the IPv4 class's).
    pub fn frames(self) -> Class {
        match self {
            Class::Ipv4Ct => Class::Ipv4,
            c => c,
        }
    }

    /// Does the switch handle a tunnel (so only a switch with VXLAN ports can do it)?
    pub fn is_vxlan(self) -> bool {
        matches!(self, Class::VxlanDecap | Class::VxlanEncap)
    }
}

/// Which generator to drive the switches with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenChoice {
    /// `flowpath gen --tx` when available, else trafgen.
    Auto,
    Flowpath,
    Trafgen,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct LabConfig {
    /// Names from `systems::SYSTEMS`.
    pub systems: Vec<String>,
    pub cases: Vec<Case>,
    /// Traffic classes (each system runs every class and case).
    pub classes: Vec<Class>,
    /// Seconds per measurement window.
    pub duration: f64,
    /// Windows per system and case.
    pub runs: usize,
    /// Take the windows in rounds: every system, class and case runs one window per
    /// round (its own start and warm-up each time), so a slow spell of a shared machine
    /// falls on every row alike instead of on one system's block of windows.
    pub interleave: bool,
    /// Seconds of traffic before the first window.
    pub warmup: f64,
    /// Established flows in the hit case.
    pub flows: u32,
    pub switch_cpu: usize,
    pub gen_cpu: usize,
    /// The flowpath binary (`flowpath switch`, `flowpath gen`).
    pub exe: PathBuf,
    pub ovs_xdp_mode: String,
    pub generator: GenChoice,
    /// Pace the generator(s) to this many packets per second in all (`flowpath gen
    /// --rate`, shared evenly when there are several); None: as fast as they go. Paced
    /// near a switch's capacity, the switch CPU's cycles per packet are its own work, not
    /// also the contention an overloading generator causes (see docs/xdp-tier.md).
    pub gen_rate: Option<f64>,
    /// Visit the hit case's flows in random order (`flowpath gen --order random`), not
    /// round-robin: entries laid out in the order the flows arrived (the XDP tier's, a
    /// megaflow cache's) are then not read as a stream the prefetcher runs ahead of.
    pub random_order: bool,
    /// Time the XDP program on the switch's ingress (`swin`) in each window with the
    /// kernel's run-time statistics (BPF_ENABLE_STATS, on for the lab's run only):
    /// nanoseconds a run, the program's own cost without the driver's and the stack's.
    /// The statistics raise every XDP row's cycles too (each program on the path reads
    /// the clock twice a run), so such rows compare with each other only.
    pub prog_time: bool,
    /// Run `swin`'s receive (NAPI: XDP programs, the copy into AF_XDP sockets, the
    /// kernel stack) in a thread pinned to the switch CPU, so that every system's
    /// figure is one core's work. False: it runs in the generator CPU's softirq, as a
    /// veth does by default, and is in no system's figure.
    pub napi_on_switch_cpu: bool,
    /// Which of this binary's XDP programs were compiled (the binary knows; the default
    /// assumes the ports' and the tier's match the lab's own).
    pub xdp_build: XdpBuild,
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            systems: systems::SYSTEMS.iter().map(|s| s.to_string()).collect(),
            cases: vec![Case::Hit, Case::Miss],
            classes: vec![Class::Ipv4],
            duration: 5.0,
            runs: 3,
            interleave: false,
            warmup: 2.0,
            flows: 1000,
            switch_cpu: 1,
            gen_cpu: 0,
            exe: std::env::current_exe().unwrap_or_else(|_| "flowpath".into()),
            ovs_xdp_mode: "native".into(),
            generator: GenChoice::Auto,
            gen_rate: None,
            random_order: false,
            prog_time: false,
            napi_on_switch_cpu: true,
            xdp_build: XdpBuild::assumed(),
        }
    }
}

/// Is this process root (the lab needs it)?
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Checks before anything is built: root, `ip`, a known system list.
pub fn preflight(cfg: &LabConfig) -> Result<(), String> {
    if !is_root() {
        return Err("the lab needs root (network namespaces, XDP, huge pages)".into());
    }
    if sh::which("ip").is_none() {
        return Err(format!("`ip` (iproute2) not found: run {SETUP_SCRIPT}"));
    }
    for s in &cfg.systems {
        if !systems::SYSTEMS.contains(&s.as_str()) {
            return Err(format!(
                "unknown system '{s}' (known: {})",
                systems::SYSTEMS.join(", ")
            ));
        }
    }
    if cfg.runs == 0 || cfg.duration <= 0.0 {
        return Err("--runs and --duration must be positive".into());
    }
    Ok(())
}

/// Write an XDP object to `dir`; None when it was not built.
pub(crate) fn xdp_object(dir: &Path, name: &str, bytes: &[u8]) -> Option<PathBuf> {
    if bytes.is_empty() {
        return None;
    }
    let p = dir.join(name);
    std::fs::write(&p, bytes).ok()?;
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_parse() {
        assert_eq!(Case::parse("hit"), Ok(Case::Hit));
        assert_eq!(Case::parse(" miss"), Ok(Case::Miss));
        assert!(Case::parse("mixed").is_err());
    }

    #[test]
    fn classes_parse() {
        assert_eq!(Class::parse("ipv4"), Ok(Class::Ipv4));
        assert_eq!(Class::parse(" vxlan_decap"), Ok(Class::VxlanDecap));
        assert_eq!(Class::parse("vxlan_encap"), Ok(Class::VxlanEncap));
        assert_eq!(Class::parse("ipv6"), Ok(Class::Ipv6));
        assert!(Class::parse("vxlan").unwrap_err().contains("vxlan_decap"));
        for c in Class::ALL {
            assert_eq!(Class::parse(c.name()), Ok(c));
        }
        assert_eq!(LabConfig::default().classes, vec![Class::Ipv4]);
    }
}
