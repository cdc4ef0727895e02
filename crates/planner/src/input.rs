//! The `flowpath plan` options as text, checked: every error is one line that starts
//! with the option it is about (`--rate: '-5Mpps' is negative: ...`).

use crate::plan::{Options, Workload};
use crate::report::Given;
use crate::stateful::{Options as StatefulOptions, Workload as StatefulWorkload};
use crate::units::{mean_frame_bytes, parse_rate, parse_share, parse_size};
use flowpath_gen::TrafficClass;

/// The options as given on the command line.
#[derive(Clone, Debug)]
pub struct PlanInput {
    pub rate: String,
    pub size: String,
    pub miss_rate: String,
    pub traffic: String,
    pub headroom: String,
    pub miss_speedup: String,
    pub miss_cores: Option<String>,
    pub offload_share: Option<String>,
    pub offload_rate: String,
    pub core_year_usd: String,
    /// Scenario (e): a new-flow flood's rate, and the miss budget it meets.
    pub attack_rate: Option<String>,
    pub attack_budget: String,
    /// The stateful plan: new connections per second and established packets per
    /// second (either makes the plan stateful), and a SYN flood's rate as a what-if.
    pub new_conns_per_sec: Option<String>,
    pub established_pps: Option<String>,
    pub synflood_pps: Option<String>,
}

impl Default for PlanInput {
    /// The command's defaults, with `rate`, `size` and `miss_rate` empty.
    fn default() -> Self {
        PlanInput {
            rate: String::new(),
            size: String::new(),
            miss_rate: String::new(),
            traffic: "ipv4".into(),
            headroom: "0%".into(),
            miss_speedup: "10".into(),
            miss_cores: None,
            offload_share: None,
            offload_rate: "90Mpps".into(),
            core_year_usd: "1000".into(),
            attack_rate: None,
            attack_budget: "50%".into(),
            new_conns_per_sec: None,
            established_pps: None,
            synflood_pps: None,
        }
    }
}

fn field<T>(name: &str, r: Result<T, String>) -> Result<T, String> {
    r.map_err(|e| format!("{name}: {e}"))
}

fn number(name: &str, s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{name}: '{s}' is not a number"))?;
    if !v.is_finite() {
        return Err(format!("{name}: '{s}' is not a finite number"));
    }
    Ok(v)
}

/// A rate of connections or packets per second: `0`, `50000`, `50k`, `1.2M`, `2Mpps`,
/// with or without a trailing `/s`.
fn per_second(name: &str, s: &str) -> Result<f64, String> {
    let t = s.trim();
    let t = t.strip_suffix("/s").unwrap_or(t).trim();
    if t.parse::<f64>().is_ok_and(|v| v == 0.0) {
        return Ok(0.0);
    }
    field(name, crate::units::parse_packet_rate(t))
}

impl PlanInput {
    /// Whether the stateful planner is asked for (`--new-conns-per-sec` or
    /// `--established-pps` given).
    pub fn is_stateful(&self) -> bool {
        self.new_conns_per_sec.is_some() || self.established_pps.is_some()
    }

    /// The stateful workload and options; the stateless workload's options are refused
    /// by name (they size a different model).
    pub fn parse_stateful(&self) -> Result<(StatefulWorkload, StatefulOptions), String> {
        if !self.is_stateful() {
            return Err(
                "--new-conns-per-sec: a stateful plan needs --new-conns-per-sec and/or --established-pps"
                    .into(),
            );
        }
        let unused = [
            ("--rate", !self.rate.trim().is_empty()),
            ("--size", !self.size.trim().is_empty()),
            ("--miss-rate", !self.miss_rate.trim().is_empty()),
            ("--miss-cores", self.miss_cores.is_some()),
            ("--offload-share", self.offload_share.is_some()),
            ("--attack-rate", self.attack_rate.is_some()),
        ];
        if let Some((name, _)) = unused.iter().find(|u| u.1) {
            return Err(format!(
                "{name}: not used by a stateful plan (--new-conns-per-sec, --established-pps): give one kind of plan or the other"
            ));
        }
        let opt = |name: &str, v: &Option<String>| match v {
            Some(s) => per_second(name, s),
            None => Ok(0.0),
        };
        let w = StatefulWorkload {
            new_conns_per_sec: opt("--new-conns-per-sec", &self.new_conns_per_sec)?,
            established_pps: opt("--established-pps", &self.established_pps)?,
            synflood_pps: match &self.synflood_pps {
                Some(s) => Some(per_second("--synflood-pps", s)?),
                None => None,
            },
        };
        let headroom = field("--headroom", parse_share(&self.headroom))?;
        let new_conn_speedup = number("--miss-speedup", &self.miss_speedup)?;
        let core_year_usd = number("--core-year-usd", &self.core_year_usd)?;
        let o = StatefulOptions {
            headroom,
            new_conn_speedup,
            core_year_usd,
        };
        crate::stateful::validate(&w, &o)?;
        Ok((w, o))
    }

    /// The stateless plan's required options are there, and no stateful-only one.
    fn stateless_given(&self) -> Result<(), String> {
        if self.synflood_pps.is_some() {
            return Err("--synflood-pps: a what-if on a stateful plan: give --new-conns-per-sec and/or --established-pps too".into());
        }
        for (name, v) in [
            ("--rate", &self.rate),
            ("--size", &self.size),
            ("--miss-rate", &self.miss_rate),
        ] {
            if v.trim().is_empty() {
                return Err(format!(
                    "{name}: required (or --new-conns-per-sec/--established-pps for a stateful plan)"
                ));
            }
        }
        Ok(())
    }

    /// The workload, the options and how the rate and size were given.
    pub fn parse(&self) -> Result<(Workload, Options, Given), String> {
        self.stateless_given()?;
        let rate = field("--rate", parse_rate(&self.rate))?;
        let mix = field("--size", parse_size(&self.size))?;
        let miss_rate = field("--miss-rate", parse_share(&self.miss_rate))?;
        let class = field("--traffic", TrafficClass::parse(self.traffic.trim()))?;
        let headroom = field("--headroom", parse_share(&self.headroom))?;
        if headroom >= 1.0 {
            return Err("--headroom: must be below 100 % (no core could take any load)".into());
        }
        let miss_speedup = number("--miss-speedup", &self.miss_speedup)?;
        if miss_speedup <= 0.0 {
            return Err(format!(
                "--miss-speedup: must be a positive factor (got {})",
                self.miss_speedup
            ));
        }
        let miss_cores = match &self.miss_cores {
            Some(s) => Some(s.trim().parse::<u64>().map_err(|_| {
                format!("--miss-cores: '{s}' is not a number of cores (0, 1, 2, ...)")
            })?),
            None => None,
        };
        let offload_share = match &self.offload_share {
            Some(s) => Some(field("--offload-share", parse_share(s))?),
            None => None,
        };
        let offload_rate = field("--offload-rate", parse_rate(&self.offload_rate))?;
        let core_year_usd = number("--core-year-usd", &self.core_year_usd)?;
        if core_year_usd < 0.0 {
            return Err(format!(
                "--core-year-usd: must not be negative (got {})",
                self.core_year_usd
            ));
        }
        let frame_bytes = mean_frame_bytes(mix);
        let attack_pps = match &self.attack_rate {
            Some(s) => Some(field("--attack-rate", parse_rate(s))?.pps(frame_bytes)),
            None => None,
        };
        let attack_budget = field("--attack-budget", parse_share(&self.attack_budget))?;
        if attack_budget <= 0.0 {
            return Err("--attack-budget: must be above 0 % (100 % = no budget)".into());
        }
        let w = Workload {
            class,
            pps: rate.pps(frame_bytes),
            frame_bytes,
            miss_rate,
        };
        let opts = Options {
            headroom,
            miss_speedup,
            miss_cores,
            offload_share,
            offload_pps: offload_rate.pps(frame_bytes),
            core_year_usd,
            attack_pps,
            attack_budget,
        };
        Ok((
            w,
            opts,
            Given {
                rate,
                size_label: mix.label(),
            },
        ))
    }
}
