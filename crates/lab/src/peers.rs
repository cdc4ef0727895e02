//! What each lab system needs from this machine (the peers' programs, DPDK's drivers) and
//! from this build (its XDP programs, compiled only when clang was there), checked all at
//! once before anything is set up: `flowpath lab` names every missing one together, with
//! the script that installs them, instead of one row's error at a time.

use crate::{sh, systems, GenChoice, LabConfig, XDP_PASS_OBJ, XDP_SINK_OBJ};
use std::path::Path;

/// The script that installs every peer, reserves huge pages and rebuilds flowpath with its
/// XDP programs (relative to the source tree).
pub const SETUP_SCRIPT: &str = "scripts/setup-lab.sh";

/// Which of this binary's XDP programs were compiled (clang and libbpf-dev at build time;
/// without them the objects are empty and the build still succeeds). The lab crate sees
/// its own (the sinks' XDP_DROP, swin's XDP_PASS); the binary tells it about the ports'
/// (AF_XDP, `flowpath gen --tx`, `flowpath xdp-forward`) and the XDP tier's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpBuild {
    pub ports: bool,
    pub tier: bool,
    pub lab: bool,
}

impl XdpBuild {
    /// The lab's own objects, and the ports' and tier's as the binary reports them.
    pub fn new(ports: bool, tier: bool) -> XdpBuild {
        XdpBuild {
            ports,
            tier,
            lab: !XDP_SINK_OBJ.is_empty() && !XDP_PASS_OBJ.is_empty(),
        }
    }

    /// Every crate's build scripts see the same clang: assume the others match the lab's.
    pub fn assumed() -> XdpBuild {
        let lab = XdpBuild::new(true, true).lab;
        XdpBuild::new(lab, lab)
    }

    pub fn complete(self) -> bool {
        self.ports && self.tier && self.lab
    }
}

/// One thing a system needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// A program on PATH, and the Debian package that has it.
    Program(&'static str, &'static str),
    /// A file, and its package.
    File(&'static str, &'static str),
    /// A DPDK driver loaded as a plugin (`librte_<name>.so` in a `pmds-*` directory), and
    /// its package's name without DPDK's ABI number.
    DpdkDriver(&'static str, &'static str),
    /// This binary's XDP programs for the AF_XDP ports and `flowpath gen --tx`.
    XdpPorts,
    /// The XDP tier's program.
    XdpTier,
}

const OVS: &str = "openvswitch-switch";

/// What `system` needs besides a traffic generator (every system but the two generator
/// rows needs one; see [`check`]) and besides root and `ip` (checked by `preflight`).
pub fn needs(system: &str) -> Vec<Need> {
    use Need::*;
    match system {
        "generator" => vec![],
        "trafgen" => vec![Program("trafgen", "netsniff-ng")],
        "linux" => vec![Program("sysctl", "procps")],
        "ovs-afxdp" => vec![
            Program("ovsdb-tool", OVS),
            Program("ovsdb-server", OVS),
            Program("ovs-vswitchd", OVS),
            Program("ovs-vsctl", OVS),
            Program("ovs-ofctl", OVS),
            Program("ovs-appctl", OVS),
            File("/usr/share/openvswitch/vswitch.ovsschema", OVS),
        ],
        "testpmd-afxdp" => vec![
            Program("dpdk-testpmd", "dpdk-dev"),
            DpdkDriver("net_af_xdp", "librte-net-af-xdp"),
            DpdkDriver("mempool_ring", "librte-mempool-ring"),
        ],
        "flowpath-afxdp" | "xdp-forward" => vec![XdpPorts],
        // `ethtool -L` gives the switch's veths a queue per worker.
        systems::TWO_WORKERS => vec![XdpPorts, Program("ethtool", "ethtool")],
        "flowpath-afpacket" => vec![],
        "flowpath-xdp" | systems::PARSE_FORWARD => vec![XdpPorts, XdpTier],
        _ => vec![],
    }
}

/// Is `need` met on this machine, by this build?
pub fn present(need: Need, build: XdpBuild) -> bool {
    match need {
        Need::Program(p, _) => sh::which(p).is_some(),
        Need::File(f, _) => Path::new(f).exists(),
        Need::DpdkDriver(name, _) => dpdk_driver_present(name),
        Need::XdpPorts => build.ports,
        Need::XdpTier => build.tier,
    }
}

/// A DPDK driver plugin in any `dpdk/pmds-*` directory under the usual library
/// directories. A DPDK with no such directory at all links its drivers in (a build of
/// its own): then there is nothing to look for.
fn dpdk_driver_present(name: &str) -> bool {
    let file = format!("librte_{name}.so");
    let mut any_dir = false;
    for lib in pmd_parents() {
        let Ok(entries) = std::fs::read_dir(lib.join("dpdk")) else {
            continue;
        };
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with("pmds-") {
                continue;
            }
            any_dir = true;
            let Ok(files) = std::fs::read_dir(e.path()) else {
                continue;
            };
            if files
                .flatten()
                .any(|f| f.file_name().to_string_lossy().starts_with(&file))
            {
                return true;
            }
        }
    }
    !any_dir
}

/// /usr/lib, /usr/lib64, /usr/local/lib and their multiarch directories (/usr/lib/x86_64-linux-gnu).
fn pmd_parents() -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for base in [
        "/usr/lib",
        "/usr/lib64",
        "/usr/local/lib",
        "/usr/local/lib64",
    ] {
        let base = Path::new(base);
        v.push(base.to_path_buf());
        if let Ok(entries) = std::fs::read_dir(base) {
            v.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with("-linux-gnu"))
                    .map(|e| e.path()),
            );
        }
    }
    v
}

/// Something missing, and the systems (of those asked for) it keeps from running.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Missing {
    /// What is missing: programs, a file, a driver, or this binary's XDP programs.
    pub what: Vec<String>,
    /// Where it comes from: a Debian package, or a rebuild.
    pub from: String,
    /// The systems that cannot run without it.
    pub systems: Vec<String>,
    /// What it costs besides those systems (e.g. trafgen drives the switches instead).
    pub also: Option<String>,
}

/// Everything the configured systems need and lack, grouped by where it comes from, in the
/// order the systems run. `has` says whether one need is met ([`present`] on a real run).
pub fn check_with(cfg: &LabConfig, has: &dyn Fn(Need) -> bool) -> Vec<Missing> {
    let mut out: Vec<Missing> = Vec::new();
    let mut add = |what: String, from: String, system: Option<&str>| {
        let i = match out.iter().position(|m| m.from == from) {
            Some(i) => i,
            None => {
                out.push(Missing {
                    from,
                    ..Missing::default()
                });
                out.len() - 1
            }
        };
        let m = &mut out[i];
        if !m.what.contains(&what) {
            m.what.push(what);
        }
        if let Some(s) = system {
            if !m.systems.iter().any(|x| x == s) {
                m.systems.push(s.to_string());
            }
        }
    };
    let xdp_from = XDP_REBUILD.to_string();
    let trafgen = Need::Program("trafgen", "netsniff-ng");
    // The generator that drives the switches: flowpath gen --tx (the ports' XDP program)
    // or trafgen, as `--generator` says.
    let (fp_gen, tg) = (has(Need::XdpPorts), has(trafgen));
    let generator_ok = match cfg.generator {
        GenChoice::Auto => fp_gen || tg,
        GenChoice::Flowpath => fp_gen,
        GenChoice::Trafgen => tg,
    };
    for sys in &cfg.systems {
        let mut needs = needs(sys);
        if sys != "trafgen" && !generator_ok {
            if cfg.generator != GenChoice::Trafgen {
                needs.push(Need::XdpPorts);
            }
            if cfg.generator != GenChoice::Flowpath {
                needs.push(trafgen);
            }
        }
        for n in needs {
            if has(n) {
                continue;
            }
            let (what, from) = describe(n, &xdp_from);
            add(what, from, Some(sys));
        }
    }
    if !cfg.xdp_build.complete() {
        add(XDP_WHAT.into(), xdp_from.clone(), None);
        let m = out.iter_mut().find(|m| m.from == xdp_from);
        if let Some(m) = m {
            let mut also = Vec::new();
            if !cfg.xdp_build.ports && generator_ok && cfg.generator == GenChoice::Auto {
                also.push("trafgen, not `flowpath gen --tx`, drives the switches (far slower)");
            }
            if !cfg.xdp_build.lab {
                also.push("no XDP drop at the sinks (the AF_XDP rows lose frames there)");
            }
            if !also.is_empty() {
                m.also = Some(also.join("; "));
            }
        }
    }
    out
}

/// [`check_with`] on this machine and build.
pub fn check(cfg: &LabConfig) -> Vec<Missing> {
    let build = cfg.xdp_build;
    check_with(cfg, &|n| present(n, build))
}

/// What the binary lacks when clang was missing at build time.
pub const XDP_WHAT: &str = "this binary's XDP programs";

/// Where the XDP programs come from when the binary lacks them.
pub const XDP_REBUILD: &str =
    "clang, llvm and libbpf-dev were missing when this flowpath was built; rebuild it";

fn describe(n: Need, xdp_from: &str) -> (String, String) {
    match n {
        Need::Program(p, pkg) => (format!("`{p}`"), format!("package {pkg}")),
        Need::File(f, pkg) => (f.to_string(), format!("package {pkg}")),
        Need::DpdkDriver(d, pkg) => (
            format!("DPDK's {d} driver"),
            format!("package {pkg}<ABI>, e.g. {pkg}23"),
        ),
        Need::XdpPorts | Need::XdpTier => (XDP_WHAT.into(), xdp_from.into()),
    }
}

/// Why `system` cannot run, when one of `missing` keeps it from running (for its row).
pub fn blocked(missing: &[Missing], system: &str) -> Option<String> {
    let why: Vec<String> = missing
        .iter()
        .filter(|m| m.systems.iter().any(|s| s == system))
        .map(|m| format!("{} ({})", m.what.join(", "), m.from))
        .collect();
    (!why.is_empty()).then(|| format!("missing {}: run {SETUP_SCRIPT}", why.join("; ")))
}

/// The systems of `cfg` that nothing in `missing` keeps from running.
pub fn runnable<'a>(cfg: &'a LabConfig, missing: &[Missing]) -> Vec<&'a str> {
    cfg.systems
        .iter()
        .map(String::as_str)
        .filter(|s| blocked(missing, s).is_none())
        .collect()
}

/// Every missing thing on its own line with the rows it costs, then what to run.
pub fn report(missing: &[Missing]) -> String {
    if missing.is_empty() {
        return String::new();
    }
    let n = missing.len();
    let mut s = format!(
        "flowpath lab: {n} thing{} the lab needs {} missing here:\n",
        if n == 1 { "" } else { "s" },
        if n == 1 { "is" } else { "are" }
    );
    for m in missing {
        s += &format!("  - {} ({})", m.what.join(", "), m.from);
        let mut costs = Vec::new();
        if !m.systems.is_empty() {
            costs.push(format!("no {} rows", m.systems.join(", ")));
        }
        costs.extend(m.also.clone());
        if !costs.is_empty() {
            s += &format!(": {}", costs.join("; "));
        }
        s.push('\n');
    }
    s += &format!(
        "Run {SETUP_SCRIPT} (as root, in flowpath's source tree): it installs every peer the \
         lab drives, reserves huge pages and rebuilds flowpath with its XDP programs.\n"
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::systems::SYSTEMS;

    fn cfg(build: XdpBuild) -> LabConfig {
        LabConfig {
            xdp_build: build,
            ..LabConfig::default()
        }
    }

    const FULL: XdpBuild = XdpBuild {
        ports: true,
        tier: true,
        lab: true,
    };

    #[test]
    fn nothing_missing_when_everything_is_there() {
        assert!(check_with(&cfg(FULL), &|_| true).is_empty());
    }

    #[test]
    fn every_missing_peer_is_named_at_once_with_the_script() {
        let has = |n: Need| !matches!(n, Need::Program("trafgen" | "ovs-vswitchd", _));
        let m = check_with(&cfg(FULL), &has);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0].from, "package netsniff-ng");
        assert_eq!(m[0].systems, ["trafgen"]);
        assert_eq!(m[1].what, ["`ovs-vswitchd`"]);
        assert_eq!(m[1].systems, ["ovs-afxdp"]);
        let r = report(&m);
        assert!(r.contains("2 things the lab needs are missing"), "{r}");
        assert!(
            r.contains("  - `trafgen` (package netsniff-ng): no trafgen rows\n"),
            "{r}"
        );
        assert!(
            r.contains("(package openvswitch-switch): no ovs-afxdp rows\n"),
            "{r}"
        );
        assert!(r.contains(SETUP_SCRIPT), "{r}");
        let b = blocked(&m, "ovs-afxdp").unwrap();
        assert!(b.contains("ovs-vswitchd") && b.ends_with("run scripts/setup-lab.sh"));
        assert!(blocked(&m, "linux").is_none());
        let c = cfg(FULL);
        let run = runnable(&c, &m);
        assert_eq!(run.len(), SYSTEMS.len() - 2);
        assert!(!run.contains(&"trafgen") && !run.contains(&"ovs-afxdp"));
    }

    #[test]
    fn a_binary_built_without_clang_says_so_and_trafgen_takes_over() {
        let none = XdpBuild {
            ports: false,
            tier: false,
            lab: false,
        };
        let c = cfg(none);
        let m = check_with(&c, &|n| present_in(n, none));
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].from.contains("missing when this flowpath was built"));
        assert_eq!(m[0].what, [XDP_WHAT]);
        assert_eq!(
            m[0].systems,
            [
                "flowpath-afxdp",
                systems::TWO_WORKERS,
                "flowpath-xdp",
                "xdp-forward",
                systems::PARSE_FORWARD
            ]
        );
        assert!(m[0].also.as_deref().unwrap().contains("trafgen"));
        assert!(report(&m).contains("rebuilds flowpath with its XDP programs"));
        // Without trafgen either, nothing can drive a switch: only the generator-free rows
        // would be left, and there are none.
        let m = check_with(&c, &|n| {
            !matches!(n, Need::Program("trafgen", _)) && present_in(n, none)
        });
        assert!(runnable(&c, &m).is_empty(), "{m:?}");
    }

    /// `present` with every program and file there but the build as given.
    fn present_in(n: Need, b: XdpBuild) -> bool {
        match n {
            Need::XdpPorts => b.ports,
            Need::XdpTier => b.tier,
            _ => true,
        }
    }

    #[test]
    fn every_system_has_its_needs_listed() {
        for s in SYSTEMS {
            let n = needs(s);
            match *s {
                "ovs-afxdp" | "testpmd-afxdp" | "flowpath-xdp" | systems::TWO_WORKERS => {
                    assert!(n.len() >= 2, "{s}")
                }
                "generator" | "flowpath-afpacket" => assert!(n.is_empty()),
                _ => assert!(!n.is_empty(), "{s}"),
            }
        }
    }
}
