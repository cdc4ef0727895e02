//! Limits, early drop, NAT allocation (uniqueness, ranges, exhaustion, the key's
//! translated fields), incremental expiry of a million connections, and two workers
//! sharing the table.

mod common;

use common::*;
use flowpath_conntrack::nat_alloc::{NatPlan, MAX_TRIES};
use flowpath_conntrack::{CtConfig, InvalidReason, Timeouts, Tracker, Tuple};
use flowpath_packet::ct::state::*;
use flowpath_packet::ct::{NatFlags, NatKind, NatSpec};
use flowpath_packet::{CtSpec, Field, FlowKey, PacketMeta};
use std::collections::HashSet;
use std::sync::Arc;

fn limited(max: u32) -> Tracker {
    Tracker::new(CtConfig {
        max_connections: max,
        ..CtConfig::default()
    })
}

#[test]
fn table_limit_early_drops_unassured_and_keeps_assured() {
    let t = limited(4);
    for i in 0..4u16 {
        udp("10.0.0.1", "10.0.0.2", 1000 + i, 53).run(&t, &spec(true, 0), 0);
        udp("10.0.0.2", "10.0.0.1", 53, 1000 + i).run(&t, &spec(false, 0), 0);
    }
    assert_eq!(t.len(), 4);
    // Every connection is assured: the fifth is refused.
    let mut p = udp("10.0.0.1", "10.0.0.2", 2000, 53);
    assert_eq!(p.run(&t, &spec(true, 0), 0), TRACKED | INVALID);
    let s = t.stats();
    assert_eq!((s.limit_hits, s.early_drops), (1, 0));
    assert_eq!(s.invalid[InvalidReason::Limit as usize], 1);
    // An unassured one (a tiny table: every bucket is near) is evicted for the newcomer.
    t.flush(None);
    for i in 0..4u16 {
        udp("10.0.0.1", "10.0.0.2", 3000 + i, 53).run(&t, &spec(true, 0), 0);
    }
    assert_eq!(p.run(&t, &spec(true, 0), 0), TRACKED | NEW);
    assert_eq!(t.len(), 4);
    assert_eq!(t.stats().early_drops, 1);
}

#[test]
fn zone_limits_at_run_time() {
    let t = Tracker::new(CtConfig {
        zone_limits: [(7, 2)].into_iter().collect(),
        default_zone_limit: 0,
        ..CtConfig::default()
    });
    let assured = |sp: u16, zone: u16| {
        let a = udp("10.0.0.1", "10.0.0.2", sp, 53).run(&t, &spec(true, zone), 0);
        udp("10.0.0.2", "10.0.0.1", 53, sp).run(&t, &spec(false, zone), 0);
        a
    };
    assert_eq!(assured(1, 7), TRACKED | NEW);
    assert_eq!(assured(2, 7), TRACKED | NEW);
    assert_eq!(assured(3, 7), TRACKED | INVALID);
    assert_eq!(assured(3, 8), TRACKED | NEW);
    t.set_zone_limit(8, Some(1));
    assert_eq!(assured(4, 8), TRACKED | INVALID);
    t.set_zone_limit(7, None);
    assert_eq!(assured(5, 7), TRACKED | NEW);
    t.set_default_zone_limit(3);
    assert_eq!(assured(6, 7), TRACKED | INVALID);
    let l = t.zone_limits();
    assert_eq!(l.default, 3);
    assert_eq!(l.zones.get(&8), Some(&(1, 1)));
    assert_eq!(l.zones.get(&7), None);
    assert_eq!(t.zone_count(7), 3);
    assert_eq!(t.summary().by_zone.get(&7), Some(&3));
}

fn snat(addrs: (&str, &str), ports: Option<(u16, u16)>, flags: NatFlags) -> NatSpec {
    NatSpec {
        kind: Some(NatKind::Src),
        addrs: Some((addr(addrs.0), addr(addrs.1))),
        ports,
        flags,
    }
}

#[test]
fn snat_hands_out_unique_tuples_until_the_range_is_exhausted() {
    let t = Tracker::new(CtConfig::default());
    let nat = snat(
        ("192.168.0.1", "192.168.0.2"),
        Some((5000, 5009)),
        NatFlags::default(),
    );
    let s = CtSpec {
        nat: Some(nat),
        ..spec(true, 0)
    };
    let mut replies = HashSet::new();
    for i in 0..20u16 {
        let mut p = udp("10.0.0.1", "10.0.0.2", 1000 + i, 53);
        assert_eq!(p.run(&t, &s, 0), TRACKED | NEW | SRC_NAT);
        let src = p.key.get(Field::Ipv4Src) as u32;
        let sp = p.key.get(Field::TpSrc) as u16;
        assert!((0xc0a8_0001..=0xc0a8_0002).contains(&src));
        assert!((5000..=5009).contains(&sp));
        assert!(replies.insert((src, sp)), "tuple handed out twice");
        // The original tuple stays in the ct fields.
        assert_eq!(p.key.get(Field::CtTpSrc), u128::from(1000 + i));
    }
    let mut p = udp("10.0.0.1", "10.0.0.2", 999, 53);
    assert_eq!(p.run(&t, &s, 0), TRACKED | INVALID);
    assert_eq!(t.stats().invalid[InvalidReason::NatExhausted as usize], 1);
    // A reply to a NAT'd tuple is de-NATed back to the client with bare `nat`.
    let c = t.dump(None)[0].clone();
    let (ra, rp) = ((c.reply.dst >> 96) as u32, c.reply.dst_port);
    let mut r = udp(
        "10.0.0.2",
        &std::net::Ipv4Addr::from(ra).to_string(),
        53,
        rp,
    );
    let bare = CtSpec {
        nat: Some(NatSpec {
            kind: None,
            addrs: None,
            ports: None,
            flags: NatFlags::default(),
        }),
        ..spec(false, 0)
    };
    assert_eq!(
        r.run(&t, &bare, 1),
        TRACKED | ESTABLISHED | REPLY_DIR | DST_NAT
    );
    assert_eq!(r.key.get(Field::Ipv4Dst), 0x0a00_0001);
    assert_eq!(r.key.get(Field::TpDst) as u16, c.orig.src_port);
    assert!(
        c.to_string().contains("reply=(src=10.0.0.2,dst=192.168.0."),
        "{c}"
    );
}

#[test]
fn dnat_and_port_keeping() {
    let t = Tracker::new(CtConfig::default());
    let nat = NatSpec {
        kind: Some(NatKind::Dst),
        addrs: Some((addr("10.1.1.1"), addr("10.1.1.1"))),
        ports: None,
        flags: NatFlags::default(),
    };
    let s = CtSpec {
        nat: Some(nat),
        ..spec(true, 0)
    };
    let mut p = tcp("10.0.0.1", "10.0.0.2", 4000, 80, 1, 0, 0x02);
    assert_eq!(p.run(&t, &s, 0), TRACKED | NEW | DST_NAT);
    assert_eq!(p.key.get(Field::Ipv4Dst), 0x0a01_0101);
    assert_eq!(p.key.get(Field::TpDst), 80);
    assert_eq!(p.key.get(Field::CtNwDst), 0x0a00_0002);
    // Without `nat` in the spec the packet is tracked but not rewritten.
    let mut q = tcp("10.0.0.1", "10.0.0.2", 4000, 80, 1, 0, 0x02);
    assert_eq!(q.run(&t, &spec(false, 0), 1), TRACKED | NEW);
    assert_eq!(q.key.get(Field::Ipv4Dst), 0x0a00_0002);
}

fn tuple(i: u32) -> Tuple {
    Tuple {
        src: u128::from(0x0a00_0000 + i) << 96,
        dst: u128::from(0x0a63_0001u32) << 96,
        src_port: 1024 + (i % 50_000) as u16,
        dst_port: 443,
        proto: TCP,
        ipv6: false,
        zone: 0,
    }
}

#[test]
fn nat_plans_cover_their_range_once_and_honour_flags() {
    let spec = snat(
        ("192.168.0.1", "192.168.0.4"),
        Some((100, 199)),
        NatFlags::default(),
    );
    let plan = NatPlan::new(&tuple(1), NatKind::Src, &spec, 12345, 678, 9).unwrap();
    let all: Vec<Tuple> = plan.candidates().collect();
    let distinct: HashSet<_> = all.iter().map(|t| (t.src, t.src_port)).collect();
    assert_eq!(distinct.len(), 400, "every address and port once");
    assert!(all
        .iter()
        .all(|t| (100..=199).contains(&t.src_port) && t.dst == tuple(1).dst));
    // Persistent: the address depends on the addresses only.
    let p = NatFlags {
        persistent: true,
        ..NatFlags::default()
    };
    let pspec = snat(("192.168.0.1", "192.168.0.4"), Some((100, 199)), p);
    let a = NatPlan::new(&tuple(1), NatKind::Src, &pspec, 1, 2, 3).unwrap();
    let b = NatPlan::new(&tuple(1), NatKind::Src, &pspec, 999_999, 2, 3).unwrap();
    assert_eq!(
        a.candidates().next().unwrap().src,
        b.candidates().next().unwrap().src
    );
    // Random: the start follows the draw, not the hash.
    let r = NatFlags {
        random: true,
        ..NatFlags::default()
    };
    let rspec = snat(("192.168.0.1", "192.168.0.4"), Some((100, 199)), r);
    let x = NatPlan::new(&tuple(1), NatKind::Src, &rspec, 5, 5, 1 << 40).unwrap();
    let y = NatPlan::new(&tuple(1), NatKind::Src, &rspec, 5, 5, 2 << 40).unwrap();
    assert_ne!(x.candidates().nth(1), y.candidates().nth(1));
    // A huge range is tried at most MAX_TRIES (+ the own port) times.
    let big = snat(("fd00::", "fd00::ffff:ffff"), None, NatFlags::default());
    let mut v6 = tuple(1);
    v6.ipv6 = true;
    let n = NatPlan::new(&v6, NatKind::Src, &big, 1, 2, 3)
        .unwrap()
        .candidates()
        .count();
    assert_eq!(n as u64, MAX_TRIES + 1);
    // A range of the wrong family offers nothing.
    assert!(NatPlan::new(&v6, NatKind::Src, &spec, 1, 2, 3).is_err());
}

#[test]
fn many_snat_connections_get_distinct_reply_tuples() {
    let t = Tracker::new(CtConfig::default());
    let nat = snat(("192.168.0.1", "192.168.0.1"), None, NatFlags::default());
    let s = CtSpec {
        nat: Some(nat),
        ..spec(true, 0)
    };
    // 3,000 clients all using source port 5555 to one server: one address, ports must move.
    for i in 0..3000u32 {
        let src = std::net::Ipv4Addr::from(0x0a00_0000 + i).to_string();
        let mut p = udp(&src, "10.99.0.1", 5555, 53);
        assert_eq!(p.run(&t, &s, 0), TRACKED | NEW | SRC_NAT);
    }
    let replies: HashSet<(u128, u16)> = t
        .dump(None)
        .iter()
        .map(|c| (c.reply.dst, c.reply.dst_port))
        .collect();
    assert_eq!(replies.len(), 3000);
}

#[test]
fn a_million_expired_connections_go_away_in_bounded_steps() {
    let timeouts = Timeouts {
        udp: 1,
        ..Timeouts::default()
    };
    let t = Tracker::new(CtConfig {
        max_connections: 1 << 20,
        timeouts,
        ..CtConfig::default()
    });
    let mut key = FlowKey::ZERO;
    key.set(Field::EthType, 0x0800);
    key.set(Field::NwProto, u128::from(UDP));
    key.set(Field::Ipv4Dst, 0x0a63_0001);
    let meta = PacketMeta::default();
    let s = spec(true, 0);
    for i in 0..1_000_000u32 {
        key.set(Field::Ipv4Src, u128::from(0x0a00_0000 + (i >> 4)));
        key.set(Field::TpSrc, u128::from(1000 + (i & 15)));
        assert_eq!(t.execute(&mut [], &meta, &mut key, &s, 0), TRACKED | NEW);
    }
    assert_eq!(t.len(), 1_000_000);
    assert_eq!(t.expire(500, 4096), 0, "not yet idle");
    let budget = 4096;
    let mut calls = 0;
    while !t.is_empty() {
        let gone = t.expire(10_000, budget);
        assert!(gone <= budget);
        calls += 1;
        assert!(calls <= 2 * 1_000_000 / budget + 2, "expiry makes progress");
    }
    assert!(calls >= 1_000_000 / budget);
    assert_eq!(t.stats().expired, 1_000_000);
}

#[test]
fn two_workers_share_one_table() {
    let t = Arc::new(Tracker::new(CtConfig::default()));
    let n = 2000u16;
    // Worker 0 sends the one direction, worker 1 the other, both committing, racing to
    // create the same connections: each pair ends up as one connection, and no packet is
    // refused for the race.
    let run = |back: bool| {
        let t = t.clone();
        std::thread::spawn(move || {
            for round in 0..3 {
                for i in 0..n {
                    let mut p = if back {
                        udp("10.0.0.2", "10.0.0.1", 53, 1000 + i)
                    } else {
                        udp("10.0.0.1", "10.0.0.2", 1000 + i, 53)
                    };
                    let st = p.run(&t, &spec(true, 0), round);
                    assert_eq!(st & (TRACKED | INVALID), TRACKED, "{st:#x}");
                }
            }
        })
    };
    let (a, b) = (run(false), run(true));
    a.join().unwrap();
    b.join().unwrap();
    assert_eq!(
        t.len(),
        n as usize,
        "one connection per pair, whatever the race"
    );
    let clients: HashSet<u16> = t
        .dump(None)
        .iter()
        .map(|c| c.orig.src_port.max(c.orig.dst_port))
        .collect();
    assert_eq!(clients.len(), n as usize);
    // (A packet that met its connection half-made in the other worker was reported new
    // without changing it; both directions once more settle every pair.)
    for i in 0..n {
        udp("10.0.0.2", "10.0.0.1", 53, 1000 + i).run(&t, &spec(false, 0), 5);
        let st = udp("10.0.0.1", "10.0.0.2", 1000 + i, 53).run(&t, &spec(false, 0), 5);
        assert_ne!(st & ESTABLISHED, 0, "both directions were seen");
    }
    assert_eq!(t.flush(None), n as usize);
    assert!(t.is_empty());
}
