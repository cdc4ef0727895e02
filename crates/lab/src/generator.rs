//! The traffic source of the lab, behind one small type: `flowpath gen --tx` (XDP live
//! frames) when this build has it, `trafgen` (netsniff-ng, AF_PACKET) otherwise.

use crate::sh;
use crate::{Case, Class, VXLAN_VNI};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

/// Which program generates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GenKind {
    /// `flowpath gen --tx IFACE ...`; the flags its `--help` shows, to pass only those.
    Flowpath { exe: PathBuf, flags: Vec<String> },
    /// netsniff-ng's `trafgen` with a generated packet config.
    Trafgen { exe: PathBuf },
}

/// What to send and where.
#[derive(Clone, Debug)]
pub struct GenJob<'a> {
    pub ns: &'a str,
    pub iface: &'a str,
    pub src_mac: &'a str,
    pub dst_mac: &'a str,
    pub dst_ip: &'a str,
    pub case: Case,
    /// What the frames are (IPv4, IPv6, VXLAN; encap sends IPv4).
    pub class: Class,
    /// Established flows in the `hit` case.
    pub flows: u32,
    /// Seconds to run (the lab stops it earlier when done).
    pub secs: u64,
    /// CPU to pin the generator to.
    pub cpu: usize,
    /// (k, n): this is generator k of n sending at once (one per CPU, so that their XDP
    /// frames land on n rx queues), with the k-th share of the source addresses. (0, 1):
    /// the only one. Shares are for `flowpath gen` and IPv4.
    pub part: (u32, u32),
    /// Packets per second for this generator (`flowpath gen --rate`), or as fast as it goes.
    pub rate: Option<f64>,
    /// Visit the hit case's flows in random order (`flowpath gen --order random`) instead
    /// of round-robin.
    pub random_order: bool,
    /// Where configs and logs go.
    pub dir: &'a Path,
}

/// A traffic generator the lab can start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generator {
    pub kind: GenKind,
}

/// Source addresses: `hit` cycles through `flows` addresses from 10.1.0.1; `miss` counts
/// up through 10.0.0.0/8 (trafgen wraps after 16.7 M; flowpath gen counts on past it), so
/// every packet has a source never seen before.
pub const HIT_SRC_FIRST: u32 = 0x0a01_0001;
pub const MISS_SRC_FIRST: u32 = 0x0a00_0000;
pub const MISS_SRC_LAST: u32 = 0x0aff_ffff;

/// IPv6 addresses of the `ipv6` class: hit sources `flows` addresses from 2001:db8:1::1;
/// miss sources new addresses in 2001:db8:1::/96 (with churn, `flowpath gen` wants the
/// range in ::8000:0-::ffff:ffff of one /96 and counts new flows from its low end);
/// destination the sink's side.
pub const IPV6_HIT_SRC_FIRST: &str = "2001:db8:1::1";
pub const IPV6_MISS_SRC: &str = "2001:db8:1::8000:1-2001:db8:1::ffff:fffe";
pub const IPV6_DST: &str = "2001:db8:2::2";

/// The k-th of n shares of `count` addresses from `first`: (its first, its count); the
/// last share takes the remainder.
pub fn share(first: u32, count: u32, (k, n): (u32, u32)) -> (u32, u32) {
    let n = n.max(1);
    let per = count / n;
    let cnt = if k + 1 == n { count - k * per } else { per };
    (first + k * per, cnt)
}

fn dotted(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

/// The trafgen packet config for a case: 64-byte frames (60 + FCS), UDP 65535 -> 5001.
pub fn trafgen_config(job: &GenJob) -> String {
    let (lo, hi) = match job.case {
        Case::Hit => (HIT_SRC_FIRST, HIT_SRC_FIRST + job.flows.max(1) - 1),
        Case::Miss => (MISS_SRC_FIRST, MISS_SRC_LAST),
    };
    let sa = if lo == hi {
        dotted(lo)
    } else {
        format!("dinc({lo}, {hi})")
    };
    format!(
        "{{\n  eth(da={}, sa={}, type=0x0800),\n  ipv4(sa={sa}, da={}, ttl=64),\n  \
         udp(sp=65535, dp=5001),\n  fill(0, 18),\n}}\n",
        job.dst_mac, job.src_mac, job.dst_ip
    )
}

impl Generator {
    /// `flowpath gen --tx` if `exe gen --help` lists `--tx`.
    pub fn flowpath(exe: &Path) -> Option<Generator> {
        let help = sh::run(None, &exe.to_string_lossy(), &["gen", "--help"]).ok()?;
        let flags = help_flags(&help);
        flags.iter().any(|f| f == "--tx").then(|| Generator {
            kind: GenKind::Flowpath {
                exe: exe.to_path_buf(),
                flags,
            },
        })
    }

    /// `trafgen` when it is installed.
    pub fn trafgen() -> Option<Generator> {
        sh::which("trafgen").map(|exe| Generator {
            kind: GenKind::Trafgen { exe },
        })
    }

    /// Why this generator cannot send `class`, or None.
    pub fn cannot(&self, class: Class) -> Option<String> {
        match (&self.kind, class) {
            (GenKind::Trafgen { .. }, Class::Ipv4 | Class::VxlanEncap | Class::Ipv4Ct) => None,
            (GenKind::Trafgen { .. }, _) => Some(format!(
                "the lab's trafgen config sends IPv4 only; {} needs `flowpath gen --tx`",
                class.name()
            )),
            (GenKind::Flowpath { flags, .. }, Class::VxlanDecap)
                if !flags.iter().any(|f| f == "--outer-sport") =>
            {
                Some("this `flowpath gen` has no --outer-sport".into())
            }
            _ => None,
        }
    }

    /// How `flowpath gen --tx` transmits from `iface` in `ns` (one frame sent to find out):
    /// None while it uses XDP live frames (or for trafgen), else why it cannot and what
    /// it uses instead. The kernel may refuse live frames to this process: the generator
    /// then sends through a packet socket, and the switch's veth receives socket buffers,
    /// not XDP frames, which changes what every row costs.
    pub fn without_live_frames(&self, ns: &str, iface: &str) -> Option<String> {
        let GenKind::Flowpath { exe, .. } = &self.kind else {
            return None;
        };
        let exe = exe.to_string_lossy();
        let args = ["gen", "--tx", iface, "--packets", "1", "--json"];
        let out = match sh::run(Some(ns), &exe, &args) {
            Ok(o) => o,
            Err(e) => return Some(format!("`flowpath gen --tx` failed: {e}")),
        };
        let v: serde_json::Value = serde_json::from_str(&out).ok()?;
        if v["transmitter"] != "packet-socket" {
            return None;
        }
        Some(format!(
            "`flowpath gen --tx` sends through a packet socket here ({}): the switch's veth \
             receives socket buffers and converts each one for XDP, which every row's cycles \
             include: rows taken this way compare with each other, not with rows (or ratios) \
             taken with live frames",
            v["live_frames_refused"]
                .as_str()
                .unwrap_or("live frames refused")
        ))
    }

    /// Short name for tables: `flowpath-gen` or `trafgen`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            GenKind::Flowpath { .. } => "flowpath-gen",
            GenKind::Trafgen { .. } => "trafgen",
        }
    }

    /// The command line (program and arguments, run in `job.ns`, pinned to `job.cpu`).
    pub fn argv(&self, job: &GenJob) -> Result<Vec<String>, String> {
        let mut v: Vec<String> = vec!["taskset".into(), "-c".into(), job.cpu.to_string()];
        match &self.kind {
            GenKind::Trafgen { exe } => {
                if let Some(why) = self.cannot(job.class) {
                    return Err(why);
                }
                v.extend(trafgen_args(exe, job)?);
            }
            GenKind::Flowpath { exe, flags } => v.extend(flowpath_args(exe, flags, job)?),
        }
        Ok(v)
    }

    /// Start it; stdout and stderr go to `<dir>/<name>-<iface>-<case>.log`.
    pub fn spawn(&self, job: &GenJob) -> Result<(Child, PathBuf), String> {
        let argv = self.argv(job)?;
        let log = job.dir.join(format!(
            "{}-{}-{}-{}{}.log",
            self.name(),
            job.iface,
            job.class.name(),
            job.case.name(),
            if job.part.1 > 1 {
                format!("-{}", job.part.0)
            } else {
                String::new()
            }
        ));
        let f = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let f2 = f.try_clone().map_err(|e| e.to_string())?;
        let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
        let c = sh::cmd_in(Some(job.ns), &argv[0], &args);
        let child = sh::spawn(c, Stdio::from(f), Stdio::from(f2))?;
        Ok((child, log))
    }
}

/// trafgen's arguments for `job` (its config written to `job.dir`).
fn trafgen_args(exe: &Path, job: &GenJob) -> Result<Vec<String>, String> {
    if job.part.1 > 1 {
        return Err(
            "one trafgen per CPU is not set up: the multi-worker rows need \
                    `flowpath gen --tx`"
                .into(),
        );
    }
    if job.rate.is_some() {
        return Err("--gen-rate paces `flowpath gen --tx` only, not trafgen".into());
    }
    if job.random_order {
        return Err(
            "--flow-order random needs `flowpath gen --tx` (trafgen's config \
                    counts through the flows)"
                .into(),
        );
    }
    let cfg = job.dir.join(format!("trafgen-{}.cfg", job.case.name()));
    std::fs::write(&cfg, trafgen_config(job)).map_err(|e| format!("{}: {e}", cfg.display()))?;
    Ok(vec![
        exe.to_string_lossy().into_owned(),
        "-o".into(),
        job.iface.into(),
        "-i".into(),
        cfg.to_string_lossy().into_owned(),
        "-P".into(),
        "1".into(),
        "-C".into(),
    ])
}

/// `flowpath gen --tx`'s arguments for `job`, using only the `flags` its `--help` lists
/// where a flag is optional.
fn flowpath_args(exe: &Path, flags: &[String], job: &GenJob) -> Result<Vec<String>, String> {
    let has = |f: &str| flags.iter().any(|x| x == f);
    if job.part.1 > 1 && job.class.frames() != Class::Ipv4 {
        return Err(format!(
            "generators sharing the flows: ipv4 only, not {}",
            job.class.name()
        ));
    }
    let mut v: Vec<String> = vec![
        exe.to_string_lossy().into_owned(),
        "gen".into(),
        "--tx".into(),
        job.iface.into(),
        "--duration".into(),
        job.secs.to_string(),
        "--dst".into(),
        if job.class.frames() == Class::Ipv6 {
            IPV6_DST.into()
        } else {
            job.dst_ip.into()
        },
        // One source port: flowpath gen steps the source port over the ports above the
        // template's before the address, so with 65535 every flow (and every new flow) is
        // a new source address.
        "--sport".into(),
        "65535".into(),
    ];
    if let Some(r) = job.rate {
        if !has("--rate") {
            return Err("this flowpath gen has no --rate to pace with".into());
        }
        v.extend(["--rate".into(), format!("{:.0}", r.max(1.0))]);
    }
    if job.random_order && job.case == Case::Hit {
        if !has("--order") {
            return Err("this flowpath gen has no --order to visit flows at random".into());
        }
        v.extend(["--order".into(), "random".into()]);
    }
    v.extend(flowpath_sources(job));
    v.extend(flowpath_encap(job.class));
    for (flag, value) in [("--dst-mac", job.dst_mac), ("--src-mac", job.src_mac)] {
        if has(flag) {
            v.extend([flag.into(), value.into()]);
        }
    }
    Ok(v)
}

/// The flows and sources of `job`'s case and class (`--flows`, `--src`, `--miss-rate`),
/// IPv4 sources shared among the generators running side by side.
fn flowpath_sources(job: &GenJob) -> [String; 6] {
    let (flows, src, miss) = match (job.case, job.class.frames() == Class::Ipv6) {
        (Case::Hit, false) => {
            let (first, n) = share(HIT_SRC_FIRST, job.flows.max(1), job.part);
            (n, format!("{}+{n}", dotted(first)), "0%")
        }
        (Case::Miss, false) => {
            let all = MISS_SRC_LAST - 1 - (MISS_SRC_FIRST + 1) + 1;
            let (first, n) = share(MISS_SRC_FIRST + 1, all, job.part);
            let src = format!("{}-{}", dotted(first), dotted(first + n - 1));
            (1, src, "100%")
        }
        (Case::Hit, true) => (
            job.flows,
            format!("{IPV6_HIT_SRC_FIRST}+{}", job.flows),
            "0%",
        ),
        (Case::Miss, true) => (1, IPV6_MISS_SRC.into(), "100%"),
    };
    [
        "--flows".into(),
        flows.to_string(),
        "--src".into(),
        src,
        "--miss-rate".into(),
        miss.into(),
    ]
}

/// The encapsulation flags of a class (none for IPv4 and the encap class, whose frames
/// arrive as IPv4).
fn flowpath_encap(class: Class) -> Vec<String> {
    let vni = VXLAN_VNI.to_string();
    let args = match class {
        Class::Ipv6 => vec!["--encap", "ipv6"],
        // The kernel program varies the outermost header: with one outer source port,
        // each flow (and each new flow) is a new outer source address, i.e. another
        // remote VTEP; the inner frame is the IPv4 one.
        Class::VxlanDecap => vec![
            "--encap",
            "vxlan4-ipv4",
            "--vni",
            &vni,
            "--outer-sport",
            "65535",
        ],
        Class::Ipv4 | Class::VxlanEncap | Class::Ipv4Ct => vec![],
    };
    args.into_iter().map(String::from).collect()
}

/// The long flags (`--name`) an `--help` text lists.
pub fn help_flags(help: &str) -> Vec<String> {
    let mut v: Vec<String> = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[' || c == ']')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .to_string()
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The last `n` lines of a log file (for error messages).
pub fn tail(path: &Path, n: usize) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(case: Case, dir: &Path) -> GenJob<'_> {
        GenJob {
            ns: "fpl1-gen",
            iface: "gen0",
            src_mac: "02:f1:00:00:00:01",
            dst_mac: "02:f1:00:00:00:02",
            dst_ip: "10.10.2.2",
            case,
            class: Class::Ipv4,
            flows: 1000,
            secs: 20,
            cpu: 0,
            part: (0, 1),
            rate: None,
            random_order: false,
            dir,
        }
    }

    /// `flowpath gen` at /bin/flowpath whose `--help` lists the flags in `help`.
    fn flowpath_gen(help: &str) -> Generator {
        Generator {
            kind: GenKind::Flowpath {
                exe: "/bin/flowpath".into(),
                flags: help_flags(help),
            },
        }
    }

    #[test]
    fn trafgen_hit_config_cycles_through_the_flows() {
        let d = std::env::temp_dir();
        let c = trafgen_config(&job(Case::Hit, &d));
        // 10.1.0.1 = 167837697; 1,000 addresses.
        assert!(c.contains("sa=dinc(167837697, 167838696)"), "{c}");
        assert!(c.contains("da=02:f1:00:00:00:02"));
        assert!(c.contains("da=10.10.2.2"));
        assert!(c.contains("fill(0, 18)"), "60-byte frames: {c}");
    }

    #[test]
    fn trafgen_miss_config_counts_through_ten_slash_eight() {
        let d = std::env::temp_dir();
        let c = trafgen_config(&job(Case::Miss, &d));
        assert!(c.contains("sa=dinc(167772160, 184549375)"), "{c}");
    }

    #[test]
    fn flowpath_gen_gets_only_the_flags_it_has() {
        let d = std::env::temp_dir();
        let g = flowpath_gen("  --tx <IFACE>  send\n  --dst-mac <MAC>\n  --duration <S>");
        let v = g.argv(&job(Case::Miss, &d)).unwrap();
        let s = v.join(" ");
        assert!(
            s.starts_with("taskset -c 0 /bin/flowpath gen --tx gen0 --duration 20"),
            "{s}"
        );
        assert!(s.contains("--miss-rate 100%"));
        assert!(s.contains("--dst-mac 02:f1:00:00:00:02"));
        assert!(!s.contains("--src-mac"));
    }

    #[test]
    fn the_classes_make_their_frames() {
        let d = std::env::temp_dir();
        let g = flowpath_gen("  --tx <IFACE>\n  --outer-sport <PORT>");
        let argv = |class, case| {
            g.argv(&GenJob {
                class,
                ..job(case, &d)
            })
            .unwrap()
            .join(" ")
        };
        let v4 = argv(Class::Ipv4, Case::Hit);
        assert!(!v4.contains("--encap"), "{v4}");
        assert_eq!(argv(Class::VxlanEncap, Case::Hit), v4, "encap: IPv4 in");
        let v6 = argv(Class::Ipv6, Case::Miss);
        assert!(v6.contains("--encap ipv6"), "{v6}");
        assert!(v6.contains("--dst 2001:db8:2::2"), "{v6}");
        assert!(
            v6.contains("--src 2001:db8:1::8000:1-2001:db8:1::ffff:fffe"),
            "{v6}"
        );
        let v6 = argv(Class::Ipv6, Case::Hit);
        assert!(v6.contains("--src 2001:db8:1::1+1000"), "{v6}");
        let vx = argv(Class::VxlanDecap, Case::Hit);
        assert!(
            vx.contains("--encap vxlan4-ipv4 --vni 42 --outer-sport 65535"),
            "{vx}"
        );
        assert!(g.cannot(Class::VxlanDecap).is_none());
        let t = Generator {
            kind: GenKind::Trafgen {
                exe: "/usr/sbin/trafgen".into(),
            },
        };
        assert!(t.cannot(Class::Ipv4).is_none() && t.cannot(Class::VxlanEncap).is_none());
        assert!(t.cannot(Class::Ipv6).is_some());
        assert!(t
            .argv(&GenJob {
                class: Class::VxlanDecap,
                ..job(Case::Hit, &d)
            })
            .is_err());
    }

    #[test]
    fn generators_side_by_side_share_the_addresses() {
        assert_eq!(share(10, 1000, (0, 1)), (10, 1000));
        assert_eq!(share(10, 1001, (0, 2)), (10, 500));
        assert_eq!(share(10, 1001, (1, 2)), (510, 501));
        let d = std::env::temp_dir();
        let g = flowpath_gen("  --tx <IFACE>");
        let argv = |case, part, class| {
            g.argv(&GenJob {
                part,
                class,
                ..job(case, &d)
            })
            .map(|v| v.join(" "))
        };
        let a = argv(Case::Hit, (0, 2), Class::Ipv4).unwrap();
        let b = argv(Case::Hit, (1, 2), Class::Ipv4).unwrap();
        assert!(a.contains("--flows 500 --src 10.1.0.1+500"), "{a}");
        assert!(b.contains("--flows 500 --src 10.1.1.245+500"), "{b}");
        let a = argv(Case::Miss, (0, 2), Class::Ipv4).unwrap();
        let b = argv(Case::Miss, (1, 2), Class::Ipv4).unwrap();
        assert!(a.contains("--src 10.0.0.1-10.127.255.255"), "{a}");
        assert!(b.contains("--src 10.128.0.0-10.255.255.254"), "{b}");
        assert!(argv(Case::Hit, (0, 2), Class::Ipv6).is_err());
        let t = Generator {
            kind: GenKind::Trafgen {
                exe: "/usr/sbin/trafgen".into(),
            },
        };
        assert!(t
            .argv(&GenJob {
                part: (0, 2),
                ..job(Case::Hit, &d)
            })
            .is_err());
    }

    #[test]
    fn random_flow_order_goes_to_flowpath_gen_in_the_hit_case_only() {
        let d = std::env::temp_dir();
        let random = |g: &Generator, case| {
            g.argv(&GenJob {
                random_order: true,
                ..job(case, &d)
            })
            .map(|v| v.join(" "))
        };
        let g = flowpath_gen("  --tx <IFACE>\n  --order <ORDER>");
        let hit = random(&g, Case::Hit).unwrap();
        assert!(hit.contains(" --order random "), "{hit}");
        let miss = random(&g, Case::Miss).unwrap();
        assert!(!miss.contains("--order"), "every packet new: {miss}");
        let plain = g.argv(&job(Case::Hit, &d)).unwrap().join(" ");
        assert!(!plain.contains("--order"), "{plain}");
        assert!(
            random(&flowpath_gen("  --tx <IFACE>"), Case::Hit).is_err(),
            "no --order"
        );
        let t = Generator {
            kind: GenKind::Trafgen {
                exe: "/usr/sbin/trafgen".into(),
            },
        };
        assert!(
            random(&t, Case::Hit).is_err(),
            "trafgen counts through the flows"
        );
    }

    #[test]
    fn a_paced_generator_gets_its_rate() {
        let d = std::env::temp_dir();
        let paced = |g: &Generator| {
            g.argv(&GenJob {
                rate: Some(1.1e6),
                ..job(Case::Hit, &d)
            })
            .map(|v| v.join(" "))
        };
        let g = flowpath_gen("  --tx <IFACE>\n  --rate <PPS>");
        let v = paced(&g).unwrap();
        assert!(v.contains(" --rate 1100000 "), "{v}");
        let unpaced = g.argv(&job(Case::Hit, &d)).unwrap().join(" ");
        assert!(!unpaced.contains("--rate"), "{unpaced}");
        assert!(
            paced(&flowpath_gen("  --tx <IFACE>")).is_err(),
            "no --rate to pace with"
        );
        let t = Generator {
            kind: GenKind::Trafgen {
                exe: "/usr/sbin/trafgen".into(),
            },
        };
        assert!(paced(&t).is_err(), "trafgen is not paced");
    }

    #[test]
    fn help_flags_finds_long_flags() {
        let f = help_flags(
            "Options:\n  --tx <IFACE>      x\n  -r, --rate <PPS>  y\n      --json\n  [--flows=N]",
        );
        assert_eq!(f, vec!["--flows", "--json", "--rate", "--tx"]);
    }
}
