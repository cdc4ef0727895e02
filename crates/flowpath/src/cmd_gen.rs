//! `flowpath gen`: the traffic generator command. Turns flags into a
//! [`TrafficSpec`](flowpath_gen::TrafficSpec), or reads a capture to replay, writes pcap
//! files and prints what they hold.

use std::process::ExitCode;

use flowpath_gen::pcap::{self, Summary};
use flowpath_gen::spec::{AddrRange, PortRange, SpecError};
use flowpath_gen::{Churn, Encap, InMemorySource, Lifetime, Popularity, Proto, Sizes, TrafficSpec};

const ABOUT: &str = "How it works: the flags describe a workload (flows, popularity, frame \
sizes, churn, encapsulation, seed), the same spec `flowpath bench` can run from memory. One loop \
over the generator's slots is an exact sample of it: every flow gets its share by popularity, \
every frame size its exact share, shuffled with the seed; churn stamps packets as never-seen \
flows, so the miss rate a switch sees is the one asked for. Frames are valid (lengths and \
checksums right); sizes include the 4-byte FCS (RFC 2544), which is not written, and grow when \
the headers need more (VXLAN at 64 B). The same flags and seed give the same bytes.";

const EXAMPLES: &str = "Examples:
  # 1,000 UDP flows, IMIX sizes, 5% of packets new flows, VXLAN over IPv4 carrying IPv6,
  # Zipf popularity with skew 1.1, 100,000 packets:
  flowpath gen --flows 1000 --size imix --miss-rate 5% --encap vxlan4-ipv6 --proto udp \\
               --zipf 1.1 --packets 100000 --seed 7 --out /tmp/x.pcap

  # Flows that live 100 packets each (so 1% of packets are new flows), RFC 2544 sizes in turn:
  flowpath gen --lifetime 100 --size sweep:rfc2544 --out /tmp/sweep.pcap

  # What does a capture hold? Loop it into 1,000,000 packets:
  flowpath gen --replay in.pcap
  flowpath gen --replay in.pcap --packets 1000000 --out out.pcap

Without --out nothing is written: the summary shows what would be. --json prints the spec and \
the summary as JSON (the spec is what bench results record).";

const SHORT_EXAMPLE: &str = "Example:
  flowpath gen --flows 1000 --size imix --miss-rate 5% --encap vxlan4-ipv6 --zipf 1.1 \\
               --packets 100000 --seed 7 --out /tmp/x.pcap
(--help explains more and shows more examples)";

fn concat_help() -> String {
    format!("{ABOUT}\n\n{EXAMPLES}")
}

/// The flags of `flowpath gen`, boxed: the command enum in main.rs holds one of these
/// per subcommand, and eighteen strings inline would make it large.
#[derive(clap::Args)]
#[command(after_help = SHORT_EXAMPLE, after_long_help = concat_help())]
pub struct GenArgs {
    #[command(flatten)]
    flags: Box<GenFlags>,
}

#[derive(clap::Args)]
struct GenFlags {
    /// Number of flows [default: 1024].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    flows: Option<String>,
    /// Transport protocol: udp, tcp or icmp (echo requests) [default: udp].
    #[arg(long, value_name = "PROTO")]
    proto: Option<String>,
    /// Encapsulation: ipv4, ipv6, or vxlanO-ipvI = VXLAN over IPvO carrying IPvI
    /// (vxlan4-ipv4, vxlan4-ipv6, vxlan6-ipv4, vxlan6-ipv6) [default: ipv4].
    #[arg(long, value_name = "ENCAP")]
    encap: Option<String>,
    /// VXLAN network identifier (with a vxlan encapsulation) [default: 100].
    #[arg(long, value_name = "VNI", allow_hyphen_values = true)]
    vni: Option<String>,
    /// Source addresses of the (inner) header: 10.0.0.1, 10.0.0.1-10.0.3.255, 10.0.0.0/16 or
    /// 10.0.0.1+1000 [default: 10.0.0.1-10.255.255.254, or 2001:db8::8000:1-2001:db8::ffff:ffff].
    #[arg(long, value_name = "RANGE")]
    src: Option<String>,
    /// Destination addresses, same forms [default: 192.168.0.1, or 2001:db8:1::1].
    #[arg(long, value_name = "RANGE")]
    dst: Option<String>,
    /// Source ports: 1024 or 1024-65535 [default: 1024-65535].
    #[arg(long, value_name = "RANGE")]
    sport: Option<String>,
    /// Destination ports [default: 5001].
    #[arg(long, value_name = "RANGE")]
    dport: Option<String>,
    /// Zipf popularity with this skew (flow k sends in proportion to k^-SKEW; 0 = uniform)
    /// [default: uniform].
    #[arg(long, value_name = "SKEW", allow_hyphen_values = true)]
    zipf: Option<String>,
    /// Frame size including FCS: 64…9018, imix (64/570/1518 B in 7:4:1),
    /// mix:64*7,570*4,1518*1, or sweep:64,128,… (sweep:rfc2544) [default: 64].
    #[arg(long, value_name = "SIZE")]
    size: Option<String>,
    /// Share of packets that start a new flow, e.g. 5% or 0.05 [default: 0, or what
    /// --lifetime gives].
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    miss_rate: Option<String>,
    /// Each flow lives exactly N of its packets, then a new flow replaces it.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    lifetime: Option<String>,
    /// Each flow lives a random (geometric) number of packets with mean N.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    mean_lifetime: Option<String>,
    /// Packets to generate [default: 100000; with --replay, the capture's count].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    packets: Option<String>,
    /// Seed: the same flags and seed give the same bytes [default: 0].
    #[arg(long, value_name = "SEED", allow_hyphen_values = true)]
    seed: Option<String>,
    /// Slots of the in-memory source (one loop = one exact sample) [default: chosen from
    /// the flows, popularity and sizes].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    slots: Option<String>,
    /// Read this capture (pcap or pcapng, Ethernet) instead of generating: report what it
    /// holds, and with --out loop it into --packets packets.
    #[arg(long, value_name = "FILE")]
    replay: Option<String>,
    /// Write the packets to this pcap file.
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<String>,
    /// Print the spec and the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// A one-line error naming the flag.
struct Bad(String);

fn bad(flag: &str, msg: impl std::fmt::Display) -> Bad {
    Bad(format!("{flag}: {msg}"))
}

fn num<T: std::str::FromStr>(flag: &str, s: &Option<String>, what: &str) -> Result<Option<T>, Bad> {
    s.as_deref()
        .map(|v| {
            v.trim()
                .replace('_', "")
                .parse::<T>()
                .map_err(|_| bad(flag, format!("'{v}' is not {what}")))
        })
        .transpose()
}

fn parsed<T: std::str::FromStr<Err = String>>(
    flag: &str,
    s: &Option<String>,
) -> Result<Option<T>, Bad> {
    s.as_deref()
        .map(|v| v.parse::<T>().map_err(|e| bad(flag, e)))
        .transpose()
}

/// `5%` or `0.05`.
fn share(flag: &str, s: &Option<String>) -> Result<Option<f64>, Bad> {
    let Some(v) = s.as_deref() else {
        return Ok(None);
    };
    let (n, scale) = match v.trim().strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (v.trim(), 1.0),
    };
    let x: f64 = n
        .trim()
        .parse()
        .map_err(|_| bad(flag, format!("'{v}' is not a share like 5% or 0.05")))?;
    let x = x / scale;
    if !(0.0..=1.0).contains(&x) {
        return Err(bad(flag, format!("'{v}' is outside 0%..100%")));
    }
    Ok(Some(x))
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

fn spec_err(e: SpecError) -> Bad {
    bad(flag_of(&e), e.message)
}

/// The churn flags: the share of new flows, with or without lifetimes.
fn churn(a: &GenFlags) -> Result<Churn, Bad> {
    let rate = share("--miss-rate", &a.miss_rate)?;
    let lifetime = match (
        num::<u64>("--lifetime", &a.lifetime, "a number of packets")?,
        num::<f64>("--mean-lifetime", &a.mean_lifetime, "a number of packets")?,
    ) {
        (Some(0), _) => return Err(bad("--lifetime", "must be at least 1 packet")),
        (Some(n), _) => Some(Lifetime::Packets(n)),
        (_, Some(m)) if !(m >= 1.0 && m.is_finite()) => {
            return Err(bad("--mean-lifetime", "must be at least 1 packet"))
        }
        (_, Some(m)) => Some(Lifetime::Mean(m)),
        _ => None,
    };
    if a.lifetime.is_some() && a.mean_lifetime.is_some() {
        return Err(bad(
            "--lifetime",
            "give --lifetime (exact) or --mean-lifetime (random), not both",
        ));
    }
    let flag = if a.mean_lifetime.is_some() {
        "--mean-lifetime"
    } else {
        "--lifetime"
    };
    match (rate, lifetime) {
        (None, l) => Ok(Churn {
            new_flow_share: 0.0,
            lifetime: l,
        }),
        (Some(r), l) => Churn::for_new_flow_rate(r, l).map_err(|e| {
            if e.field == "churn.lifetime" {
                bad(flag, e.message)
            } else {
                bad("--miss-rate", e.message)
            }
        }),
    }
}

fn spec_from(a: &GenFlags) -> Result<TrafficSpec, Bad> {
    let mut s = TrafficSpec::default();
    if let Some(n) = num::<usize>("--flows", &a.flows, "a number of flows")? {
        s.flows.count = n;
    }
    if let Some(p) = parsed::<Proto>("--proto", &a.proto)? {
        s.flows.proto = p;
    }
    if let Some(e) = parsed::<Encap>("--encap", &a.encap)? {
        s.encap = e;
    }
    if let Some(v) = num::<u32>("--vni", &a.vni, "a VNI (0..16777215)")? {
        match &mut s.encap {
            Encap::Vxlan { vni, .. } if v < 1 << 24 => *vni = v,
            Encap::Vxlan { .. } => {
                return Err(bad("--vni", format!("{v} does not fit in 24 bits")))
            }
            _ => {
                return Err(bad(
                    "--vni",
                    "needs a vxlan encapsulation (--encap vxlan4-ipv4, ...)",
                ))
            }
        }
    }
    s.flows.src = parsed::<AddrRange>("--src", &a.src)?;
    s.flows.dst = parsed::<AddrRange>("--dst", &a.dst)?;
    if let Some(p) = parsed::<PortRange>("--sport", &a.sport)? {
        s.flows.sport = p;
    }
    if let Some(p) = parsed::<PortRange>("--dport", &a.dport)? {
        s.flows.dport = p;
    }
    if let Some(skew) = num::<f64>("--zipf", &a.zipf, "a skew (a number ≥ 0, e.g. 1.1)")? {
        if !(skew.is_finite() && skew >= 0.0) {
            return Err(bad("--zipf", format!("skew {skew} must be a number ≥ 0")));
        }
        s.popularity = Popularity::Zipf { skew };
    }
    if let Some(z) = parsed::<Sizes>("--size", &a.size)? {
        s.sizes = z;
    }
    s.churn = churn(a)?;
    if let Some(seed) = num::<u64>("--seed", &a.seed, "a whole number")? {
        s.seed = seed;
    }
    s.slots = num::<usize>("--slots", &a.slots, "a number of slots")?;
    s.validate().map_err(spec_err)?;
    Ok(s)
}

fn packets(a: &GenFlags, default: u64) -> Result<u64, Bad> {
    let n = num::<u64>("--packets", &a.packets, "a number of packets")?.unwrap_or(default);
    if n == 0 {
        return Err(bad("--packets", "must be at least 1"));
    }
    Ok(n)
}

/// Generate (or replay), write, summarise. Returns the text to print.
fn execute(a: &GenFlags) -> Result<String, Bad> {
    if a.replay.is_some() {
        let generator_only = [
            ("--flows", a.flows.is_some()),
            ("--proto", a.proto.is_some()),
            ("--encap", a.encap.is_some()),
            ("--vni", a.vni.is_some()),
            ("--src", a.src.is_some()),
            ("--dst", a.dst.is_some()),
            ("--sport", a.sport.is_some()),
            ("--dport", a.dport.is_some()),
            ("--zipf", a.zipf.is_some()),
            ("--size", a.size.is_some()),
            ("--slots", a.slots.is_some()),
        ];
        if let Some((flag, _)) = generator_only.iter().find(|(_, set)| *set) {
            return Err(bad(
                flag,
                "describes generated traffic and cannot be used with --replay",
            ));
        }
        return replay(a);
    }
    let spec = spec_from(a)?;
    let n = packets(a, 100_000)?;
    let mut src = spec.source().map_err(spec_err)?;
    let summary = write(a, &mut src, n)?;
    let head = format!(
        "{} flows {}, {}, {}, sizes {}, {} new flows (long run), seed {} ({} slots)",
        spec.flows.count,
        spec.flows.proto,
        spec.encap,
        spec.popularity,
        spec.sizes,
        pct(spec.churn.new_flow_rate()),
        spec.seed,
        src.slot_count()
    );
    if a.json {
        let v = serde_json::json!({ "spec": spec, "summary": summary, "out": a.out });
        return Ok(format!("{}\n", serde_json::to_string_pretty(&v).unwrap()));
    }
    Ok(report(&head, verb(a), a.out.as_deref(), &summary))
}

fn verb(a: &GenFlags) -> Verb {
    if a.out.is_some() {
        Verb::Wrote
    } else {
        Verb::WouldWrite
    }
}

fn replay(a: &GenFlags) -> Result<String, Bad> {
    let path = a.replay.as_deref().unwrap_or_default();
    let cap = pcap::read_capture_file(path).map_err(|e| bad("--replay", format!("{path}: {e}")))?;
    let (count, truncated, format) = (cap.frames.len(), cap.truncated, cap.format);
    let mut head = format!("{path}: {format}, {count} packets");
    if truncated > 0 {
        head += &format!(" ({truncated} captured truncated: replayed as captured)");
    }
    let wants_output = a.out.is_some() || a.packets.is_some();
    let mut how = verb(a);
    let summary = if wants_output {
        let c = churn(a)?;
        let seed = num::<u64>("--seed", &a.seed, "a whole number")?.unwrap_or(0);
        let n = packets(a, count.max(1) as u64)?;
        let mut src = cap
            .into_source()
            .map_err(|e| bad("--replay", format!("{path}: {e}")))?
            .with_seed(seed);
        src.set_new_flow_share(c.new_flow_share);
        src.set_lifetime(c.lifetime);
        head += &format!(", looped into {n}");
        write(a, &mut src, n)?
    } else {
        how = Verb::Holds;
        cap.summary()
    };
    if a.json {
        let v = serde_json::json!({ "replay": path, "format": format, "capture_packets": count,
            "truncated": truncated, "summary": summary, "out": a.out });
        return Ok(format!("{}\n", serde_json::to_string_pretty(&v).unwrap()));
    }
    Ok(report(&head, how, a.out.as_deref(), &summary))
}

/// Write `n` packets of `src` to --out, or only count them.
fn write(a: &GenFlags, src: &mut InMemorySource, n: u64) -> Result<Summary, Bad> {
    match a.out.as_deref() {
        Some(path) => {
            pcap::write_pcap_file(path, src, n).map_err(|e| bad("--out", format!("{path}: {e}")))
        }
        None => pcap::write_pcap(std::io::sink(), src, n).map_err(|e| bad("--out", e)),
    }
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// 1234567 -> "1,234,567".
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How the packets of a report came about.
#[derive(Clone, Copy, PartialEq)]
enum Verb {
    Wrote,
    WouldWrite,
    Holds,
}

fn report(head: &str, verb: Verb, out: Option<&str>, s: &Summary) -> String {
    let mut t = format!("{head}\n");
    let p = s.packets.max(1) as f64;
    t += &format!(
        "{} {} packets, {} bytes (without FCS){}\n",
        match verb {
            Verb::Wrote => "wrote",
            Verb::WouldWrite => "would write",
            Verb::Holds => "holds",
        },
        grouped(s.packets),
        grouped(s.bytes),
        out.map(|o| format!(" to {o}")).unwrap_or_default()
    );
    t += &format!(
        "distinct flows {}   new flows {} ({} of packets)",
        grouped(s.distinct_flows),
        grouped(s.new_flows),
        pct(s.new_flows as f64 / p)
    );
    if verb == Verb::Holds {
        t = t.replacen("   new flows 0 (0.00% of packets)", "", 1);
    }
    if s.unparsed > 0 {
        t += &format!("   unparsed {}", grouped(s.unparsed));
    }
    t += "\nframe sizes (FCS included):\n";
    const SHOWN: usize = 12;
    let mut sizes: Vec<(usize, u64)> = s.sizes.iter().map(|(&k, &v)| (k, v)).collect();
    if sizes.len() > SHOWN {
        // Many sizes (a capture): the most frequent ones, in size order.
        sizes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        sizes.truncate(SHOWN);
        sizes.sort();
    }
    for (size, n) in &sizes {
        t += &format!(
            "  {size:>5} B  {:>12}  {:>7}\n",
            grouped(*n),
            pct(*n as f64 / p)
        );
    }
    if s.sizes.len() > SHOWN {
        t += &format!("  ({} more sizes)\n", s.sizes.len() - SHOWN);
    }
    t
}

pub fn run(args: GenArgs) -> ExitCode {
    match execute(&args.flags) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(Bad(msg)) => {
            eprintln!("flowpath gen: {msg}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gen: GenArgs,
    }

    fn err(args: &[&str]) -> String {
        let cli = Cli::try_parse_from(std::iter::once("gen").chain(args.iter().copied()))
            .expect("clap accepts the flags");
        match execute(&cli.gen.flags) {
            Ok(_) => panic!("{args:?} succeeded"),
            Err(Bad(m)) => m,
        }
    }

    #[test]
    fn bad_arguments_give_one_line_errors_naming_the_flag() {
        for (args, flag) in [
            (&["--flows", "x"][..], "--flows:"),
            (&["--flows", "0"], "--flows:"),
            (&["--proto", "sctp"], "--proto:"),
            (&["--encap", "gre"], "--encap:"),
            (&["--vni", "5"], "--vni:"),
            (&["--encap", "vxlan", "--vni", "99999999"], "--vni:"),
            (&["--src", "10.0.0.300"], "--src:"),
            (&["--src", "2001:db8::1"], "--src:"),
            (&["--dst", "10.0.0.9-10.0.0.1"], "--dst:"),
            (&["--sport", "70000"], "--sport:"),
            (&["--dport", "9-1"], "--dport:"),
            (&["--zipf", "-1"], "--zipf:"),
            (&["--size", "63"], "--size:"),
            (&["--size", "sweep:64,x"], "--size:"),
            (&["--miss-rate", "150%"], "--miss-rate:"),
            (&["--lifetime", "0"], "--lifetime:"),
            (&["--lifetime", "10", "--miss-rate", "5%"], "--lifetime:"),
            (&["--mean-lifetime", "0.5"], "--mean-lifetime:"),
            (&["--packets", "0"], "--packets:"),
            (&["--seed", "x"], "--seed:"),
            (&["--seed", "-3"], "--seed:"),
            (&["--flows", "-3"], "--flows:"),
            (&["--lifetime", "3", "--mean-lifetime", "4"], "--lifetime:"),
            (&["--slots", "10"], "--slots:"),
            (
                &["--flows", "300", "--src", "10.0.0.1+10", "--sport", "1-20"],
                "--flows:",
            ),
            (&["--miss-rate", "1%", "--src", "100.64.0.0/16"], "--src:"),
            (&["--replay", "/nonexistent.pcap"], "--replay:"),
            (&["--replay", "x.pcap", "--flows", "3"], "--flows:"),
            (&["--out", "/nonexistent-dir/x.pcap"], "--out:"),
        ] {
            let m = err(args);
            assert!(m.starts_with(flag), "{args:?}: {m}");
            assert!(!m.contains('\n'), "{args:?}: {m}");
        }
    }

    #[test]
    fn flags_make_the_spec() {
        let cli = Cli::try_parse_from([
            "gen",
            "--flows",
            "1000",
            "--size",
            "imix",
            "--miss-rate",
            "5%",
            "--encap",
            "vxlan4-ipv6",
            "--zipf",
            "1.1",
            "--seed",
            "7",
            "--lifetime",
            "100",
        ])
        .unwrap();
        let s = spec_from(&cli.gen.flags).map_err(|b| b.0).unwrap();
        assert_eq!(s.flows.count, 1000);
        assert_eq!(s.sizes, Sizes::Imix);
        assert_eq!(s.popularity, Popularity::Zipf { skew: 1.1 });
        assert_eq!(s.seed, 7);
        assert!((s.churn.new_flow_rate() - 0.05).abs() < 1e-12);
        assert_eq!(s.churn.lifetime, Some(Lifetime::Packets(100)));
        assert_eq!(s.encap.to_string(), "vxlan4-ipv6");
    }

    #[test]
    fn summary_groups_digits() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
