//! `flowpath gen`: the traffic generator command. Turns flags into a
//! [`TrafficSpec`](flowpath_gen::TrafficSpec), or reads a capture to replay, writes pcap
//! files and prints what they hold, or (`--tx`) transmits on an interface with XDP live
//! frames.

use flowpath_gen::CaptureReplay;
use std::process::ExitCode;
use std::time::Duration;

use flowpath_gen::pcap::{self, Summary};
use flowpath_gen::spec::{AddrRange, PortRange, SpecError};
use flowpath_gen::{Churn, Encap, InMemorySource, Lifetime, Popularity, Proto, Sizes, TrafficSpec};
use flowpath_ports::xdpgen::{LiveFrameTx, TxPlan, Vary, MAX_TEMPLATES};

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
the summary as JSON (the spec is what bench results record).

Transmitting (--tx IFACE, root): frames go out of IFACE through XDP live frames (BPF_PROG_RUN \
in the kernel, one core, several Mpps into a veth). The spec's sizes, protocol and encapsulation \
become template frames (one flow); a program in the kernel rewrites each packet's flow: the \
outermost source port (then source address) cycles round-robin over --flows flows, and the \
long-run new-flow rate of --miss-rate / --lifetime / --mean-lifetime becomes that share of \
packets carrying never-seen flows, spread evenly (lifetimes are not kept: every new flow is one \
packet, the recurring ones never end). Popularity is uniform (--zipf is refused). --miss-rate \
100% makes every packet a new flow. A veth only accepts these frames when its PEER has an XDP \
program attached (an AF_XDP port does; for the Linux stack attach an XDP_PASS program), \
otherwise they are dropped silently. Nothing reports frames the receiver had no room for: use \
--rate to pace (bursts of at most 256 frames).
  flowpath gen --tx veth0 --flows 1000 --miss-rate 5% --size imix --duration 10 --rate 1M
  flowpath gen --replay in.pcap --tx veth0 --packets 1000000 --json";

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
    /// Print the spec and the summary (with --tx: packets, seconds, Mpps) as JSON.
    #[arg(long)]
    json: bool,
    /// Transmit on this interface (XDP live frames; needs root) instead of writing a pcap.
    /// Flows and new flows are rewritten in the kernel per packet: see --help.
    #[arg(long, value_name = "IFACE")]
    tx: Option<String>,
    /// With --tx: seconds to transmit [default: 10, or until --packets are sent].
    #[arg(long, value_name = "SECS", allow_hyphen_values = true)]
    duration: Option<String>,
    /// With --tx: pace to this many packets per second, e.g. 500k, 1M, 2.5M [default: as
    /// fast as possible].
    #[arg(long, value_name = "PPS", allow_hyphen_values = true)]
    rate: Option<String>,
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
    if a.tx.is_some() {
        return transmit(a);
    }
    for (flag, set) in [
        ("--duration", a.duration.is_some()),
        ("--rate", a.rate.is_some()),
    ] {
        if set {
            return Err(bad(flag, "only applies with --tx IFACE"));
        }
    }
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

/// `1M`, `500k`, `2.5M`, `1_000_000`: packets per second.
fn rate(s: &Option<String>) -> Result<Option<u64>, Bad> {
    let Some(v) = s.as_deref() else {
        return Ok(None);
    };
    let t = v.trim().replace('_', "");
    let (n, mul) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'm' | 'M')) => (&t[..i], 1e6),
        Some((i, 'g' | 'G')) => (&t[..i], 1e9),
        _ => (&t[..], 1.0),
    };
    let x: f64 = n
        .trim()
        .parse()
        .map_err(|_| bad("--rate", format!("'{v}' is not a rate like 500k or 1M")))?;
    let pps = x * mul;
    if !(pps >= 1.0 && pps.is_finite()) {
        return Err(bad(
            "--rate",
            format!("'{v}' must be at least 1 packet per second"),
        ));
    }
    Ok(Some(pps.round() as u64))
}

/// `10`, `0.5`, `10s`: seconds.
fn seconds(s: &Option<String>) -> Result<Option<Duration>, Bad> {
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

/// The source's templates, each repeated in proportion to the slots holding it (the
/// proportions reduced by their common divisor), at most [`MAX_TEMPLATES`] frames.
fn template_cycle(src: &InMemorySource) -> Vec<Vec<u8>> {
    let mut count = vec![0u64; src.template_count()];
    for slot in 0..src.slot_count() {
        count[src.template_of_slot(slot)] += 1;
    }
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let g = count.iter().copied().fold(0, gcd).max(1);
    let mut out = Vec::new();
    for (t, &c) in count.iter().enumerate() {
        for _ in 0..c / g {
            if out.len() < MAX_TEMPLATES {
                out.push(src.template(t).to_vec());
            }
        }
    }
    out
}

/// `--tx`: build template frames and a flow plan, transmit, report.
fn transmit(a: &GenFlags) -> Result<String, Bad> {
    let iface = a.tx.as_deref().unwrap_or_default();
    for (flag, set, why) in [
        (
            "--out",
            a.out.is_some(),
            "transmit or write a file, not both",
        ),
        (
            "--zipf",
            a.zipf.is_some(),
            "popularity is uniform with --tx (the kernel program cycles flows round-robin)",
        ),
        ("--slots", a.slots.is_some(), "does not apply with --tx"),
    ] {
        if set {
            return Err(bad(flag, format!("cannot be used with --tx: {why}")));
        }
    }
    let rate = rate(&a.rate)?;
    let packets = num::<u64>("--packets", &a.packets, "a number of packets")?;
    if packets == Some(0) {
        return Err(bad("--packets", "must be at least 1"));
    }
    let duration = match (seconds(&a.duration)?, packets) {
        (Some(d), _) => d,
        (None, Some(_)) => Duration::from_secs(365 * 24 * 3600),
        (None, None) => Duration::from_secs(10),
    };
    let (templates, vary, head, spec) = if let Some(path) = a.replay.as_deref() {
        let churned = [
            ("--miss-rate", a.miss_rate.is_some()),
            ("--lifetime", a.lifetime.is_some()),
            ("--mean-lifetime", a.mean_lifetime.is_some()),
            ("--flows", a.flows.is_some()),
        ];
        if let Some((flag, _)) = churned.iter().find(|(_, set)| *set) {
            return Err(bad(
                flag,
                "cannot be used with --replay --tx (the capture is sent as it is)",
            ));
        }
        let cap =
            pcap::read_capture_file(path).map_err(|e| bad("--replay", format!("{path}: {e}")))?;
        let n = cap.frames.len();
        if n == 0 {
            return Err(bad("--replay", format!("{path}: no frames")));
        }
        let mut frames = cap.frames;
        frames.truncate(MAX_TEMPLATES);
        let head = format!(
            "{path}: {n} frames{}, sent as they are",
            if n > MAX_TEMPLATES {
                format!(" (the first {MAX_TEMPLATES} used)")
            } else {
                String::new()
            }
        );
        (frames, Vary::AsIs, head, None)
    } else {
        let spec = spec_from(a)?;
        // One flow, no churn: the templates only carry sizes, protocol and encapsulation.
        let mut one = spec.clone();
        one.flows.count = 1;
        one.churn = Churn {
            new_flow_share: 0.0,
            lifetime: None,
        };
        one.popularity = Popularity::Uniform;
        one.slots = None;
        let src = one.source().map_err(spec_err)?;
        let frames = template_cycle(&src);
        let flows = u32::try_from(spec.flows.count).unwrap_or(u32::MAX);
        let share = spec.churn.new_flow_rate();
        let vary = if flows <= 1 && share == 0.0 {
            Vary::AsIs
        } else {
            Vary::Flows {
                flows,
                new_share: share,
            }
        };
        let head = format!(
            "{} flows {} round-robin, {}, sizes {}, {} new flows; {} template frames",
            spec.flows.count,
            spec.flows.proto,
            spec.encap,
            spec.sizes,
            pct(share),
            frames.len()
        );
        (frames, vary, head, Some(spec))
    };
    let mut tx = LiveFrameTx::open(iface).map_err(|e| bad("--tx", format!("{iface}: {e}")))?;
    let plan = TxPlan {
        duration,
        packets,
        rate_pps: rate,
        vary,
    };
    let r = tx
        .run(&templates, &plan)
        .map_err(|e| bad("--tx", format!("{iface}: {e}")))?;
    if a.json {
        let v = serde_json::json!({
            "interface": iface,
            "packets": r.packets,
            "seconds": r.seconds,
            "mpps": r.mpps,
            "rate_pps": rate,
            "vary": vary,
            "templates": templates.len(),
            "fast_calls": tx.fast_calls(),
            "spec": spec,
            "replay": a.replay,
        });
        return Ok(format!("{}\n", serde_json::to_string_pretty(&v).unwrap()));
    }
    let mut t = format!("{head}\n");
    if !tx.fast_calls() {
        t += &format!(
            "note: {iface} already has an XDP program, so every kernel call costs tens of ms: \
             bursts are long and --rate is coarse\n"
        );
    }
    t += &format!(
        "sent {} packets on {iface} in {:.2} s: {:.3} Mpps{}\n",
        grouped(r.packets),
        r.seconds,
        r.mpps,
        rate.map(|p| format!(" (paced to {})", grouped(p)))
            .unwrap_or_default()
    );
    Ok(t)
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
            (&["--rate", "1M"], "--rate:"),
            (&["--duration", "3"], "--duration:"),
            (&["--tx", "lo", "--rate", "fast"], "--rate:"),
            (&["--tx", "lo", "--rate", "0"], "--rate:"),
            (&["--tx", "lo", "--duration", "-1"], "--duration:"),
            (&["--tx", "lo", "--out", "x.pcap"], "--out:"),
            (&["--tx", "lo", "--zipf", "1.1"], "--zipf:"),
            (&["--tx", "no-such-if0", "--packets", "1"], "--tx:"),
            (
                &["--tx", "lo", "--replay", "x.pcap", "--miss-rate", "5%"],
                "--miss-rate:",
            ),
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
    fn rates_and_durations_parse() {
        let r = |v: &str| rate(&Some(v.to_string())).map_err(|b| b.0).unwrap();
        assert_eq!(r("1M"), Some(1_000_000));
        assert_eq!(r("500k"), Some(500_000));
        assert_eq!(r("2.5M"), Some(2_500_000));
        assert_eq!(r("1_000"), Some(1000));
        let d = |v: &str| seconds(&Some(v.to_string())).map_err(|b| b.0).unwrap();
        assert_eq!(d("10"), Some(Duration::from_secs(10)));
        assert_eq!(d("0.5s"), Some(Duration::from_millis(500)));
    }

    #[test]
    fn summary_groups_digits() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
