//! Reading a profile from TOML or JSON by hand, so that every error names the full field
//! path and unknown fields are refused.

use super::extra::{Band, CtCosts};
use super::*;

/// A value with its path in the document, for errors that name the field.
#[derive(Clone, Copy)]
pub(super) struct Node<'a> {
    v: &'a Value,
    path: &'a str,
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

pub(super) fn kind(v: &Value) -> &'static str {
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

pub(super) fn field<'a>(
    m: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<&'a Value, String> {
    m.get(key)
        .ok_or_else(|| format!("{}: missing", join(path, key)))
}

pub(super) fn number(v: &Value, path: &str) -> Result<f64, String> {
    let x = v
        .as_f64()
        .ok_or_else(|| format!("{path}: expected a number, got {}", kind(v)))?;
    if !x.is_finite() {
        return Err(format!("{path}: must be a finite number"));
    }
    Ok(x)
}

pub(super) fn non_negative(v: &Value, path: &str) -> Result<f64, String> {
    let x = number(v, path)?;
    if x < 0.0 {
        return Err(format!("{path}: must not be negative (got {x})"));
    }
    Ok(x)
}

pub(super) fn string(v: &Value, path: &str) -> Result<String, String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{path}: expected a string, got {}", kind(v)))
}

pub(super) fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, String> {
    v.as_array()
        .ok_or_else(|| format!("{path}: expected an array, got {}", kind(v)))
}

pub(super) fn cost(v: &Value, path: &str) -> Result<Cost, String> {
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

pub(super) fn curve(v: &Value, path: &str) -> Result<Curve, String> {
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

pub(super) fn class_costs(v: &Value, path: &str) -> Result<ClassCosts, String> {
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

pub(super) fn machine(v: &Value, path: &str) -> Result<MachineInfo, String> {
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
pub(super) fn from_value(v: &Value) -> Result<Profile, String> {
    const KEYS: [&str; 9] = [
        "name",
        "source",
        "notes",
        "tsc_hz",
        "scaling",
        "machine",
        "classes",
        "bands",
        "conntrack",
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
    let tsc_hz = tsc_hz(field(top, "", "tsc_hz")?)?;
    let scaling = scaling(field(top, "", "scaling")?)?;
    let machine = match top.get("machine") {
        Some(m) => Some(machine(m, "machine")?),
        None => None,
    };
    let mut notes = notes;
    let classes = classes(field(top, "", "classes")?, &mut notes)?;
    let bands = match top.get("bands") {
        Some(b) => Some(bands(b, "bands")?),
        None => None,
    };
    let conntrack = match top.get("conntrack") {
        Some(c) => Some(conntrack(c, "conntrack")?),
        None => None,
    };
    Ok(Profile {
        name,
        source,
        notes,
        tsc_hz,
        scaling,
        machine,
        classes,
        bands,
        conntrack,
    })
}

/// The TSC rate: positive, and in Hz (not GHz).
fn tsc_hz(v: &Value) -> Result<f64, String> {
    let tsc_hz = number(v, "tsc_hz")?;
    if tsc_hz <= 0.0 {
        return Err(format!("tsc_hz: must be positive (got {tsc_hz})"));
    }
    if tsc_hz < 1e6 {
        return Err(format!(
            "tsc_hz: {tsc_hz} is not a clock rate in Hz (2.6 GHz is 2.6e9)"
        ));
    }
    Ok(tsc_hz)
}

/// The scaling efficiencies: each in (0, 2], the first (one core) 1.0.
fn scaling(v: &Value) -> Result<Vec<f64>, String> {
    let scaling: Vec<f64> = array(v, "scaling")?
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
        None => Err("scaling: must list at least the efficiency of one core (1.0)".into()),
        Some(&e) if (e - 1.0).abs() > 1e-9 => Err(format!(
            "scaling[0]: must be 1.0 (efficiency is relative to one core), got {e}"
        )),
        _ => Ok(scaling),
    }
}

/// Every class's costs. A profile without the encap class gets the decap costs for it,
/// and a note in `notes` that says so.
fn classes(v: &Value, notes: &mut Vec<String>) -> Result<Classes, String> {
    let cm = Node { v, path: "classes" }.table(&["ipv4", "ipv6", "vxlan", "vxlan_encap"])?;
    let class = |k: &str| class_costs(field(cm, "classes", k)?, &join("classes", k));
    let (ipv4, ipv6, vxlan) = (class("ipv4")?, class("ipv6")?, class("vxlan")?);
    let vxlan_encap = match cm.get("vxlan_encap") {
        Some(v) => class_costs(v, "classes.vxlan_encap")?,
        None => {
            notes.push(super::ENCAP_DEFAULT_NOTE.to_string());
            vxlan.clone()
        }
    };
    Ok(Classes {
        ipv4,
        ipv6,
        vxlan,
        vxlan_encap,
    })
}

fn conntrack(v: &Value, path: &str) -> Result<CtCosts, String> {
    const KEYS: [&str; 3] = [
        "new_connection_cycles",
        "established_packet_cycles",
        "syn_cycles",
    ];
    let m = Node { v, path }.table(&KEYS)?;
    let positive = |k: &str| -> Result<f64, String> {
        let p = join(path, k);
        let x = non_negative(field(m, path, k)?, &p)?;
        if x == 0.0 {
            return Err(format!("{p}: must be positive (cycles)"));
        }
        Ok(x)
    };
    Ok(CtCosts {
        new_connection_cycles: positive("new_connection_cycles")?,
        established_packet_cycles: positive("established_packet_cycles")?,
        syn_cycles: match m.get("syn_cycles") {
            Some(_) => Some(positive("syn_cycles")?),
            None => None,
        },
    })
}

fn bands(v: &Value, path: &str) -> Result<Vec<Band>, String> {
    const KEYS: [&str; 6] = ["class", "frame_bytes", "miss_rate", "cores", "low", "high"];
    let mut out = Vec::new();
    for (i, b) in array(v, path)?.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let m = Node { v: b, path: &p }.table(&KEYS)?;
        let class_path = join(&p, "class");
        let class = TrafficClass::parse(&string(field(m, &p, "class")?, &class_path)?)
            .map_err(|e| format!("{class_path}: {e}"))?;
        let num = |k: &str| number(field(m, &p, k)?, &join(&p, k));
        let miss_rate = num("miss_rate")?;
        if !(0.0..=1.0).contains(&miss_rate) {
            return Err(format!(
                "{p}.miss_rate: must be within 0..1, got {miss_rate}"
            ));
        }
        let cores = num("cores")?;
        if cores < 1.0 || cores.fract() != 0.0 {
            return Err(format!(
                "{p}.cores: must be a whole number of cores, got {cores}"
            ));
        }
        let (low, high) = (num("low")?, num("high")?);
        if !(low > 0.0 && low <= 1.0 && high >= 1.0) {
            return Err(format!(
                "{p}: low and high are shares of the median (0 < low ≤ 1 ≤ high), got {low} and {high}"
            ));
        }
        out.push(Band {
            class,
            frame_bytes: num("frame_bytes")?,
            miss_rate,
            cores: cores as u64,
            low,
            high,
        });
    }
    Ok(out)
}
