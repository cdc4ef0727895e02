//! OVS-DPDK on the rig: its own ovsdb-server, database, sockets and run directory, the
//! DPDK build of ovs-vswitchd run by path (the system's OVS is never touched), a netdev
//! bridge with a `net_pcap` port replaying the capture from memory and a `net_null` sink,
//! a private hugetlbfs and DPDK file prefix; measured from its PMD's own counters.

use super::{Figures, FlowSet, RigConfig, RX_PORT, TX_PORT};
use crate::pmdperf;
use crate::sh;
use crate::systems::HugePages;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

/// The DPDK build of ovs-vswitchd (Debian's `openvswitch-switch-dpdk`), run by path.
pub const OVS_DPDK_VSWITCHD: &str = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";
const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
/// Huge pages of 2 MiB DPDK gets (`dpdk-socket-mem=512`).
const SOCKET_MEM_MB: u64 = 512;
const PAGES: u64 = SOCKET_MEM_MB / 2;

/// What OVS-DPDK lacks here (the package, its tools, huge pages), if anything.
pub fn missing() -> Option<String> {
    if !Path::new(OVS_DPDK_VSWITCHD).exists() {
        return Some(format!(
            "{OVS_DPDK_VSWITCHD} not found (openvswitch-switch-dpdk): run {}",
            crate::peers::SETUP_SCRIPT
        ));
    }
    for p in [
        "ovsdb-tool",
        "ovsdb-server",
        "ovs-vsctl",
        "ovs-ofctl",
        "ovs-appctl",
    ] {
        if sh::which(p).is_none() {
            return Some(format!("{p} not found (openvswitch-switch)"));
        }
    }
    if !Path::new(SCHEMA).exists() {
        return Some(format!("{SCHEMA} not found (openvswitch-switch)"));
    }
    if !Path::new("/proc/sys/vm/nr_hugepages").exists() {
        return Some("this kernel has no huge pages".into());
    }
    None
}

/// One OVS-DPDK instance; dropping it stops it and gives its huge pages back.
pub struct OvsDpdk {
    dir: PathBuf,
    children: Vec<Child>,
    huge: Option<HugePages>,
}

impl OvsDpdk {
    /// Start OVS-DPDK on `pcap` with `set`'s flows, warm up, measure `cfg.runs` windows,
    /// stop it. Errors say what failed, with the end of its log.
    pub fn measure(
        scratch: &Path,
        pcap: &Path,
        set: FlowSet,
        cfg: &RigConfig,
    ) -> Result<Figures, String> {
        let mut ovs = OvsDpdk {
            dir: scratch.join(format!("ovs-{}", set.name())),
            children: Vec::new(),
            huge: None,
        };
        crate::progress(&format!("OVS-DPDK, {} flows: starting", set.name()));
        ovs.start(pcap, set, cfg)?;
        crate::progress(&format!("OVS-DPDK, {} flows: warming up", set.name()));
        ovs.windows(cfg)
    }

    fn env(&self, c: &mut std::process::Command) {
        for var in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            c.env(var, &self.dir);
        }
        c.env("OVS_PKGDATADIR", "/usr/share/openvswitch");
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).to_string_lossy().into_owned()
    }

    fn tool(&self, prog: &str, args: &[&str]) -> Result<String, String> {
        let mut c = sh::cmd_in(None, prog, args);
        self.env(&mut c);
        sh::output(c)
    }

    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let db = format!("--db=unix:{}", self.path("db.sock"));
        let mut a = vec![db.as_str(), "--timeout=60"];
        a.extend_from_slice(args);
        self.tool("ovs-vsctl", &a)
    }

    fn appctl(&self, args: &[&str]) -> Result<String, String> {
        let t = self.path("ovs-vswitchd.ctl");
        let mut a = vec!["-t", t.as_str()];
        a.extend_from_slice(args);
        self.tool("ovs-appctl", &a)
    }

    /// The last errors and warnings of ovs-vswitchd's log.
    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default();
        let errs: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("|ERR|") || l.contains("|EMER|") || l.contains("|WARN|"))
            .collect();
        errs[errs.len().saturating_sub(3)..].join(" | ")
    }

    /// Start `prog` (named `name` for its files) with its control socket, pid file and log
    /// in the run directory.
    fn spawn(&mut self, prog: &str, name: &str, args: &[&str]) -> Result<(), String> {
        let own = [
            format!("--unixctl={}", self.path(&format!("{name}.ctl"))),
            format!("--pidfile={}", self.path(&format!("{name}.pid"))),
            format!("--log-file={}", self.path(&format!("{name}.log"))),
        ];
        let mut all: Vec<&str> = args.to_vec();
        all.extend(own.iter().map(String::as_str));
        let mut c = sh::cmd_in(None, prog, &all);
        self.env(&mut c);
        let log = |ext: &str| -> Result<Stdio, String> {
            std::fs::File::create(self.dir.join(format!("{name}.{ext}")))
                .map(Stdio::from)
                .map_err(|e| e.to_string())
        };
        let child = sh::spawn(c, log("out")?, log("err")?)?;
        self.children.push(child);
        Ok(())
    }

    fn start(&mut self, pcap: &Path, set: FlowSet, cfg: &RigConfig) -> Result<(), String> {
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        self.huge = Some(HugePages::reserve(&self.dir, PAGES)?);
        let db = self.path("conf.db");
        self.tool("ovsdb-tool", &["create", &db, SCHEMA])?;
        let remote = format!("--remote=punix:{}", self.path("db.sock"));
        self.spawn("ovsdb-server", "ovsdb-server", &[&db, &remote])?;
        let sock = self.dir.join("db.sock");
        sh::wait_for(Duration::from_secs(10), || sock.exists().then_some(()))
            .ok_or("ovsdb-server did not create its socket in 10 s")?;
        self.vsctl(&["--no-wait", "init"])?;
        self.configure(cfg)?;
        let db_sock = format!("unix:{}", self.path("db.sock"));
        self.spawn(OVS_DPDK_VSWITCHD, "ovs-vswitchd", &[&db_sock])?;
        let ctl = self.dir.join("ovs-vswitchd.ctl");
        sh::wait_for(Duration::from_secs(60), || ctl.exists().then_some(()))
            .ok_or_else(|| format!("ovs-vswitchd-dpdk did not start: {}", self.log_tail()))?;
        self.bridge(pcap)?;
        self.load_flows(set)
    }

    /// DPDK on: no PCI, the private hugetlbfs and file prefix, the PMD on `pmd_cpu`.
    fn configure(&self, cfg: &RigConfig) -> Result<(), String> {
        let huge = self
            .huge
            .as_ref()
            .map(HugePages::dir)
            .ok_or("no huge pages")?;
        let prefix = format!("{}-rig", crate::topo::run_id());
        // DPDK's runtime directory for the prefix (sockets, config), left behind by EAL.
        crate::topo::register_dir(&Path::new("/var/run/dpdk").join(&prefix));
        let extra = format!(
            "other_config:dpdk-extra=\"--no-pci --file-prefix={prefix} --huge-dir={}\"",
            huge.display()
        );
        let mask = format!("other_config:pmd-cpu-mask=0x{:x}", 1u64 << cfg.pmd_cpu);
        let mem = format!("other_config:dpdk-socket-mem={SOCKET_MEM_MB}");
        self.vsctl(&[
            "--no-wait",
            "set",
            "Open_vSwitch",
            ".",
            "other_config:dpdk-init=true",
            &extra,
            &mask,
            &mem,
        ])?;
        Ok(())
    }

    /// `br0` on the netdev datapath: the capture replayed forever from memory on port 1,
    /// a null device that receives nothing as port 2.
    fn bridge(&self, pcap: &Path) -> Result<(), String> {
        self.vsctl(&[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
        ])?;
        let rx = format!(
            "options:dpdk-devargs=\"net_pcap0,rx_pcap={},infinite_rx=1\"",
            pcap.display()
        );
        let tx = "options:dpdk-devargs=\"net_null0,no-rx=1\"".to_string();
        for (name, port, args) in [("rx", RX_PORT, rx), ("tx", TX_PORT, tx)] {
            self.vsctl(&[
                "add-port",
                "br0",
                name,
                "--",
                "set",
                "interface",
                name,
                "type=dpdk",
                &args,
                &format!("ofport_request={port}"),
            ])?;
        }
        for name in ["rx", "tx"] {
            let err = self.vsctl(&["get", "interface", name, "error"])?;
            let err = err.trim();
            if !err.is_empty() && err != "[]" {
                return Err(format!("dpdk port {name}: {err}"));
            }
            if self.vsctl(&["get", "interface", name, "ofport"])?.trim() == "-1" {
                return Err(format!("dpdk port {name}: {}", self.log_tail()));
            }
        }
        Ok(())
    }

    fn load_flows(&self, set: FlowSet) -> Result<(), String> {
        let file = self.dir.join("flows.txt");
        std::fs::write(&file, set.flows()).map_err(|e| e.to_string())?;
        let mgmt = format!("unix:{}", self.path("br0.mgmt"));
        self.tool("ovs-ofctl", &["del-flows", &mgmt])?;
        self.tool("ovs-ofctl", &["add-flows", &mgmt, &file.to_string_lossy()])?;
        Ok(())
    }

    /// Warm up, then per window: clear the PMD's counters, wait, read `pmd-perf-show`.
    fn windows(&mut self, cfg: &RigConfig) -> Result<Figures, String> {
        let interrupted = || "interrupted".to_string();
        if !sh::sleep(Duration::from_secs_f64(cfg.warmup)) {
            return Err(interrupted());
        }
        let mut f = Figures::default();
        let (mut rx, mut tx, mut emc, mut smc, mut mf, mut up) = (0u64, 0, 0, 0, 0, 0);
        for _ in 0..cfg.runs {
            self.alive()?;
            self.appctl(&["dpif-netdev/pmd-stats-clear"])?;
            if !sh::sleep(Duration::from_secs_f64(cfg.duration)) {
                return Err(interrupted());
            }
            let text = self.appctl(&["dpif-netdev/pmd-perf-show"])?;
            let _ = std::fs::write(self.dir.join("pmd-perf-show.txt"), &text);
            let p = pmdperf::parse(&text);
            let cyc = p
                .cycles_per_packet()
                .ok_or_else(|| format!("no packets in the window: {}", self.log_tail()))?;
            let secs = p.duration_s.unwrap_or(cfg.duration).max(1e-3);
            f.cycles.push(cyc);
            f.mpps.push(p.rx_packets() as f64 / secs / 1e6);
            rx += p.rx_packets();
            for t in &p.pmds {
                tx += t.tx_packets;
                emc += t.emc_hits;
                smc += t.smc_hits;
                mf += t.megaflow_hits;
            }
            up += p.upcalls();
        }
        f.forwarded_share = tx as f64 / rx.max(1) as f64;
        f.note = lookups(rx, emc, smc, mf, up);
        Ok(f)
    }

    fn alive(&mut self) -> Result<(), String> {
        for c in &mut self.children {
            if let Ok(Some(st)) = c.try_wait() {
                return Err(format!("an OVS daemon exited ({st}): {}", self.log_tail()));
            }
        }
        Ok(())
    }
}

/// How packets were looked up: per received packet (a recirculated packet is looked up
/// once a pass), and each cache's share of the lookups.
fn lookups(rx: u64, emc: u64, smc: u64, mf: u64, up: u64) -> String {
    let all = (emc + smc + mf + up).max(1) as f64;
    let pct = |n: u64| 100.0 * n as f64 / all;
    format!(
        "{:.2} lookups a packet: EMC {:.1} %, SMC {:.1} %, megaflow {:.1} %, upcalls {up}",
        all / rx.max(1) as f64,
        pct(emc),
        pct(smc),
        pct(mf)
    )
}

impl Drop for OvsDpdk {
    fn drop(&mut self) {
        if !self.children.is_empty() {
            let _ = self.appctl(&["exit", "--cleanup"]);
        }
        for c in self.children.iter_mut().rev() {
            sh::stop(c, libc::SIGTERM, Duration::from_secs(5));
        }
        self.children.clear();
        if let Some(h) = self.huge.take() {
            h.release();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        let prefix = format!("{}-rig", crate::topo::run_id());
        let _ = std::fs::remove_dir_all(Path::new("/var/run/dpdk").join(prefix));
    }
}
