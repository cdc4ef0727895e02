//! The switches under test, each started inside the `sw` namespace on `swin` -> `swout`
//! and stopped again: flowpath (AF_XDP or AF_PACKET ports), Open vSwitch's user-space
//! datapath with afxdp ports, DPDK testpmd io-forward over net_af_xdp, Linux forwarding.

use crate::pmdperf;
use crate::sh;
use crate::topo::{self, Topology, SINK_IP, SINK_MAC, SWIN_IF, SWIN_IP, SWOUT_IF, SWOUT_IP};
use crate::Case;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The rules every switch runs, in ovs-ofctl syntax with port numbers (1 = swin, 2 =
/// swout). The never-hit priority-200 rule on `nw_src` makes a cache that un-wildcards
/// what it looked at keep the source address in each megaflow, so in the `miss` case
/// (a new source per packet) every packet is a new megaflow, as it is a new 5-tuple.
pub const FLOWS: &str = "\
priority=200,ip,in_port=1,nw_src=10.10.1.254,actions=drop
priority=100,in_port=1,actions=output:2
priority=0,actions=drop
";

/// A switch's own account of a measurement window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Own {
    pub cycles_per_packet: Option<f64>,
    pub packets: u64,
    pub upcalls: u64,
    pub lost_upcalls: u64,
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
}

/// One switch under test.
pub trait Switch {
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
}

/// Names accepted by `--systems`, in the order they run.
pub const SYSTEMS: &[&str] = &[
    "generator",
    "trafgen",
    "linux",
    "ovs-afxdp",
    "testpmd-afxdp",
    "flowpath-afxdp",
    "flowpath-afpacket",
    "flowpath-xdp",
    "xdp-forward",
];

/// The switch for a name of `SYSTEMS` (not the two generator rows).
pub fn make(name: &str) -> Option<Box<dyn Switch>> {
    Some(match name {
        "linux" => Box::new(Linux),
        "ovs-afxdp" => Box::<Ovs>::default(),
        "testpmd-afxdp" => Box::<Testpmd>::default(),
        "flowpath-afxdp" => Box::new(Flowpath::new("afxdp")),
        "flowpath-afpacket" => Box::new(Flowpath::new("afpacket")),
        "flowpath-xdp" => Box::new(Flowpath::with_xdp_tier()),
        "xdp-forward" => Box::<XdpForward>::default(),
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

/// Plain Linux IPv4 forwarding in the `sw` namespace; RPS steers `swin`'s receive work to
/// the switch CPU (a veth's receive otherwise runs on the sender's CPU, the generator's).
pub struct Linux;

const NETDEV_MAX_BACKLOG: &str = "/proc/sys/net/core/netdev_max_backlog";
/// Per-CPU backlog for the Linux row (the default is 1,000).
pub const LINUX_BACKLOG: u32 = 30_000;

impl Switch for Linux {
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
        Ok(())
    }

    fn stop(&mut self, ctx: &Ctx) {
        let sw = &ctx.topo.sw;
        let _ = in_sw(ctx, "sysctl", &["-qw", "net.ipv4.ip_forward=0"]);
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

/// ovsdb-server and ovs-vswitchd with their own directories, a netdev bridge, afxdp ports.
#[derive(Default)]
pub struct Ovs {
    dir: PathBuf,
    children: Vec<Child>,
    notes: Vec<String>,
}

impl Ovs {
    fn env(&self, c: &mut std::process::Command) {
        for var in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            c.env(var, &self.dir);
        }
        c.env("OVS_PKGDATADIR", "/usr/share/openvswitch");
    }

    fn tool(&self, prog: &str, args: &[&str]) -> Result<String, String> {
        let mut c = sh::cmd_in(None, prog, args);
        self.env(&mut c);
        sh::output(c)
    }

    fn db(&self) -> String {
        format!("--db=unix:{}", self.dir.join("db.sock").display())
    }

    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let db = self.db();
        let mut a = vec![db.as_str(), "--timeout=30"];
        a.extend_from_slice(args);
        self.tool("ovs-vsctl", &a)
    }

    fn appctl(&self, args: &[&str]) -> Result<String, String> {
        let t = self.dir.join("ovs-vswitchd.ctl");
        let t = t.to_string_lossy();
        let mut a = vec!["-t", &*t];
        a.extend_from_slice(args);
        self.tool("ovs-appctl", &a)
    }

    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default();
        let errs: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("|ERR|") || l.contains("|EMER|") || l.contains("|WARN|"))
            .filter(|l| !l.contains("RLIMIT_MEMLOCK"))
            .collect();
        errs[errs.len().saturating_sub(3)..].join(" | ")
    }
}

impl Switch for Ovs {
    fn start(&mut self, ctx: &Ctx, case: Case) -> Result<(), String> {
        for p in [
            "ovsdb-tool",
            "ovsdb-server",
            "ovs-vswitchd",
            "ovs-vsctl",
            "ovs-ofctl",
        ] {
            sh::which(p).ok_or_else(|| format!("{p} not found (install openvswitch-switch)"))?;
        }
        let schema = Path::new("/usr/share/openvswitch/vswitch.ovsschema");
        if !schema.exists() {
            return Err(format!("{} not found", schema.display()));
        }
        self.dir = ctx.topo.dir.join(format!("ovs-{}", case.name()));
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        let dir = self.dir.clone();
        let d = |f: &str| dir.join(f).to_string_lossy().into_owned();
        self.tool(
            "ovsdb-tool",
            &["create", &d("conf.db"), &schema.to_string_lossy()],
        )?;
        let cpu = ctx.switch_cpu.to_string();
        let log = |name: &str| -> Result<Stdio, String> {
            std::fs::File::create(dir.join(name))
                .map(Stdio::from)
                .map_err(|e| e.to_string())
        };
        let mut c = sh::cmd_in(
            Some(&ctx.topo.sw),
            "taskset",
            &[
                "-c",
                &cpu,
                "ovsdb-server",
                &d("conf.db"),
                &format!("--remote=punix:{}", d("db.sock")),
                &format!("--unixctl={}", d("ovsdb-server.ctl")),
                &format!("--pidfile={}", d("ovsdb-server.pid")),
                &format!("--log-file={}", d("ovsdb-server.log")),
            ],
        );
        self.env(&mut c);
        self.children.push(sh::spawn(
            c,
            log("ovsdb-server.out")?,
            log("ovsdb-server.err")?,
        )?);
        let sock = self.dir.join("db.sock");
        sh::wait_for(Duration::from_secs(10), || sock.exists().then_some(()))
            .ok_or("ovsdb-server did not create its socket in 10 s")?;
        self.vsctl(&["--no-wait", "init"])?;
        self.vsctl(&[
            "--no-wait",
            "set",
            "Open_vSwitch",
            ".",
            &format!("other_config:pmd-cpu-mask=0x{}", cpu_mask(ctx.switch_cpu)),
        ])?;
        // The whole daemon on the switch CPU: PMD, revalidators and main thread share one
        // core, as every other system's work does.
        let mut c = sh::cmd_in(
            Some(&ctx.topo.sw),
            "taskset",
            &[
                "-c",
                &cpu,
                "ovs-vswitchd",
                &format!("unix:{}", d("db.sock")),
                &format!("--unixctl={}", d("ovs-vswitchd.ctl")),
                &format!("--pidfile={}", d("ovs-vswitchd.pid")),
                &format!("--log-file={}", d("ovs-vswitchd.log")),
            ],
        );
        self.env(&mut c);
        self.children.push(sh::spawn(
            c,
            log("ovs-vswitchd.out")?,
            log("ovs-vswitchd.err")?,
        )?);
        let ctl = self.dir.join("ovs-vswitchd.ctl");
        sh::wait_for(Duration::from_secs(15), || ctl.exists().then_some(()))
            .ok_or_else(|| format!("ovs-vswitchd did not start: {}", self.log_tail()))?;
        self.vsctl(&[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
        ])?;
        // Exact source addresses in megaflows (no prefix tries): see FLOWS.
        self.vsctl(&[
            "--",
            "--id=@ft",
            "create",
            "Flow_Table",
            "prefixes=none",
            "--",
            "set",
            "Bridge",
            "br0",
            "flow_tables:0=@ft",
        ])?;
        let mode = format!("options:xdp-mode={}", ctx.ovs_xdp_mode);
        for (ifname, ofport) in [(SWIN_IF, "1"), (SWOUT_IF, "2")] {
            self.vsctl(&[
                "add-port",
                "br0",
                ifname,
                "--",
                "set",
                "interface",
                ifname,
                "type=afxdp",
                &format!("ofport_request={ofport}"),
                &mode,
            ])?;
        }
        for ifname in [SWIN_IF, SWOUT_IF] {
            let err = self.vsctl(&["get", "interface", ifname, "error"])?;
            let err = err.trim();
            if !err.is_empty() && err != "[]" {
                return Err(format!(
                    "afxdp port {ifname} (xdp-mode={}): {err}",
                    ctx.ovs_xdp_mode
                ));
            }
            let ofport = self.vsctl(&["get", "interface", ifname, "ofport"])?;
            if ofport.trim() == "-1" {
                return Err(format!("afxdp port {ifname}: {}", self.log_tail()));
            }
        }
        let flows = self.dir.join("flows.txt");
        std::fs::write(&flows, FLOWS).map_err(|e| e.to_string())?;
        let mgmt = format!("unix:{}", d("br0.mgmt"));
        self.tool("ovs-ofctl", &["del-flows", &mgmt])?;
        self.tool("ovs-ofctl", &["add-flows", &mgmt, &flows.to_string_lossy()])?;
        let status = self
            .vsctl(&["get", "interface", SWIN_IF, "status"])
            .unwrap_or_default();
        self.notes = vec![format!("afxdp xdp-mode={}", ctx.ovs_xdp_mode)];
        if let Some(m) = status
            .split([',', '{', '}'])
            .map(str::trim)
            .find(|kv| kv.starts_with("xdp-mode"))
        {
            self.notes = vec![format!("afxdp {}", m.replace('"', ""))];
        }
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        for c in &mut self.children {
            if let Ok(Some(st)) = c.try_wait() {
                return Err(format!("an OVS daemon exited ({st}): {}", self.log_tail()));
            }
        }
        Ok(())
    }

    fn before_window(&mut self, _ctx: &Ctx) {
        let _ = self.appctl(&["dpif-netdev/pmd-stats-clear"]);
    }

    fn after_window(&mut self, _ctx: &Ctx) -> Option<Own> {
        let text = self.appctl(&["dpif-netdev/pmd-perf-show"]).ok()?;
        let _ = std::fs::write(self.dir.join("pmd-perf-show.txt"), &text);
        let p = pmdperf::parse(&text);
        Some(Own {
            cycles_per_packet: p.cycles_per_packet(),
            packets: p.rx_packets(),
            upcalls: p.upcalls(),
            lost_upcalls: p.pmds.iter().map(|t| t.lost_upcalls).sum(),
        })
    }

    fn stop(&mut self, ctx: &Ctx) {
        let _ = self.appctl(&["exit", "--cleanup"]);
        for c in self.children.iter_mut().rev() {
            sh::stop(c, libc::SIGTERM, Duration::from_secs(5));
        }
        self.children.clear();
        reset_switch_ports(ctx.topo);
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

// ---------------------------------------------------------------------------------------
// DPDK testpmd

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

/// Reserve huge pages and mount a private hugetlbfs; undone by `release`.
struct HugePages {
    mount: PathBuf,
    restore: Option<u64>,
}

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn free_hugepages() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("HugePages_Free:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

impl HugePages {
    fn reserve(dir: &Path, pages: u64) -> Result<HugePages, String> {
        let before = read_u64(NR_HUGEPAGES).ok_or("cannot read nr_hugepages")?;
        let mut restore = None;
        if free_hugepages() < pages {
            topo::register_hugepages_restore(before);
            restore = Some(before);
            std::fs::write(NR_HUGEPAGES, (before + pages).to_string())
                .map_err(|e| format!("{NR_HUGEPAGES}: {e}"))?;
            if free_hugepages() < pages {
                return Err(format!(
                    "could reserve only {} of {pages} huge pages",
                    free_hugepages()
                ));
            }
        }
        let mount = dir.join("huge");
        std::fs::create_dir_all(&mount).map_err(|e| e.to_string())?;
        sh::run(
            None,
            "mount",
            &[
                "-t",
                "hugetlbfs",
                "-o",
                "pagesize=2M",
                "nodev",
                &mount.to_string_lossy(),
            ],
        )?;
        topo::register_mount(&mount);
        Ok(HugePages { mount, restore })
    }

    fn release(self) {
        let _ = sh::run(None, "umount", &[&self.mount.to_string_lossy()]);
        topo::unregister_mount(&self.mount);
        if let Some(n) = self.restore {
            let _ = std::fs::write(NR_HUGEPAGES, n.to_string());
            topo::take_hugepages_restore();
        }
    }
}

/// `dpdk-testpmd` io-forward between two net_af_xdp ports, main lcore on the generator's
/// CPU (it only prints statistics), the forwarding lcore on the switch CPU.
#[derive(Default)]
pub struct Testpmd {
    child: Option<Child>,
    lines: Lines,
    huge: Option<HugePages>,
    notes: Vec<String>,
}

impl Switch for Testpmd {
    fn start(&mut self, ctx: &Ctx, case: Case) -> Result<(), String> {
        let exe = sh::which("dpdk-testpmd").ok_or("dpdk-testpmd not found (install dpdk-dev)")?;
        let dir = ctx.topo.dir.join(format!("testpmd-{}", case.name()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let huge = HugePages::reserve(&dir, 256)?;
        let lcores = format!("{},{}", ctx.gen_cpu, ctx.switch_cpu);
        let main = ctx.gen_cpu.to_string();
        let prefix = format!("{}{}", ctx.topo.id, case.name());
        let huge_dir = huge.mount.to_string_lossy().into_owned();
        self.huge = Some(huge);
        let args = [
            "-l",
            &lcores,
            "--main-lcore",
            &main,
            "-n",
            "1",
            "--no-pci",
            "--file-prefix",
            &prefix,
            "--huge-dir",
            &huge_dir,
            "--vdev",
            "net_af_xdp0,iface=swin,start_queue=0,queue_count=1",
            "--vdev",
            "net_af_xdp1,iface=swout,start_queue=0,queue_count=1",
            "--",
            "--forward-mode=io",
            "--auto-start",
            "--stats-period=1",
            "--nb-cores=1",
            "--total-num-mbufs=16384",
        ];
        let exe = exe.to_string_lossy();
        let c = sh::cmd_in(Some(&ctx.topo.sw), &exe, &args);
        let err = std::fs::File::create(dir.join("testpmd.err")).map_err(|e| e.to_string())?;
        let mut child = sh::spawn(c, Stdio::piped(), Stdio::from(err))?;
        self.lines = Lines::collect(&mut child);
        self.child = Some(child);
        let lines = self.lines.clone();
        let ready = sh::wait_for(Duration::from_secs(30), || {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    return Some(Err(format!("testpmd exited ({st})")));
                }
            }
            lines
                .any(|l| l.contains("Port statistics") || l.contains("packet forwarding - ports"))
                .then_some(Ok(()))
        });
        match ready {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(format!(
                "{e}: {} {}",
                self.lines.tail(3),
                crate::generator::tail(&dir.join("testpmd.err"), 3)
            )),
            None => Err(format!(
                "testpmd did not start forwarding in 30 s: {}",
                self.lines.tail(3)
            )),
        }
        .inspect(|_| {
            self.notes = vec!["io-fwd, main lcore on the generator CPU".into()];
        })
    }

    fn check(&mut self) -> Result<(), String> {
        match self.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(Some(st))) => Err(format!("testpmd exited ({st}): {}", self.lines.tail(3))),
            _ => Ok(()),
        }
    }

    fn stop(&mut self, ctx: &Ctx) {
        if let Some(mut c) = self.child.take() {
            sh::stop(&mut c, libc::SIGINT, Duration::from_secs(5));
        }
        if let Some(h) = self.huge.take() {
            h.release();
        }
        reset_switch_ports(ctx.topo);
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

// ---------------------------------------------------------------------------------------
// flowpath

/// A `flowpath` subcommand running in the `sw` namespace that prints "ready" when set up.
struct FlowpathProcess {
    child: Child,
    err_log: PathBuf,
    what: &'static str,
}

impl FlowpathProcess {
    /// Start `flowpath <args>` (pinned to `cpu` when given) and wait for its "ready".
    fn start(
        ctx: &Ctx,
        cpu: Option<usize>,
        args: &[&str],
        err_log: PathBuf,
        what: &'static str,
        timeout: Duration,
    ) -> Result<FlowpathProcess, String> {
        let exe = ctx.exe.to_string_lossy();
        let cpu = cpu.map(|c| c.to_string());
        let mut argv: Vec<&str> = Vec::new();
        if let Some(c) = &cpu {
            argv.extend(["-c", c, &exe]);
        }
        argv.extend(args);
        let prog = if cpu.is_some() { "taskset" } else { &exe };
        let c = sh::cmd_in(Some(&ctx.topo.sw), prog, &argv);
        let err = std::fs::File::create(&err_log).map_err(|e| e.to_string())?;
        let mut child = sh::spawn(c, Stdio::piped(), Stdio::from(err))?;
        let lines = Lines::collect(&mut child);
        let mut p = FlowpathProcess {
            child,
            err_log,
            what,
        };
        let ready = sh::wait_for(timeout, || {
            if let Err(e) = p.check() {
                return Some(Err(e));
            }
            lines
                .any(|l| l.trim_start().starts_with("ready"))
                .then_some(Ok(()))
        });
        let r = ready.unwrap_or_else(|| {
            Err(format!(
                "{what} printed no \"ready\" in {} s: {}",
                timeout.as_secs(),
                crate::generator::tail(&p.err_log, 3)
            ))
        });
        match r {
            Ok(()) => Ok(p),
            Err(e) => {
                p.stop();
                Err(e)
            }
        }
    }

    /// Err once it has exited, with the end of its stderr.
    fn check(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(st)) => Err(format!(
                "{} exited ({st}): {}",
                self.what,
                crate::generator::tail(&self.err_log, 3)
            )),
            _ => Ok(()),
        }
    }

    /// SIGTERM (it removes what it attached), SIGKILL after 5 s.
    fn stop(mut self) {
        sh::stop(&mut self.child, libc::SIGTERM, Duration::from_secs(5));
    }
}

/// `flowpath switch --config <toml>` with two ports of one type, one worker on the switch CPU.
pub struct Flowpath {
    port_type: &'static str,
    /// `[datapath] xdp_tier = true`: cached flows are forwarded by the XDP program.
    xdp_tier: bool,
    process: Option<FlowpathProcess>,
    control: PathBuf,
    exe: PathBuf,
    before: Option<FlowpathCounters>,
}

/// The counters of `flowpath stats --json`, summed over workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowpathCounters {
    pub busy_cycles: u64,
    pub packets: u64,
    pub upcalls: u64,
    pub misses: u64,
    /// Packets the XDP tier forwarded in the kernel (credited by the workers' sweeps).
    pub xdp_hits: u64,
}

/// Sum the workers of `flowpath stats --json`.
pub fn parse_flowpath_stats(json: &str) -> Option<FlowpathCounters> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let mut c = FlowpathCounters::default();
    for w in v.as_array()? {
        let f = |k: &str| w.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        c.busy_cycles += f("busy_cycles");
        c.packets += f("packets");
        c.upcalls += f("upcalls");
        c.misses += f("misses");
        c.xdp_hits += f("xdp_hits");
    }
    Some(c)
}

impl Flowpath {
    fn counters(&self) -> Option<FlowpathCounters> {
        let out = sh::run(
            None,
            &self.exe.to_string_lossy(),
            &[
                "stats",
                "--json",
                "--control",
                &self.control.to_string_lossy(),
            ],
        )
        .ok()?;
        parse_flowpath_stats(&out)
    }
}

impl Flowpath {
    pub fn new(port_type: &'static str) -> Flowpath {
        Flowpath {
            port_type,
            xdp_tier: false,
            process: None,
            control: PathBuf::new(),
            exe: PathBuf::new(),
            before: None,
        }
    }

    /// AF_XDP ports with the XDP tier on.
    pub fn with_xdp_tier() -> Flowpath {
        Flowpath {
            xdp_tier: true,
            ..Flowpath::new("afxdp")
        }
    }
}

/// The daemon's TOML config for two ports of `port_type` and one worker on `core`, with
/// the XDP tier when `xdp_tier`.
pub fn flowpath_config(dir: &Path, port_type: &str, core: usize, xdp_tier: bool) -> String {
    let p = |f: &str| dir.join(f).to_string_lossy().replace('\\', "\\\\");
    // With the tier, cached packets never reach the worker: it naps up to 20 ms when idle
    // (the default 500 us wakes it 2,000 times a second on the core the kernel's receive
    // shares: 1.47 instead of 2.19 Mpps here), at the cost of a new flow's first packet
    // waiting up to that long.
    let datapath = if xdp_tier {
        "[datapath]\nxdp_tier = true\nidle_sleep_max_us = 20000\n\n"
    } else {
        ""
    };
    format!(
        "[switch]\nstate = \"{}\"\ncontrol = \"{}\"\nflows = \"{}\"\n\n{datapath}\
         [[worker]]\ncore = {core}\n\n\
         [[port]]\nname = \"swin\"\nnumber = 1\ntype = \"{port_type}\"\ninterface = \"swin\"\n\n\
         [[port]]\nname = \"swout\"\nnumber = 2\ntype = \"{port_type}\"\ninterface = \"swout\"\n",
        p("state"),
        p("control.sock"),
        p("flows.txt"),
    )
}

impl Switch for Flowpath {
    fn start(&mut self, ctx: &Ctx, case: Case) -> Result<(), String> {
        let dir = ctx
            .topo
            .dir
            .join(format!("flowpath-{}-{}", self.name(), case.name()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("flows.txt"), FLOWS).map_err(|e| e.to_string())?;
        let cfg = dir.join("switch.toml");
        std::fs::write(
            &cfg,
            flowpath_config(&dir, self.port_type, ctx.switch_cpu, self.xdp_tier),
        )
        .map_err(|e| e.to_string())?;
        self.control = dir.join("control.sock");
        self.exe = ctx.exe.to_path_buf();
        let cfg = cfg.to_string_lossy();
        self.process = Some(FlowpathProcess::start(
            ctx,
            Some(ctx.switch_cpu),
            &["switch", "--config", &cfg],
            dir.join("switch.err"),
            "flowpath switch",
            Duration::from_secs(30),
        )?);
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        self.process.as_mut().map_or(Ok(()), |p| p.check())
    }

    fn before_window(&mut self, _ctx: &Ctx) {
        self.before = self.counters();
    }

    fn after_window(&mut self, _ctx: &Ctx) -> Option<Own> {
        let a = self.before.take()?;
        let b = self.counters()?;
        let packets = b.packets.saturating_sub(a.packets);
        let cycles = b.busy_cycles.saturating_sub(a.busy_cycles);
        let kernel = b.xdp_hits.saturating_sub(a.xdp_hits);
        Some(Own {
            // With the XDP tier the worker's busy cycles are only the user-space share
            // (misses); the kernel's work on the hits is in the lab's CPU figure only.
            cycles_per_packet: (packets > 0 && !self.xdp_tier)
                .then(|| cycles as f64 / packets as f64),
            packets: packets + kernel,
            upcalls: b.upcalls.saturating_sub(a.upcalls),
            // Every flowpath miss is classified (misses - upcalls were answered by a
            // megaflow an earlier packet of the same batch installed): none are lost.
            lost_upcalls: 0,
        })
    }

    fn stop(&mut self, ctx: &Ctx) {
        if let Some(p) = self.process.take() {
            p.stop();
        }
        reset_switch_ports(ctx.topo);
    }

    fn notes(&self) -> Vec<String> {
        if self.xdp_tier {
            vec![
                "afxdp ports, XDP tier on: cached flows forwarded by the flow_tier program, \
                  misses to the worker"
                    .into(),
            ]
        } else {
            vec![format!("{} ports", self.port_type)]
        }
    }
}

impl Flowpath {
    fn name(&self) -> &'static str {
        if self.xdp_tier {
            "xdp"
        } else {
            self.port_type
        }
    }
}

// ---------------------------------------------------------------------------------------
// XDP forward-all (the floor for in-kernel forwarding)

/// `flowpath xdp-forward --from swin --to swout`: every frame redirected through a devmap
/// with no parsing and no lookup; what the XDP tier adds to the same redirect is its
/// parse, lookup, actions and counters.
#[derive(Default)]
pub struct XdpForward {
    process: Option<FlowpathProcess>,
}

impl Switch for XdpForward {
    fn start(&mut self, ctx: &Ctx, _case: Case) -> Result<(), String> {
        let dir = ctx.topo.dir.join("xdp-forward");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        self.process = Some(FlowpathProcess::start(
            ctx,
            None,
            &["xdp-forward", "--from", SWIN_IF, "--to", SWOUT_IF],
            dir.join("xdp-forward.err"),
            "flowpath xdp-forward",
            Duration::from_secs(10),
        )?);
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        self.process.as_mut().map_or(Ok(()), |p| p.check())
    }

    fn stop(&mut self, ctx: &Ctx) {
        if let Some(p) = self.process.take() {
            p.stop();
        }
        reset_switch_ports(ctx.topo);
    }

    fn notes(&self) -> Vec<String> {
        vec!["XDP redirect of every frame, no parse or lookup (the floor)".into()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_parse_as_three_rules_in_flowpaths_syntax() {
        let flows =
            flowpath_flowsyntax::parse_flows_file(FLOWS, flowpath_flowsyntax::FlowCommand::Add)
                .expect("flowpath accepts the lab's flows");
        assert_eq!(flows.len(), 3);
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
    }

    #[test]
    fn flowpath_config_is_the_daemons_toml() {
        let c = flowpath_config(Path::new("/tmp/x"), "afxdp", 1, false);
        assert!(!c.contains("xdp_tier"));
        assert!(flowpath_config(Path::new("/tmp/x"), "afxdp", 1, true)
            .contains("[datapath]\nxdp_tier = true"));
        assert!(c.contains("state = \"/tmp/x/state\""));
        assert!(c.contains("control = \"/tmp/x/control.sock\""));
        assert!(c.contains("[[worker]]\ncore = 1"));
        assert_eq!(c.matches("[[port]]").count(), 2);
        assert_eq!(c.matches("type = \"afxdp\"").count(), 2);
        assert!(c.contains("number = 2"));
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
