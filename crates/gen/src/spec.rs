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

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use flowpath_packet::packet::HEADROOM;
use serde::{Deserialize, Serialize};

use crate::build::{FrameSpec, Vxlan, L3, L4};
use crate::source::{
    splitmix64, InMemorySource, Lifetime, NEW_FLOW_V4_BASE, NEW_FLOW_V4_MASK, SLOT_TAILROOM,
};

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

    fn validate(&self) -> Result<(), SpecError> {
        let w = self.weights();
        if w.is_empty() {
            return Err(SpecError::new("sizes", "no frame sizes given"));
        }
        for &(s, k) in &w {
            if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&s) {
                return Err(SpecError::new(
                    "sizes",
                    format!(
                        "frame size {s} is outside {MIN_FRAME_SIZE}..={MAX_FRAME_SIZE} bytes \
                         (sizes include the 4-byte FCS)"
                    ),
                ));
            }
            if k == 0 {
                return Err(SpecError::new("sizes", format!("size {s} has weight 0")));
            }
        }
        if w.iter().map(|&(_, k)| k as u64).sum::<u64>() > 1_000_000 {
            return Err(SpecError::new(
                "sizes",
                "weights add up to more than 1,000,000",
            ));
        }
        Ok(())
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
        let v = to_u128(self.first) + i;
        match self.first {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
        }
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

    /// Check every field; [`TrafficSpec::source`] does this first.
    pub fn validate(&self) -> Result<(), SpecError> {
        let f = &self.flows;
        if f.count == 0 {
            return Err(SpecError::new("flows.count", "at least one flow is needed"));
        }
        if f.count > u32::MAX as usize {
            return Err(SpecError::new(
                "flows.count",
                format!("{} flows: at most {}", f.count, u32::MAX),
            ));
        }
        let v4 = self.encap.inner() == IpVersion::V4;
        let family = if v4 { "IPv4" } else { "IPv6" };
        for (field, r) in [
            ("flows.src", self.src_range()),
            ("flows.dst", self.dst_range()),
        ] {
            if r.first.is_ipv4() != r.last.is_ipv4() {
                return Err(SpecError::new(field, "range mixes IPv4 and IPv6"));
            }
            if r.is_v4() != v4 {
                return Err(SpecError::new(
                    field,
                    format!(
                        "{} is not {family}, the (inner) family of encapsulation {}",
                        r.first, self.encap
                    ),
                ));
            }
            if to_u128(r.first) > to_u128(r.last) {
                return Err(SpecError::new(
                    field,
                    format!("range starts at {} after its end {}", r.first, r.last),
                ));
            }
        }
        for (field, r) in [("flows.sport", f.sport), ("flows.dport", f.dport)] {
            if r.first > r.last {
                return Err(SpecError::new(
                    field,
                    format!("range starts at {} after its end {}", r.first, r.last),
                ));
            }
        }
        let tuples = self.tuple_space();
        if (f.count as u128) > tuples {
            return Err(SpecError::new(
                "flows.count",
                format!(
                    "{} flows need as many distinct {} but the ranges hold only {tuples}",
                    f.count,
                    if f.proto == Proto::Icmp {
                        "(src, dst) pairs"
                    } else {
                        "(src, dst, sport, dport) tuples"
                    }
                ),
            ));
        }
        if let Popularity::Zipf { skew } = self.popularity {
            if !(skew.is_finite() && skew >= 0.0) {
                return Err(SpecError::new(
                    "popularity",
                    format!("Zipf skew {skew}: must be a finite number ≥ 0"),
                ));
            }
        }
        self.sizes.validate()?;
        let c = &self.churn;
        if !(0.0..=1.0).contains(&c.new_flow_share) {
            return Err(SpecError::new(
                "churn.new_flow_share",
                format!("{} is outside 0..=1", c.new_flow_share),
            ));
        }
        if let Some(l) = &c.lifetime {
            check_lifetime(l)?;
        }
        if let Encap::Vxlan { vni, .. } = self.encap {
            if vni >= 1 << 24 {
                return Err(SpecError::new(
                    "encap",
                    format!("VNI {vni} does not fit in 24 bits"),
                ));
            }
        }
        if c.is_on() {
            self.check_no_collision()?;
        }
        if let Some(n) = self.slots {
            if n < f.count {
                return Err(SpecError::new(
                    "slots",
                    format!(
                        "{n} slots cannot hold {} flows (one slot each at least)",
                        f.count
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Stamped new flows must never look like one of the spec's flows.
    fn check_no_collision(&self) -> Result<(), SpecError> {
        let r = self.src_range();
        match (r.first, r.last) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let (lo, hi) = (NEW_FLOW_V4_BASE, NEW_FLOW_V4_BASE + NEW_FLOW_V4_MASK);
                if u32::from(a) <= hi && u32::from(b) >= lo {
                    return Err(SpecError::new(
                        "flows.src",
                        format!(
                            "with churn, sources must stay out of {}/10, where new flows \
                             come from",
                            Ipv4Addr::from(NEW_FLOW_V4_BASE)
                        ),
                    ));
                }
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let (a, b) = (u128::from(a), u128::from(b));
                if a >> 32 != b >> 32 || (a as u32) < 0x8000_0000 {
                    return Err(SpecError::new(
                        "flows.src",
                        "with churn, IPv6 sources must lie in ::8000:0-::ffff:ffff of one /96 \
                         (new flows take the low 32 bits 0, 1, 2, ... of it)",
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Distinct flows the ranges can hold.
    fn tuple_space(&self) -> u128 {
        let f = &self.flows;
        let mut n = self
            .src_range()
            .count()
            .saturating_mul(self.dst_range().count());
        if f.proto != Proto::Icmp {
            n = n
                .saturating_mul(f.sport.count())
                .saturating_mul(f.dport.count());
        }
        n
    }

    /// Addresses and ports of flow `i` (see [`Flows`]).
    pub fn flow_tuple(&self, i: usize) -> FlowTuple {
        let f = &self.flows;
        let (src, dst) = (self.src_range(), self.dst_range());
        let mut i = i as u128;
        let mut digit = |n: u128| {
            let d = i % n;
            i /= n;
            d
        };
        let s = src.nth(digit(src.count()));
        let d = dst.nth(digit(dst.count()));
        let (sport, dport) = if f.proto == Proto::Icmp {
            (0, 0)
        } else {
            (
                f.sport.first + digit(f.sport.count()) as u16,
                f.dport.first + digit(f.dport.count()) as u16,
            )
        };
        FlowTuple {
            src: s,
            dst: d,
            sport,
            dport,
        }
    }

    /// The frame of flow `i` at `frame_size` bytes (FCS included).
    pub fn frame_spec(&self, i: usize, frame_size: usize) -> FrameSpec {
        let t = self.flow_tuple(i);
        let l3 = match (t.src, t.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => L3::V4 {
                src,
                dst,
                ttl: 64,
                tos: 0,
            },
            (IpAddr::V6(src), IpAddr::V6(dst)) => L3::V6 {
                src,
                dst,
                hop_limit: 64,
                tclass: 0,
            },
            _ => panic!("flow {i}: source and destination of different families"),
        };
        let l4 = match self.flows.proto {
            Proto::Udp => L4::Udp {
                sport: t.sport,
                dport: t.dport,
            },
            Proto::Tcp => L4::Tcp {
                sport: t.sport,
                dport: t.dport,
                flags: TCP_FLAGS,
            },
            Proto::Icmp => L4::Icmp {
                ty: if t.src.is_ipv4() { 8 } else { 128 },
                code: 0,
            },
        };
        let spec = FrameSpec::new(l3, l4, frame_size);
        match self.encap {
            Encap::Vxlan { outer, vni, .. } => {
                let mut v = match outer {
                    IpVersion::V4 => Vxlan::v4(vni, VXLAN_V4_ENDPOINTS.0, VXLAN_V4_ENDPOINTS.1),
                    IpVersion::V6 => Vxlan::v6(vni, VXLAN_V6_ENDPOINTS.0, VXLAN_V6_ENDPOINTS.1),
                };
                v.sport = 49152 + (i % 16384) as u16;
                spec.with_vxlan(v)
            }
            _ => spec,
        }
    }

    /// Bytes per slot of the source: headroom, the longest frame, tailroom, rounded to 64.
    fn slot_bytes(&self) -> usize {
        let max_len = self
            .sizes
            .weights()
            .iter()
            .map(|&(s, _)| self.frame_spec(0, s).frame_len())
            .max()
            .unwrap_or(0);
        (HEADROOM + max_len + SLOT_TAILROOM).div_ceil(64) * 64
    }

    /// Slots of the source: [`TrafficSpec::slots`] if set, else the fewest that realise
    /// the spec exactly, within [`DEFAULT_ARENA_BUDGET`] (never fewer than the flows, nor
    /// than 1,024):
    /// - uniform: a multiple of both the flow count and the size pattern (12 for IMIX), so
    ///   every flow gets the same slots and the sizes their exact shares;
    /// - Zipf: enough that the least popular flow's share is one slot, so no flow's share
    ///   is rounded up (a flow never gets fewer than one slot).
    ///
    /// Call on a valid spec.
    pub fn slot_count(&self) -> usize {
        if let Some(n) = self.slots {
            return n;
        }
        let flows = self.flows.count;
        let pattern = self.sizes.pattern_len().max(1);
        let cap = flows.max(DEFAULT_ARENA_BUDGET / self.slot_bytes());
        let base = flows.max(MIN_SLOTS);
        let round = |n: usize| n.div_ceil(pattern) * pattern;
        match self.popularity {
            Popularity::Zipf { skew } if skew > 0.0 => {
                let w = self.weights();
                let total: f64 = w.iter().sum();
                let need = (total / w[flows - 1]).ceil();
                let want = if need >= cap as f64 {
                    cap
                } else {
                    need as usize
                };
                round(want.max(base))
            }
            _ => {
                let l = lcm(flows, pattern);
                let exact = base.div_ceil(l).saturating_mul(l);
                if exact <= cap {
                    exact
                } else {
                    round(base)
                }
            }
        }
    }

    /// Popularity weight of each flow (not normalised).
    fn weights(&self) -> Vec<f64> {
        let n = self.flows.count;
        match self.popularity {
            Popularity::Uniform => vec![1.0; n],
            Popularity::Zipf { skew } => (1..=n).map(|k| (k as f64).powf(-skew)).collect(),
        }
    }

    /// The expected share of packets of each flow (what the source realises, up to one
    /// slot's rounding: see [`TrafficSpec::slot_count`]).
    pub fn popularity_shares(&self) -> Vec<f64> {
        let w = self.weights();
        let total: f64 = w.iter().sum();
        w.into_iter().map(|x| x / total).collect()
    }

    /// The slot sequence: `(flow, index into sizes.weights())` per slot.
    pub fn slot_plan(&self) -> Result<Vec<(u32, u16)>, SpecError> {
        self.validate()?;
        let s = self.slot_count();
        let flow_counts = popularity_counts(&self.weights(), s);
        let size_w: Vec<f64> = self
            .sizes
            .weights()
            .iter()
            .map(|&(_, k)| k as f64)
            .collect();
        let size_counts = apportion(s, &size_w);

        let mut flows: Vec<u32> = Vec::with_capacity(s);
        for (f, &c) in flow_counts.iter().enumerate() {
            flows.extend(std::iter::repeat_n(f as u32, c));
        }
        let mut sizes: Vec<u16> = Vec::with_capacity(s);
        for (j, &c) in size_counts.iter().enumerate() {
            sizes.extend(std::iter::repeat_n(j as u16, c));
        }
        let mut rng = self.seed ^ 0x736c_6f74_666c_6f77;
        shuffle(&mut flows, &mut rng);
        if !matches!(self.sizes, Sizes::Sweep(_)) {
            let mut rng = self.seed ^ 0x736c_6f74_7369_7a65;
            shuffle(&mut sizes, &mut rng);
        }
        Ok(flows.into_iter().zip(sizes).collect())
    }

    /// Build the in-memory source the spec describes (see the module documentation): its
    /// new-flow share, lifetime and seed are set; templates of one flow share a flow id.
    pub fn source(&self) -> Result<InMemorySource, SpecError> {
        let plan = self.slot_plan()?;
        let bytes = plan.len().saturating_mul(self.slot_bytes());
        if bytes > MAX_ARENA {
            return Err(SpecError::new(
                "slots",
                format!(
                    "{} slots of {} bytes need {} MiB, more than the {} MiB allowed",
                    plan.len(),
                    self.slot_bytes(),
                    bytes >> 20,
                    MAX_ARENA >> 20
                ),
            ));
        }
        let sizes = self.sizes.weights();
        let mut index: HashMap<(u32, u16), u32> = HashMap::new();
        let mut templates = Vec::new();
        let mut flow_ids = Vec::new();
        let slot_tpl = plan
            .iter()
            .map(|&(f, z)| {
                *index.entry((f, z)).or_insert_with(|| {
                    templates.push(crate::build(
                        &self.frame_spec(f as usize, sizes[z as usize].0),
                    ));
                    flow_ids.push(f);
                    (templates.len() - 1) as u32
                })
            })
            .collect();
        let mut src = InMemorySource::from_slot_templates(templates, slot_tpl)
            .with_flow_ids(flow_ids)
            .with_seed(self.seed);
        src.set_new_flow_share(self.churn.new_flow_share);
        src.set_lifetime(self.churn.lifetime);
        Ok(src)
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

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: usize, b: usize) -> usize {
    (a / gcd(a, b)).saturating_mul(b)
}

/// Split `total` into integer parts proportional to `weights` (largest remainder; ties go
/// to the lower index). Every part is within one of its exact quota; the parts add up.
fn apportion(total: usize, weights: &[f64]) -> Vec<usize> {
    let sum: f64 = weights.iter().sum();
    let quotas: Vec<f64> = weights.iter().map(|w| w / sum * total as f64).collect();
    let mut counts: Vec<usize> = quotas.iter().map(|q| q.floor() as usize).collect();
    let given: usize = counts.iter().sum();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (quotas[a] - quotas[a].floor(), quotas[b] - quotas[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in order.iter().take(total.saturating_sub(given)) {
        counts[i] += 1;
    }
    counts
}

/// Slots per flow for popularity `weights` (non-increasing) over `slots >= flows` slots:
/// flows whose share is below one slot get exactly one, the rest share what is left in
/// proportion to their weights.
fn popularity_counts(weights: &[f64], slots: usize) -> Vec<usize> {
    let n = weights.len();
    debug_assert!(slots >= n);
    // prefix[k] = sum of weights[..k]
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0f64);
    for w in weights {
        prefix.push(prefix.last().unwrap() + w);
    }
    // The first k flows are proportional, the other n - k get one slot each. Shrink k
    // while its smallest member would get less than one slot.
    let mut k = n;
    while k > 0 {
        let rest = (slots - (n - k)) as f64;
        if weights[k - 1] / prefix[k] * rest >= 1.0 {
            break;
        }
        k -= 1;
    }
    let mut counts = apportion(slots - (n - k), &weights[..k]);
    counts.resize(n, 1);
    counts
}

/// Fisher–Yates with splitmix64 (the generator the source uses); the index comes from the
/// high half of a 64×64-bit product (bias below 2^-32 for any slot count we allow).
fn shuffle<T>(v: &mut [T], rng: &mut u64) {
    for i in (1..v.len()).rev() {
        let j = ((splitmix64(rng) as u128 * (i as u128 + 1)) >> 64) as usize;
        v.swap(i, j);
    }
}

// --- Text forms (the command line's syntax) ------------------------------------------

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Proto::Udp => "udp",
            Proto::Tcp => "tcp",
            Proto::Icmp => "icmp",
        })
    }
}

impl FromStr for Proto {
    type Err = String;
    /// `udp`, `tcp` or `icmp`.
    fn from_str(s: &str) -> Result<Proto, String> {
        match s.to_ascii_lowercase().as_str() {
            "udp" => Ok(Proto::Udp),
            "tcp" => Ok(Proto::Tcp),
            "icmp" => Ok(Proto::Icmp),
            _ => Err(format!("'{s}' is not udp, tcp or icmp")),
        }
    }
}

fn v(x: IpVersion) -> char {
    match x {
        IpVersion::V4 => '4',
        IpVersion::V6 => '6',
    }
}

impl fmt::Display for Encap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Encap::Ipv4 => f.write_str("ipv4"),
            Encap::Ipv6 => f.write_str("ipv6"),
            Encap::Vxlan { outer, inner, .. } => write!(f, "vxlan{}-ipv{}", v(*outer), v(*inner)),
        }
    }
}

impl FromStr for Encap {
    type Err = String;
    /// `ipv4`, `ipv6`, or `vxlanO-ipvI`: VXLAN over IPvO carrying IPvI (`vxlan` alone is
    /// `vxlan4-ipv4`); the VNI is 100 (set [`Encap::Vxlan::vni`] to change it).
    fn from_str(s: &str) -> Result<Encap, String> {
        let ver = |c: &str| match c {
            "4" => Some(IpVersion::V4),
            "6" => Some(IpVersion::V6),
            _ => None,
        };
        let l = s.to_ascii_lowercase();
        let e = match l.as_str() {
            "ipv4" => Some(Encap::Ipv4),
            "ipv6" => Some(Encap::Ipv6),
            "vxlan" => Some(Encap::Vxlan {
                outer: IpVersion::V4,
                inner: IpVersion::V4,
                vni: 100,
            }),
            _ => l
                .strip_prefix("vxlan")
                .and_then(|r| r.split_once("-ipv"))
                .and_then(|(o, i)| {
                    Some(Encap::Vxlan {
                        outer: ver(o)?,
                        inner: ver(i)?,
                        vni: 100,
                    })
                }),
        };
        e.ok_or_else(|| {
            format!("'{s}' is not ipv4, ipv6, vxlan4-ipv4, vxlan4-ipv6, vxlan6-ipv4 or vxlan6-ipv6")
        })
    }
}

impl fmt::Display for Sizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(",");
        match self {
            Sizes::Fixed(n) => write!(f, "{n}"),
            Sizes::Imix => f.write_str("imix"),
            Sizes::Mix(m) => write!(
                f,
                "mix:{}",
                list(&mut m.iter().map(|(s, k)| format!("{s}*{k}")))
            ),
            Sizes::Sweep(v) => write!(f, "sweep:{}", list(&mut v.iter().map(|s| s.to_string()))),
        }
    }
}

impl FromStr for Sizes {
    type Err = String;
    /// `64` (one size), `imix`, `mix:64*7,570*4,1518*1` (sizes with weights) or
    /// `sweep:64,128,256` (`sweep:rfc2544` for 64…1518). Sizes include the FCS.
    fn from_str(s: &str) -> Result<Sizes, String> {
        let size = |t: &str| -> Result<usize, String> {
            let n: usize = t
                .trim()
                .parse()
                .map_err(|_| format!("'{t}' is not a frame size in bytes"))?;
            if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&n) {
                return Err(format!(
                    "{n} is outside {MIN_FRAME_SIZE}..={MAX_FRAME_SIZE} bytes (sizes include \
                     the 4-byte FCS)"
                ));
            }
            Ok(n)
        };
        let l = s.trim().to_ascii_lowercase();
        if l == "imix" {
            return Ok(Sizes::Imix);
        }
        if let Some(rest) = l.strip_prefix("sweep:") {
            if rest == "rfc2544" {
                return Ok(Sizes::Sweep(RFC2544_SIZES.to_vec()));
            }
            return rest
                .split(',')
                .map(size)
                .collect::<Result<_, _>>()
                .map(Sizes::Sweep);
        }
        if let Some(rest) = l.strip_prefix("mix:") {
            return rest
                .split(',')
                .map(|t| {
                    let (s, k) = t.split_once('*').unwrap_or((t, "1"));
                    let k: u32 = k
                        .trim()
                        .parse()
                        .ok()
                        .filter(|&k| k > 0)
                        .ok_or_else(|| format!("'{k}' is not a positive weight"))?;
                    Ok((size(s)?, k))
                })
                .collect::<Result<_, String>>()
                .map(Sizes::Mix);
        }
        if l.chars().all(|c| c.is_ascii_digit()) && !l.is_empty() {
            return size(&l).map(Sizes::Fixed);
        }
        Err(format!(
            "'{s}' is not a size (64), imix, mix:64*7,570*4,1518 or sweep:64,128,..."
        ))
    }
}

impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for AddrRange {
    type Err = String;
    /// `10.0.0.1` (one address), `10.0.0.1-10.0.3.255`, `10.0.0.0/16` (every address of
    /// the prefix) or `10.0.0.1+1000` (1000 addresses from 10.0.0.1); IPv6 alike.
    fn from_str(s: &str) -> Result<AddrRange, String> {
        let addr = |t: &str| -> Result<IpAddr, String> {
            t.trim()
                .parse()
                .map_err(|_| format!("'{t}' is not an IP address"))
        };
        let bits = |a: IpAddr| if a.is_ipv4() { 32u32 } else { 128 };
        let make = |first: IpAddr, last: u128| -> IpAddr {
            match first {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(last as u32)),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(last)),
            }
        };
        let r = if let Some((a, len)) = s.split_once('/') {
            let a = addr(a)?;
            let b = bits(a);
            let len: u32 = len
                .trim()
                .parse()
                .ok()
                .filter(|&l| l <= b)
                .ok_or_else(|| format!("'{len}' is not a prefix length 0..={b}"))?;
            let host = if len == 0 {
                u128::MAX >> (128 - b)
            } else {
                (1u128 << (b - len)) - 1
            };
            let net = to_u128(a) & !host;
            AddrRange {
                first: make(a, net),
                last: make(a, net | host),
            }
        } else if let Some((a, n)) = s.split_once('+') {
            let a = addr(a)?;
            let n: u128 = n
                .trim()
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("'{n}' is not a positive address count"))?;
            let max = u128::MAX >> (128 - bits(a));
            let last = to_u128(a)
                .checked_add(n - 1)
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("{n} addresses from {a} run past the last address"))?;
            AddrRange {
                first: a,
                last: make(a, last),
            }
        } else if let Some((a, b)) = s.split_once('-') {
            AddrRange {
                first: addr(a)?,
                last: addr(b)?,
            }
        } else {
            AddrRange::single(addr(s)?)
        };
        if r.first.is_ipv4() != r.last.is_ipv4() {
            return Err(format!("'{s}' mixes IPv4 and IPv6"));
        }
        if to_u128(r.first) > to_u128(r.last) {
            return Err(format!("'{s}' ends before it starts"));
        }
        Ok(r)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for PortRange {
    type Err = String;
    /// `5001` or `1024-65535`.
    fn from_str(s: &str) -> Result<PortRange, String> {
        let port = |t: &str| -> Result<u16, String> {
            t.trim()
                .parse()
                .map_err(|_| format!("'{t}' is not a port 0..=65535"))
        };
        let r = match s.split_once('-') {
            Some((a, b)) => PortRange {
                first: port(a)?,
                last: port(b)?,
            },
            None => PortRange::single(port(s)?),
        };
        if r.first > r.last {
            return Err(format!("'{s}' ends before it starts"));
        }
        Ok(r)
    }
}

impl fmt::Display for Popularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Popularity::Uniform => f.write_str("uniform"),
            Popularity::Zipf { skew } => write!(f, "zipf:{skew}"),
        }
    }
}

impl FromStr for Popularity {
    type Err = String;
    /// `uniform` or `zipf:SKEW` (e.g. `zipf:1.1`).
    fn from_str(s: &str) -> Result<Popularity, String> {
        let l = s.trim().to_ascii_lowercase();
        if l == "uniform" {
            return Ok(Popularity::Uniform);
        }
        let skew = l.strip_prefix("zipf:").unwrap_or(&l);
        match skew.parse::<f64>() {
            Ok(k) if k.is_finite() && k >= 0.0 => Ok(Popularity::Zipf { skew: k }),
            _ => Err(format!(
                "'{s}' is not uniform or a Zipf skew (a number ≥ 0, e.g. 1.1)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apportion_is_exact_and_sums() {
        assert_eq!(apportion(12, &[7.0, 4.0, 1.0]), vec![7, 4, 1]);
        assert_eq!(apportion(1032, &[7.0, 4.0, 1.0]), vec![602, 344, 86]);
        let c = apportion(10, &[1.0, 1.0, 1.0]);
        assert_eq!(c.iter().sum::<usize>(), 10);
        assert_eq!(c, vec![4, 3, 3]);
    }

    #[test]
    fn popularity_counts_give_every_flow_a_slot() {
        let w: Vec<f64> = (1..=100).map(|k| (k as f64).powf(-2.0)).collect();
        let c = popularity_counts(&w, 200);
        assert_eq!(c.iter().sum::<usize>(), 200);
        assert!(c.iter().all(|&x| x >= 1));
        assert!(c.windows(2).all(|p| p[0] >= p[1]));
        assert_eq!(popularity_counts(&[1.0; 5], 10), vec![2; 5]);
    }
}
