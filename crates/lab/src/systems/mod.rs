//! The switches under test, each started inside the `sw` namespace on `swin` -> `swout`
//! and stopped again: flowpath (AF_XDP or AF_PACKET ports), Open vSwitch's user-space
//! datapath with afxdp ports, DPDK testpmd io-forward over net_af_xdp, Linux forwarding.

mod flowpath;
mod linux;
mod ovs;
mod testpmd;

pub use flowpath::{
    flowpath_config, parse_flowpath_stats, parse_worker_packets, Flowpath, FlowpathCounters,
    XdpForward,
};
pub use linux::{Linux, LINUX_BACKLOG};
pub use ovs::Ovs;
pub(crate) use testpmd::HugePages;
pub use testpmd::Testpmd;

use crate::pmdperf;
use crate::sh;
use crate::topo::{
    self, Topology, SINK_IP, SINK_MAC, SWIN_IF, SWIN_IP, SWOUT_IF, SWOUT_IP, SWOUT_MAC,
};
use crate::VXLAN_VNI;
use crate::{Case, Class};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The rules every switch runs, in ovs-ofctl syntax with port numbers (1 = swin, 2 =
/// swout). The never-hit priority-200 rule on `nw_src` makes a cache that un-wildcards
/// what it looked at keep the source address in each megaflow, so in the `miss` case
/// (a new source per packet) every packet is a new megaflow, as it is a new 5-tuple.
/// Prefix tracking would un-wildcard only the bits that tell a source from 10.10.1.254
/// (one megaflow for all of 10.1.0.0/16), so OVS runs with `prefixes=none` and flowpath
/// with `classifier = "tss-whole-masks"`.
pub const FLOWS: &str = "\
priority=200,ip,in_port=1,nw_src=10.10.1.254,actions=drop
priority=100,in_port=1,actions=output:2
priority=0,actions=drop
";

/// The IPv6 class's rules: the same three, with the never-hit rule on `ipv6_src` (outside
/// the generator's source addresses, 2001:db8:1::/64).
pub const FLOWS_IPV6: &str = "\
priority=200,ipv6,in_port=1,ipv6_src=2001:db8:ff::fe,actions=drop
priority=100,in_port=1,actions=output:2
priority=0,actions=drop
";

/// The outer destination of the decap class's VXLAN frames (the generator's outer
/// endpoints are 172.16.0.1 -> 172.16.0.2; with one outer source port the generator's
/// flows count up the outer source address from 172.16.0.1).
pub const VXLAN_DECAP_LOCAL: &str = "172.16.0.2";

/// The VXLAN tunnel port's number in the switches that have one.
pub const TUNNEL_PORT: u32 = 10;

/// Decap: what arrives through the tunnel port (10) goes out of swout; the never-hit rule
/// on the outer source (`tun_src`) keeps it in every megaflow, so each remote VTEP the
/// generator's flows come from is a megaflow (and in `miss` each packet a new one).
pub const FLOWS_VXLAN_DECAP: &str = "\
priority=200,in_port=10,tun_src=10.10.1.254,actions=drop
priority=100,in_port=10,actions=output:2
priority=0,actions=drop
";

/// Encap: the IPv4 rules with output to the tunnel port (10), whose underlay is swout.
pub const FLOWS_VXLAN_ENCAP: &str = "\
priority=200,ip,in_port=1,nw_src=10.10.1.254,actions=drop
priority=100,in_port=1,actions=output:10
priority=0,actions=drop
";

/// The stateful class's rules: a two-pass security group in OVS's model. Table 0 sends
/// every untracked IP packet through the connection tracker in zone 1 and on to table 1;
/// there new connections from swin are committed and forwarded, established ones (either
/// direction) forwarded, anything else dropped. The never-hit rule on `nw_src` plays the
/// part it plays in [`FLOWS`] for the second pass's megaflows.
pub const FLOWS_CT: &str = "\
table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1,zone=1)
table=0,priority=0,actions=drop
table=1,priority=200,ip,in_port=1,nw_src=10.10.1.254,actions=drop
table=1,priority=100,ip,in_port=1,ct_state=+trk+new,actions=ct(commit,zone=1),output:2
table=1,priority=100,ip,in_port=1,ct_state=+trk+est,actions=output:2
table=1,priority=100,ip,in_port=2,ct_state=+trk+est,actions=output:1
table=1,priority=0,actions=drop
";

/// The rules for a class.
pub fn flows(class: Class) -> &'static str {
    match class {
        Class::Ipv4Ct => FLOWS_CT,
        Class::Ipv4 => FLOWS,
        Class::Ipv6 => FLOWS_IPV6,
        Class::VxlanDecap => FLOWS_VXLAN_DECAP,
        Class::VxlanEncap => FLOWS_VXLAN_ENCAP,
    }
}

/// A switch's own account of a measurement window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Own {
    pub cycles_per_packet: Option<f64>,
    pub packets: u64,
    pub upcalls: u64,
    pub lost_upcalls: u64,
    /// Packets per worker, when it has more than one.
    pub worker_packets: Vec<u64>,
}

/// What the lab hands each system.
pub struct Ctx<'a> {
    pub topo: &'a Topology,
    pub switch_cpu: usize,
    pub gen_cpu: usize,
    /// The flowpath binary (for `flowpath switch`).
    pub exe: &'a Path,
    /// OVS afxdp `options:xdp-mode`.
    pub ovs_xdp_mode: &'a str,
    /// The traffic class being run.
    pub class: Class,
}

impl Ctx<'_> {
    /// The CPUs of `n` workers: the switch CPU for one; for two the generator's CPU and
    /// the switch CPU in ascending order, so that worker q is on the CPU whose XDP frames
    /// land on rx queue q (CPU % 2 for CPUs 0 and 1).
    pub fn worker_cpus(&self, n: usize) -> Vec<usize> {
        worker_cpus(self.switch_cpu, self.gen_cpu, n)
    }
}

/// [`Ctx::worker_cpus`].
pub fn worker_cpus(switch_cpu: usize, gen_cpu: usize, n: usize) -> Vec<usize> {
    if n <= 1 {
        return vec![switch_cpu];
    }
    let mut v = vec![gen_cpu, switch_cpu];
    v.sort_unstable();
    v
}

/// One switch under test.
pub trait Switch {
    /// Why this switch cannot run `class` ("n/a" rows), or None when it can.
    fn cannot(&self, class: Class) -> Option<String> {
        (class != Class::Ipv4).then(|| "not set up for this class".into())
    }
    /// Start it for `case` (fresh each case: no cache carried over); Ok once forwarding.
    fn start(&mut self, ctx: &Ctx, case: Case) -> Result<(), String>;
    /// Still running? (checked after the warm-up and after each window)
    fn check(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Just before a measurement window (OVS clears its PMD statistics here).
    fn before_window(&mut self, _ctx: &Ctx) {}
    /// Just after a window: the system's own account of it, when it keeps one.
    fn after_window(&mut self, _ctx: &Ctx) -> Option<Own> {
        None
    }
    /// Stop it and undo its setup in the `sw` namespace.
    fn stop(&mut self, ctx: &Ctx);
    /// Remarks for the table (modes chosen, fallbacks taken).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Worker threads (with one generator per worker CPU when more than one, see
    /// [`Ctx::worker_cpus`]).
    fn workers(&self) -> usize {
        1
    }
}

/// flowpath-afxdp with two workers: both veth pairs on the switch's path get two queues,
/// one per worker, and a generator on each worker's CPU feeds one rx queue of swin.
pub const TWO_WORKERS: &str = "flowpath-afxdp-2w";

/// Names accepted by `--systems`, in the order they run.
pub const SYSTEMS: &[&str] = &[
    "generator",
    "trafgen",
    "linux",
    "ovs-afxdp",
    "testpmd-afxdp",
    "flowpath-afxdp",
    TWO_WORKERS,
    "flowpath-afpacket",
    "flowpath-xdp",
    "xdp-forward",
    PARSE_FORWARD,
];

/// `flowpath xdp-forward --parse`: the XDP tier's parser, then the redirect.
pub const PARSE_FORWARD: &str = "xdp-parse-forward";

/// The switch for a name of `SYSTEMS` (not the two generator rows).
pub fn make(name: &str) -> Option<Box<dyn Switch>> {
    Some(match name {
        "linux" => Box::new(Linux),
        "ovs-afxdp" => Box::<Ovs>::default(),
        "testpmd-afxdp" => Box::<Testpmd>::default(),
        "flowpath-afxdp" => Box::new(Flowpath::new("afxdp")),
        TWO_WORKERS => Box::new(Flowpath::with_workers(2)),
        "flowpath-afpacket" => Box::new(Flowpath::new("afpacket")),
        "flowpath-xdp" => Box::new(Flowpath::with_xdp_tier()),
        "xdp-forward" => Box::<XdpForward>::default(),
        PARSE_FORWARD => Box::new(XdpForward::parsing()),
        _ => return None,
    })
}

/// Remove any XDP program (native or generic) a previous system left on the switch ports,
/// and GRO and threaded NAPI the lab may have turned on.
pub fn reset_switch_ports(t: &Topology) {
    for ifname in [SWIN_IF, SWOUT_IF] {
        t.napi_unthreaded(&t.sw, ifname);
        for mode in ["xdp", "xdpgeneric"] {
            let _ = sh::ip(&["-n", &t.sw, "link", "set", "dev", ifname, mode, "off"]);
        }
        let _ = sh::run(Some(&t.sw), "ethtool", &["-K", ifname, "gro", "off"]);
        let _ = sh::ip(&["-n", &t.sw, "link", "set", "dev", ifname, "up"]);
    }
}

fn in_sw(ctx: &Ctx, prog: &str, args: &[&str]) -> Result<String, String> {
    sh::run(Some(&ctx.topo.sw), prog, args)
}

fn cpu_mask(cpu: usize) -> String {
    format!("{:x}", 1u64 << cpu)
}

// ---------------------------------------------------------------------------------------
// Linux

/// Lines a child printed on stdout, collected by a thread.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    /// Collect `child`'s stdout (which must be piped), echoing nothing.
    pub fn collect(child: &mut Child) -> Lines {
        let lines = Lines::default();
        if let Some(out) = child.stdout.take() {
            let l = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    let mut v = l.0.lock().unwrap_or_else(|e| e.into_inner());
                    if v.len() > 10_000 {
                        v.drain(..5_000);
                    }
                    v.push(line);
                }
            });
        }
        lines
    }

    /// Does any line so far satisfy `f`?
    pub fn any(&self, f: impl Fn(&str) -> bool) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|l| f(l))
    }

    /// The last `n` non-empty lines, joined.
    pub fn tail(&self, n: usize) -> String {
        let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let v: Vec<&String> = v.iter().filter(|l| !l.trim().is_empty()).collect();
        v[v.len().saturating_sub(n)..]
            .iter()
            .map(|s| s.trim())
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_parse_in_flowpaths_syntax() {
        for class in Class::ALL {
            let text = flows(class);
            let flows =
                flowpath_flowsyntax::parse_flows_file(text, flowpath_flowsyntax::FlowCommand::Add)
                    .unwrap_or_else(|e| panic!("flowpath accepts the {} flows: {e}", class.name()));
            assert_eq!(flows.len(), text.lines().count());
        }
        assert!(flows(Class::VxlanEncap).contains("output:10"));
        assert!(flows(Class::VxlanDecap).contains("in_port=10,actions=output:2"));
    }

    #[test]
    fn which_system_can_run_which_class() {
        for s in SYSTEMS.iter().filter_map(|s| make(s)) {
            assert!(s.cannot(Class::Ipv4).is_none());
        }
        let can = |name: &str, c: Class| make(name).unwrap().cannot(c).is_none();
        for fp in ["flowpath-afxdp", "flowpath-afpacket", "flowpath-xdp"] {
            for c in Class::ALL {
                assert!(can(fp, c), "{fp} {}", c.name());
            }
        }
        for other in [
            "linux",
            "ovs-afxdp",
            "testpmd-afxdp",
            "xdp-forward",
            PARSE_FORWARD,
        ] {
            assert!(!can(other, Class::VxlanDecap) && !can(other, Class::VxlanEncap));
        }
        assert!(can("testpmd-afxdp", Class::Ipv6) && can("ovs-afxdp", Class::Ipv6));
        assert!(can("ovs-afxdp", Class::Ipv4Ct));
        for stateless in ["testpmd-afxdp", "xdp-forward", PARSE_FORWARD] {
            assert!(!can(stateless, Class::Ipv4Ct), "{stateless}");
        }
        assert!(can(TWO_WORKERS, Class::Ipv4) && !can(TWO_WORKERS, Class::VxlanDecap));
        assert_eq!(make(TWO_WORKERS).unwrap().workers(), 2);
        assert_eq!(make("flowpath-afxdp").unwrap().workers(), 1);
    }

    #[test]
    fn flowpath_stats_sum_over_workers() {
        let j = r#"[{"busy_cycles": 100, "packets": 10, "upcalls": 2, "misses": 3, "core": 1},
                   {"busy_cycles": 50, "packets": 5, "upcalls": 1, "misses": 1}]"#;
        assert_eq!(
            parse_flowpath_stats(j),
            Some(FlowpathCounters {
                busy_cycles: 150,
                packets: 15,
                upcalls: 3,
                misses: 4,
                xdp_hits: 0,
            })
        );
        assert_eq!(parse_flowpath_stats("{}"), None);
        assert_eq!(parse_worker_packets(j), Some(vec![10, 5]));
    }

    #[test]
    fn flowpath_config_is_the_daemons_toml() {
        let c = flowpath_config(Path::new("/tmp/x"), "afxdp", &[1], false, Class::Ipv4);
        assert!(!c.contains("xdp_tier"));
        assert!(!c.contains("vxlan"));
        assert!(
            flowpath_config(Path::new("/tmp/x"), "afxdp", &[1], true, Class::Ipv4)
                .contains("[datapath]\nxdp_tier = true")
        );
        assert!(c.contains("state = \"/tmp/x/state\""));
        assert!(c.contains("control = \"/tmp/x/control.sock\""));
        assert!(c.contains("[[worker]]\ncore = 1"));
        assert_eq!(c.matches("[[port]]").count(), 2);
        assert_eq!(c.matches("type = \"afxdp\"").count(), 2);
        assert!(c.contains("number = 2"));
        assert!(!c.contains("queues"));
        let two = flowpath_config(Path::new("/tmp/x"), "afxdp", &[0, 1], false, Class::Ipv4);
        assert!(
            two.contains("[[worker]]\ncore = 0\n\n[[worker]]\ncore = 1"),
            "{two}"
        );
        assert_eq!(two.matches("queues = 2").count(), 2, "{two}");
        let cfg = flowpath_switch::config::DaemonConfig::parse(&two)
            .unwrap_or_else(|e| panic!("{e}:\n{two}"));
        assert_eq!(cfg.workers.len(), 2);
        assert!(cfg.ports.iter().all(|p| p.queues == 2));
        assert_eq!(worker_cpus(1, 0, 2), vec![0, 1]);
        assert_eq!(worker_cpus(1, 0, 1), vec![1]);
    }

    /// The daemon parses the lab's configs, tunnel ports included, to what they mean.
    #[test]
    fn the_vxlan_configs_parse_to_their_tunnel_ports() {
        use flowpath_datapath::{TunnelKey, TunnelRemote, UnderlayHop};
        use flowpath_switch::config::DaemonConfig;
        let parse = |class| {
            let toml = flowpath_config(Path::new("/tmp/x"), "afxdp", &[1], false, class);
            DaemonConfig::parse(&toml).unwrap_or_else(|e| panic!("{e}:\n{toml}"))
        };
        assert!(parse(Class::Ipv4).tunnel_ports().is_empty());
        assert!(parse(Class::Ipv6).tunnel_ports().is_empty());

        let cfg = parse(Class::VxlanDecap);
        let t = cfg.tunnel_ports();
        assert_eq!(t.len(), 1);
        let (p, hop) = &t[0];
        assert_eq!((p.number, p.dst_port), (TUNNEL_PORT, 4789));
        assert_eq!(p.remote, TunnelRemote::Flow);
        assert_eq!(p.local, Some(VXLAN_DECAP_LOCAL.parse().unwrap()));
        assert_eq!(p.key, TunnelKey::Fixed(VXLAN_VNI));
        assert!(hop.is_none(), "decap needs no underlay hop");

        let cfg = parse(Class::VxlanEncap);
        let t = cfg.tunnel_ports();
        let (p, hop) = &t[0];
        assert_eq!(p.remote, TunnelRemote::Fixed(SINK_IP.parse().unwrap()));
        assert_eq!(p.local, Some(SWOUT_IP.parse().unwrap()));
        let mac = |m: &str| -> [u8; 6] {
            let v: Vec<u8> = m
                .split(':')
                .map(|b| u8::from_str_radix(b, 16).unwrap())
                .collect();
            v.try_into().unwrap()
        };
        assert_eq!(
            *hop,
            Some(UnderlayHop {
                port: 2,
                src_mac: mac(SWOUT_MAC),
                dst_mac: mac(SINK_MAC),
                src_ip: SWOUT_IP.parse().unwrap(),
            })
        );
    }

    #[test]
    fn every_system_name_is_known() {
        for s in SYSTEMS {
            assert!(make(s).is_some() || s.ends_with("generator") || *s == "trafgen");
        }
        assert!(make("nope").is_none());
        assert_eq!(cpu_mask(1), "2");
        assert_eq!(cpu_mask(4), "10");
    }
}
