//! flowpath's connection tracking against the real thing: the same TCP, UDP and ICMP
//! traffic between real sockets (`conntrack_support/peer.py`) through flowpath with a
//! security group in OVS's model and through a Linux router with an nftables `ct state`
//! firewall, the two connection tables compared (`flowpath conntrack dump` beside
//! `conntrack -L`); and NAT end to end: a client SNATed to an outside address, and a DNAT
//! of a virtual address to two backends, each with TCP that completes.
//!
//! Needs root, network namespaces, ip, ethtool, python3, and for the Linux side conntrack
//! (conntrack-tools) and nft (`scripts/setup-lab.sh`). Each test skips saying what is
//! missing, unless `FLOWPATH_CT_REQUIRED=1`; `FLOWPATH_CT_KEEP=1` keeps the scratch
//! directories. Namespaces `fpct{l,f,sn,dn}-<pid>-{c,m,s}`.

mod common;
mod conntrack_support;
use common::harness::{need, ping, Proc};
use conntrack_support::*;
use std::collections::BTreeSet;

/// The same traffic whatever the middle: a short TCP exchange the server closes, a TCP
/// connection held open (returned: it stays open while it lives), a UDP request and its
/// answer, a ping, a refused connection, and a connection from the server side that the
/// security group must block.
fn traffic(t: &Topo) -> Proc {
    let (ok, out) = t.peer(&t.c, &["get", SERVER, "8080"]);
    assert!(ok && out.starts_with("hi 10.77.1.1"), "TCP exchange: {out}");
    let held = t.hold(SERVER, "8081", "30");
    let (ok, out) = t.peer(&t.c, &["udp", SERVER, "5353"]);
    assert!(ok, "UDP exchange: {out}");
    assert_eq!(ping(&t.c.0, false, SERVER, 2), 2, "ping through the middle");
    let (ok, out) = t.peer(&t.c, &["refused", SERVER, "9"]);
    assert!(ok, "a closed port refuses: {out}");
    let (ok, out) = t.peer(&t.s, &["blocked", CLIENT, "8080"]);
    assert!(ok, "a connection from the server side is blocked: {out}");
    // The last ACK of the closed exchange.
    std::thread::sleep(std::time::Duration::from_millis(300));
    held
}

fn show(set: &BTreeSet<Conn>) -> String {
    set.iter()
        .map(|c| format!("  {c:?}\n"))
        .collect::<Vec<_>>()
        .concat()
}

#[test]
fn connection_states_match_linux_conntrack() {
    need!(H, need_tools(Middle::Linux));
    need!(H, need_tools(PLAIN));
    let linux = {
        let t = Topo::new("l", Middle::Linux);
        let _held = traffic(&t);
        t.linux_conns()
    };
    let flowpath = {
        let t = Topo::new("f", PLAIN);
        let _held = traffic(&t);
        t.flowpath_conns()
    };
    // A refused connection (SYN, then RST): Linux removes an unassured connection on the
    // RST at once; flowpath keeps it in CLOSE for its close timeout, as OVS does.
    let closed = |c: &Conn| c.tcp_state.as_deref() == Some("CLOSE");
    assert!(
        flowpath.iter().any(|c| closed(c) && c.dport == 9),
        "the refused connection is CLOSE:\n{}",
        show(&flowpath)
    );
    let flowpath: BTreeSet<Conn> = flowpath.into_iter().filter(|c| !closed(c)).collect();
    let linux: BTreeSet<Conn> = linux.into_iter().filter(|c| !closed(c)).collect();
    assert!(
        linux.len() >= 4,
        "Linux tracked the traffic:\n{}",
        show(&linux)
    );
    assert_eq!(
        flowpath,
        linux,
        "flowpath's table:\n{}Linux's:\n{}",
        show(&flowpath),
        show(&linux)
    );
}

#[test]
fn snat_client_reaches_the_server_from_the_outside_address() {
    let middle = Middle::Flowpath {
        commit: "ct(commit,zone=1,nat(src=10.77.9.9))",
        first: "ct(table=1,zone=1,nat)",
    };
    need!(H, need_tools(middle));
    let t = Topo::new("sn", middle);
    for _ in 0..5 {
        let (ok, out) = t.peer(&t.c, &["get", SERVER, "8080"]);
        assert!(ok, "TCP through SNAT: {out}");
        assert!(
            out.starts_with(&format!("hi {SNAT_ADDR} via {SERVER}")),
            "the server sees the outside address: {out}"
        );
    }
    let (ok, out) = t.peer(&t.c, &["udp", SERVER, "5353"]);
    assert!(ok, "UDP through SNAT: {out}");
    assert_eq!(ping(&t.c.0, false, SERVER, 2), 2, "ping through SNAT");
    let conns = t.flowpath_conns();
    assert!(
        conns.iter().any(|c| c.proto == "tcp" && c.src == CLIENT),
        "connections keep their original tuple:\n{}",
        show(&conns)
    );
}

#[test]
fn dnat_spreads_connections_over_two_backends() {
    let middle = Middle::Flowpath {
        commit: "ct(commit,zone=1,nat(dst=10.77.2.1-10.77.2.2:8080))",
        first: "ct(table=1,zone=1,nat)",
    };
    need!(H, need_tools(middle));
    let t = Topo::new("dn", middle);
    let mut backends = BTreeSet::new();
    for _ in 0..24 {
        let (ok, out) = t.peer(&t.c, &["get", VIP, "80"]);
        assert!(ok, "TCP to the virtual address: {out}");
        assert!(out.starts_with(&format!("hi {CLIENT} via ")), "{out}");
        backends.insert(out.rsplit(' ').next().unwrap().to_string());
    }
    let want: BTreeSet<String> = [SERVER, SERVER2].map(String::from).into();
    assert_eq!(backends, want, "both backends served connections");
}
