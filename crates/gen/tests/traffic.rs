//! `TrafficSpec` sources measured from the outside: over a million packets the share of
//! packets that start a never-seen flow is the churn asked for, IMIX is 7:4:1, Zipf
//! popularity follows its skew, lifetimes hold, and the seed decides every byte.

mod common;

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use flowpath_gen::pcap::write_pcap;
use flowpath_gen::spec::{
    AddrRange, Churn, Encap, IpVersion, Popularity, PortRange, Proto, Sizes, TrafficSpec,
};
use flowpath_gen::{InMemorySource, Lifetime};

const MILLION: usize = 1_000_000;

/// Hand out `packets` packets in batches of 32 and call `f` on each frame.
fn pump(src: &mut InMemorySource, packets: usize, mut f: impl FnMut(&[u8])) {
    let mut left = packets;
    while left > 0 {
        let b = src.lend(left.min(32));
        for p in b.iter() {
            f(p.data());
        }
        left -= b.len();
    }
}

/// The 5-tuple bytes of an untagged UDP/IPv4 frame: source, destination, ports.
fn udp4_key(f: &[u8]) -> [u8; 12] {
    assert_eq!(&f[12..14], &[0x08, 0x00], "IPv4");
    assert_eq!(f[23], 17, "UDP");
    f[26..38].try_into().unwrap()
}

fn udp4_spec(flows: usize, sizes: Sizes, churn: Churn, seed: u64) -> TrafficSpec {
    TrafficSpec {
        flows: flowpath_gen::spec::Flows {
            count: flows,
            ..Default::default()
        },
        sizes,
        churn,
        seed,
        ..TrafficSpec::default()
    }
}

#[test]
fn new_flow_share_matches_the_churn_over_a_million_packets_and_imix_is_7_4_1() {
    let share = |s| Churn {
        new_flow_share: s,
        lifetime: None,
    };
    let cases = [
        (share(0.0), 0.0),
        (share(0.01), 0.01),
        (share(0.1), 0.1),
        (share(0.5), 0.5),
        (share(1.0), 1.0),
        (
            Churn {
                new_flow_share: 0.0,
                lifetime: Some(Lifetime::Packets(20)),
            },
            0.05,
        ),
        (
            Churn {
                new_flow_share: 0.1,
                lifetime: Some(Lifetime::Mean(50.0)),
            },
            0.1 + 0.9 / 50.0,
        ),
        (
            Churn::for_new_flow_rate(0.05, Some(Lifetime::Packets(100))).unwrap(),
            0.05,
        ),
        (
            Churn::for_new_flow_rate(0.3, Some(Lifetime::Mean(10.0))).unwrap(),
            0.3,
        ),
    ];
    for (i, (churn, want)) in cases.into_iter().enumerate() {
        assert!((churn.new_flow_rate() - want).abs() < 1e-12, "case {i}");
        let spec = udp4_spec(1000, Sizes::Imix, churn, 100 + i as u64);
        let mut src = spec.source().unwrap();
        let mut seen = HashSet::new();
        let mut new = 0u64;
        let mut sizes: HashMap<usize, u64> = HashMap::new();
        pump(&mut src, MILLION, |f| {
            *sizes.entry(f.len() + 4).or_default() += 1;
            let k = udp4_key(f);
            let from_spec = k[0] == 10;
            // A packet starts a new flow when its key was never seen; the spec's own
            // flows are not new flows (a warmed-up switch knows them).
            if seen.insert(k) && !from_spec {
                new += 1;
            }
        });
        assert_eq!(src.packets(), MILLION as u64);
        let got = new as f64 / MILLION as f64;
        assert!(
            (got - want).abs() < 0.01,
            "case {i} ({churn:?}): new-flow share {got}, asked {want}"
        );
        // The source's own count agrees with what a switch would see.
        assert_eq!(src.new_flows(), new, "case {i}");
        let imix = [(64usize, 7.0), (570, 4.0), (1518, 1.0)];
        assert_eq!(sizes.len(), 3, "case {i}: sizes {sizes:?}");
        for (size, w) in imix {
            let want = MILLION as f64 * w / 12.0;
            let n = sizes[&size] as f64;
            assert!(
                (n - want).abs() <= 0.01 * want,
                "case {i}: {n} frames of {size} B, want {want}"
            );
        }
    }
}

#[test]
fn lifetimes_end_flows_after_their_packets() {
    for (lifetime, flows) in [(Lifetime::Packets(7), 100), (Lifetime::Packets(1), 10)] {
        let Lifetime::Packets(n) = lifetime else {
            unreachable!()
        };
        let churn = Churn {
            new_flow_share: 0.0,
            lifetime: Some(lifetime),
        };
        let mut src = udp4_spec(flows, Sizes::Fixed(64), churn, 3)
            .source()
            .unwrap();
        let mut per_identity: HashMap<[u8; 12], u64> = HashMap::new();
        pump(&mut src, 100_000, |f| {
            *per_identity.entry(udp4_key(f)).or_default() += 1;
        });
        // Every identity lives exactly n packets, except the `flows` still alive.
        let short = per_identity.values().filter(|&&c| c != n).count();
        assert!(
            short <= flows,
            "{short} identities did not live {n} packets"
        );
        assert!(per_identity.values().all(|&c| c <= n));
        assert_eq!(per_identity.len() as u64, flows as u64 + src.new_flows());
        // Each flow's first life is its original identity; every later one is new.
        assert_eq!(per_identity.keys().filter(|k| k[0] == 10).count(), flows);
        assert!(per_identity.keys().all(|k| k[0] == 10 || k[0] == 100));
    }
    // Geometric lifetimes: the mean holds.
    let churn = Churn {
        new_flow_share: 0.0,
        lifetime: Some(Lifetime::Mean(40.0)),
    };
    let mut src = udp4_spec(200, Sizes::Fixed(64), churn, 9).source().unwrap();
    let mut per_identity: HashMap<[u8; 12], u64> = HashMap::new();
    pump(&mut src, 400_000, |f| {
        *per_identity.entry(udp4_key(f)).or_default() += 1
    });
    let lives: Vec<u64> = per_identity
        .iter()
        .filter(|(k, _)| k[0] == 100)
        .map(|(_, &c)| c)
        .collect();
    let mean = lives.iter().sum::<u64>() as f64 / lives.len() as f64;
    // The flows still alive at the end are cut short; ignore that bias (200 of ~10,000).
    assert!((mean - 40.0).abs() < 2.0, "mean lifetime {mean}");
    assert!(lives.contains(&1) && lives.iter().any(|&c| c > 120));
}

/// Packets per flow (flow `i` comes from 10.0.0.1 + i) over whole loops of the source,
/// about `packets` packets; and the packets counted.
fn flow_counts(spec: &TrafficSpec, packets: usize) -> (Vec<u64>, usize) {
    let mut src = spec.source().unwrap();
    let packets = packets / src.slot_count() * src.slot_count();
    let mut counts = vec![0u64; spec.flows.count];
    pump(&mut src, packets, |f| {
        let a = u32::from_be_bytes(f[26..30].try_into().unwrap());
        counts[(a - u32::from(Ipv4Addr::new(10, 0, 0, 1))) as usize] += 1;
    });
    (counts, packets)
}

#[test]
fn zipf_rank_frequency_follows_the_skew() {
    for (skew, flows) in [(0.7, 1000usize), (1.1, 1000), (1.5, 200)] {
        let spec = TrafficSpec {
            popularity: Popularity::Zipf { skew },
            ..udp4_spec(flows, Sizes::Imix, Churn::none(), 11)
        };
        let (counts, packets) = flow_counts(&spec, MILLION);
        assert!(packets > 900_000);
        assert!(
            counts.iter().all(|&c| c > 0),
            "skew {skew}: a flow never sent"
        );
        // Flow i has rank i + 1: counts never increase along the flows.
        assert!(counts.windows(2).all(|w| w[0] >= w[1]), "skew {skew}");
        let h: f64 = (1..=flows).map(|k| (k as f64).powf(-skew)).sum();
        for k in 1..=10 {
            let want = (k as f64).powf(-skew) / h;
            let got = counts[k - 1] as f64 / packets as f64;
            assert!(
                (got / want - 1.0).abs() < 0.02,
                "skew {skew}, rank {k}: share {got}, theory {want}"
            );
        }
        // Least-squares slope of log(count) against log(rank) over ranks 1..=100.
        let pts: Vec<(f64, f64)> = (1..=100)
            .map(|k| ((k as f64).ln(), (counts[k - 1] as f64).ln()))
            .collect();
        let n = pts.len() as f64;
        let (sx, sy) = pts.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
        let (mx, my) = (sx / n, sy / n);
        let cov: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let var: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let slope = cov / var;
        assert!(
            (slope + skew).abs() < 0.03,
            "skew {skew}: rank-frequency slope {slope}"
        );
    }
    // Uniform: flat.
    for sizes in [Sizes::Fixed(64), Sizes::Imix] {
        let (counts, _) = flow_counts(&udp4_spec(1000, sizes, Churn::none(), 5), MILLION);
        let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(
            (*hi as f64) <= *lo as f64 * 1.01,
            "uniform: counts from {lo} to {hi}"
        );
    }
}

#[test]
fn the_seed_decides_every_byte() {
    let spec = TrafficSpec {
        flows: flowpath_gen::spec::Flows {
            count: 300,
            proto: Proto::Tcp,
            ..Default::default()
        },
        popularity: Popularity::Zipf { skew: 1.0 },
        sizes: Sizes::Imix,
        churn: Churn {
            new_flow_share: 0.2,
            lifetime: Some(Lifetime::Mean(30.0)),
        },
        encap: Encap::Vxlan {
            outer: IpVersion::V6,
            inner: IpVersion::V4,
            vni: 7,
        },
        seed: 42,
        slots: None,
    };
    let pcap = |s: &TrafficSpec| {
        let mut out = Vec::new();
        write_pcap(&mut out, &mut s.source().unwrap(), 20_000).unwrap();
        out
    };
    let a = pcap(&spec);
    assert_eq!(a, pcap(&spec), "same spec and seed, different bytes");
    assert_eq!(a, pcap(&spec.clone()));
    let other = TrafficSpec {
        seed: 43,
        ..spec.clone()
    };
    let b = pcap(&other);
    assert_ne!(a, b, "a different seed gave the same bytes");
    // The seed changes the order and the stamping, not the workload: same size mix.
    let (_, fa) = common::read_pcap_by_hand(&a);
    let (_, fb) = common::read_pcap_by_hand(&b);
    let hist = |fs: &[Vec<u8>]| {
        let mut h: HashMap<usize, usize> = HashMap::new();
        for f in fs {
            *h.entry(f.len()).or_default() += 1;
        }
        h
    };
    assert_eq!(hist(&fa).len(), 3);
    assert_eq!(
        hist(&fa).keys().collect::<HashSet<_>>(),
        hist(&fb).keys().collect()
    );
}

#[test]
fn spec_round_trips_through_json_and_text() {
    let spec = TrafficSpec {
        flows: flowpath_gen::spec::Flows {
            count: 77,
            proto: Proto::Icmp,
            src: Some("2001:db8::8000:0/112".parse().unwrap()),
            dst: Some("2001:db8:5::1".parse().unwrap()),
            sport: PortRange::single(1),
            dport: "10-20".parse().unwrap(),
        },
        popularity: Popularity::Zipf { skew: 0.9 },
        sizes: Sizes::Mix(vec![(64, 3), (1518, 1)]),
        churn: Churn {
            new_flow_share: 0.25,
            lifetime: Some(Lifetime::Packets(9)),
        },
        encap: Encap::Vxlan {
            outer: IpVersion::V4,
            inner: IpVersion::V6,
            vni: 5000,
        },
        seed: 1,
        slots: Some(4096),
    };
    spec.validate().unwrap();
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(serde_json::from_str::<TrafficSpec>(&json).unwrap(), spec);
    // Omitted fields take their defaults.
    let small: TrafficSpec =
        serde_json::from_str(r#"{"flows": {"count": 10}, "sizes": "imix", "seed": 3}"#).unwrap();
    assert_eq!(small.flows.count, 10);
    assert_eq!(small.sizes, Sizes::Imix);
    assert_eq!(small.encap, Encap::Ipv4);
    assert!(serde_json::from_str::<TrafficSpec>(r#"{"flow": {}}"#).is_err());

    for s in [
        "ipv4",
        "ipv6",
        "vxlan4-ipv4",
        "vxlan4-ipv6",
        "vxlan6-ipv4",
        "vxlan6-ipv6",
    ] {
        assert_eq!(s.parse::<Encap>().unwrap().to_string(), s);
    }
    for s in ["64", "imix", "mix:64*7,570*4,1518*1", "sweep:64,128,9018"] {
        assert_eq!(s.parse::<Sizes>().unwrap().to_string(), s);
    }
    assert_eq!(
        "sweep:rfc2544".parse::<Sizes>().unwrap(),
        Sizes::Sweep(vec![64, 128, 256, 512, 1024, 1280, 1518])
    );
    for s in ["63", "9019", "sweep:", "mix:64*0", "big"] {
        assert!(s.parse::<Sizes>().is_err(), "{s}");
    }
    let r: AddrRange = "10.1.0.0/16".parse().unwrap();
    assert_eq!((r.first.to_string(), r.count()), ("10.1.0.0".into(), 65536));
    let r: AddrRange = "10.0.0.250+10".parse().unwrap();
    assert_eq!(r.last.to_string(), "10.0.1.3");
    assert_eq!("10.0.0.1-10.0.0.1".parse::<AddrRange>().unwrap().count(), 1);
    for s in [
        "10.0.0.9-10.0.0.1",
        "10.0.0.1-::1",
        "1.2.3.4/33",
        "255.255.255.255+2",
        "x",
    ] {
        assert!(s.parse::<AddrRange>().is_err(), "{s}");
    }
    assert_eq!("1024-65535".parse::<PortRange>().unwrap().count(), 64512);
    assert!("5-4".parse::<PortRange>().is_err());
}

#[test]
fn invalid_specs_name_their_field() {
    let base = TrafficSpec::default();
    let field = |s: TrafficSpec| s.validate().unwrap_err().field;
    let mut s = base.clone();
    s.flows.count = 0;
    assert_eq!(field(s), "flows.count");
    let mut s = base.clone();
    s.flows.src = Some("10.0.0.1+4".parse().unwrap());
    s.flows.sport = PortRange::single(9);
    s.flows.count = 5;
    assert_eq!(field(s), "flows.count");
    let mut s = base.clone();
    s.encap = Encap::Ipv6;
    s.flows.dst = Some("10.0.0.1".parse().unwrap());
    assert_eq!(field(s), "flows.dst");
    let mut s = base.clone();
    s.sizes = Sizes::Fixed(10_000);
    assert_eq!(field(s), "sizes");
    let mut s = base.clone();
    s.popularity = Popularity::Zipf { skew: f64::NAN };
    assert_eq!(field(s), "popularity");
    let mut s = base.clone();
    s.churn.lifetime = Some(Lifetime::Mean(0.5));
    assert_eq!(field(s), "churn.lifetime");
    let mut s = base.clone();
    s.churn.new_flow_share = 0.1;
    s.flows.src = Some("100.64.1.0/24".parse().unwrap());
    assert_eq!(field(s), "flows.src");
    let mut s = base.clone();
    s.encap = Encap::Ipv6;
    s.churn.new_flow_share = 0.1;
    s.flows.src = Some("2001:db8::1+100".parse().unwrap());
    assert_eq!(field(s), "flows.src");
    let mut s = base.clone();
    s.slots = Some(10);
    assert_eq!(field(s), "slots");
    assert_eq!(
        Churn::for_new_flow_rate(0.01, Some(Lifetime::Packets(10)))
            .unwrap_err()
            .field,
        "churn.lifetime"
    );
}

#[test]
fn slot_layouts_are_exact() {
    // Uniform + IMIX: a multiple of the flows and of 12, so both are exact per loop.
    let s = udp4_spec(1000, Sizes::Imix, Churn::none(), 0);
    assert_eq!(s.slot_count(), 3000);
    let plan = s.slot_plan().unwrap();
    let mut per_flow = vec![0; 1000];
    let mut per_size = [0; 3];
    for &(f, z) in &plan {
        per_flow[f as usize] += 1;
        per_size[z as usize] += 1;
    }
    assert!(per_flow.iter().all(|&c| c == 3));
    assert_eq!(per_size, [1750, 1000, 250]);
    // A sweep: equal consecutive blocks, in the order given.
    let s = udp4_spec(10, Sizes::Sweep(vec![512, 64, 1518]), Churn::none(), 0);
    let plan = s.slot_plan().unwrap();
    let third = plan.len() / 3;
    assert_eq!(plan.len() % 3, 0);
    for (b, block) in plan.chunks(third).enumerate() {
        assert!(block.iter().all(|&(_, z)| z as usize == b));
    }
    let mut src = s.source().unwrap();
    let mut lens = Vec::new();
    pump(&mut src, plan.len(), |f| lens.push(f.len() + 4));
    assert_eq!(lens[0], 512);
    assert_eq!(lens[third], 64);
    assert_eq!(*lens.last().unwrap(), 1518);
    let points = s.sweep_points();
    assert_eq!(points.len(), 3);
    assert_eq!(points[1].sizes, Sizes::Fixed(64));
    // Templates of one flow (its sizes) share a flow id, so a lifetime replaces them
    // together.
    let src = udp4_spec(5, Sizes::Imix, Churn::none(), 0)
        .source()
        .unwrap();
    let mut tpl_of_flow: HashMap<u32, usize> = HashMap::new();
    for t in 0..src.template_count() {
        *tpl_of_flow.entry(src.flow_of_template(t)).or_default() += 1;
    }
    assert_eq!(tpl_of_flow.len(), 5);
    assert!(tpl_of_flow.values().all(|&n| n == 3));
}

#[test]
fn a_lifetime_replaces_every_size_of_a_flow_at_once() {
    let churn = Churn {
        new_flow_share: 0.0,
        lifetime: Some(Lifetime::Packets(4)),
    };
    let spec = TrafficSpec {
        encap: Encap::Vxlan {
            outer: IpVersion::V6,
            inner: IpVersion::V6,
            vni: 1,
        },
        flows: flowpath_gen::spec::Flows {
            count: 3,
            proto: Proto::Tcp,
            ..Default::default()
        },
        ..udp4_spec(3, Sizes::Imix, churn, 8)
    };
    let mut src = spec.source().unwrap();
    let mut per_identity: HashMap<(std::net::IpAddr, u16), (u64, HashSet<usize>)> = HashMap::new();
    pump(&mut src, 50_000, |f| {
        let seen = common::check_frame(f, "vxlan6-ipv6 tcp with lifetimes");
        let e = per_identity.entry((seen.src, seen.sport)).or_default();
        e.0 += 1;
        e.1.insert(f.len());
    });
    let short = per_identity.values().filter(|v| v.0 != 4).count();
    assert!(short <= 3, "{short} identities did not live 4 packets");
    // Sizes mix inside one identity: the flow kept its identity across its templates.
    assert!(per_identity.values().any(|v| v.1.len() > 1));
}

#[test]
fn frame_mix_templates_repeat_each_size_by_its_share_for_one_flow() {
    let spec = udp4_spec(
        1000,
        Sizes::Imix,
        Churn::for_new_flow_rate(0.05, None).unwrap(),
        3,
    );
    let t = spec.frame_mix_templates(1024).unwrap();
    let mut lens: Vec<usize> = t.iter().map(|f| f.len()).collect();
    lens.sort();
    assert_eq!(lens, [[60; 7].as_slice(), &[566; 4], &[1514]].concat());
    // One flow: every frame has the first flow's addresses and ports.
    let keys: HashSet<[u8; 12]> = t.iter().map(|f| udp4_key(f)).collect();
    assert_eq!(keys.len(), 1);
    assert_eq!(spec.frame_mix_templates(5).unwrap().len(), 5);
}
