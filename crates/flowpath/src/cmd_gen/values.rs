//! Turning one flag's text into a value of the library's types, or a one-line error that
//! names the flag: numbers, shares, rates, durations, and the flag behind a spec field or a
//! failed job.

use std::time::Duration;

use flowpath_gen::spec::SpecError;
use flowpath_planner::units::{parse_packet_rate, parse_share};
use flowpath_tx::Failure;

/// A one-line error naming the flag.
pub(super) struct Bad(pub(super) String);

pub(super) fn bad(flag: &str, msg: impl std::fmt::Display) -> Bad {
    Bad(format!("{flag}: {msg}"))
}

pub(super) fn num<T: std::str::FromStr>(
    flag: &str,
    s: &Option<String>,
    what: &str,
) -> Result<Option<T>, Bad> {
    s.as_deref()
        .map(|v| {
            v.trim()
                .replace('_', "")
                .parse::<T>()
                .map_err(|_| bad(flag, format!("'{v}' is not {what}")))
        })
        .transpose()
}

pub(super) fn parsed<T: std::str::FromStr<Err = String>>(
    flag: &str,
    s: &Option<String>,
) -> Result<Option<T>, Bad> {
    s.as_deref()
        .map(|v| v.parse::<T>().map_err(|e| bad(flag, e)))
        .transpose()
}

/// `5%` or `0.05` (the planner's share syntax).
pub(super) fn share(flag: &str, s: &Option<String>) -> Result<Option<f64>, Bad> {
    s.as_deref()
        .map(|v| parse_share(v).map_err(|e| bad(flag, e)))
        .transpose()
}

/// Refuse the first of `flags` (name, given) that was given, saying `why`.
pub(super) fn refuse(flags: &[(&str, bool)], why: &str) -> Result<(), Bad> {
    match flags.iter().find(|(_, given)| *given) {
        Some((flag, _)) => Err(bad(flag, why)),
        None => Ok(()),
    }
}

/// The flag a spec field comes from.
fn flag_of(e: &SpecError) -> &'static str {
    match e.field {
        "flows.count" => "--flows",
        "flows.src" => "--src",
        "flows.dst" => "--dst",
        "flows.sport" => "--sport",
        "flows.dport" => "--dport",
        "popularity" => "--zipf",
        "sizes" => "--size",
        "churn.new_flow_share" => "--miss-rate",
        "churn.lifetime" => "--lifetime",
        "encap" => "--encap",
        "slots" => "--slots",
        _ => "spec",
    }
}

pub(super) fn spec_err(e: SpecError) -> Bad {
    bad(flag_of(&e), e.message)
}

/// A job's failure as the flag at fault.
pub(super) fn failed(f: Failure) -> Bad {
    match f {
        Failure::Spec(e) => spec_err(e),
        Failure::Replay(m) => bad("--replay", m),
        Failure::Out(m) => bad("--out", m),
        Failure::Tx(m) => bad("--tx", m),
    }
}

/// `1M`, `500k`, `2.5M`, `1_000_000` (or the planner's packet units, `560kpps`): packets
/// per second, at least 1.
pub(super) fn rate(s: &Option<String>) -> Result<Option<u64>, Bad> {
    let Some(v) = s.as_deref() else {
        return Ok(None);
    };
    let pps = parse_packet_rate(&v.replace('_', "")).map_err(|e| bad("--rate", e))?;
    if pps < 1.0 {
        return Err(bad(
            "--rate",
            format!("'{v}' must be at least 1 packet per second"),
        ));
    }
    Ok(Some(pps.round() as u64))
}

/// `10`, `0.5`, `10s`: seconds.
pub(super) fn seconds(s: &Option<String>) -> Result<Option<Duration>, Bad> {
    let Some(v) = s.as_deref() else {
        return Ok(None);
    };
    let t = v.trim();
    let x: f64 = t
        .strip_suffix('s')
        .unwrap_or(t)
        .trim()
        .parse()
        .map_err(|_| bad("--duration", format!("'{v}' is not a number of seconds")))?;
    if !(x > 0.0 && x.is_finite() && x < 1e9) {
        return Err(bad(
            "--duration",
            format!("'{v}' must be more than 0 seconds"),
        ));
    }
    Ok(Some(Duration::from_secs_f64(x)))
}
