//! `flowpath conntrack`: a running switch's connection tracker (dump, flush, stats,
//! limits) through its control socket, as `ovs-appctl dpctl/*-conntrack` and
//! `dpctl/ct-*` do for Open vSwitch.

use clap::{Args, Subcommand};
use flowpath_switch::conntrack::{LimitsRequest, ZoneLimit, ZoneRequest};
use flowpath_switch::control::{call, default_socket, Op, Request};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ConntrackArgs {
    /// The switch's control socket [default: as `flowpath flows`].
    #[arg(long, global = true)]
    control: Option<PathBuf>,
    #[command(subcommand)]
    cmd: ConntrackCmd,
}

#[derive(Subcommand, Debug, PartialEq)]
pub enum ConntrackCmd {
    /// Every tracked connection, one line each (OVS's dpctl/dump-conntrack format).
    Dump {
        /// Only this zone's connections.
        #[arg(long)]
        zone: Option<u16>,
        /// Print the connections as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Remove tracked connections: all of them, or one zone's (dpctl/flush-conntrack).
    Flush {
        /// Only this zone's connections.
        #[arg(long)]
        zone: Option<u16>,
    },
    /// The tracker's counters: connections, created, expired, early drops, limit hits,
    /// invalid packets by reason, connections by zone and state (dpctl/ct-stats-show).
    Stats {
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the connection limits with each limited zone's connections
    /// (dpctl/ct-get-limits); with --set or --default, change them first
    /// (dpctl/ct-set-limits; limit=0: no limit for that zone).
    Limits {
        /// A zone's limit, `zone=N,limit=M` (repeatable, or several after one --set).
        #[arg(long, value_name = "zone=N,limit=M", num_args = 1.., value_parser = parse_zone_limit)]
        set: Vec<ZoneLimit>,
        /// The limit of every zone without its own (0 = none).
        #[arg(long, value_name = "N")]
        default: Option<u32>,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn parse_zone_limit(s: &str) -> Result<ZoneLimit, String> {
    s.parse()
}

impl ConntrackCmd {
    /// The control request this command sends, and whether it prints JSON.
    fn request(&self) -> (Request, bool) {
        let (op, text, json) = match self {
            ConntrackCmd::Dump { zone, json } => {
                (Op::CtDump, json_text(&ZoneRequest { zone: *zone }), *json)
            }
            ConntrackCmd::Flush { zone } => {
                (Op::CtFlush, json_text(&ZoneRequest { zone: *zone }), false)
            }
            ConntrackCmd::Stats { json } => (Op::CtStats, String::new(), *json),
            ConntrackCmd::Limits { set, default, json } => {
                let req = LimitsRequest {
                    set: set.clone(),
                    default: *default,
                };
                (Op::CtLimits, json_text(&req), *json)
            }
        };
        (Request { op, text }, json)
    }
}

/// A request's JSON text.
fn json_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

pub fn run(args: ConntrackArgs) -> ExitCode {
    let socket = args.control.unwrap_or_else(default_socket);
    let (req, json) = args.cmd.request();
    let resp = match call(&socket, &req, Duration::from_secs(30)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flowpath conntrack: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(e) = resp.error {
        eprintln!("flowpath conntrack: {e}");
        return ExitCode::from(1);
    }
    if json {
        let v = resp.data.unwrap_or(serde_json::Value::Null);
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    for l in &resp.lines {
        println!("{l}");
    }
    if !resp.summary.is_empty() && req.op != Op::CtDump {
        println!("{}", resp.summary);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ConntrackArgs,
    }

    fn parse(argv: &[&str]) -> Result<ConntrackArgs, clap::Error> {
        let mut v = vec!["conntrack"];
        v.extend_from_slice(argv);
        Cli::try_parse_from(v).map(|c| c.args)
    }

    fn request(argv: &[&str]) -> (Request, bool) {
        parse(argv).unwrap().cmd.request()
    }

    #[test]
    fn dump_and_flush_take_a_zone() {
        let (r, json) = request(&["dump", "--zone", "5", "--json"]);
        assert_eq!((r.op, json), (Op::CtDump, true));
        let z: ZoneRequest = serde_json::from_str(&r.text).unwrap();
        assert_eq!(z.zone, Some(5));
        let (r, json) = request(&["dump"]);
        assert!(!json);
        assert_eq!(
            serde_json::from_str::<ZoneRequest>(&r.text).unwrap().zone,
            None
        );
        let (r, _) = request(&["flush", "--zone", "0"]);
        assert_eq!(r.op, Op::CtFlush);
        assert_eq!(
            serde_json::from_str::<ZoneRequest>(&r.text).unwrap().zone,
            Some(0)
        );
        assert!(parse(&["dump", "--zone", "65536"]).is_err());
        assert!(parse(&["flush", "--zone", "-1"]).is_err());
        assert!(parse(&["stats", "--zone", "1"]).is_err());
    }

    #[test]
    fn limits_take_zone_limit_pairs_and_a_default() {
        let (r, _) = request(&[
            "limits",
            "--set",
            "zone=1,limit=10",
            "limit=5,zone=2",
            "--set",
            "zone=3,limit=0",
            "--default",
            "100",
        ]);
        assert_eq!(r.op, Op::CtLimits);
        let l: LimitsRequest = serde_json::from_str(&r.text).unwrap();
        let pairs: Vec<(u16, u32)> = l.set.iter().map(|z| (z.zone, z.limit)).collect();
        assert_eq!(pairs, [(1, 10), (2, 5), (3, 0)]);
        assert_eq!(l.default, Some(100));
        // Without changes: only show.
        let (r, _) = request(&["limits"]);
        assert!(!serde_json::from_str::<LimitsRequest>(&r.text)
            .unwrap()
            .changes());
        for bad in [
            "zone=1",
            "limit=1",
            "zone=70000,limit=1",
            "zone=1,limit=x",
            "zone=1,cap=2",
            "1,2",
        ] {
            let e = parse(&["limits", "--set", bad]).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn control_socket_and_stats() {
        let a = parse(&["stats", "--json", "--control", "/tmp/x.sock"]).unwrap();
        assert_eq!(a.control, Some(PathBuf::from("/tmp/x.sock")));
        assert_eq!(a.cmd, ConntrackCmd::Stats { json: true });
        assert!(parse(&["show"]).is_err());
    }
}
