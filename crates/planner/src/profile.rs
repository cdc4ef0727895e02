//! Calibration profiles: what a packet costs on one system, with where the numbers come
//! from. TOML on disk (JSON accepted by extension), read by hand rather than by derive
//! so that every error names the full field path (`classes.ipv6.hit.fixed_cycles:
//! missing`) and unknown fields are refused instead of silently ignored.

use flowpath_bench::workload::TrafficClass;
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

/// The three traffic classes of the talk.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Classes {
    pub ipv4: ClassCosts,
    pub ipv6: ClassCosts,
    pub vxlan: ClassCosts,
}

impl Classes {
    pub fn get(&self, class: TrafficClass) -> &ClassCosts {
        match class {
            TrafficClass::Ipv4 => &self.ipv4,
            TrafficClass::Ipv6 => &self.ipv6,
            TrafficClass::Vxlan => &self.vxlan,
        }
    }

    pub fn get_mut(&mut self, class: TrafficClass) -> &mut ClassCosts {
        match class {
            TrafficClass::Ipv4 => &mut self.ipv4,
            TrafficClass::Ipv6 => &mut self.ipv6,
            TrafficClass::Vxlan => &mut self.vxlan,
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
}

/// Shipped profiles: (name, file name, TOML text).
pub const BUILTIN: [(&str, &str, &str); 2] = [
    (
        "ovs-kernel-2019",
        "ovs-kernel-2019.toml",
        include_str!("../profiles/ovs-kernel-2019.toml"),
    ),
    (
        "ovs-dpdk-2019",
        "ovs-dpdk-2019.toml",
        include_str!("../profiles/ovs-dpdk-2019.toml"),
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
    for (name, c) in [
        ("ipv4", &p.classes.ipv4),
        ("ipv6", &p.classes.ipv6),
        ("vxlan", &p.classes.vxlan),
    ] {
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

/// A value with its path in the document, for errors that name the field.
#[derive(Clone, Copy)]
struct Node<'a> {
    v: &'a Value,
    path: &'a str,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

impl<'a> Node<'a> {
    fn table(&self, allowed: &[&str]) -> Result<&'a Map<String, Value>, String> {
        let m = self.v.as_object().ok_or_else(|| {
            format!(
                "{}: expected a table, got {}",
                self.path_or_top(),
                kind(self.v)
            )
        })?;
        if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!(
                "{}: unknown field (expected one of: {})",
                join(self.path, k),
                allowed.join(", ")
            ));
        }
        Ok(m)
    }

    fn path_or_top(&self) -> &str {
        if self.path.is_empty() {
            "(top level)"
        } else {
            self.path
        }
    }
}

fn field<'a>(m: &'a Map<String, Value>, path: &str, key: &str) -> Result<&'a Value, String> {
    m.get(key)
        .ok_or_else(|| format!("{}: missing", join(path, key)))
}

fn number(v: &Value, path: &str) -> Result<f64, String> {
    let x = v
        .as_f64()
        .ok_or_else(|| format!("{path}: expected a number, got {}", kind(v)))?;
    if !x.is_finite() {
        return Err(format!("{path}: must be a finite number"));
    }
    Ok(x)
}

fn non_negative(v: &Value, path: &str) -> Result<f64, String> {
    let x = number(v, path)?;
    if x < 0.0 {
        return Err(format!("{path}: must not be negative (got {x})"));
    }
    Ok(x)
}

fn string(v: &Value, path: &str) -> Result<String, String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{path}: expected a string, got {}", kind(v)))
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, String> {
    v.as_array()
        .ok_or_else(|| format!("{path}: expected an array, got {}", kind(v)))
}

fn cost(v: &Value, path: &str) -> Result<Cost, String> {
    let m = Node { v, path }.table(&["fixed_cycles", "per_byte_cycles"])?;
    let fixed_cycles = non_negative(field(m, path, "fixed_cycles")?, &join(path, "fixed_cycles"))?;
    let per_byte_cycles = match m.get("per_byte_cycles") {
        Some(v) => non_negative(v, &join(path, "per_byte_cycles"))?,
        None => 0.0,
    };
    let c = Cost {
        fixed_cycles,
        per_byte_cycles,
    };
    if c.at(64.0) <= 0.0 {
        return Err(format!(
            "{path}: costs 0 cycles for a 64-byte frame (fixed_cycles and per_byte_cycles both 0)"
        ));
    }
    Ok(c)
}

fn curve(v: &Value, path: &str) -> Result<Curve, String> {
    let m = Node { v, path }.table(&["frame_bytes", "points"])?;
    let fb_path = join(path, "frame_bytes");
    let frame_bytes = number(field(m, path, "frame_bytes")?, &fb_path)?;
    if frame_bytes < 1.0 {
        return Err(format!(
            "{fb_path}: must be a frame size in bytes (got {frame_bytes})"
        ));
    }
    let pts_path = join(path, "points");
    let mut points = Vec::new();
    for (i, p) in array(field(m, path, "points")?, &pts_path)?
        .iter()
        .enumerate()
    {
        let pp = format!("{pts_path}[{i}]");
        let pm = Node { v: p, path: &pp }.table(&["miss_rate", "cycles"])?;
        let mr_path = join(&pp, "miss_rate");
        let miss_rate = number(field(pm, &pp, "miss_rate")?, &mr_path)?;
        if !(miss_rate > 0.0 && miss_rate < 1.0) {
            return Err(format!(
                "{mr_path}: must be strictly between 0 and 1 (the ends are hit and miss), got {miss_rate}"
            ));
        }
        if let Some(prev) = points.last().map(|p: &CurvePoint| p.miss_rate) {
            if miss_rate <= prev {
                return Err(format!(
                    "{mr_path}: points must be in increasing miss_rate order ({miss_rate} after {prev})"
                ));
            }
        }
        let c_path = join(&pp, "cycles");
        let cycles = number(field(pm, &pp, "cycles")?, &c_path)?;
        if cycles <= 0.0 {
            return Err(format!("{c_path}: must be positive (got {cycles})"));
        }
        points.push(CurvePoint { miss_rate, cycles });
    }
    Ok(Curve {
        frame_bytes,
        points,
    })
}

fn class_costs(v: &Value, path: &str) -> Result<ClassCosts, String> {
    let m = Node { v, path }.table(&["hit", "miss", "curves"])?;
    let hit = cost(field(m, path, "hit")?, &join(path, "hit"))?;
    let miss = cost(field(m, path, "miss")?, &join(path, "miss"))?;
    let mut curves: Vec<Curve> = Vec::new();
    if let Some(cs) = m.get("curves") {
        let cs_path = join(path, "curves");
        for (i, c) in array(cs, &cs_path)?.iter().enumerate() {
            let cp = format!("{cs_path}[{i}]");
            let c = curve(c, &cp)?;
            if let Some(prev) = curves.last() {
                if c.frame_bytes <= prev.frame_bytes {
                    return Err(format!(
                        "{cp}.frame_bytes: curves must be in increasing frame_bytes order ({} after {})",
                        c.frame_bytes, prev.frame_bytes
                    ));
                }
            }
            curves.push(c);
        }
    }
    Ok(ClassCosts { hit, miss, curves })
}

fn machine(v: &Value, path: &str) -> Result<MachineInfo, String> {
    const KEYS: [&str; 8] = [
        "cpu",
        "cores",
        "kernel",
        "date",
        "git_rev",
        "command",
        "load_before",
        "load_after",
    ];
    let m = Node { v, path }.table(&KEYS)?;
    let s = |k: &str| -> Result<String, String> {
        m.get(k)
            .map_or(Ok(String::new()), |v| string(v, &join(path, k)))
    };
    let f = |k: &str| -> Result<f64, String> {
        m.get(k).map_or(Ok(-1.0), |v| number(v, &join(path, k)))
    };
    Ok(MachineInfo {
        cpu: s("cpu")?,
        cores: f("cores")?.max(0.0) as u64,
        kernel: s("kernel")?,
        date: s("date")?,
        git_rev: s("git_rev")?,
        command: s("command")?,
        load_before: f("load_before")?,
        load_after: f("load_after")?,
    })
}

/// Build and validate a profile from a parsed document.
fn from_value(v: &Value) -> Result<Profile, String> {
    const KEYS: [&str; 7] = [
        "name", "source", "notes", "tsc_hz", "scaling", "machine", "classes",
    ];
    let top = Node { v, path: "" }.table(&KEYS)?;
    let name = string(field(top, "", "name")?, "name")?;
    if name.trim().is_empty() {
        return Err("name: must not be empty".into());
    }
    let source = string(field(top, "", "source")?, "source")?;
    if source.trim().is_empty() {
        return Err("source: must say where the numbers come from".into());
    }
    let notes = match top.get("notes") {
        Some(n) => array(n, "notes")?
            .iter()
            .enumerate()
            .map(|(i, s)| string(s, &format!("notes[{i}]")))
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let tsc_hz = number(field(top, "", "tsc_hz")?, "tsc_hz")?;
    if tsc_hz <= 0.0 {
        return Err(format!("tsc_hz: must be positive (got {tsc_hz})"));
    }
    if tsc_hz < 1e6 {
        return Err(format!(
            "tsc_hz: {tsc_hz} is not a clock rate in Hz (2.6 GHz is 2.6e9)"
        ));
    }
    let scaling: Vec<f64> = array(field(top, "", "scaling")?, "scaling")?
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let p = format!("scaling[{i}]");
            let e = number(x, &p)?;
            if !(e > 0.0 && e <= 2.0) {
                return Err(format!(
                    "{p}: efficiency must be in (0, 2] (1.0 = linear), got {e}"
                ));
            }
            Ok(e)
        })
        .collect::<Result<_, String>>()?;
    match scaling.first() {
        None => return Err("scaling: must list at least the efficiency of one core (1.0)".into()),
        Some(&e) if (e - 1.0).abs() > 1e-9 => {
            return Err(format!(
                "scaling[0]: must be 1.0 (efficiency is relative to one core), got {e}"
            ))
        }
        _ => {}
    }
    let machine = match top.get("machine") {
        Some(m) => Some(machine(m, "machine")?),
        None => None,
    };
    let classes_v = field(top, "", "classes")?;
    let cm = Node {
        v: classes_v,
        path: "classes",
    }
    .table(&["ipv4", "ipv6", "vxlan"])?;
    let class = |k: &str| class_costs(field(cm, "classes", k)?, &join("classes", k));
    let classes = Classes {
        ipv4: class("ipv4")?,
        ipv6: class("ipv6")?,
        vxlan: class("vxlan")?,
    };
    Ok(Profile {
        name,
        source,
        notes,
        tsc_hz,
        scaling,
        machine,
        classes,
    })
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
