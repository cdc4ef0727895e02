//! VXLAN tunnel ports against real VTEPs: hosts A and B ping each other (inner IPv4 and
//! IPv6) through the middle (flowpath by default) and a Linux or OVS remote VTEP, over an
//! IPv4 or IPv6 underlay, with a static underlay next hop or the kernel's tables. The
//! topology and the peers: `vxlan_support/mod.rs`.
//!
//! Needs root, network namespaces, ip, ping, ethtool, bridge, and Open vSwitch for the OVS
//! remote (`scripts/setup-vxlan-peers.sh`). Each test skips saying what is missing, unless
//! `FLOWPATH_VXLAN_REQUIRED=1`, where a missing peer fails. `FLOWPATH_VXLAN_PEER=linux` or
//! `=ovs` puts a reference VTEP in flowpath's place; `FLOWPATH_VXLAN_KEEP=1` keeps the
//! scratch directories. Namespaces `fpvx{l4,l6,o4,o6,k4,k6}-<pid>-{a,m,r,b}`.

mod common;
mod vxlan_support;
use common::harness::need;
use vxlan_support::topo::*;
use vxlan_support::*;

// ---- the scenarios ----------------------------------------------------------------------

fn pings(tag: &str, remote: Vtep, ul: Underlay, hop: NextHop) {
    need!(H, need_all(remote));
    let t = Topo::new(tag, remote, ul, hop);
    t.ping_both_ways(false, 5);
    t.ping_both_ways(true, 5);
}

#[test]
fn linux_vtep_ipv4_underlay_pings() {
    pings("l4", Vtep::Linux, Underlay::V4, NextHop::Static);
}

#[test]
fn linux_vtep_ipv6_underlay_pings() {
    pings("l6", Vtep::Linux, Underlay::V6, NextHop::Static);
}

#[test]
fn ovs_vtep_ipv4_underlay_pings() {
    pings("o4", Vtep::Ovs, Underlay::V4, NextHop::Static);
}

#[test]
fn ovs_vtep_ipv6_underlay_pings() {
    pings("o6", Vtep::Ovs, Underlay::V6, NextHop::Static);
}

/// flowpath with no static next hop: route and neighbour from the middle's kernel.
/// (The references always work that way: for them it repeats the IPv4 scenario.)
#[test]
fn kernel_routed_underlay_pings() {
    pings("k4", Vtep::Linux, Underlay::V4, NextHop::Kernel);
    pings("k6", Vtep::Linux, Underlay::V6, NextHop::Kernel);
}
