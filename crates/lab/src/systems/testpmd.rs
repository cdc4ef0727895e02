//! DPDK testpmd io-forward over net_af_xdp, on huge pages this row reserves and gives back.

use super::*;

/// Reserve huge pages and mount a private hugetlbfs; undone by `release`.
pub(crate) struct HugePages {
    mount: PathBuf,
    restore: Option<u64>,
}

pub(super) const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

pub(super) fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub(super) fn free_hugepages() -> u64 {
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
    pub(crate) fn reserve(dir: &Path, pages: u64) -> Result<HugePages, String> {
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

    /// The private hugetlbfs mount (DPDK's `--huge-dir`).
    pub(crate) fn dir(&self) -> &Path {
        &self.mount
    }

    pub(crate) fn release(self) {
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
    fn cannot(&self, class: Class) -> Option<String> {
        if class.is_stateful() {
            return Some("io-fwd forwards frames unchanged: it tracks no connections".into());
        }
        class.is_vxlan().then(|| {
            "io-fwd forwards frames unchanged: it cannot decapsulate or encapsulate".into()
        })
    }

    fn start(&mut self, ctx: &Ctx, case: Case) -> Result<(), String> {
        let exe = sh::which("dpdk-testpmd").ok_or_else(|| {
            format!(
                "dpdk-testpmd not found (dpdk-dev): run {}",
                crate::peers::SETUP_SCRIPT
            )
        })?;
        let dir = ctx
            .topo
            .dir
            .join(format!("testpmd-{}-{}", ctx.class.name(), case.name()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let huge = HugePages::reserve(&dir, 256)?;
        let lcores = format!("{},{}", ctx.gen_cpu, ctx.switch_cpu);
        let main = ctx.gen_cpu.to_string();
        let prefix = format!("{}{}{}", ctx.topo.id, ctx.class.name(), case.name());
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
