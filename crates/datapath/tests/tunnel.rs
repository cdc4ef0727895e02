//! VXLAN tunnel ports through the datapath: receive maps a decapsulated packet to its
//! tunnel port (or drops it, named), output to a tunnel port encapsulates via the underlay
//! hop, the outer headers are what a peer expects (checked by parsing them back, and by
//! tshark when it is installed), every cache tier answers as the slow path does, and a
//! next hop still being resolved holds a few packets (then sends or drops them, named).

mod common;

use flowpath_datapath::{
    CaptureSink, Datapath, DatapathConfig, DatapathDrop, HopMiss, StaticUnderlay, TunnelKey,
    TunnelPort, TunnelRemote, Tunnels, UnderlayHop, UnderlayResolver, HOLD_MAX_AGE_SECS,
    HOLD_PER_REMOTE,
};
use flowpath_gen::{build, FrameSpec, Vxlan};
use flowpath_packet::key::{TUN_IPV6, TUN_PRESENT};
use flowpath_packet::{checksum, parse, Action, Field, FlowKey, ParseOptions};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

const UNDERLAY: u32 = 1;
const HOST: u32 = 2;
const UPLINK: u32 = 3;
const VX: u32 = 10;

const LOCAL4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const REMOTE4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const LOCAL6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const REMOTE6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const NH_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn hop(src: IpAddr) -> UnderlayHop {
    UnderlayHop {
        port: UPLINK,
        src_mac: SRC_MAC,
        dst_mac: NH_MAC,
        src_ip: src,
    }
}

fn tunnel(remote: IpAddr, local: IpAddr, vni: u32) -> TunnelPort {
    TunnelPort {
        local: Some(local),
        ..TunnelPort::vxlan(VX, "vx0", remote, vni)
    }
}

fn datapath(rules: Vec<RuleSpec>, tunnels: Option<Tunnels>, emc: bool) -> Datapath {
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    store.add(rules).unwrap();
    Datapath::new(
        store,
        DatapathConfig {
            emc,
            emc_insert_inv_prob: 1,
            smc_entries: 0,
            tunnels: tunnels.map(Arc::new),
            ..DatapathConfig::default()
        },
    )
}

fn static_tunnels(ports: Vec<TunnelPort>, hops: &[(IpAddr, UnderlayHop)]) -> Tunnels {
    let u = StaticUnderlay::new();
    for (r, h) in hops {
        u.insert(*r, *h);
    }
    Tunnels::new(ports, Arc::new(u))
}

fn inner_frame(i: u32) -> Vec<u8> {
    build(&FrameSpec::udp4(
        Ipv4Addr::from(0x0a00_0001 + i),
        Ipv4Addr::new(10, 1, 0, 1),
        1000 + i as u16,
        5001,
        64,
    ))
}

fn vxlan_frame(i: u32, vx: Vxlan) -> Vec<u8> {
    let mut spec = FrameSpec::udp4(
        Ipv4Addr::from(0x0a00_0001 + i),
        Ipv4Addr::new(10, 1, 0, 1),
        1000 + i as u16,
        5001,
        64,
    );
    spec.vxlan = Some(vx);
    build(&spec)
}

/// Run `frames` in on `port`, each in a buffer with 128 bytes of headroom.
fn run(dp: &mut Datapath, port: u32, frames: &[Vec<u8>]) -> Vec<(u32, Vec<u8>)> {
    let mut sink = CaptureSink::default();
    common::process(dp, port, frames.iter().map(Vec::as_slice), &mut sink);
    sink.packets
}

fn rule(m: Match, actions: Vec<Action>) -> RuleSpec {
    RuleSpec::new(0, 100, m).actions(actions)
}

#[test]
fn decap_enters_as_the_tunnel_port_in_every_tier() {
    let t = static_tunnels(
        vec![tunnel(REMOTE4.into(), LOCAL4.into(), 42)],
        &[(REMOTE4.into(), hop(LOCAL4.into()))],
    );
    let rules = vec![rule(
        Match::any().exact(Field::InPort, VX as u128),
        vec![Action::Output(HOST)],
    )];
    let frames: Vec<Vec<u8>> = (0..8)
        .map(|i| vxlan_frame(i, Vxlan::v4(42, REMOTE4, LOCAL4)))
        .collect();
    for emc in [true, false] {
        let mut dp = datapath(rules.clone(), Some(t.clone()), emc);
        // Pass 1: slow path; passes 2 and 3: the EMC (or megaflow) tier.
        for pass in 0..3 {
            let out = run(&mut dp, UNDERLAY, &frames);
            assert_eq!(out.len(), frames.len(), "pass {pass}, emc {emc}");
            for (i, (port, data)) in out.iter().enumerate() {
                assert_eq!(*port, HOST);
                assert_eq!(data[..], frames[i][50..], "the inner frame, pass {pass}");
            }
        }
        assert_eq!(dp.stats().upcalls, 1, "one megaflow for all eight");
        assert_eq!(dp.stats().decapsulated, 24);
        let (_, mf) = dp.megaflow_entries().next().unwrap();
        assert_eq!(
            mf.key().get(Field::InPort),
            VX as u128,
            "the megaflow is the tunnel port's"
        );
    }
}

#[test]
fn tunnel_fields_are_matched_after_decap() {
    let t = static_tunnels(
        vec![TunnelPort {
            key: TunnelKey::Flow,
            remote: TunnelRemote::Flow,
            ..tunnel(REMOTE4.into(), LOCAL4.into(), 0)
        }],
        &[],
    );
    let rules = vec![
        rule(
            Match::any()
                .exact(Field::InPort, VX as u128)
                .exact(Field::TunId, 7)
                .exact(Field::TunSrc, (u32::from(REMOTE4) as u128) << 96),
            vec![Action::Output(HOST)],
        ),
        RuleSpec::new(0, 1, Match::any()).actions([Action::Output(UPLINK)]),
    ];
    let mut dp = datapath(rules, Some(t), true);
    let out = run(
        &mut dp,
        UNDERLAY,
        &[
            vxlan_frame(0, Vxlan::v4(7, REMOTE4, LOCAL4)),
            vxlan_frame(0, Vxlan::v4(8, REMOTE4, LOCAL4)),
            vxlan_frame(0, Vxlan::v4(7, Ipv4Addr::new(192, 0, 2, 3), LOCAL4)),
        ],
    );
    let ports: Vec<u32> = out.iter().map(|o| o.0).collect();
    assert_eq!(ports, vec![HOST, UPLINK, UPLINK]);
}

#[test]
fn wrong_vni_unknown_remote_and_wrong_local_are_dropped_by_name() {
    let t = static_tunnels(vec![tunnel(REMOTE4.into(), LOCAL4.into(), 42)], &[]);
    let rules = vec![RuleSpec::new(0, 1, Match::any()).actions([Action::Output(HOST)])];
    let mut dp = datapath(rules, Some(t), true);
    let out = run(
        &mut dp,
        UNDERLAY,
        &[
            vxlan_frame(0, Vxlan::v4(43, REMOTE4, LOCAL4)),
            vxlan_frame(0, Vxlan::v4(42, Ipv4Addr::new(192, 0, 2, 3), LOCAL4)),
            vxlan_frame(0, Vxlan::v4(42, REMOTE4, Ipv4Addr::new(192, 0, 2, 9))),
            vxlan_frame(0, Vxlan::v6(42, REMOTE6, LOCAL6)),
        ],
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(dp.stats().dropped(DatapathDrop::VxlanNoTunnel), 4);
    assert!(dp.stats().drops().contains(&("vxlan_no_tunnel", 4)));
    // Plain traffic is not affected by the tunnel lookup.
    let out = run(&mut dp, UNDERLAY, &[inner_frame(0)]);
    assert_eq!(out, vec![(HOST, inner_frame(0))]);
    // A truncated VXLAN header keeps its parser drop reason.
    let mut f = vxlan_frame(0, Vxlan::v4(42, REMOTE4, LOCAL4));
    f.truncate(14 + 20 + 8 + 4);
    f[16..18].copy_from_slice(&(20u16 + 12).to_be_bytes());
    f[38..40].copy_from_slice(&12u16.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = checksum::finish(checksum::sum16(&f[14..34], 0));
    f[24..26].copy_from_slice(&c.to_be_bytes());
    assert!(run(&mut dp, UNDERLAY, &[f]).is_empty());
    assert_eq!(
        dp.stats().parse_drops[flowpath_packet::DropReason::VxlanTruncated as usize],
        1
    );
}

#[test]
fn without_tunnel_ports_vxlan_is_decapsulated_on_the_underlay_port() {
    let rules = vec![rule(
        Match::any()
            .exact(Field::InPort, UNDERLAY as u128)
            .exact(Field::TunId, 42),
        vec![Action::Output(HOST)],
    )];
    let mut dp = datapath(rules, None, true);
    let f = vxlan_frame(3, Vxlan::v4(42, REMOTE4, LOCAL4));
    let out = run(&mut dp, UNDERLAY, std::slice::from_ref(&f));
    assert_eq!(out, vec![(HOST, f[50..].to_vec())]);
}

/// What an encapsulated frame says, parsed back (and its checksums checked).
struct Outer {
    key: FlowKey,
    sport: u16,
    inner: Vec<u8>,
}

fn dissect(frame: &[u8]) -> Outer {
    let mut key = FlowKey::ZERO;
    let meta = parse(frame, UNDERLAY, &ParseOptions::default(), &mut key).expect("parses");
    assert_eq!(&frame[0..6], &NH_MAC);
    assert_eq!(&frame[6..12], &SRC_MAC);
    let v6 = key.get(Field::TunFlags) as u8 & TUN_IPV6 != 0;
    assert_ne!(key.get(Field::TunFlags) as u8 & TUN_PRESENT, 0);
    let l4 = if v6 { 54 } else { 34 };
    if v6 {
        assert_eq!(frame[14] >> 4, 6);
        assert_eq!(frame[21], 64, "hop limit");
        // UDP checksum over the pseudo-header verifies to zero.
        let mut acc = checksum::sum16(&frame[22..54], 0);
        acc += (frame.len() - l4) as u64 + 17;
        acc = checksum::sum16(&frame[l4..], acc);
        assert_ne!(&frame[l4 + 6..l4 + 8], &[0, 0], "computed over IPv6");
        assert_eq!(checksum::finish(acc), 0, "UDP checksum valid");
    } else {
        assert_eq!(frame[14], 0x45);
        assert_eq!(frame[20] & 0x40, 0x40, "DF");
        assert_eq!(frame[22], 64, "TTL");
        assert_eq!(checksum::finish(checksum::sum16(&frame[14..34], 0)), 0);
        assert_eq!(&frame[l4 + 6..l4 + 8], &[0, 0], "UDP checksum 0 over IPv4");
    }
    assert_eq!(frame[l4 + 8], 0x08, "the I flag");
    let sport = u16::from_be_bytes([frame[l4], frame[l4 + 1]]);
    assert!(sport >= 49152, "source port {sport}");
    assert_eq!(meta.l2 as usize, l4 + 16);
    Outer {
        key,
        sport,
        inner: frame[l4 + 16..].to_vec(),
    }
}

/// The local and the remote tunnel address, both IPv6 or both IPv4.
fn ends(v6: bool) -> (IpAddr, IpAddr) {
    if v6 {
        (LOCAL6.into(), REMOTE6.into())
    } else {
        (LOCAL4.into(), REMOTE4.into())
    }
}

fn tun_v4(a: Ipv4Addr) -> u128 {
    (u32::from(a) as u128) << 96
}

#[test]
fn encap_over_ipv4_and_ipv6_builds_what_a_peer_parses() {
    for v6 in [false, true] {
        let (local, remote) = ends(v6);
        let t = static_tunnels(vec![tunnel(remote, local, 42)], &[(remote, hop(local))]);
        let rules = vec![rule(
            Match::any().exact(Field::InPort, HOST as u128),
            vec![Action::Output(VX)],
        )];
        for emc in [true, false] {
            let mut dp = datapath(rules.clone(), Some(t.clone()), emc);
            let frames: Vec<Vec<u8>> = (0..64).map(inner_frame).collect();
            let mut sports = std::collections::HashSet::new();
            for pass in 0..3 {
                let out = run(&mut dp, HOST, &frames);
                assert_eq!(out.len(), frames.len());
                for (i, (port, data)) in out.iter().enumerate() {
                    assert_eq!(*port, UPLINK, "out on the hop's port");
                    let o = dissect(data);
                    assert_eq!(o.inner, frames[i], "pass {pass}");
                    assert_eq!(o.key.get(Field::TunId), 42);
                    let (s, d) = (o.key.get(Field::TunSrc), o.key.get(Field::TunDst));
                    if v6 {
                        assert_eq!((s, d), (u128::from(LOCAL6), u128::from(REMOTE6)));
                    } else {
                        assert_eq!((s, d), (tun_v4(LOCAL4), tun_v4(REMOTE4)));
                    }
                    sports.insert(o.sport);
                }
            }
            assert!(
                sports.len() > 32,
                "source ports spread by flow: {}",
                sports.len()
            );
            assert_eq!(dp.stats().encapsulated, 3 * 64);
            write_pcap_and_dissect(&run(&mut dp, HOST, &frames), if v6 { "v6" } else { "v4" });
        }
    }
}

/// With tshark installed: no malformed frame, and the VNI as sent.
fn write_pcap_and_dissect(out: &[(u32, Vec<u8>)], tag: &str) {
    if std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_err()
    {
        return;
    }
    let path =
        std::env::temp_dir().join(format!("flowpath-vxlan-{tag}-{}.pcap", std::process::id()));
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (_, f) in out {
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(&path, b).unwrap();
    let r = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&path)
        .args([
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
        ])
        .args([
            "-T",
            "fields",
            "-e",
            "_ws.malformed",
            "-e",
            "vxlan.vni",
            "-e",
            "_ws.expert",
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&r.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), out.len(), "{text}");
    for l in lines {
        let f: Vec<&str> = l.split('\t').collect();
        assert_eq!(f[0], "", "malformed: {l}");
        assert_eq!(f[1], "42", "{l}");
        assert!(f.get(2).is_none_or(|e| e.is_empty()), "expert info: {l}");
    }
}

#[test]
fn encap_then_decap_gives_back_the_inner_frame() {
    for v6 in [false, true] {
        let (a, b) = ends(v6);
        // Switch A sends to B over its tunnel; B receives on its uplink and forwards the
        // inner frame to its host port.
        let ta = static_tunnels(vec![tunnel(b, a, 5000)], &[(b, hop(a))]);
        let tb = static_tunnels(vec![tunnel(a, b, 5000)], &[(a, hop(b))]);
        let mut dpa = datapath(
            vec![rule(Match::any(), vec![Action::Output(VX)])],
            Some(ta),
            true,
        );
        let mut dpb = datapath(
            vec![rule(
                Match::any().exact(Field::InPort, VX as u128),
                vec![Action::Output(HOST)],
            )],
            Some(tb),
            true,
        );
        let frames: Vec<Vec<u8>> = (0..40).map(inner_frame).collect();
        let sent: Vec<Vec<u8>> = run(&mut dpa, HOST, &frames)
            .into_iter()
            .map(|(_, f)| f)
            .collect();
        let got: Vec<Vec<u8>> = run(&mut dpb, UPLINK, &sent)
            .into_iter()
            .map(|(p, f)| {
                assert_eq!(p, HOST);
                f
            })
            .collect();
        assert_eq!(got, frames);
    }
}

#[test]
fn flow_remote_and_key_come_from_the_actions() {
    let u = StaticUnderlay::new();
    u.set_default(Some(hop(LOCAL4.into())));
    let t = Tunnels::new(
        vec![TunnelPort {
            remote: TunnelRemote::Flow,
            key: TunnelKey::Flow,
            ..tunnel(REMOTE4.into(), LOCAL4.into(), 0)
        }],
        Arc::new(u),
    );
    let far = Ipv4Addr::new(198, 51, 100, 9);
    let rules = vec![
        rule(
            Match::any().exact(Field::InPort, HOST as u128),
            vec![
                Action::SetTunnel(7),
                Action::set_tunnel_dst(far.into()),
                Action::Output(VX),
            ],
        ),
        // No tun_dst set and the packet was not received by a tunnel: no remote.
        rule(
            Match::any().exact(Field::InPort, UPLINK as u128),
            vec![Action::Output(VX)],
        ),
    ];
    let mut dp = datapath(rules, Some(t), true);
    for _ in 0..2 {
        let out = run(&mut dp, HOST, &[inner_frame(1)]);
        assert_eq!(out.len(), 1);
        let o = dissect(&out[0].1);
        assert_eq!(o.key.get(Field::TunId), 7);
        assert_eq!(o.key.get(Field::TunDst), tun_v4(far));
    }
    assert!(run(&mut dp, UPLINK, &[inner_frame(1)]).is_empty());
    assert_eq!(dp.stats().dropped(DatapathDrop::TunnelNoRoute), 1);
}

#[test]
fn an_unresolved_hop_is_asked_for_counted_and_dropped() {
    let u = Arc::new(StaticUnderlay::new());
    let t = Tunnels::new(vec![tunnel(REMOTE4.into(), LOCAL4.into(), 42)], u.clone());
    let rules = vec![rule(
        Match::any(),
        vec![Action::Output(VX), Action::Output(HOST)],
    )];
    let mut dp = datapath(rules, Some(t), true);
    let out = run(&mut dp, UPLINK, &[inner_frame(0), inner_frame(1)]);
    // The other output still goes out, unencapsulated and unchanged.
    assert_eq!(out, vec![(HOST, inner_frame(0)), (HOST, inner_frame(1))]);
    assert_eq!(dp.stats().dropped(DatapathDrop::TunnelNoRoute), 2);
    assert_eq!(u.asked(), vec![IpAddr::from(REMOTE4); 2]);
    // Once the hop is known, the cached megaflow encapsulates: no flush needed.
    u.insert(REMOTE4.into(), hop(LOCAL4.into()));
    let out = run(&mut dp, UPLINK, &[inner_frame(0)]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].0, UPLINK);
    assert_eq!(dissect(&out[0].1).inner, inner_frame(0));
    assert_eq!(dp.stats().upcalls, 1);
}

#[test]
fn flood_reaches_tunnel_ports_but_not_the_one_it_came_from() {
    let t = static_tunnels(
        vec![tunnel(REMOTE4.into(), LOCAL4.into(), 42)],
        &[(REMOTE4.into(), hop(LOCAL4.into()))],
    );
    let mut dp = datapath(vec![rule(Match::any(), vec![Action::Flood])], Some(t), true);
    dp.set_ports([HOST, UPLINK]);
    let out = run(&mut dp, HOST, &[inner_frame(0)]);
    let ports: Vec<u32> = out.iter().map(|o| o.0).collect();
    assert_eq!(
        ports,
        vec![UPLINK, UPLINK],
        "plain to the uplink, then encapsulated"
    );
    assert_eq!(dissect(&out[1].1).inner, inner_frame(0));
    let out = run(
        &mut dp,
        UPLINK,
        &[vxlan_frame(0, Vxlan::v4(42, REMOTE4, LOCAL4))],
    );
    let ports: Vec<u32> = out.iter().map(|o| o.0).collect();
    assert_eq!(ports, vec![HOST, UPLINK], "not back into the tunnel");
}

/// A resolver whose misses are neighbours being resolved (the route is known), as the
/// netlink underlay answers while the kernel's ARP is in flight.
struct Resolving(StaticUnderlay);

impl UnderlayResolver for Resolving {
    fn hop(&self, remote: IpAddr) -> Option<UnderlayHop> {
        self.0.hop(remote)
    }
    fn resolve(&self, remote: IpAddr) {
        self.0.resolve(remote)
    }
    fn generation(&self) -> u64 {
        self.0.generation()
    }
    fn miss(&self, _remote: IpAddr) -> HopMiss {
        HopMiss::NeighUnresolved
    }
}

fn resolving_datapath() -> (Datapath, Arc<Resolving>) {
    let u = Arc::new(Resolving(StaticUnderlay::new()));
    let t = Tunnels::new(vec![tunnel(REMOTE4.into(), LOCAL4.into(), 42)], u.clone());
    let rules = vec![rule(Match::any(), vec![Action::Output(VX)])];
    (datapath(rules, Some(t), true), u)
}

#[test]
fn an_unresolved_neighbour_holds_a_few_packets_and_sends_them_once_resolved() {
    let (mut dp, u) = resolving_datapath();
    let frames: Vec<Vec<u8>> = (0..5).map(inner_frame).collect();
    assert!(run(&mut dp, UPLINK, &frames).is_empty());
    assert_eq!(dp.stats().tunnel_held, HOLD_PER_REMOTE as u64);
    assert_eq!(
        dp.stats().dropped(DatapathDrop::TunnelNeighUnresolved),
        (5 - HOLD_PER_REMOTE) as u64
    );
    assert!(dp.has_held());
    let mut sink = CaptureSink::default();
    assert_eq!(
        dp.release_held(&mut sink),
        0,
        "nothing changed in the underlay"
    );
    // The neighbour answers: the held packets go out, in order, encapsulated.
    u.0.insert(REMOTE4.into(), hop(LOCAL4.into()));
    assert_eq!(dp.release_held(&mut sink), HOLD_PER_REMOTE);
    assert!(!dp.has_held());
    assert_eq!(sink.packets.len(), HOLD_PER_REMOTE);
    for (i, (port, frame)) in sink.packets.iter().enumerate() {
        assert_eq!(*port, UPLINK);
        let o = dissect(frame);
        assert_eq!(o.inner, inner_frame(i as u32), "held packet {i}");
    }
    assert_eq!(dp.stats().tunnel_released, HOLD_PER_REMOTE as u64);
    // And later packets go straight out.
    let out = run(&mut dp, UPLINK, &[inner_frame(7)]);
    assert_eq!(out.len(), 1);
    assert_eq!(dissect(&out[0].1).inner, inner_frame(7));
}

#[test]
fn held_packets_that_wait_too_long_are_dropped_by_name() {
    let (mut dp, _u) = resolving_datapath();
    assert!(run(&mut dp, UPLINK, &[inner_frame(0)]).is_empty());
    assert_eq!(dp.stats().tunnel_held, 1);
    let mut sink = CaptureSink::default();
    std::thread::sleep(std::time::Duration::from_secs_f64(HOLD_MAX_AGE_SECS * 1.2));
    assert_eq!(dp.release_held(&mut sink), 0);
    assert!(!dp.has_held());
    assert!(sink.packets.is_empty());
    assert_eq!(dp.stats().dropped(DatapathDrop::TunnelNeighUnresolved), 1);
    assert_eq!(dp.stats().tunnel_released, 0);
}
