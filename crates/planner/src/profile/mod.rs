//! Calibration profiles: what a packet costs on one system, with where the numbers come
//! from. TOML on disk (JSON accepted by extension), read by hand rather than by derive
//! so that every error names the full field path (`classes.ipv6.hit.fixed_cycles:
//! missing`) and unknown fields are refused instead of silently ignored.

mod extra;
mod read;

pub use extra::{Band, CtCosts};

use flowpath_gen::TrafficClass;
use read::from_value;
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::Path;

/// Cost of one packet of a kind: `fixed_cycles + per_byte_cycles · frame_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Cost {
    pub fixed_cycles: f64,
    /// May be 0 (flat across frame sizes, as the talk found for OVS's kernel datapath).
    pub per_byte_cycles: f64,
}

impl Cost {
    pub fn flat(cycles: f64) -> Cost {
        Cost {
            fixed_cycles: cycles,
            per_byte_cycles: 0.0,
        }
    }

    /// TSC cycles for one frame of `frame_bytes` bytes (FCS included).
    pub fn at(&self, frame_bytes: f64) -> f64 {
        self.fixed_cycles + self.per_byte_cycles * frame_bytes
    }
}

/// One measured point between the hit (0 %) and miss (100 %) ends.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CurvePoint {
    pub miss_rate: f64,
    /// Cycles per packet (all packets, hits and misses) at the curve's frame size.
    pub cycles: f64,
}

/// Measured cycles per packet at miss rates between 0 and 1, at one frame size. Where a
/// class has curves, the planner interpolates them (in the miss rate, then between the
/// curves' frame sizes) instead of the two-cost line `(1 − m)·hit + m·miss`: on a real
/// datapath new flows also displace established ones from the caches, so a miss costs
/// more than its own slow path (see the suite's "measurement disagrees with the model"
/// findings), and how much more depends on the frames' memory footprint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Curve {
    pub frame_bytes: f64,
    pub points: Vec<CurvePoint>,
}

/// What a hit and a miss cost for one traffic class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassCosts {
    pub hit: Cost,
    pub miss: Cost,
    /// By increasing frame size; may be empty (the two-cost line).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub curves: Vec<Curve>,
}

/// The traffic classes of the talk (IPv4, IPv6, VXLAN), VXLAN as decap (`vxlan`) and
/// encap (`vxlan_encap`). The VXLAN classes' frame sizes are the VXLAN frame on the wire
/// (received for decap, sent for encap).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Classes {
    pub ipv4: ClassCosts,
    pub ipv6: ClassCosts,
    /// VXLAN decapsulation (through a tunnel port).
    pub vxlan: ClassCosts,
    /// VXLAN encapsulation (output to a tunnel port). Profiles written before this class
    /// existed have none: it is read as a copy of `vxlan` (see [`ENCAP_DEFAULT_NOTE`]).
    pub vxlan_encap: ClassCosts,
}

/// The note a profile without `classes.vxlan_encap` gets when it is read: the decap
/// costs stand in for the encap costs.
pub const ENCAP_DEFAULT_NOTE: &str = "classes.vxlan_encap: the profile as written had none (it predates the class), so the vxlan (decap) costs were copied for it: the same VXLAN frames on the wire, one tunnel header handled per packet either way; calibrate again (`flowpath calibrate`) to measure encap.";

impl Classes {
    /// Key in a profile (`classes.<key>`) and costs, in [`TrafficClass::ALL`]'s order.
    pub fn named(&self) -> [(&'static str, &ClassCosts); 4] {
        TrafficClass::ALL.map(|c| (c.name(), self.get(c)))
    }

    pub fn get(&self, class: TrafficClass) -> &ClassCosts {
        match class {
            TrafficClass::Ipv4 => &self.ipv4,
            TrafficClass::Ipv6 => &self.ipv6,
            TrafficClass::Vxlan => &self.vxlan,
            TrafficClass::VxlanEncap => &self.vxlan_encap,
        }
    }

    pub fn get_mut(&mut self, class: TrafficClass) -> &mut ClassCosts {
        match class {
            TrafficClass::Ipv4 => &mut self.ipv4,
            TrafficClass::Ipv6 => &mut self.ipv6,
            TrafficClass::Vxlan => &mut self.vxlan,
            TrafficClass::VxlanEncap => &mut self.vxlan_encap,
        }
    }
}

/// Where and how a calibration ran (absent in hand-written profiles).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MachineInfo {
    pub cpu: String,
    pub cores: u64,
    pub kernel: String,
    /// UTC, `YYYY-MM-DD HH:MM:SS UTC`.
    pub date: String,
    pub git_rev: String,
    pub command: String,
    /// The 1-minute load average before and after (-1: unknown).
    pub load_before: f64,
    pub load_after: f64,
}

/// A calibration profile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    pub name: String,
    /// Where the numbers come from (provenance), free text.
    pub source: String,
    /// Assumptions and how the numbers were derived, one sentence each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// TSC (cycle counter) ticks per second: cycles are counted at this rate.
    pub tsc_hz: f64,
    /// Multi-core scaling efficiency for 1, 2, … cores: `aggregate(n) / (n · one core)`;
    /// the first is 1. Beyond the last, the last is used (the planner says so).
    pub scaling: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineInfo>,
    pub classes: Classes,
    /// The calibration's run-to-run spread per measured point (absent in hand-written
    /// profiles and those calibrated before it was kept): `flowpath calibrate --check`
    /// predicts an interval from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bands: Option<Vec<Band>>,
    /// Connection tracking's costs (absent: the profile cannot size stateful workloads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conntrack: Option<CtCosts>,
}

/// Shipped profiles: (name, file name, TOML text).
pub const BUILTIN: [(&str, &str, &str); 2] = [
    (
        "ovs-kernel-2019",
        "ovs-kernel-2019.toml",
        include_str!("../../profiles/ovs-kernel-2019.toml"),
    ),
    (
        "ovs-dpdk-2019",
        "ovs-dpdk-2019.toml",
        include_str!("../../profiles/ovs-dpdk-2019.toml"),
    ),
];

/// The built-in profile called `name` (`ovs-kernel-2019`, or short: `ovs-kernel`).
pub fn builtin(name: &str) -> Option<Profile> {
    let (n, _, text) = BUILTIN.iter().find(|(n, file, _)| {
        *n == name || *file == name || n.strip_suffix("-2019") == Some(name)
    })?;
    Some(parse_toml(text, n).expect("built-in profiles are valid"))
}

/// Load a profile by built-in name or path. A path that exists wins over a built-in name;
/// `.json` files are JSON, everything else TOML. Errors are one line and start with
/// `profile <what>:`.
pub fn load(spec: &str) -> Result<Profile, String> {
    let path = Path::new(spec);
    if !path.exists() {
        if let Some(p) = builtin(spec) {
            return Ok(p);
        }
        let names: Vec<&str> = BUILTIN.iter().map(|b| b.0).collect();
        return Err(format!(
            "profile {spec}: no such file, and not a built-in profile ({})",
            names.join(", ")
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("profile {spec}: cannot read: {}", one_line(&e.to_string())))?;
    if is_json(path) {
        parse_json(&text, spec)
    } else {
        parse_toml(&text, spec)
    }
}

fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// Write `p` to `path` (JSON for `.json`, else TOML).
pub fn save(p: &Profile, path: &Path) -> Result<(), String> {
    let text = if is_json(path) {
        serde_json::to_string_pretty(p).map_err(|e| e.to_string())? + "\n"
    } else {
        to_toml(p)
    };
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The profile as TOML, with a header comment: written by hand (the `toml` crate would
/// make every curve point a `[[table]]` of its own), with `toml`'s own quoting of strings
/// and shortest round-trip floats, so that [`parse_toml`] reads back exactly `p`.
pub fn to_toml(p: &Profile) -> String {
    let s = |x: &str| toml::Value::String(x.to_string()).to_string();
    let f = |x: f64| toml::Value::Float(x).to_string();
    let mut o = String::from(
        "# flowpath calibration profile (read by `flowpath plan --profile FILE`).\n\
         # Costs are TSC cycles per packet: fixed_cycles + per_byte_cycles * frame bytes\n\
         # (FCS included); scaling[n-1] is the efficiency of n cores against one; curves are\n\
         # measured cycles per packet by miss rate at a frame size, which the planner\n\
         # interpolates between the hit (0 %) and miss (100 %) costs.\n\n",
    );
    o.push_str(&format!(
        "name = {}\nsource = {}\n",
        s(&p.name),
        s(&p.source)
    ));
    if !p.notes.is_empty() {
        o.push_str("notes = [\n");
        for n in &p.notes {
            o.push_str(&format!("    {},\n", s(n)));
        }
        o.push_str("]\n");
    }
    o.push_str(&format!("tsc_hz = {}\n", f(p.tsc_hz)));
    let sc: Vec<String> = p.scaling.iter().map(|&e| f(e)).collect();
    o.push_str(&format!("scaling = [{}]\n", sc.join(", ")));
    o.push_str(&extra::bands_toml(p.bands.as_deref()));
    if let Some(m) = &p.machine {
        o.push_str(&format!(
            "\n[machine]\ncpu = {}\ncores = {}\nkernel = {}\ndate = {}\ngit_rev = {}\ncommand = {}\nload_before = {}\nload_after = {}\n",
            s(&m.cpu),
            m.cores,
            s(&m.kernel),
            s(&m.date),
            s(&m.git_rev),
            s(&m.command),
            f(m.load_before),
            f(m.load_after)
        ));
    }
    let cost = |c: &Cost| {
        format!(
            "{{ fixed_cycles = {}, per_byte_cycles = {} }}",
            f(c.fixed_cycles),
            f(c.per_byte_cycles)
        )
    };
    for (name, c) in p.classes.named() {
        o.push_str(&format!(
            "\n[classes.{name}]\nhit = {}\nmiss = {}\n",
            cost(&c.hit),
            cost(&c.miss)
        ));
        for cv in &c.curves {
            o.push_str(&format!(
                "\n[[classes.{name}.curves]]\nframe_bytes = {}\npoints = [\n",
                f(cv.frame_bytes)
            ));
            for pt in &cv.points {
                o.push_str(&format!(
                    "    {{ miss_rate = {}, cycles = {} }},\n",
                    f(pt.miss_rate),
                    f(pt.cycles)
                ));
            }
            o.push_str("]\n");
        }
    }
    o.push_str(&extra::conntrack_toml(p.conntrack.as_ref()));
    o
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Parse TOML text; `what` names the profile in errors.
pub fn parse_toml(text: &str, what: &str) -> Result<Profile, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let at = e
            .span()
            .map(|s| {
                let before = &text[..s.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!(" at line {line}, column {col}")
            })
            .unwrap_or_default();
        format!(
            "profile {what}: malformed TOML{at}: {}",
            one_line(e.message())
        )
    })?;
    let value = serde_json::to_value(&table)
        .map_err(|e| format!("profile {what}: {}", one_line(&e.to_string())))?;
    from_value(&value).map_err(|e| format!("profile {what}: {e}"))
}

/// Parse JSON text; `what` names the profile in errors.
pub fn parse_json(text: &str, what: &str) -> Result<Profile, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "profile {what}: malformed JSON: {}",
            one_line(&e.to_string())
        )
    })?;
    from_value(&value).map_err(|e| format!("profile {what}: {e}"))
}

impl Profile {
    /// Efficiency of `n` cores against one, and whether it was extrapolated beyond the
    /// measured counts (with the last measured efficiency).
    pub fn efficiency(&self, n: u64) -> (f64, bool) {
        let i = n.max(1) as usize - 1;
        match self.scaling.get(i) {
            Some(&e) => (e, false),
            None => (*self.scaling.last().unwrap_or(&1.0), true),
        }
    }

    /// Where the profile came from, in one line (the first line of `source`).
    pub fn source_line(&self) -> &str {
        self.source.lines().next().unwrap_or("").trim()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_are_found_by_short_name() {
        for (n, file, _) in BUILTIN {
            assert_eq!(builtin(n).unwrap().name, n);
            assert_eq!(builtin(file).unwrap().name, n);
        }
        assert_eq!(builtin("ovs-kernel").unwrap().name, "ovs-kernel-2019");
        assert_eq!(builtin("ovs-dpdk").unwrap().name, "ovs-dpdk-2019");
        assert!(builtin("ovs").is_none());
    }

    #[test]
    fn efficiency_extrapolates_with_the_last() {
        let mut p = builtin("ovs-kernel").unwrap();
        p.scaling = vec![1.0, 0.9];
        assert_eq!(p.efficiency(1), (1.0, false));
        assert_eq!(p.efficiency(2), (0.9, false));
        assert_eq!(p.efficiency(7), (0.9, true));
    }
}
