//! The lab's topology — `fpl<pid>-gen` —veth— `fpl<pid>-sw` —veth— `fpl<pid>-sink`, plus a
//! direct gen—sink pair for measuring the generator alone: its addresses, how it is built,
//! its queues and NAPI threads, and its interfaces' counters. What the run created is
//! registered ([`crate::registry`]) and torn down on drop ([`crate::teardown`]); both are
//! re-exported here, where the lab's users have always found them.

use crate::registry::register_namespace;
use crate::sh;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::registry::{
    interrupted, register_dir, register_hugepages_restore, register_mount, register_pid,
    restore_file, set_file, take_hugepages_restore, unregister_mount, unregister_pid,
};
pub use crate::teardown::{
    cleanup_all, cleanup_leftovers, install_signal_handler, kill_namespace_processes,
    pid_of_namespace, run_id, PREFIX,
};

/// Fixed addresses: the generator's frames go to `SWIN_MAC` / `SINK_IP`, so Linux
/// forwarding routes them and the other switches simply forward them.
/// `flowpath gen` sends from 02:00:00:00:00:01 to 02:00:00:00:00:02 (its defaults), so
/// those are the generator's and the switch's (and on the direct pair the sink's) MACs.
pub const GEN_MAC: &str = "02:00:00:00:00:01";
pub const SWIN_MAC: &str = "02:00:00:00:00:02";
pub const SWOUT_MAC: &str = "02:00:00:00:00:03";
pub const SINK_MAC: &str = "02:00:00:00:00:04";
pub const GDIR_MAC: &str = "02:00:00:00:00:01";
pub const SDIR_MAC: &str = "02:00:00:00:00:02";
pub const GEN_IP: &str = "10.10.1.2";
pub const SWIN_IP: &str = "10.10.1.1";
pub const SWOUT_IP: &str = "10.10.2.1";
pub const SINK_IP: &str = "10.10.2.2";
pub const GDIR_IP: &str = "10.10.3.2";
pub const SDIR_IP: &str = "10.10.3.1";

/// The interfaces, by namespace: gen ns `gen0`, `gdir0`; sw ns `swin`, `swout`; sink ns
/// `sink0`, `sdir0`.
pub const GEN_IF: &str = "gen0";
pub const SWIN_IF: &str = "swin";
pub const SWOUT_IF: &str = "swout";
pub const SINK_IF: &str = "sink0";
pub const GDIR_IF: &str = "gdir0";
pub const SDIR_IF: &str = "sdir0";

/// The most queues the switch's veth pairs can be given (one per worker of the
/// multi-worker rows).
pub const MAX_SWITCH_QUEUES: u32 = 2;

/// The three namespaces and the interfaces between them. Dropping it tears everything
/// the run registered down.
pub struct Topology {
    pub id: String,
    pub gen: String,
    pub sw: String,
    pub sink: String,
    /// Where this run keeps its files (configs, OVS run directory, logs).
    pub dir: PathBuf,
    /// Why the sinks have no XDP program, when they have none.
    pub sink_xdp_note: Option<String>,
}

impl Topology {
    /// Build the topology with namespace names `<id>-gen`, `<id>-sw`, `<id>-sink`.
    /// `xdp_obj` is a compiled XDP program attached natively to `sink0` and `sdir0`.
    pub fn create(id: &str, xdp_obj: Option<&Path>) -> Result<Topology, String> {
        let dir = std::env::temp_dir().join(format!("{id}-lab"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        register_dir(&dir);
        let mut t = Topology {
            id: id.to_string(),
            gen: format!("{id}-gen"),
            sw: format!("{id}-sw"),
            sink: format!("{id}-sink"),
            dir,
            sink_xdp_note: None,
        };
        t.sink_xdp_note = t.build(xdp_obj)?;
        Ok(t)
    }

    fn build(&self, xdp_obj: Option<&Path>) -> Result<Option<String>, String> {
        self.add_namespaces()?;
        self.add_links()?;
        let note = self.sink_xdp(xdp_obj);
        for (ns, ifname) in [
            (&self.gen, GEN_IF),
            (&self.gen, GDIR_IF),
            (&self.sw, SWIN_IF),
            (&self.sw, SWOUT_IF),
            (&self.sink, SINK_IF),
            (&self.sink, SDIR_IF),
        ] {
            sh::ip(&["-n", ns, "link", "set", ifname, "up"])?;
        }
        self.add_routes()?;
        Ok(note)
    }

    /// The three namespaces, without IPv6 (no neighbour discovery or MLD frames to count
    /// at the sink), loopback up.
    fn add_namespaces(&self) -> Result<(), String> {
        for ns in [&self.gen, &self.sw, &self.sink] {
            sh::ip(&["netns", "add", ns])?;
            register_namespace(ns);
            // No IPv6: no neighbour discovery or MLD frames to count at the sink.
            let _ = sh::run(
                Some(ns),
                "sysctl",
                &["-qw", "net.ipv6.conf.all.disable_ipv6=1"],
            );
            let _ = sh::run(
                Some(ns),
                "sysctl",
                &["-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            );
            sh::ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// The veth pairs gen—switch, switch—sink, gen—sink (direct), with their addresses.
    /// The two on the switch's path have room for [`MAX_SWITCH_QUEUES`] queues each way
    /// but run with one (what every system but the multi-worker rows binds to) until
    /// [`Topology::switch_queues`] raises it; where `ethtool -L` cannot lower a veth's
    /// channels they are made with one queue.
    fn add_links(&self) -> Result<(), String> {
        let pair = |ns: &str, a: &str, amac: &str, peer_ns: &str, b: &str, bmac: &str, q: u32| {
            let q = q.to_string();
            sh::ip(&[
                "-n",
                ns,
                "link",
                "add",
                a,
                "address",
                amac,
                "numrxqueues",
                &q,
                "numtxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                b,
                "address",
                bmac,
                "numrxqueues",
                &q,
                "numtxqueues",
                &q,
                "netns",
                peer_ns,
            ])
        };
        let switch_pairs = |q: u32| -> Result<(), String> {
            pair(&self.gen, GEN_IF, GEN_MAC, &self.sw, SWIN_IF, SWIN_MAC, q)?;
            pair(
                &self.sw, SWOUT_IF, SWOUT_MAC, &self.sink, SINK_IF, SINK_MAC, q,
            )
            .map(|_| ())
        };
        switch_pairs(MAX_SWITCH_QUEUES)?;
        if self.switch_queues(1).is_err() {
            let _ = sh::ip(&["-n", &self.gen, "link", "del", GEN_IF]);
            let _ = sh::ip(&["-n", &self.sw, "link", "del", SWOUT_IF]);
            switch_pairs(1)?;
        }
        pair(
            &self.gen, GDIR_IF, GDIR_MAC, &self.sink, SDIR_IF, SDIR_MAC, 1,
        )?;
        for (ns, ifname, addr) in [
            (&self.gen, GEN_IF, format!("{GEN_IP}/24")),
            (&self.sink, SINK_IF, format!("{SINK_IP}/24")),
            (&self.gen, GDIR_IF, format!("{GDIR_IP}/24")),
            (&self.sink, SDIR_IF, format!("{SDIR_IP}/24")),
        ] {
            sh::ip(&["-n", ns, "addr", "add", &addr, "dev", ifname])?;
        }
        Ok(())
    }

    /// The XDP drop program on the sinks; a note when it could not be attached.
    fn sink_xdp(&self, xdp_obj: Option<&Path>) -> Option<String> {
        let mut note = None;
        match xdp_obj {
            Some(obj) => {
                let obj = obj.to_string_lossy();
                for (ns, ifname) in [(&self.sink, SINK_IF), (&self.sink, SDIR_IF)] {
                    if let Err(e) = sh::ip(&[
                        "-n", ns, "link", "set", "dev", ifname, "xdpdrv", "obj", &obj, "sec", "xdp",
                    ]) {
                        note = Some(format!("no XDP program on the sinks: {e}"));
                    }
                }
            }
            None => note = Some("no XDP program on the sinks (built without clang)".into()),
        }
        note
    }

    /// The hosts' routes through the switch, with static neighbours (no ARP needed).
    fn add_routes(&self) -> Result<(), String> {
        sh::ip(&[
            "-n",
            &self.gen,
            "route",
            "add",
            "10.10.2.0/24",
            "via",
            SWIN_IP,
        ])?;
        sh::ip(&[
            "-n",
            &self.gen,
            "neigh",
            "replace",
            SWIN_IP,
            "lladdr",
            SWIN_MAC,
            "dev",
            GEN_IF,
            "nud",
            "permanent",
        ])?;
        sh::ip(&[
            "-n",
            &self.sink,
            "route",
            "add",
            "10.10.1.0/24",
            "via",
            SWOUT_IP,
        ])?;
        sh::ip(&[
            "-n",
            &self.sink,
            "neigh",
            "replace",
            SWOUT_IP,
            "lladdr",
            SWOUT_MAC,
            "dev",
            SINK_IF,
            "nud",
            "permanent",
        ])?;
        Ok(())
    }

    /// Give both veth pairs on the switch's path (gen0—swin, swout—sink0) `n` queues
    /// each way (`ethtool -L`; at most [`MAX_SWITCH_QUEUES`]). A veth puts a frame
    /// transmitted from XDP on the peer's rx queue of the sending CPU (CPU % queues), and
    /// an AF_XDP socket's on the queue it is bound to. Receivers are raised first and
    /// lowered last: a veth with an XDP program needs as many rx queues as its peer has
    /// tx queues.
    pub fn switch_queues(&self, n: u32) -> Result<(), String> {
        let mut ends = [
            (&self.sink, SINK_IF),
            (&self.sw, SWIN_IF),
            (&self.sw, SWOUT_IF),
            (&self.gen, GEN_IF),
        ];
        if n == 1 {
            ends.reverse();
        }
        let queues = n;
        let n = n.to_string();
        for (ns, ifname) in ends {
            sh::run(Some(ns), "ethtool", &["-L", ifname, "rx", &n, "tx", &n])
                .map_err(|e| format!("{ifname}: {n} queue(s): {e}"))?;
        }
        if queues > 1 {
            self.gen_queue_per_cpu(queues)?;
        }
        Ok(())
    }

    /// Transmit queue `q` of the generator's veth for the CPUs `c` with `c % queues == q`
    /// (XPS), so a generator sending through a packet socket (where the kernel refuses
    /// live frames) reaches the rx queue of its CPU, as XDP frames do. Without it, on a
    /// VM that refused live frames, every frame of both generators reached one queue.
    fn gen_queue_per_cpu(&self, queues: u32) -> Result<(), String> {
        let cpus = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(64);
        for q in 0..queues as usize {
            let mask: u64 = (0..cpus)
                .filter(|c| c % queues as usize == q)
                .fold(0, |m, c| m | 1 << c);
            let file = format!("/sys/class/net/{GEN_IF}/queues/tx-{q}/xps_cpus");
            sh::run(
                Some(&self.gen),
                "sh",
                &["-c", &format!("echo {mask:x} > {file}")],
            )
            .map_err(|e| format!("{GEN_IF}: XPS of tx queue {q}: {e}"))?;
        }
        Ok(())
    }

    /// Does `ifname` in `ns` have an XDP program attached in driver (native) mode? Only
    /// that makes a veth accept frames its peer transmits from XDP.
    pub fn has_native_xdp(&self, ns: &str, ifname: &str) -> bool {
        sh::ip(&["-n", ns, "-j", "link", "show", "dev", ifname])
            .ok()
            .map(|j| json_has_native_xdp(&j))
            .unwrap_or(false)
    }

    /// The `stats64` counters of an interface: (rx packets, tx packets).
    pub fn counters(&self, ns: &str, ifname: &str) -> Result<(u64, u64), String> {
        self.link_stats(ns, ifname)
            .map(|c| (c.rx_packets, c.tx_packets))
    }

    /// Packets each rx queue of a veth has taken through its XDP path (`ethtool -S`'s
    /// `rx_queue_<q>_xdp_packets`, which counts socket buffers and XDP frames alike while a
    /// program is attached), by queue.
    pub fn rx_queue_packets(&self, ns: &str, ifname: &str) -> Result<Vec<u64>, String> {
        let out = sh::run(Some(ns), "ethtool", &["-S", ifname])?;
        Ok(parse_rx_queue_packets(&out))
    }

    /// The `stats64` packet and byte counters of an interface.
    pub fn link_stats(&self, ns: &str, ifname: &str) -> Result<LinkStats, String> {
        let out = sh::ip(&["-n", ns, "-s", "-j", "link", "show", "dev", ifname])?;
        parse_link_stats(&out).ok_or_else(|| format!("no counters for {ifname} in {ns}"))
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        cleanup_all();
    }
}

/// Kernel threads whose name is `napi/<ifname>-<id>` (threaded NAPI of that interface),
/// from the `comm` of every task in `/proc`. Names are global: another namespace's
/// interface of the same name would match too (the lab's names are its own).
pub fn napi_threads(ifname: &str) -> Vec<u32> {
    let prefix = format!("napi/{ifname}-");
    let mut pids = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
                if is_napi_thread_of(comm.trim(), &prefix) {
                    pids.push(pid);
                }
            }
        }
    }
    pids
}

/// `comm` is `<prefix><napi id>` (comm is cut at 15 bytes, so the id may be partial).
fn is_napi_thread_of(comm: &str, prefix: &str) -> bool {
    comm.strip_prefix(prefix)
        .is_some_and(|id| id.chars().all(|c| c.is_ascii_digit()))
}

impl Topology {
    /// Run `ifname`'s receive (NAPI: for a veth, the XDP program and everything after it)
    /// in kernel threads (one per rx queue) pinned to `cpu` (a taskset list: "1", "0,1"),
    /// instead of in the softirq of whichever CPU sent the frame. Needs NAPI on the
    /// interface (an XDP program or GRO). Returns the threads pinned.
    pub fn napi_on_cpu(&self, ns: &str, ifname: &str, cpu: &str) -> Result<usize, String> {
        let knob = format!("/sys/class/net/{ifname}/threaded");
        sh::run(Some(ns), "sh", &["-c", &format!("echo 1 > {knob}")])
            .map_err(|e| format!("threaded NAPI on {ifname}: {e}"))?;
        let pids = sh::wait_for(Duration::from_secs(2), || {
            let p = napi_threads(ifname);
            (!p.is_empty()).then_some(p)
        })
        .ok_or_else(|| format!("no napi/{ifname}-* thread after setting {knob}"))?;
        for pid in &pids {
            sh::run(None, "taskset", &["-pc", cpu, &pid.to_string()])?;
        }
        Ok(pids.len())
    }

    /// Back to receiving in the sender's softirq (what `napi_on_cpu` changed).
    pub fn napi_unthreaded(&self, ns: &str, ifname: &str) {
        let _ = sh::run(
            Some(ns),
            "sh",
            &[
                "-c",
                &format!("echo 0 > /sys/class/net/{ifname}/threaded 2>/dev/null || true"),
            ],
        );
    }
}

/// Does `ip -j link show` output list a driver-mode (mode 1) XDP program?
pub fn json_has_native_xdp(json: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return false;
    };
    let xdp = &v[0]["xdp"];
    xdp["mode"] == 1
        || xdp["attached"]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p["mode"] == 1))
}

/// An interface's packet and byte counters (bytes: frames without the FCS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

/// (rx packets, tx packets) from `ip -s -j link show dev X`.
pub fn parse_link_counters(json: &str) -> Option<(u64, u64)> {
    parse_link_stats(json).map(|c| (c.rx_packets, c.tx_packets))
}

/// The packet and byte counters from `ip -s -j link show dev X`.
pub fn parse_link_stats(json: &str) -> Option<LinkStats> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let s = v.get(0)?.get("stats64")?;
    let n = |dir: &str, what: &str| s.get(dir)?.get(what)?.as_u64();
    Some(LinkStats {
        rx_packets: n("rx", "packets")?,
        tx_packets: n("tx", "packets")?,
        rx_bytes: n("rx", "bytes")?,
        tx_bytes: n("tx", "bytes")?,
    })
}

/// `rx_queue_<q>_xdp_packets: N` lines of `ethtool -S` output, by queue (missing queues
/// count 0).
pub fn parse_rx_queue_packets(text: &str) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::new();
    for line in text.lines() {
        let Some((name, n)) = line.trim().split_once(':') else {
            continue;
        };
        let q = name
            .strip_prefix("rx_queue_")
            .and_then(|r| r.strip_suffix("_xdp_packets"))
            .and_then(|q| q.parse::<usize>().ok());
        if let (Some(q), Ok(n)) = (q, n.trim().parse::<u64>()) {
            if v.len() <= q {
                v.resize(q + 1, 0);
            }
            v[q] = n;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn napi_thread_names_are_told_apart() {
        assert!(is_napi_thread_of("napi/swin-8193", "napi/swin-"));
        assert!(is_napi_thread_of("napi/swin-81", "napi/swin-"));
        assert!(!is_napi_thread_of("napi/swout-8193", "napi/swin-"));
        assert!(!is_napi_thread_of("napi/swin-x", "napi/swin-"));
        assert!(!is_napi_thread_of("ksoftirqd/1", "napi/swin-"));
    }

    #[test]
    fn native_xdp_is_told_from_generic() {
        let drv = r#"[{"ifname":"swin","xdp":{"mode":1,"prog":{"id":1}}}]"#;
        let skb = r#"[{"ifname":"swin","xdp":{"mode":2,"prog":{"id":1}}}]"#;
        let both = r#"[{"ifname":"swin","xdp":{"mode":4,"attached":[{"mode":2},{"mode":1}]}}]"#;
        assert!(json_has_native_xdp(drv));
        assert!(!json_has_native_xdp(skb));
        assert!(json_has_native_xdp(both));
        assert!(!json_has_native_xdp(r#"[{"ifname":"swin"}]"#));
    }

    #[test]
    fn rx_queue_packets_from_ethtool() {
        let out = "NIC statistics:\n     peer_ifindex: 7\n     rx_queue_0_xdp_packets: 1001\n     \
                   rx_queue_0_xdp_bytes: 60060\n     rx_queue_1_xdp_packets: 25\n     \
                   tx_queue_0_xdp_xmit: 0\n";
        assert_eq!(parse_rx_queue_packets(out), vec![1001, 25]);
        assert_eq!(
            parse_rx_queue_packets("     rx_queue_1_xdp_packets: 3\n"),
            vec![0, 3]
        );
        assert!(parse_rx_queue_packets("no statistics").is_empty());
    }

    #[test]
    fn link_counters_from_ip_json() {
        let j = r#"[{"ifindex":6,"ifname":"t1","stats64":{"rx":{"bytes":65286730,"packets":1419272,"errors":0},"tx":{"bytes":836,"packets":10}}}]"#;
        assert_eq!(parse_link_counters(j), Some((1419272, 10)));
        assert_eq!(
            parse_link_stats(j),
            Some(LinkStats {
                rx_packets: 1419272,
                tx_packets: 10,
                rx_bytes: 65286730,
                tx_bytes: 836,
            })
        );
        assert_eq!(parse_link_counters("[]"), None);
        assert_eq!(parse_link_counters("not json"), None);
    }
}
