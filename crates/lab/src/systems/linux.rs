//! Linux IPv4 forwarding between the switch namespace's interfaces (RPS on the switch
//! CPU), the baseline with no user-space switch at all.

use super::*;

/// Plain Linux IPv4 forwarding in the `sw` namespace; RPS steers `swin`'s receive work to
/// the switch CPU (a veth's receive otherwise runs on the sender's CPU, the generator's).
pub struct Linux;

pub(super) const NETDEV_MAX_BACKLOG: &str = "/proc/sys/net/core/netdev_max_backlog";
/// The stateful class's firewall in the switch namespace (nf_conntrack through nftables):
/// the security group of [`super::FLOWS_CT`] — new connections from swin and established
/// or related packets either way pass, anything else is dropped.
const NFT_TABLE: &str = "fplab_ct";
const NFT_CT: &str = "\
table inet fplab_ct {
    chain forward {
        type filter hook forward priority 0; policy drop;
        ct state established,related accept
        iifname \"swin\" ct state new accept
    }
}
";

/// Per-CPU backlog for the Linux row (the default is 1,000).
pub const LINUX_BACKLOG: u32 = 30_000;

impl Switch for Linux {
    fn cannot(&self, class: Class) -> Option<String> {
        match class {
            Class::Ipv4 => None,
            Class::Ipv4Ct => sh::which("nft")
                .is_none()
                .then(|| "nft not found (apt-get install nftables)".into()),
            Class::Ipv6 => Some(
                "the lab's namespaces run without IPv6 (no neighbour discovery frames at the \
                 sink); Linux IPv6 forwarding is not set up"
                    .into(),
            ),
            Class::VxlanDecap | Class::VxlanEncap => {
                Some("would need a Linux vxlan device and routes through it: not set up".into())
            }
        }
    }

    fn start(&mut self, ctx: &Ctx, _case: Case) -> Result<(), String> {
        for kv in [
            "net.ipv4.ip_forward=1",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
            "net.ipv4.conf.swin.rp_filter=0",
            "net.ipv4.conf.swout.rp_filter=0",
        ] {
            in_sw(ctx, "sysctl", &["-qw", kv])?;
        }
        let sw = &ctx.topo.sw;
        sh::ip(&[
            "-n",
            sw,
            "addr",
            "replace",
            &format!("{SWIN_IP}/24"),
            "dev",
            SWIN_IF,
        ])?;
        sh::ip(&[
            "-n",
            sw,
            "addr",
            "replace",
            &format!("{SWOUT_IP}/24"),
            "dev",
            SWOUT_IF,
        ])?;
        sh::ip(&[
            "-n",
            sw,
            "neigh",
            "replace",
            SINK_IP,
            "lladdr",
            SINK_MAC,
            "dev",
            SWOUT_IF,
            "nud",
            "permanent",
        ])?;
        let rps = format!(
            "echo {} > /sys/class/net/{SWIN_IF}/queues/rx-0/rps_cpus",
            cpu_mask(ctx.switch_cpu)
        );
        in_sw(ctx, "sh", &["-c", &rps])?;
        // The switch CPU's backlog queue: at the default 1,000 packets, bursts handed over
        // by RPS overflow it while the CPU is not yet busy (set back when stopping).
        topo::set_file(Path::new(NETDEV_MAX_BACKLOG), &LINUX_BACKLOG.to_string())?;
        if ctx.class.is_stateful() {
            let file = ctx.topo.dir.join("linux-ct.nft");
            std::fs::write(&file, NFT_CT).map_err(|e| e.to_string())?;
            in_sw(ctx, "nft", &["-f", &file.to_string_lossy()])?;
        }
        Ok(())
    }

    fn stop(&mut self, ctx: &Ctx) {
        let sw = &ctx.topo.sw;
        let _ = in_sw(ctx, "sysctl", &["-qw", "net.ipv4.ip_forward=0"]);
        if ctx.class.is_stateful() {
            let _ = in_sw(ctx, "nft", &["delete", "table", "inet", NFT_TABLE]);
        }
        let _ = sh::ip(&["-n", sw, "neigh", "del", SINK_IP, "dev", SWOUT_IF]);
        let _ = sh::ip(&["-n", sw, "addr", "flush", "dev", SWIN_IF]);
        let _ = sh::ip(&["-n", sw, "addr", "flush", "dev", SWOUT_IF]);
        let _ = in_sw(
            ctx,
            "sh",
            &[
                "-c",
                &format!("echo 0 > /sys/class/net/{SWIN_IF}/queues/rx-0/rps_cpus"),
            ],
        );
        topo::restore_file(Path::new(NETDEV_MAX_BACKLOG));
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "route lookup per packet (no flow cache); RPS to the switch CPU, backlog {LINUX_BACKLOG}"
        )]
    }
}

// ---------------------------------------------------------------------------------------
// Open vSwitch
