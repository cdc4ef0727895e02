//! `NetlinkUnderlay` against real kernel tables: network namespaces joined by veth pairs,
//! a gateway namespace, routes and neighbours. Needs root; skips (saying why) otherwise.
//!
//! The topology (`fpul<pid>-<n>-{h,gw,r,o}`; interface names are per namespace):
//!
//! ```text
//!  h (flowpath's host)            gw                      r
//!  fp0 10.77.1.1  fd77:1::1 ---- g0 10.77.1.2 fd77:1::2
//!  fp1 10.77.5.1  fd77:5::1 ---- g2 10.77.5.2 fd77:5::2
//!                                 g1 10.77.2.1 fd77:2::1 ---- r0 10.77.2.2 fd77:2::2
//!  other0 10.77.3.1 ------------- o: o0 10.77.3.2
//!  routes in h: 10.77.2.0/24 via 10.77.1.2 dev fp0, fd77:2::/64 via fd77:1::2 dev fp0,
//!               10.77.4.0/24 via 10.77.3.2 dev other0
//! ```
//!
//! flowpath's underlay ports are fp0 (port 1) and fp1 (port 2); other0 is not one.

use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use flowpath_underlay::{
    HopMiss, NetlinkUnderlay, Refusal, UnderlayConfig, UnderlayPort, UnderlayResolver,
};

const FP0_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 0x01];
const FP1_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 0x02];
const G0_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 1, 0x01];
const G2_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 1, 0x02];
/// Generous: resolution on veth takes milliseconds, but CI machines are shared.
const DEADLINE: Duration = Duration::from_secs(20);

/// Why these tests cannot run here (not root, no namespaces), or `None`. Probed once per
/// test binary (the tests run in parallel).
fn skip_reason() -> Option<String> {
    static REASON: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    REASON.get_or_init(probe).clone()
}

fn probe() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces)".into());
    }
    let probe = format!("fpul{}-probe", std::process::id());
    let _ = Command::new("ip").args(["netns", "del", &probe]).output();
    match Command::new("ip").args(["netns", "add", &probe]).output() {
        Ok(o) if o.status.success() => {
            let _ = Command::new("ip").args(["netns", "del", &probe]).output();
            None
        }
        Ok(o) => Some(format!(
            "cannot create a network namespace: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("needs `ip` from iproute2: {e}")),
    }
}

/// Build the namespaces and run `f` with them on a thread inside the host namespace; a
/// note and nothing else where they cannot be made.
fn in_topo(f: impl FnOnce(&Topo) + Send) {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED {}: {why}", module_path!());
        return;
    }
    let t = Topo::new();
    t.in_host(|| f(&t));
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run `ip -n ns` with `words` (split at spaces) after it.
fn ip_n(ns: &str, words: &str) {
    let mut args = vec!["ip", "-n", ns];
    args.extend(words.split_whitespace());
    sh(&args);
}

/// Run `words` (split at spaces) in namespace `ns` with `ip netns exec`.
fn ip_netns_exec(ns: &str, words: &str) {
    let mut args = vec!["ip", "netns", "exec", ns];
    args.extend(words.split_whitespace());
    sh(&args);
}

fn mac_str(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The namespaces; deleted on drop (veths go with them).
struct Topo {
    h: String,
    gw: String,
    r: String,
    o: String,
}

impl Drop for Topo {
    fn drop(&mut self) {
        for ns in [&self.h, &self.gw, &self.r, &self.o] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

impl Topo {
    fn new() -> Topo {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = format!(
            "fpul{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let t = Topo {
            h: format!("{p}-h"),
            gw: format!("{p}-gw"),
            r: format!("{p}-r"),
            o: format!("{p}-o"),
        };
        for ns in [&t.h, &t.gw, &t.r, &t.o] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            sh(&["ip", "netns", "add", ns]);
            ip_n(ns, "link set lo up");
        }
        ip_netns_exec(&t.gw, "sysctl -qw net.ipv4.ip_forward=1");
        ip_netns_exec(&t.gw, "sysctl -qw net.ipv6.conf.all.forwarding=1");
        t.veth(&t.h, "fp0", Some(FP0_MAC), &t.gw, "g0", Some(G0_MAC));
        t.veth(&t.h, "fp1", Some(FP1_MAC), &t.gw, "g2", Some(G2_MAC));
        t.veth(&t.gw, "g1", None, &t.r, "r0", None);
        t.veth(&t.h, "other0", None, &t.o, "o0", None);
        for (ns, dev, v4, v6) in [
            (&t.h, "fp0", "10.77.1.1/24", "fd77:1::1/64"),
            (&t.gw, "g0", "10.77.1.2/24", "fd77:1::2/64"),
            (&t.h, "fp1", "10.77.5.1/24", "fd77:5::1/64"),
            (&t.gw, "g2", "10.77.5.2/24", "fd77:5::2/64"),
            (&t.gw, "g1", "10.77.2.1/24", "fd77:2::1/64"),
            (&t.r, "r0", "10.77.2.2/24", "fd77:2::2/64"),
            (&t.h, "other0", "10.77.3.1/24", "fd77:3::1/64"),
            (&t.o, "o0", "10.77.3.2/24", "fd77:3::2/64"),
        ] {
            ip_n(ns, &format!("addr add {v4} dev {dev}"));
            ip_n(ns, &format!("addr add {v6} dev {dev} nodad"));
            ip_n(ns, &format!("link set {dev} up"));
        }
        ip_n(&t.h, "route add 10.77.2.0/24 via 10.77.1.2 dev fp0");
        ip_n(&t.h, "-6 route add fd77:2::/64 via fd77:1::2 dev fp0");
        ip_n(&t.h, "route add 10.77.4.0/24 via 10.77.3.2 dev other0");
        ip_n(&t.r, "route add default via 10.77.2.1");
        ip_n(&t.r, "-6 route add default via fd77:2::1");
        t
    }

    fn veth(
        &self,
        a: &str,
        x: &str,
        xmac: Option<[u8; 6]>,
        b: &str,
        y: &str,
        ymac: Option<[u8; 6]>,
    ) {
        let mut args: Vec<String> = ["ip", "-n", a, "link", "add", x]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if let Some(m) = xmac {
            args.extend(["address".into(), mac_str(m)]);
        }
        args.extend(["type", "veth", "peer", "name", y].map(String::from));
        if let Some(m) = ymac {
            args.extend(["address".into(), mac_str(m)]);
        }
        args.extend(["netns".into(), b.to_string()]);
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        sh(&refs);
    }

    /// Run `f` on a thread inside the host namespace: the underlay's sockets (and its
    /// thread) belong to the namespace of the thread that creates it.
    fn in_host<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.h);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns = std::fs::File::open(&path).unwrap();
                // SAFETY: setns on this thread with a namespace fd we hold open.
                let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap()
        })
    }

    /// The host's neighbour entry for `ip`, as `ip neigh` prints it (empty if none).
    fn neigh(&self, ip: &str) -> String {
        let out = Command::new("ip")
            .args(["-n", &self.h, "neigh", "show", "to", ip])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

fn ports() -> Vec<UnderlayPort> {
    vec![
        UnderlayPort {
            port: 1,
            ifname: "fp0".into(),
        },
        UnderlayPort {
            port: 2,
            ifname: "fp1".into(),
        },
    ]
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Poll `f` until it returns `Some`, or panic after [`DEADLINE`] with `what`.
fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn state_of(u: &NetlinkUnderlay, r: IpAddr) -> Option<Result<flowpath_underlay::Route, Refusal>> {
    u.status(r).map(|s| s.route)
}

#[test]
fn direct_and_routed_hops_ipv4_and_ipv6_resolve_on_demand() {
    in_topo(|t| {
        let u = NetlinkUnderlay::new(ports(), &[]).unwrap();
        let cases = [
            // (remote, next hop, expected source)
            ("10.77.1.2", "10.77.1.2", "10.77.1.1"),
            ("10.77.2.2", "10.77.1.2", "10.77.1.1"),
            ("fd77:1::2", "fd77:1::2", "fd77:1::1"),
            ("fd77:2::2", "fd77:1::2", "fd77:1::1"),
        ];
        for (remote, next_hop, src) in cases {
            let remote = ip(remote);
            // Nothing resolved it yet: no hop, no kernel entry for the next hop.
            if t.neigh(next_hop).is_empty() {
                assert_eq!(u.hop(remote), None, "{remote}");
            }
            assert_eq!(u.miss(remote), HopMiss::NeighUnresolved);
            let g0 = u.generation();
            u.resolve(remote);
            let hop = wait(&format!("a hop to {remote}"), || u.hop(remote));
            assert!(u.generation() > g0);
            assert_eq!(hop.port, 1, "{remote}");
            assert_eq!(hop.src_mac, FP0_MAC, "{remote}");
            assert_eq!(hop.dst_mac, G0_MAC, "{remote}: the gateway's MAC");
            assert_eq!(hop.src_ip, ip(src), "{remote}");
            let route = state_of(&u, remote).unwrap().unwrap();
            assert_eq!(route.next_hop, ip(next_hop));
            assert_eq!(route.ifname, "fp0");
            assert_eq!(route.gateway.is_some(), next_hop != remote.to_string());
            // The kernel resolved it (resolve() asked it to).
            let entry = t.neigh(next_hop);
            assert!(entry.contains(&mac_str(G0_MAC)), "{entry}");
        }
        let s = u.stats();
        assert_eq!((s.remotes, s.resolved), (4, 4), "{s:?}");
        assert!(s.neigh_requests >= 2, "{s:?}");
        assert_eq!(s.neigh_request_errors, 0, "{s:?}");
        assert!(s.missing_ports.is_empty());
    });
}

#[test]
fn unanswered_neighbour_stays_unresolved_and_is_counted() {
    in_topo(|t| {
        // Given at start: looked up (and resolution asked for) before new() returns.
        let nobody = ip("10.77.1.99");
        let nobody6 = ip("fd77:1::99");
        let cfg = UnderlayConfig {
            resolve_interval: Duration::from_millis(50),
            ..UnderlayConfig::default()
        };
        let u = NetlinkUnderlay::with_config(ports(), &[nobody, nobody6], cfg).unwrap();
        for r in [nobody, nobody6] {
            match state_of(&u, r).unwrap() {
                Err(Refusal::NeighbourUnresolved {
                    next_hop, ifname, ..
                }) => {
                    assert_eq!(next_hop, r);
                    assert_eq!(ifname, "fp0");
                }
                other => panic!("{r}: {other:?}"),
            }
            assert_eq!(u.hop(r), None);
            assert_eq!(u.miss(r), HopMiss::NeighUnresolved);
            assert!(u.status(r).unwrap().refused >= 1);
        }
        // The kernel is probing for it (INCOMPLETE), then gives up (FAILED); either way
        // the entry stays refused, and the state is named.
        let shown = wait("the kernel's entry for 10.77.1.99", || {
            let s = t.neigh("10.77.1.99");
            (!s.is_empty()).then_some(s)
        });
        assert!(
            shown.contains("INCOMPLETE") || shown.contains("FAILED"),
            "{shown}"
        );
        let why = wait(
            "the refusal to name the kernel's state",
            || match state_of(&u, nobody).unwrap() {
                Err(e @ Refusal::NeighbourUnresolved { state, .. }) if state != "none" => Some(e),
                _ => None,
            },
        );
        assert!(why.to_string().contains("unresolved"), "{why}");
        // resolve() while one is outstanding: rate-limited, never blocks.
        for _ in 0..1000 {
            u.resolve(nobody);
        }
        assert_eq!(u.hop(nobody), None);
    });
}

#[test]
fn route_and_neighbour_changes_are_seen() {
    in_topo(|t| {
        let remote = ip("10.77.2.2");
        let remote6 = ip("fd77:2::2");
        let u = NetlinkUnderlay::new(ports(), &[remote, remote6]).unwrap();
        for r in [remote, remote6] {
            let h = wait("the first hops", || u.hop(r));
            assert_eq!((h.port, h.dst_mac), (1, G0_MAC));
        }

        // The route moves to fp1 via another gateway.
        let g = u.generation();
        ip_n(&t.h, "route replace 10.77.2.0/24 via 10.77.5.2 dev fp1");
        ip_n(&t.h, "-6 route replace fd77:2::/64 via fd77:5::2 dev fp1");
        for r in [remote, remote6] {
            let h = wait(&format!("{r} to move to fp1"), || {
                u.resolve(r);
                u.hop(r).filter(|h| h.port == 2)
            });
            assert_eq!(h.dst_mac, G2_MAC);
            assert_eq!(h.src_mac, FP1_MAC);
            assert_eq!(
                h.src_ip,
                ip(if r.is_ipv4() {
                    "10.77.5.1"
                } else {
                    "fd77:5::1"
                })
            );
        }
        assert!(u.generation() > g);

        // The gateway's MAC changes in the neighbour table.
        let new_mac = [0x02, 0, 0, 0, 0, 0x99];
        let g = u.generation();
        let mac = mac_str(new_mac);
        for gw in ["10.77.5.2", "fd77:5::2"] {
            ip_n(
                &t.h,
                &format!("neigh replace {gw} dev fp1 lladdr {mac} nud permanent"),
            );
        }
        for r in [remote, remote6] {
            wait(&format!("{r}'s next hop MAC to change"), || {
                u.hop(r).filter(|h| h.dst_mac == new_mac)
            });
        }
        assert!(u.generation() > g);

        // The neighbour goes away: the hop goes with it.
        let g = u.generation();
        ip_n(&t.h, "neigh del 10.77.5.2 dev fp1");
        wait("the hop to go with the neighbour", || {
            u.hop(remote).is_none().then_some(())
        });
        assert!(u.generation() > g);
        // And an unrelated change does not bump the generation: an address on other0.
        let g = u.generation();
        let st = u.status(remote6).unwrap().route;
        ip_n(&t.h, "addr add 10.77.9.1/24 dev other0");
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(u.status(remote6).unwrap().route, st);
        assert_eq!(u.generation(), g);
    });
}

#[test]
fn remotes_not_via_a_flowpath_port_are_refused_with_their_reason() {
    in_topo(|t| {
        let other = ip("10.77.4.2");
        let direct_other = ip("fd77:3::2");
        let unroutable = ip("10.99.0.1");
        let local = ip("10.77.1.1");
        let u = NetlinkUnderlay::new(ports(), &[other, direct_other, unroutable, local]).unwrap();
        for r in [other, direct_other] {
            let e = state_of(&u, r).unwrap().unwrap_err();
            assert_eq!(e.name(), "not_flowpath_port", "{r}: {e}");
            assert_eq!(
                e.to_string(),
                "no route via a flowpath port (the route leaves by other0)"
            );
            assert_eq!(u.hop(r), None);
            assert_eq!(u.hop(r), None);
            assert_eq!(u.miss(r), HopMiss::NoRoute);
            assert_eq!(u.status(r).unwrap().refused, 2);
            // Nothing to resolve: no neighbour request goes out for it.
            u.resolve(r);
        }
        let e = state_of(&u, unroutable).unwrap().unwrap_err();
        assert_eq!(e.name(), "no_route", "{e}");
        let e = state_of(&u, local).unwrap().unwrap_err();
        assert_eq!(e.to_string(), "route type local");
        std::thread::sleep(Duration::from_millis(100));
        assert!(t.neigh("10.77.3.2").is_empty(), "{}", t.neigh("10.77.3.2"));

        // A route towards other0 moved onto fp0 is accepted at once (events).
        ip_n(&t.h, "route replace 10.77.4.0/24 via 10.77.1.2 dev fp0");
        wait("10.77.4.2 to be routed via fp0", || {
            u.resolve(other);
            u.hop(other).filter(|h| h.port == 1)
        });

        // A missing underlay port is reported.
        let mut p = ports();
        p.push(UnderlayPort {
            port: 3,
            ifname: "nosuch0".into(),
        });
        let u2 = NetlinkUnderlay::new(p, &[]).unwrap();
        assert_eq!(u2.stats().missing_ports, vec!["nosuch0".to_string()]);
    });
}
