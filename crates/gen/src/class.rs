//! The workload vocabulary the bench, the suite and the planner share: traffic classes
//! (IPv4, IPv6, VXLAN decap and encap) and frame mixes (one size, or the simple IMIX as the
//! interleaved [`IMIX_PATTERN`]). What rules and frames a class stands for is the bench's.

/// What the traffic of a workload looks like: the classes the suite and the planner measure
/// (the bench builds each one's rules and frames: `flowpath_bench::workload::class_pipeline`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrafficClass {
    /// UDP over IPv4.
    Ipv4,
    /// UDP over IPv6 (no extension headers).
    Ipv6,
    /// VXLAN decapsulation: UDP/IPv4 inside VXLAN over IPv4 (UDP 4789) arriving on the
    /// underlay port for a configured tunnel port (`flowpath_bench::workload::class_tunnels`); the
    /// datapath decapsulates it and it enters the pipeline as `in_port=<tunnel>`.
    Vxlan,
    /// VXLAN encapsulation: plain UDP/IPv4 in, output to a tunnel port with a static
    /// underlay hop, so every frame leaves VXLAN over IPv4 encapsulated.
    #[serde(rename = "vxlan_encap")]
    VxlanEncap,
}

impl TrafficClass {
    pub const ALL: [TrafficClass; 4] = [
        TrafficClass::Ipv4,
        TrafficClass::Ipv6,
        TrafficClass::Vxlan,
        TrafficClass::VxlanEncap,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TrafficClass::Ipv4 => "ipv4",
            TrafficClass::Ipv6 => "ipv6",
            TrafficClass::Vxlan => "vxlan",
            TrafficClass::VxlanEncap => "vxlan_encap",
        }
    }

    pub fn parse(s: &str) -> Result<TrafficClass, String> {
        TrafficClass::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown traffic class '{s}' (expected ipv4, ipv6, vxlan (decap) or vxlan_encap)"
                )
            })
    }

    /// Bytes between the frames the class's source sends and the frame size it is
    /// reported at, which is always the VXLAN frame on the wire for the VXLAN classes:
    /// encap receives inner frames and sends them [`VXLAN4_OVERHEAD`] bytes larger; decap
    /// receives the outer frame itself (0).
    pub fn wire_extra_bytes(self) -> f64 {
        match self {
            TrafficClass::VxlanEncap => VXLAN4_OVERHEAD as f64,
            _ => 0.0,
        }
    }

    /// One line on what the frames and rules are.
    pub fn describe(self) -> &'static str {
        match self {
            TrafficClass::Ipv4 => {
                "UDP/IPv4; 3 tables, 1,000 rules on IPv4 prefixes and ports; a new flow has a fresh source in 100.64.0.0/10"
            }
            TrafficClass::Ipv6 => {
                "UDP/IPv6; 3 tables, 1,000 rules on IPv6 prefixes and ports; a new flow has a fresh low 32 bits of its source"
            }
            TrafficClass::Vxlan => {
                "VXLAN decap: VXLAN over IPv4 (UDP 4789, VNI 42) carrying UDP/IPv4 in on the underlay port, decapsulated through tunnel port 10; the IPv4 rules with in_port=10; a new flow has a fresh inner source; frame size: the outer frame"
            }
            TrafficClass::VxlanEncap => {
                "VXLAN encap: UDP/IPv4 in, the IPv4 rules ending in output to tunnel port 10 (VNI 42, static underlay hop), so every frame leaves VXLAN over IPv4 encapsulated; a new flow has a fresh source; frame size: the outer frame sent (50 B over the inner)"
            }
        }
    }
}

/// Frame sizes of a workload's flows. Serialised as its label (`"64"`, `"imix"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum FrameMix {
    /// Every frame this size in bytes, FCS included (RFC 2544: 64 → 60 bytes in memory);
    /// frames too small for their headers are as small as the headers allow.
    Fixed(usize),
    /// Simple IMIX: 64, 570 and 1518-byte frames in the proportion 7:4:1, interleaved
    /// flow by flow (mean 353.8 bytes).
    Imix,
}

impl From<FrameMix> for String {
    fn from(m: FrameMix) -> String {
        m.label()
    }
}

impl TryFrom<String> for FrameMix {
    type Error = String;
    fn try_from(s: String) -> Result<FrameMix, String> {
        FrameMix::parse(&s)
    }
}

/// The IMIX size of flow `i`: twelve flows in a row hold seven 64-byte, four 570-byte and
/// one 1518-byte frame, spread out so that a batch sees the mix.
pub const IMIX_PATTERN: [usize; 12] = [64, 570, 64, 64, 570, 64, 1518, 64, 570, 64, 64, 570];

impl FrameMix {
    /// `64`, `512`, …, or `imix`.
    pub fn label(self) -> String {
        match self {
            FrameMix::Fixed(n) => n.to_string(),
            FrameMix::Imix => "imix".into(),
        }
    }

    pub fn parse(s: &str) -> Result<FrameMix, String> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(FrameMix::Imix);
        }
        s.parse::<usize>()
            .ok()
            .filter(|n| (64..=9018).contains(n))
            .map(FrameMix::Fixed)
            .ok_or_else(|| format!("'{s}' is not a frame size in 64..=9018 or 'imix'"))
    }

    /// Frame size (FCS included) of flow `i`.
    pub fn size_of(self, i: usize) -> usize {
        match self {
            FrameMix::Fixed(n) => n,
            FrameMix::Imix => IMIX_PATTERN[i % IMIX_PATTERN.len()],
        }
    }

    /// Flow count that keeps the mix's proportions exact (IMIX: a multiple of 12).
    pub fn round_flows(self, flows: usize) -> usize {
        match self {
            FrameMix::Fixed(_) => flows.max(1),
            FrameMix::Imix => flows.max(1).div_ceil(IMIX_PATTERN.len()) * IMIX_PATTERN.len(),
        }
    }
}

/// Bytes VXLAN over IPv4 adds to a frame: outer Ethernet (14), IPv4 (20), UDP (8) and
/// VXLAN (8) headers.
pub const VXLAN4_OVERHEAD: usize = 50;
