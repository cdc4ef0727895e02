//! `flowpath gen`: the traffic generator command's flags. Turns them into a
//! [`TrafficSpec`], a capture to replay, or a transmit job (`--tx`, XDP live frames),
//! refusing flags that do not go together with a one-line error naming the flag
//! ([`values`] reads each flag), and hands the job to `flowpath_tx` (or the attack to
//! `flowpath_bench::attack`), which does it and says what happened.

use std::process::ExitCode;
use std::time::Duration;

use flowpath_gen::pcap::{self, Pace};
use flowpath_gen::spec::{AddrRange, PortRange};
use flowpath_gen::{Churn, Encap, Lifetime, Popularity, Proto, Sizes, TrafficSpec};
use flowpath_tx::{FlowOrder, Looped, TxFrames, TxJob};

mod values;

use values::{bad, failed, num, parsed, rate, refuse, seconds, share, spec_err, Bad};

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
outermost source port (then source address) cycles round-robin over --flows flows (--order \
random: each packet's flow at random, uniform), and the \
long-run new-flow rate of --miss-rate / --lifetime / --mean-lifetime becomes that share of \
packets carrying never-seen flows, spread evenly (lifetimes are not kept: every new flow is one \
packet, the recurring ones never end). Popularity is uniform (--zipf is refused). --miss-rate \
100% makes every packet a new flow. A veth only accepts these frames when its PEER has an XDP \
program attached (an AF_XDP port does; for the Linux stack attach an XDP_PASS program), \
otherwise they are dropped silently. Nothing reports frames the receiver had no room for: use \
--rate to pace (below 250k pps bursts of a few frames with sleeps between them; from 250k up \
the kernel program sends each frame when it is due, which keeps the sender's core busy). Where \
the kernel refuses live frames to this process (EPERM), the same frames and flows go out \
through a packet socket instead (sendmmsg, the qdisc bypassed; slower), and the report says so.
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
    /// Transmit on this interface (XDP live frames, else a packet socket; needs root)
    /// instead of writing a pcap. Flows and new flows are rewritten per packet: see --help.
    #[arg(long, value_name = "IFACE")]
    tx: Option<String>,
    /// With --tx and a vxlan encapsulation: the outer UDP source port of every template
    /// (instead of 49152 + flow). The kernel program steps the outermost source port over
    /// the ports above it before the source address, so 65535 makes each flow (and each
    /// new flow) a new outer source address: a new remote VTEP.
    #[arg(long, value_name = "PORT", allow_hyphen_values = true)]
    outer_sport: Option<String>,
    /// With --tx: seconds to transmit [default: 10, or until --packets are sent].
    #[arg(long, value_name = "SECS", allow_hyphen_values = true)]
    duration: Option<String>,
    /// With --tx: pace to this many packets per second, e.g. 500k, 1M, 2.5M; from 250k up
    /// the sender's core stays busy [default: as fast as possible]. With --out: the written
    /// packets' timestamps are this many per second apart [default: back to back at
    /// 10 Gb/s line rate for each frame's size].
    #[arg(long, value_name = "PPS", allow_hyphen_values = true)]
    rate: Option<String>,
    /// With --tx: the order packets visit the --flows flows: `round-robin` (each flow every
    /// N packets) or `random` (uniform per packet, as traffic interleaved from many hosts:
    /// a cache laid out in arrival order is then not read as a stream) [default:
    /// round-robin].
    #[arg(long, value_name = "ORDER", allow_hyphen_values = true)]
    order: Option<String>,
    /// Attack traffic instead of a workload: `tse` = tuple-space explosion against --rules
    /// (each packet inside a random rule with one bit flipped, at a random depth, in some of
    /// the address and port fields, so megaflows get new masks). Writes --out; the summary
    /// says how many megaflow masks the packets create in flowpath's datapath with no
    /// defence and with the defaults. (A new-flow flood is `--miss-rate 100%`.)
    #[arg(long, value_name = "KIND")]
    attack: Option<String>,
    /// With --attack: the ACL (ClassBench filters or a flows file) [default: the built-in
    /// 1,000-rule ClassBench acl2 set `flowpath bench --case tse` uses].
    #[arg(long, value_name = "FILE")]
    rules: Option<String>,
}

impl GenFlags {
    /// The flags that describe generated flows, each with whether it was given.
    fn flow_flags(&self) -> Vec<(&'static str, bool)> {
        vec![
            ("--flows", self.flows.is_some()),
            ("--proto", self.proto.is_some()),
            ("--encap", self.encap.is_some()),
            ("--src", self.src.is_some()),
            ("--dst", self.dst.is_some()),
            ("--sport", self.sport.is_some()),
            ("--dport", self.dport.is_some()),
            ("--zipf", self.zipf.is_some()),
        ]
    }
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
    if a.attack.is_some() {
        return attack(a);
    }
    if a.rules.is_some() {
        return Err(bad("--rules", "only applies with --attack tse"));
    }
    if a.tx.is_some() {
        return transmit(a);
    }
    refuse(
        &[
            ("--duration", a.duration.is_some()),
            ("--outer-sport", a.outer_sport.is_some()),
            ("--order", a.order.is_some()),
        ],
        "only applies with --tx IFACE",
    )?;
    if a.out.is_none() {
        refuse(
            &[("--rate", a.rate.is_some())],
            "only applies with --tx IFACE (the sending rate) or --out FILE (the timestamps' rate)",
        )?;
    }
    if a.replay.is_some() {
        let mut generator_only = a.flow_flags();
        generator_only.extend([
            ("--vni", a.vni.is_some()),
            ("--size", a.size.is_some()),
            ("--slots", a.slots.is_some()),
        ]);
        refuse(
            &generator_only,
            "describes generated traffic and cannot be used with --replay",
        )?;
        return replay(a);
    }
    let spec = spec_from(a)?;
    let n = packets(a, 100_000)?;
    flowpath_tx::generate(&spec, n, a.out.as_deref(), pace(a)?, a.json).map_err(failed)
}

/// `--attack tse`: the attack's frames to --out, and what they do to the megaflow cache.
fn attack(a: &GenFlags) -> Result<String, Bad> {
    let kind = a.attack.as_deref().unwrap_or_default();
    if kind != "tse" {
        return Err(bad(
            "--attack",
            format!("'{kind}' is not an attack this generator makes (tse; a new-flow flood is --miss-rate 100%)"),
        ));
    }
    let mut workload_only = a.flow_flags();
    workload_only.extend([
        ("--miss-rate", a.miss_rate.is_some()),
        ("--lifetime", a.lifetime.is_some()),
        ("--replay", a.replay.is_some()),
        ("--tx", a.tx.is_some()),
    ]);
    refuse(
        &workload_only,
        "cannot be used with --attack (to transmit it: --out FILE, then --replay FILE --tx IFACE)",
    )?;
    let rules = match &a.rules {
        Some(path) => flowpath_bench::classifier::load_rules(std::path::Path::new(path))
            .map_err(|e| bad("--rules", e))?,
        None => flowpath_bench::attack::default_acl(),
    };
    let n = packets(a, 100_000)?;
    let seed = num::<u64>("--seed", &a.seed, "a whole number")?.unwrap_or(0);
    let size = match &a.size {
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|v| (64..=1518).contains(v))
            .ok_or_else(|| bad("--size", "with --attack: one frame size, 64..=1518"))?,
        None => 64,
    };
    let report =
        flowpath_bench::attack::tse_report(&rules, n as usize, seed, size, a.out.as_deref())
            .map_err(|e| bad("--out", e))?;
    Ok(if a.json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&report).expect("serialises")
        )
    } else {
        report.text()
    })
}

/// `--replay` without `--tx`: what the capture holds, or (with --out or --packets) the
/// capture looped into packets.
fn replay(a: &GenFlags) -> Result<String, Bad> {
    let path = a.replay.as_deref().unwrap_or_default();
    let cap = read_replay(path)?;
    let looped = if a.out.is_some() || a.packets.is_some() {
        Some(Looped {
            churn: churn(a)?,
            seed: num::<u64>("--seed", &a.seed, "a whole number")?.unwrap_or(0),
            packets: packets(a, cap.frames.len().max(1) as u64)?,
            pace: pace(a)?,
        })
    } else {
        None
    };
    flowpath_tx::replay(path, cap, looped, a.out.as_deref(), a.json).map_err(failed)
}

/// `--tx`: the flags that apply, then build template frames, transmit, report.
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
            "popularity is uniform with --tx (the kernel program visits the flows \
             round-robin or, with --order random, at random)",
        ),
        ("--slots", a.slots.is_some(), "does not apply with --tx"),
    ] {
        if set {
            return Err(bad(flag, format!("cannot be used with --tx: {why}")));
        }
    }
    let rate_pps = rate(&a.rate)?;
    let packets = num::<u64>("--packets", &a.packets, "a number of packets")?;
    if packets == Some(0) {
        return Err(bad("--packets", "must be at least 1"));
    }
    let duration = match (seconds(&a.duration)?, packets) {
        (Some(d), _) => d,
        (None, Some(_)) => Duration::from_secs(365 * 24 * 3600),
        (None, None) => Duration::from_secs(10),
    };
    let outer_sport = num::<u16>("--outer-sport", &a.outer_sport, "a UDP port (0..65535)")?;
    let order = match a.order.as_deref() {
        None => FlowOrder::RoundRobin,
        Some(s) => FlowOrder::parse(s).ok_or_else(|| {
            bad(
                "--order",
                format!("'{s}' is not an order: round-robin or random"),
            )
        })?,
    };
    let what = match a.replay.as_deref() {
        Some(_) if outer_sport.is_some() || a.order.is_some() => {
            let flag = if outer_sport.is_some() {
                "--outer-sport"
            } else {
                "--order"
            };
            return Err(bad(
                flag,
                "cannot be used with --replay --tx (the capture is sent as it is)",
            ));
        }
        Some(path) => TxFrames::Capture {
            path,
            cap: tx_capture(a, path)?,
        },
        None => {
            let spec = spec_from(a)?;
            if outer_sport.is_some() && !matches!(spec.encap, Encap::Vxlan { .. }) {
                return Err(bad(
                    "--outer-sport",
                    "needs a vxlan encapsulation (--encap vxlan4-ipv4, ...)",
                ));
            }
            TxFrames::Spec(spec)
        }
    };
    let job = TxJob {
        iface,
        duration,
        packets,
        rate_pps,
        json: a.json,
        outer_sport,
        order,
    };
    flowpath_tx::transmit(&job, what).map_err(failed)
}

/// `--replay` with `--tx`: the capture, sent as it is (so no flags that would change it).
fn tx_capture(a: &GenFlags, path: &str) -> Result<pcap::Capture, Bad> {
    let churned = [
        ("--miss-rate", a.miss_rate.is_some()),
        ("--lifetime", a.lifetime.is_some()),
        ("--mean-lifetime", a.mean_lifetime.is_some()),
        ("--flows", a.flows.is_some()),
    ];
    refuse(
        &churned,
        "cannot be used with --replay --tx (the capture is sent as it is)",
    )?;
    read_replay(path)
}

/// The timestamps of a written file: `--rate` packets per second, else line rate.
fn pace(a: &GenFlags) -> Result<Pace, Bad> {
    Ok(rate(&a.rate)?.map_or(Pace::LineRate, Pace::PacketsPerSecond))
}

/// The `--replay` capture; a capture cut short is read up to its last complete packet,
/// with a warning on stderr naming where it ends.
fn read_replay(path: &str) -> Result<pcap::Capture, Bad> {
    let cap = pcap::read_capture_file(path).map_err(|e| bad("--replay", format!("{path}: {e}")))?;
    if let Some(w) = cap.warning() {
        eprintln!("flowpath gen: warning: --replay {path}: {w}");
    }
    Ok(cap)
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
mod tests;
