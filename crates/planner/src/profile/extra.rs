//! The profile's optional parts: the connection-tracking costs (`[conntrack]`) and the
//! calibration's run-to-run spread (`bands`), each absent in profiles written before it
//! existed (they still load: `None`, and the planner says what that means). Read in
//! `read`, with the rest of the profile.

use flowpath_gen::TrafficClass;
use serde::Serialize;

/// What connection tracking costs on one core, in TSC cycles, from the bench cases
/// `ct_new`, `ct_established` and `ct_synflood` (`flowpath calibrate`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CtCosts {
    /// Cycles per new connection: the packet that creates and commits it (`ct_new`, every
    /// packet a new connection).
    pub new_connection_cycles: f64,
    /// Cycles per packet of an established connection (`ct_established`).
    pub established_packet_cycles: f64,
    /// Cycles per SYN of a flood (`ct_synflood`); absent when that case was not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syn_cycles: Option<f64>,
}

/// The run-to-run spread of one calibration point: its runs' slowest and fastest rate
/// as shares of their median (`low ≤ 1 ≤ high`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Band {
    pub class: TrafficClass,
    /// Mean frame bytes of the point (the VXLAN classes: the frame on the wire).
    pub frame_bytes: f64,
    pub miss_rate: f64,
    /// Workers (1 for the curves; more for the scaling points).
    pub cores: u64,
    pub low: f64,
    pub high: f64,
}

fn f(x: f64) -> String {
    toml::Value::Float(x).to_string()
}

/// `bands` as a top-level TOML key (before the profile's first table).
pub(super) fn bands_toml(bands: Option<&[Band]>) -> String {
    let mut o = String::new();
    if let Some(b) = bands {
        o.push_str("bands = [\n");
        for b in b {
            o.push_str(&format!(
                "    {{ class = \"{}\", frame_bytes = {}, miss_rate = {}, cores = {}, low = {}, high = {} }},\n",
                b.class.name(),
                f(b.frame_bytes),
                f(b.miss_rate),
                b.cores,
                f(b.low),
                f(b.high)
            ));
        }
        o.push_str("]\n");
    }
    o
}

/// `[conntrack]` as a TOML table.
pub(super) fn conntrack_toml(ct: Option<&CtCosts>) -> String {
    let mut o = String::new();
    if let Some(c) = ct {
        o.push_str(&format!(
            "\n[conntrack]\nnew_connection_cycles = {}\nestablished_packet_cycles = {}\n",
            f(c.new_connection_cycles),
            f(c.established_packet_cycles)
        ));
        if let Some(s) = c.syn_cycles {
            o.push_str(&format!("syn_cycles = {}\n", f(s)));
        }
    }
    o
}
