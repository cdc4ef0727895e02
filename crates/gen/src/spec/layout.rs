//! Turning a [`TrafficSpec`] into an [`InMemorySource`]: each flow's addresses and frame,
//! the slot count and slot sequence (popularity and size shares apportioned exactly, then
//! shuffled with the seed), and the deduplicated template frames behind the slots.

use std::collections::HashMap;
use std::net::IpAddr;

use flowpath_packet::packet::HEADROOM;

use super::{
    Churn, Encap, FlowTuple, Flows, IpVersion, Popularity, Proto, Sizes, SpecError, TrafficSpec,
    DEFAULT_ARENA_BUDGET, MAX_ARENA, MIN_SLOTS, TCP_FLAGS, VXLAN_V4_ENDPOINTS, VXLAN_V6_ENDPOINTS,
};
use crate::build::{FrameSpec, Vxlan, L3, L4};
use crate::source::{splitmix64, InMemorySource, SLOT_TAILROOM};

impl TrafficSpec {
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
            (IpAddr::V4(src), IpAddr::V4(dst)) => L3::v4(src, dst),
            (IpAddr::V6(src), IpAddr::V6(dst)) => L3::v6(src, dst),
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
        self.churn.apply_to(&mut src);
        Ok(src)
    }

    /// Template frames for a transmitter that varies the flows itself (`flowpath gen
    /// --tx`, where a kernel program rewrites each packet's flow): the frames of this spec
    /// with one flow, no churn and uniform popularity, so they carry only its sizes,
    /// protocol and encapsulation; see [`template_cycle`] for the repeats. At most `max`.
    pub fn frame_mix_templates(&self, max: usize) -> Result<Vec<Vec<u8>>, SpecError> {
        let one = TrafficSpec {
            flows: Flows {
                count: 1,
                ..self.flows.clone()
            },
            churn: Churn::none(),
            popularity: Popularity::Uniform,
            slots: None,
            ..self.clone()
        };
        Ok(template_cycle(&one.source()?, max))
    }
}

/// The source's templates, each repeated in proportion to the slots holding it (the
/// proportions reduced by their common divisor), at most `max` frames.
pub fn template_cycle(src: &InMemorySource, max: usize) -> Vec<Vec<u8>> {
    let mut count = vec![0usize; src.template_count()];
    for slot in 0..src.slot_count() {
        count[src.template_of_slot(slot)] += 1;
    }
    let g = count.iter().copied().fold(0, gcd).max(1);
    let mut out = Vec::new();
    for (t, &c) in count.iter().enumerate() {
        for _ in 0..c / g {
            if out.len() < max {
                out.push(src.template(t).to_vec());
            }
        }
    }
    out
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
