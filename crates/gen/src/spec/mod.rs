//! [`TrafficSpec`]: a whole workload in one serialisable value (flows, popularity, frame
//! sizes, churn, encapsulation, seed), built into an [`InMemorySource`].
//!
//! The source's slot sequence realises the spec: every flow gets a number of slots
//! proportional to its popularity (at least one), every frame size its exact share of the
//! slots (IMIX 7:4:1), and both are shuffled with the seed, so each loop over the slots
//! is one exact sample of the workload. Churn uses the source's stamping: a share of the
//! packets become one-packet new flows, and with a lifetime each flow is replaced by a new
//! one after its last packet. Same spec, same seed: the same bytes in the same order.
//!
//! ```
//! use flowpath_gen::spec::{Churn, Encap, IpVersion, Popularity, Sizes, TrafficSpec};
//!
//! let spec = TrafficSpec {
//!     sizes: Sizes::Imix,
//!     popularity: Popularity::Zipf { skew: 1.1 },
//!     encap: Encap::Vxlan { outer: IpVersion::V4, inner: IpVersion::V6, vni: 100 },
//!     churn: Churn::for_new_flow_rate(0.05, None).unwrap(),
//!     seed: 7,
//!     ..TrafficSpec::default()
//! };
//! let mut source = spec.source().unwrap();
//! assert_eq!(source.lend(32).len(), 32);
//! ```
//!
//! This module owns the spec's types and their defaults; checking a spec is in
//! `validate`, turning it into slots and templates in `layout`, the command-line text
//! forms in `text`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::source::{InMemorySource, Lifetime};

mod layout;
mod text;
mod validate;

pub use layout::template_cycle;

/// Smallest frame size a spec accepts (bytes, FCS included).
pub const MIN_FRAME_SIZE: usize = 64;
/// Largest frame size a spec accepts: a 9000-byte MTU jumbo frame with Ethernet header and
/// FCS.
pub const MAX_FRAME_SIZE: usize = 9018;
/// The simple IMIX: 7 frames of 64 bytes, 4 of 570 and 1 of 1518 (FCS included).
pub const IMIX: [(usize, u32); 3] = [(64, 7), (570, 4), (1518, 1)];
/// Frame sizes of an RFC 2544 sweep (`sweep:rfc2544` on the command line).
pub const RFC2544_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];
/// Arena a default slot count may fill (the slot count never goes below the flow count).
pub const DEFAULT_ARENA_BUDGET: usize = 64 << 20;
/// Largest arena a spec may ask for.
pub const MAX_ARENA: usize = 2 << 30;
/// Fewest slots a default layout uses (as [`crate::source::DEFAULT_SLOTS`]).
const MIN_SLOTS: usize = 1024;
/// Outer endpoints of VXLAN traffic.
pub const VXLAN_V4_ENDPOINTS: (Ipv4Addr, Ipv4Addr) =
    (Ipv4Addr::new(172, 16, 0, 1), Ipv4Addr::new(172, 16, 0, 2));
pub const VXLAN_V6_ENDPOINTS: (Ipv6Addr, Ipv6Addr) = (
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
);
/// TCP flags of generated segments (ACK: packets of established connections).
pub const TCP_FLAGS: u8 = 0x10;

/// A whole workload. Every field has a default ([`TrafficSpec::default`]): 1,024 UDP/IPv4
/// flows, uniform popularity, 64-byte frames, no churn, seed 0. In JSON, omitted fields
/// take their defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrafficSpec {
    pub flows: Flows,
    pub popularity: Popularity,
    pub sizes: Sizes,
    pub churn: Churn,
    pub encap: Encap,
    /// Seeds the slot shuffle, the new-flow stamping and the lifetimes.
    pub seed: u64,
    /// Slots of the in-memory source (at least `flows.count`); `None` chooses (see
    /// [`TrafficSpec::slot_count`]).
    pub slots: Option<usize>,
}

/// The flows: flow `i` is the `i`-th (src, dst, sport, dport) tuple of the ranges in
/// mixed radix, the source address varying fastest, then the destination, the source port
/// and the destination port (ICMP flows have no ports). Flow 0 is the most popular.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Flows {
    pub count: usize,
    pub proto: Proto,
    /// Source addresses of the (inner) IP header; `None`: 10.0.0.1–10.255.255.254 or
    /// 2001:db8::8000:1–2001:db8::ffff:ffff.
    pub src: Option<AddrRange>,
    /// Destination addresses; `None`: 192.168.0.1 or 2001:db8:1::1.
    pub dst: Option<AddrRange>,
    pub sport: PortRange,
    pub dport: PortRange,
}

impl Default for Flows {
    fn default() -> Flows {
        Flows {
            count: 1024,
            proto: Proto::Udp,
            src: None,
            dst: None,
            sport: PortRange {
                first: 1024,
                last: 65535,
            },
            dport: PortRange::single(5001),
        }
    }
}

/// The transport protocol of every flow. ICMP is an echo request (ICMPv4 type 8 or
/// ICMPv6 type 128).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Proto {
    #[default]
    Udp,
    Tcp,
    Icmp,
}

/// An inclusive range of addresses of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddrRange {
    pub first: IpAddr,
    pub last: IpAddr,
}

/// An inclusive range of ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

/// How packets are spread over the flows.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Popularity {
    /// Every flow sends the same number of packets.
    #[default]
    Uniform,
    /// Flow of rank `k` (1-based: flow `k - 1`) sends a share proportional to `k^-skew`
    /// (skew 0 is uniform; around 1 is typical of real traffic).
    Zipf { skew: f64 },
}

/// Frame sizes, FCS included (RFC 2544); a frame whose headers do not fit grows to the
/// smallest that holds them (see [`crate::build::build`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sizes {
    Fixed(usize),
    /// 64, 570 and 1518 bytes in exact 7:4:1 proportion ([`IMIX`]).
    Imix,
    /// Sizes in exact proportion to their weights: `(size, weight)`.
    Mix(Vec<(usize, u32)>),
    /// Each size in turn, in equal consecutive shares of one loop over the source's
    /// slots. To measure each size on its own, use [`TrafficSpec::sweep_points`].
    Sweep(Vec<usize>),
}

impl Default for Sizes {
    fn default() -> Sizes {
        Sizes::Fixed(64)
    }
}

/// Churn: how many packets start a flow the switch has never seen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Churn {
    /// Share (0.0..=1.0) of packets stamped as one-packet new flows.
    pub new_flow_share: f64,
    /// Flows end after this many of their packets and are replaced by new ones.
    pub lifetime: Option<Lifetime>,
}

/// Encapsulation: plain IPv4 or IPv6, or VXLAN over IPv4/IPv6 carrying IPv4/IPv6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Encap {
    #[default]
    Ipv4,
    Ipv6,
    /// Outer endpoints [`VXLAN_V4_ENDPOINTS`] or [`VXLAN_V6_ENDPOINTS`]; the outer UDP
    /// source port varies per flow (49152 + flow mod 16384), as RFC 7348 suggests for
    /// entropy.
    Vxlan {
        outer: IpVersion,
        inner: IpVersion,
        vni: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpVersion {
    V4,
    V6,
}

/// One flow's addresses and ports (ports are 0 for ICMP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowTuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

/// A spec that cannot be built: the field at fault (`flows.count`, `flows.src`,
/// `flows.dst`, `flows.sport`, `flows.dport`, `popularity`, `sizes`,
/// `churn.new_flow_share`, `churn.lifetime`, `encap`, `slots`) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    pub field: &'static str,
    pub message: String,
}

impl SpecError {
    fn new(field: &'static str, message: impl Into<String>) -> SpecError {
        SpecError {
            field,
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for SpecError {}

impl Default for TrafficSpec {
    fn default() -> TrafficSpec {
        TrafficSpec {
            flows: Flows::default(),
            popularity: Popularity::Uniform,
            sizes: Sizes::default(),
            churn: Churn::default(),
            encap: Encap::Ipv4,
            seed: 0,
            slots: None,
        }
    }
}

impl Churn {
    /// No churn: flows live forever.
    pub fn none() -> Churn {
        Churn::default()
    }

    /// The long-run share of packets that start a new flow: `s + (1 - s) / mean lifetime`.
    pub fn new_flow_rate(&self) -> f64 {
        let s = self.new_flow_share;
        match self.lifetime {
            Some(l) => s + (1.0 - s) / l.mean(),
            None => s,
        }
    }

    /// The churn that makes `rate` of the packets start a new flow, with flows living
    /// `lifetime` (the rest made up by one-packet new flows).
    ///
    /// # Errors
    /// If `rate` is outside 0..=1, the lifetime is invalid, or the lifetime alone already
    /// makes more than `rate` of the packets new flows.
    pub fn for_new_flow_rate(rate: f64, lifetime: Option<Lifetime>) -> Result<Churn, SpecError> {
        if !(0.0..=1.0).contains(&rate) {
            return Err(SpecError::new(
                "churn.new_flow_share",
                format!("new-flow rate {rate} is outside 0..=1"),
            ));
        }
        let Some(l) = lifetime else {
            return Ok(Churn {
                new_flow_share: rate,
                lifetime: None,
            });
        };
        check_lifetime(&l)?;
        let base = 1.0 / l.mean();
        if rate + 1e-12 < base {
            return Err(SpecError::new(
                "churn.lifetime",
                format!(
                    "flows living {} packets already make {:.4}% of the packets new flows, \
                     more than the {:.4}% asked for",
                    l.mean(),
                    base * 100.0,
                    rate * 100.0
                ),
            ));
        }
        let share = if base >= 1.0 {
            0.0
        } else {
            ((rate - base) / (1.0 - base)).clamp(0.0, 1.0)
        };
        Ok(Churn {
            new_flow_share: share,
            lifetime: Some(l),
        })
    }

    /// Make `src` churn this way: its new-flow share and lifetime.
    pub fn apply_to(&self, src: &mut InMemorySource) {
        src.set_new_flow_share(self.new_flow_share);
        src.set_lifetime(self.lifetime);
    }

    fn is_on(&self) -> bool {
        self.new_flow_share > 0.0 || self.lifetime.is_some()
    }
}

fn check_lifetime(l: &Lifetime) -> Result<(), SpecError> {
    l.validate()
        .map_err(|m| SpecError::new("churn.lifetime", m))
}

impl Sizes {
    /// `(frame size, weight)` of each size; a sweep weighs its sizes equally.
    pub fn weights(&self) -> Vec<(usize, u32)> {
        match self {
            Sizes::Fixed(n) => vec![(*n, 1)],
            Sizes::Imix => IMIX.to_vec(),
            Sizes::Mix(m) => m.clone(),
            Sizes::Sweep(v) => v.iter().map(|&s| (s, 1)).collect(),
        }
    }

    /// Mean frame size (FCS included) as specified (before any growth to fit headers).
    pub fn mean(&self) -> f64 {
        let w = self.weights();
        let total: f64 = w.iter().map(|&(_, k)| k as f64).sum();
        w.iter().map(|&(s, k)| s as f64 * k as f64).sum::<f64>() / total
    }

    /// Slots one exact repetition of the mix takes.
    fn pattern_len(&self) -> usize {
        self.weights().iter().map(|&(_, k)| k as usize).sum()
    }
}

impl AddrRange {
    pub fn single(a: IpAddr) -> AddrRange {
        AddrRange { first: a, last: a }
    }

    /// Number of addresses (saturating at `u128::MAX` for all of IPv6).
    pub fn count(&self) -> u128 {
        (to_u128(self.last) - to_u128(self.first)).saturating_add(1)
    }

    /// The `i`-th address (`i < count()`).
    pub fn nth(&self, i: u128) -> IpAddr {
        from_u128(self.first, to_u128(self.first) + i)
    }

    fn is_v4(&self) -> bool {
        self.first.is_ipv4()
    }
}

fn to_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The address numbered `v` in the family of `like` (`v` fits that family).
fn from_u128(like: IpAddr, v: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
    }
}

impl PortRange {
    pub fn single(p: u16) -> PortRange {
        PortRange { first: p, last: p }
    }

    pub fn count(&self) -> u128 {
        self.last as u128 - self.first as u128 + 1
    }
}

impl Encap {
    /// IP version of the (inner) frame, whose addresses the flows' ranges give.
    pub fn inner(&self) -> IpVersion {
        match self {
            Encap::Ipv4 => IpVersion::V4,
            Encap::Ipv6 => IpVersion::V6,
            Encap::Vxlan { inner, .. } => *inner,
        }
    }
}

/// Default address ranges of a family: (src, dst).
fn default_ranges(v: IpVersion) -> (AddrRange, AddrRange) {
    match v {
        IpVersion::V4 => (
            AddrRange {
                first: Ipv4Addr::new(10, 0, 0, 1).into(),
                last: Ipv4Addr::new(10, 255, 255, 254).into(),
            },
            AddrRange::single(Ipv4Addr::new(192, 168, 0, 1).into()),
        ),
        IpVersion::V6 => (
            // Low 32 bits at or above 0x8000_0000: stamped new flows take the low 32 bits
            // 0, 1, 2, ... of the same /96, so they never collide with these.
            AddrRange {
                first: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0x8000, 1).into(),
                last: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0xffff, 0xffff).into(),
            },
            AddrRange::single(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1).into()),
        ),
    }
}

impl TrafficSpec {
    /// Source addresses of the flows (the default of the inner family when unset).
    pub fn src_range(&self) -> AddrRange {
        self.flows
            .src
            .unwrap_or_else(|| default_ranges(self.encap.inner()).0)
    }

    /// Destination addresses of the flows (the default of the inner family when unset).
    pub fn dst_range(&self) -> AddrRange {
        self.flows
            .dst
            .unwrap_or_else(|| default_ranges(self.encap.inner()).1)
    }

    /// One spec per point of a sweep (each with a fixed size, all else equal), or the spec
    /// itself: how a bench measures each frame size on its own.
    pub fn sweep_points(&self) -> Vec<TrafficSpec> {
        match &self.sizes {
            Sizes::Sweep(v) => v
                .iter()
                .map(|&s| TrafficSpec {
                    sizes: Sizes::Fixed(s),
                    ..self.clone()
                })
                .collect(),
            _ => vec![self.clone()],
        }
    }
}
