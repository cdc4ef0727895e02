//! What the underlay answers for a remote: a usable [`Route`] (with the hop the datapath
//! encapsulates with) or the named [`Refusal`] why there is none, and a remote's
//! [`RemoteStatus`].

use std::fmt;
use std::io;
use std::net::IpAddr;

use flowpath_packet::hop::{HopMiss, UnderlayHop};

/// A usable route to a remote: the hop the datapath encapsulates with, and where it came
/// from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub hop: UnderlayHop,
    /// The output interface (one of the underlay ports).
    pub ifindex: u32,
    pub ifname: String,
    /// The gateway, or the remote itself when it is directly connected.
    pub next_hop: IpAddr,
    pub gateway: Option<IpAddr>,
}

/// Why a remote has no hop. [`Refusal::name`] is the counter name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The kernel has no route (`RTM_GETROUTE` failed with this errno).
    NoRoute { errno: i32 },
    /// The route is not a unicast one (local address, blackhole, unreachable, prohibit…).
    RouteType { kind: String },
    /// The route leaves by an interface that is not one of flowpath's underlay ports.
    NotFlowpathPort { ifindex: u32, ifname: String },
    /// The output interface is administratively down.
    LinkDown { ifname: String },
    /// The output interface has no Ethernet address.
    NoLinkAddress { ifname: String },
    /// No prefsrc on the route and no usable address of the remote's family on the
    /// interface.
    NoSourceAddress { ifname: String },
    /// The next hop's MAC is not known (no entry, INCOMPLETE or FAILED): resolve it.
    NeighbourUnresolved {
        next_hop: IpAddr,
        ifindex: u32,
        ifname: String,
        state: &'static str,
    },
}

impl Refusal {
    pub fn name(&self) -> &'static str {
        match self {
            Refusal::NoRoute { .. } => "no_route",
            Refusal::RouteType { .. } => "route_type",
            Refusal::NotFlowpathPort { .. } => "not_flowpath_port",
            Refusal::LinkDown { .. } => "link_down",
            Refusal::NoLinkAddress { .. } => "no_link_address",
            Refusal::NoSourceAddress { .. } => "no_source_address",
            Refusal::NeighbourUnresolved { .. } => "neighbour_unresolved",
        }
    }

    /// The datapath's drop reason for it.
    pub fn miss(&self) -> HopMiss {
        match self {
            Refusal::NeighbourUnresolved { .. } => HopMiss::NeighUnresolved,
            _ => HopMiss::NoRoute,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoRoute { errno } => {
                write!(f, "no route ({})", io::Error::from_raw_os_error(*errno))
            }
            Refusal::RouteType { kind } => write!(f, "route type {kind}"),
            Refusal::NotFlowpathPort { ifname, .. } => {
                write!(
                    f,
                    "no route via a flowpath port (the route leaves by {ifname})"
                )
            }
            Refusal::LinkDown { ifname } => write!(f, "{ifname} is down"),
            Refusal::NoLinkAddress { ifname } => write!(f, "{ifname} has no MAC address"),
            Refusal::NoSourceAddress { ifname } => {
                write!(f, "no source address on {ifname} for this family")
            }
            Refusal::NeighbourUnresolved {
                next_hop,
                ifname,
                state,
                ..
            } => write!(f, "neighbour {next_hop} on {ifname} unresolved ({state})"),
        }
    }
}

/// One remote's status, for `flowpath stats` and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteStatus {
    pub remote: IpAddr,
    pub route: Result<Route, Refusal>,
    /// `hop()` calls that found it refused.
    pub refused: u64,
}
