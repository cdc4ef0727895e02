//! Open vSwitch 3.1, user-space datapath with afxdp ports: its own run and database
//! directories, no systemd; `pmd-perf-show` read beside the CPU's own counters.

use super::*;

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

impl Ovs {
    /// `dir/file` as a string (OVS takes paths in arguments).
    fn path(&self, file: &str) -> String {
        self.dir.join(file).to_string_lossy().into_owned()
    }

    /// Start `daemon` on the switch CPU in the switch namespace with its control socket,
    /// pid file and log in this run's directory, output to `<daemon>.out`/`.err`.
    fn spawn_daemon(&mut self, ctx: &Ctx, daemon: &str, args: &[&str]) -> Result<(), String> {
        let cpu = ctx.switch_cpu.to_string();
        let own = [
            format!("--unixctl={}", self.path(&format!("{daemon}.ctl"))),
            format!("--pidfile={}", self.path(&format!("{daemon}.pid"))),
            format!("--log-file={}", self.path(&format!("{daemon}.log"))),
        ];
        let mut all: Vec<&str> = vec!["-c", &cpu, daemon];
        all.extend_from_slice(args);
        all.extend(own.iter().map(String::as_str));
        let mut c = sh::cmd_in(Some(&ctx.topo.sw), "taskset", &all);
        self.env(&mut c);
        let log = |ext: &str| -> Result<Stdio, String> {
            std::fs::File::create(self.dir.join(format!("{daemon}.{ext}")))
                .map(Stdio::from)
                .map_err(|e| e.to_string())
        };
        let child = sh::spawn(c, log("out")?, log("err")?)?;
        self.children.push(child);
        Ok(())
    }

    /// `br0` on the netdev datapath, exact megaflows, the two afxdp ports.
    fn bridge(&self, ctx: &Ctx) -> Result<(), String> {
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
            "flow_tables:1=@ft",
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
        Ok(())
    }

    /// The same three flows every switch gets (for the class).
    fn load_flows(&self, ctx: &Ctx) -> Result<(), String> {
        let flows = self.dir.join("flows.txt");
        std::fs::write(&flows, super::flows(ctx.class)).map_err(|e| e.to_string())?;
        let mgmt = format!("unix:{}", self.path("br0.mgmt"));
        self.tool("ovs-ofctl", &["del-flows", &mgmt])?;
        self.tool("ovs-ofctl", &["add-flows", &mgmt, &flows.to_string_lossy()])?;
        Ok(())
    }

    /// Which XDP mode OVS says it got, for the report.
    fn note_mode(&mut self, ctx: &Ctx) {
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
    }
}

impl Switch for Ovs {
    fn cannot(&self, class: Class) -> Option<String> {
        class.is_vxlan().then(|| {
            "no OVS tunnel port set up (its user-space tunnels need a bridge with an IP \
             address and ovs-appctl tnl/ routes and neighbours)"
                .into()
        })
    }

    fn start(&mut self, ctx: &Ctx, case: Case) -> Result<(), String> {
        let schema = installed()?;
        self.dir = ctx
            .topo
            .dir
            .join(format!("ovs-{}-{}", ctx.class.name(), case.name()));
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        let db = self.path("conf.db");
        self.tool("ovsdb-tool", &["create", &db, &schema.to_string_lossy()])?;
        self.spawn_daemon(
            ctx,
            "ovsdb-server",
            &[&db, &format!("--remote=punix:{}", self.path("db.sock"))],
        )?;
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
        self.spawn_daemon(
            ctx,
            "ovs-vswitchd",
            &[&format!("unix:{}", self.path("db.sock"))],
        )?;
        let ctl = self.dir.join("ovs-vswitchd.ctl");
        sh::wait_for(Duration::from_secs(15), || ctl.exists().then_some(()))
            .ok_or_else(|| format!("ovs-vswitchd did not start: {}", self.log_tail()))?;
        self.bridge(ctx)?;
        self.load_flows(ctx)?;
        self.note_mode(ctx);
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
            ..Own::default()
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

/// The OVS programs and schema are installed; the schema's path.
fn installed() -> Result<&'static Path, String> {
    for p in [
        "ovsdb-tool",
        "ovsdb-server",
        "ovs-vswitchd",
        "ovs-vsctl",
        "ovs-ofctl",
    ] {
        sh::which(p).ok_or_else(|| {
            format!(
                "{p} not found (openvswitch-switch): run {}",
                crate::peers::SETUP_SCRIPT
            )
        })?;
    }
    let schema = Path::new("/usr/share/openvswitch/vswitch.ovsschema");
    if !schema.exists() {
        return Err(format!(
            "{} not found (openvswitch-switch): run {}",
            schema.display(),
            crate::peers::SETUP_SCRIPT
        ));
    }
    Ok(schema)
}
