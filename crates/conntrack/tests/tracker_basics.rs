//! The tracker packet by packet: commit semantics, UDP/ICMP/TCP/generic states, ICMP
//! errors related to a connection, fragments, mark/label, force, the key's ct fields,
//! dump lines and the summary, memory per connection.

mod common;

use common::*;
use flowpath_conntrack::{CtConfig, InvalidReason, Tracker};
use flowpath_packet::ct::state::*;
use flowpath_packet::{CtSpec, Field};

fn tracker() -> Tracker {
    Tracker::new(CtConfig::default())
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const FIN: u8 = 0x01;

#[test]
fn uncommitted_new_is_reported_but_not_stored() {
    let t = tracker();
    let mut p = udp("10.0.0.1", "10.0.0.2", 1000, 53);
    assert_eq!(p.run(&t, &spec(false, 0), 0), TRACKED | NEW);
    assert_eq!(t.len(), 0);
    // The original tuple is the packet's own.
    assert_eq!(p.key.get(Field::CtTpDst), 53);
    assert_eq!(p.key.get(Field::CtNwProto), 17);
    let mut r = udp("10.0.0.2", "10.0.0.1", 53, 1000);
    assert_eq!(r.run(&t, &spec(false, 0), 0), TRACKED | NEW);
}

#[test]
fn udp_becomes_established_once_a_reply_is_seen() {
    let t = tracker();
    let mut p = udp("10.0.0.1", "10.0.0.2", 1000, 53);
    assert_eq!(p.run(&t, &spec(true, 0), 0), TRACKED | NEW);
    assert_eq!(t.len(), 1);
    assert_eq!(p.run(&t, &spec(false, 0), 1), TRACKED | NEW);
    let mut r = udp("10.0.0.2", "10.0.0.1", 53, 1000);
    assert_eq!(
        r.run(&t, &spec(false, 0), 2),
        TRACKED | ESTABLISHED | REPLY_DIR
    );
    // The reply carries the original direction's tuple.
    assert_eq!(r.key.get(Field::CtTpSrc), 1000);
    assert_eq!(r.key.get(Field::CtNwSrc), 0x0a00_0001);
    assert_eq!(p.run(&t, &spec(false, 0), 3), TRACKED | ESTABLISHED);
    // Another zone is another table.
    assert_eq!(p.run(&t, &spec(false, 5), 3), TRACKED | NEW);
    assert_eq!(p.key.get(Field::CtZone), 5);
}

#[test]
fn icmp_echo_and_ipv6_echo() {
    let t = tracker();
    for (a, b) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
        let mut req = icmp_echo(a, b, true, 77);
        assert_eq!(req.run(&t, &spec(true, 0), 0), TRACKED | NEW);
        let mut rep = icmp_echo(b, a, false, 77);
        assert_eq!(
            rep.run(&t, &spec(false, 0), 0),
            TRACKED | ESTABLISHED | REPLY_DIR
        );
        // A reply to nothing is invalid.
        let mut stray = icmp_echo(b, a, false, 78);
        assert_eq!(stray.run(&t, &spec(true, 0), 0), TRACKED | INVALID);
    }
    assert_eq!(t.len(), 2);
    let lines: Vec<String> = t.dump(None).iter().map(|c| c.to_string()).collect();
    assert!(lines.contains(
        &"icmp,orig=(src=10.0.0.1,dst=10.0.0.2,id=77,type=8,code=0),reply=(src=10.0.0.2,dst=10.0.0.1,id=77,type=0,code=0)".to_string()
    ), "{lines:?}");
    assert_eq!(t.stats().invalid[InvalidReason::IcmpOrphan as usize], 2);
}

#[test]
fn icmp_errors_are_related_in_the_direction_opposite_the_quoted_packet() {
    let t = tracker();
    let mut p = udp("10.0.0.1", "10.0.0.2", 1000, 53);
    let s = CtSpec {
        set_mark: Some((7, 0xff)),
        ..spec(true, 0)
    };
    p.run(&t, &s, 0);
    // A router on the way answers the original packet: the error travels in the reply
    // direction.
    let quoted = &p.frame[14..14 + 28];
    let mut e = icmp_error("10.9.9.9", "10.0.0.1", 11, 0, quoted);
    assert_eq!(e.run(&t, &spec(false, 0), 1), TRACKED | RELATED | REPLY_DIR);
    assert_eq!(e.key.get(Field::CtMark), 7);
    // The far side's port unreachable for a reply-direction packet travels the original way.
    let r = udp("10.0.0.2", "10.0.0.1", 53, 1000);
    let mut e2 = icmp_error("10.0.0.1", "10.0.0.2", 3, 3, &r.frame[14..14 + 28]);
    assert_eq!(e2.run(&t, &spec(false, 0), 1), TRACKED | RELATED);
    // Quoting nothing known, or cut short: invalid.
    let other = udp("10.0.0.1", "10.0.0.3", 1000, 53);
    let mut e3 = icmp_error("10.9.9.9", "10.0.0.1", 3, 1, &other.frame[14..14 + 28]);
    assert_eq!(e3.run(&t, &spec(true, 0), 1), TRACKED | INVALID);
    let mut e4 = icmp_error("10.9.9.9", "10.0.0.1", 3, 1, &quoted[..10]);
    assert_eq!(e4.run(&t, &spec(true, 0), 1), TRACKED | INVALID);
    assert_eq!(t.stats().invalid[InvalidReason::IcmpOrphan as usize], 2);
    assert_eq!(t.len(), 1);
}

#[test]
fn icmpv6_errors_relate_too() {
    let t = tracker();
    let mut p = tcp("fd00::1", "fd00::2", 4000, 80, 100, 0, SYN);
    assert_eq!(p.run(&t, &spec(true, 3), 0), TRACKED | NEW);
    let quoted = p.frame[14..14 + 48].to_vec();
    let mut e = icmp_error("fd00::9", "fd00::1", 1, 4, &quoted);
    assert_eq!(e.run(&t, &spec(false, 3), 1), TRACKED | RELATED | REPLY_DIR);
    assert_eq!(e.run(&t, &spec(false, 4), 1), TRACKED | INVALID);
}

#[test]
fn fragments_and_non_ip_are_invalid() {
    let t = tracker();
    let mut f = udp_fragment("10.0.0.1", "10.0.0.2");
    assert_eq!(f.run(&t, &spec(true, 0), 0), TRACKED | INVALID);
    assert_eq!(t.stats().invalid[InvalidReason::Fragment as usize], 1);
    assert_eq!(t.len(), 0);
}

#[test]
fn generic_protocols_track_by_address_pair() {
    let t = tracker();
    let mut g = gre("10.0.0.1", "10.0.0.2");
    assert_eq!(g.run(&t, &spec(true, 0), 0), TRACKED | NEW);
    let mut r = gre("10.0.0.2", "10.0.0.1");
    assert_eq!(
        r.run(&t, &spec(false, 0), 0),
        TRACKED | ESTABLISHED | REPLY_DIR
    );
    assert_eq!(
        t.dump(None)[0].to_string(),
        "47,orig=(src=10.0.0.1,dst=10.0.0.2),reply=(src=10.0.0.2,dst=10.0.0.1)"
    );
}

#[test]
fn tcp_handshake_data_and_close() {
    let t = tracker();
    let c = |seq, ack, f| tcp("10.0.0.1", "10.0.0.2", 4000, 80, seq, ack, f);
    let s = |seq, ack, f| tcp("10.0.0.2", "10.0.0.1", 80, 4000, seq, ack, f);
    assert_eq!(c(100, 0, ACK).run(&t, &spec(true, 0), 0), TRACKED | INVALID);
    assert_eq!(c(100, 0, SYN).run(&t, &spec(true, 0), 0), TRACKED | NEW);
    assert_eq!(
        s(500, 101, SYN | ACK).run(&t, &spec(false, 0), 1),
        TRACKED | ESTABLISHED | REPLY_DIR
    );
    assert_eq!(
        c(101, 501, ACK).run(&t, &spec(false, 0), 2),
        TRACKED | ESTABLISHED
    );
    assert_eq!(
        t.dump(None)[0].tcp_state.map(|s| s.name()),
        Some("ESTABLISHED")
    );
    assert!(t.dump(None)[0]
        .to_string()
        .ends_with(",protoinfo=(state=ESTABLISHED)"));
    assert_eq!(
        c(101, 501, FIN | ACK).run(&t, &spec(false, 0), 3),
        TRACKED | ESTABLISHED
    );
    let sum = t.summary();
    assert_eq!(sum.total, 1);
    assert_eq!(sum.by_zone.get(&0), Some(&1));
}

#[test]
fn mark_and_label_are_set_only_with_commit() {
    let t = tracker();
    let mut p = udp("10.0.0.1", "10.0.0.2", 1, 2);
    let set = |commit| CtSpec {
        set_mark: Some((0x12, 0xff)),
        set_label: Some((1 << 100, 1 << 100)),
        ..spec(commit, 0)
    };
    assert_eq!(p.run(&t, &set(false), 0), TRACKED | NEW);
    assert_eq!(p.key.get(Field::CtMark), 0);
    p.run(&t, &set(true), 0);
    assert_eq!(p.key.get(Field::CtMark), 0x12);
    assert_eq!(p.key.get(Field::CtLabel), 1 << 100);
    let later = CtSpec {
        set_mark: Some((0x300, 0xf00)),
        ..spec(false, 0)
    };
    p.run(&t, &later, 1);
    assert_eq!(p.key.get(Field::CtMark), 0x12, "no commit, no change");
    p.run(
        &t,
        &CtSpec {
            commit: true,
            ..later
        },
        1,
    );
    assert_eq!(p.key.get(Field::CtMark), 0x312);
    let line = t.dump(None)[0].to_string();
    assert!(
        line.contains(",mark=786,labels=0x10000000000000000000000000"),
        "{line}"
    );
}

#[test]
fn force_restarts_a_connection_seen_in_its_reply_direction() {
    let t = tracker();
    udp("10.0.0.1", "10.0.0.2", 1, 2).run(&t, &spec(true, 0), 0);
    let mut r = udp("10.0.0.2", "10.0.0.1", 2, 1);
    let force = CtSpec {
        force: true,
        ..spec(true, 0)
    };
    assert_eq!(r.run(&t, &force, 1), TRACKED | NEW);
    assert_eq!(t.len(), 1);
    assert_eq!(t.dump(None)[0].orig.src_port, 2);
    assert_eq!(
        r.run(&t, &force, 2),
        TRACKED | NEW,
        "now the original direction"
    );
}

#[test]
fn invalid_packets_carry_no_connection_fields() {
    let t = tracker();
    let mut p = udp("10.0.0.1", "10.0.0.2", 1, 2);
    p.key.set(Field::CtMark, 99);
    let mut f = udp_fragment("10.0.0.1", "10.0.0.2");
    f.key.set(Field::CtMark, 99);
    f.run(&t, &spec(true, 0), 0);
    assert_eq!(f.key.get(Field::CtMark), 0);
    assert_eq!(f.key.get(Field::CtState) as u8, TRACKED | INVALID);
}

#[test]
fn memory_per_connection_at_a_million() {
    let t = Tracker::new(CtConfig {
        max_connections: 1_000_000,
        ..CtConfig::default()
    });
    let b = t.bytes_per_connection();
    println!("{b} bytes per connection at 1,000,000");
    assert!(b <= 256, "{b} bytes per connection");
    assert_eq!(t.capacity(), 1_000_000);
}
