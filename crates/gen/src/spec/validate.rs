//! Checking a [`TrafficSpec`]: every field on its own, then what they must satisfy
//! together (enough distinct tuples for the flows, stamped new flows that never collide
//! with the spec's own, slots enough for the flows).

use std::net::{IpAddr, Ipv4Addr};

use super::{
    check_lifetime, to_u128, AddrRange, Encap, IpVersion, Popularity, Proto, Sizes, SpecError,
    TrafficSpec, MAX_FRAME_SIZE, MIN_FRAME_SIZE,
};
use crate::source::{NEW_FLOW_V4_BASE, NEW_FLOW_V4_MASK};

impl Sizes {
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
}

impl TrafficSpec {
    /// Check every field; [`TrafficSpec::source`] does this first.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.validate_flows()?;
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
            if n < self.flows.count {
                return Err(SpecError::new(
                    "slots",
                    format!(
                        "{n} slots cannot hold {} flows (one slot each at least)",
                        self.flows.count
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The flows: their count, the address and port ranges, and enough distinct tuples in
    /// the ranges for the count.
    fn validate_flows(&self) -> Result<(), SpecError> {
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
        self.check_addr_range("flows.src", self.src_range())?;
        self.check_addr_range("flows.dst", self.dst_range())?;
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
        Ok(())
    }

    /// An address range (`field`): one family, the (inner) family of the encapsulation,
    /// in order.
    fn check_addr_range(&self, field: &'static str, r: AddrRange) -> Result<(), SpecError> {
        let v4 = self.encap.inner() == IpVersion::V4;
        let family = if v4 { "IPv4" } else { "IPv6" };
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
}
