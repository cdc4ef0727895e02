//! `flowpath trace`, `flowpath dump-megaflows` and `flowpath explain`: the operator's
//! tools (OVS's `ofproto/trace`, `dpctl/dump-flows` and `ofp-parse-pcap`).

use flowpath_base::capture::read_capture_file;
use flowpath_inspect::{
    explain_frame, parse_ct_next, trace_request, MegaflowFilter, Trace, TraceInput, TraceRequest,
    WorkerMegaflows,
};
use flowpath_packet::parse::ParseOptions;
use flowpath_pipeline::{Backend, Pipeline, RuleStore};
use flowpath_switch::control::default_socket;
use flowpath_switch::{call, Op, Request};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const TRACE_ABOUT: &str =
    "Trace one packet through the flow tables, like `ovs-appctl ofproto/trace`.

Prints, per table, the rule the packet met (priority, match, cookie), the actions as they
accumulate, what they changed in the packet and the goto; then the megaflow the datapath
would install for it (flow syntax; masked fields as value/mask: every bit the decision
looked at) and the final actions. A dropped packet says why: which rule dropped it, or
that no rule matched in which table (table-miss), or the parser's drop reason.

The packet is one of:
  flowpath trace 'in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_dst=80'
      match fields describe it (flow syntax; fields not given are 0; in_port defaults
      to --in-port, 1)
  flowpath trace --packet 020000000002020000000001080045...
      a whole Ethernet frame in hex (spaces and colons allowed)
  flowpath trace --pcap capture.pcap --frame 3
      frame 3 of a capture (frames count from 1, as in tshark)

Against a running switch (its rules now; --control as for `flowpath flows`), or offline
against a flows file with --flows FILE (no switch needed). `flowpath explain FILE.pcap`
prints each frame's key in the same syntax, ready to paste here.

Connection tracking, like `ofproto/trace --ct-next`: a ct(table=T) action starts another
pass, traced after this one as `Pass 2 (recirculated to table T, ct_state=..., ct_zone=Z)`
with the same detail. The tracker is not run: each pass takes the next --ct-next flags as
its ct_state (trk,new when none are left), its zone from the ct action; NAT is named, not
applied. At most 8 passes.
  flowpath trace --flows fw.txt --ct-next trk,new --ct-next +trk+est 'udp,nw_dst=10.0.0.2'";

#[derive(clap::Args)]
#[command(long_about = TRACE_ABOUT)]
pub struct TraceArgs {
    /// The packet as flow-syntax match fields.
    #[arg(conflicts_with_all = ["packet", "pcap"])]
    flow: Option<String>,
    /// The packet as a hex Ethernet frame.
    #[arg(long, conflicts_with = "pcap")]
    packet: Option<String>,
    /// A capture to take the packet from (with --frame).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Which frame of --pcap (from 1).
    #[arg(long, default_value_t = 1, requires = "pcap")]
    frame: usize,
    /// The port the packet arrives on (for --packet, --pcap, or a flow without in_port).
    #[arg(long)]
    in_port: Option<u32>,
    /// Trace offline against the flows in this file instead of a running switch.
    #[arg(long)]
    flows: Option<PathBuf>,
    /// Offline: the classifier backend (the decision is the same with any).
    #[arg(long, default_value = "tss", requires = "flows")]
    classifier: Backend,
    /// The running switch's control socket [default: as `flowpath flows`].
    #[arg(long, conflicts_with = "flows")]
    control: Option<PathBuf>,
    /// The ct_state of the next pass after a ct(table=T) (repeat for later passes):
    /// flags as `trk,new` or `+trk+new` [default: trk,new].
    #[arg(long = "ct-next", value_name = "FLAGS")]
    ct_next: Vec<String>,
    /// Print the trace as JSON.
    #[arg(long)]
    json: bool,
}

pub fn trace(args: TraceArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("flowpath trace: {e}");
        ExitCode::from(1)
    };
    let input = if let Some(f) = &args.flow {
        TraceInput::Flow(f.clone())
    } else if let Some(h) = &args.packet {
        TraceInput::Packet(h.clone())
    } else if let Some(p) = &args.pcap {
        match frame_hex(p, args.frame) {
            Ok(h) => TraceInput::Packet(h),
            Err(e) => return fail(e),
        }
    } else {
        eprintln!("flowpath trace: give the packet: match fields, --packet HEX or --pcap FILE");
        return ExitCode::from(2);
    };
    // Checked here too, so bad flags are refused before a switch is asked.
    if let Some(e) = args.ct_next.iter().find_map(|f| parse_ct_next(f).err()) {
        eprintln!("flowpath trace: {e}");
        return ExitCode::from(2);
    }
    let req = TraceRequest {
        in_port: args.in_port,
        ct_next: args.ct_next,
        ..TraceRequest::new(input)
    };
    let t: Trace = match &args.flows {
        Some(path) => {
            let p = match load_flows(path, args.classifier) {
                Ok(p) => p,
                Err(e) => return fail(e),
            };
            match trace_request(&p, &req) {
                Ok(t) => t,
                Err(e) => return fail(e),
            }
        }
        None => {
            let text = serde_json::to_string(&req).expect("a trace request serialises");
            match ask(args.control, Op::Trace, text) {
                Ok(data) => match serde_json::from_value(data) {
                    Ok(t) => t,
                    Err(e) => return fail(format!("the switch's answer: {e}")),
                },
                Err(e) => return fail(e),
            }
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&t).expect("serialises"));
    } else {
        print!("{}", t.text());
    }
    ExitCode::SUCCESS
}

const MEGAFLOWS_ABOUT: &str = "The datapath's cached megaflows, like `ovs-appctl dpctl/dump-flows`.

For every worker of a running switch: how many entries each cache tier holds (exact-match
cache, megaflows, and of those the XDP tier's kernel entries), then one line per megaflow:

  in_port=1,ip,nw_src=10.1.0.1, packets:1200, bytes:72000, used:0.004s, tier:xdp, actions:output:2

The match is in flow syntax (the format `flowpath flows` and `flowpath trace` take):
exact fields as values, wildcarded bits left out, partly masked fields as value/mask. It
holds every bit the slow path's decision looked at: any packet that agrees on them gets
these actions without a lookup in the tables. `used` is the time since a packet last
used the megaflow (never: installed and not used since); `tier:xdp` means the XDP tier
also holds it and answers its packets in the kernel (their counts are credited here).

  flowpath dump-megaflows                    every megaflow
  flowpath dump-megaflows 'tcp,tp_dst=80'    those a tcp port-80 packet could share
  flowpath dump-megaflows --tier xdp --worker 0
  flowpath dump-megaflows --count            counts only";

#[derive(clap::Args)]
#[command(long_about = MEGAFLOWS_ABOUT)]
pub struct MegaflowsArgs {
    /// Only megaflows a packet with these match fields could use (flow syntax).
    filter: Option<String>,
    /// Only megaflows held by this tier: megaflow (user space only) or xdp.
    #[arg(long, value_parser = ["megaflow", "xdp"])]
    tier: Option<String>,
    /// Only this worker's.
    #[arg(long)]
    worker: Option<usize>,
    /// Counts only.
    #[arg(long)]
    count: bool,
    /// The running switch's control socket [default: as `flowpath flows`].
    #[arg(long)]
    control: Option<PathBuf>,
    /// Print JSON: one object per worker, with its megaflows.
    #[arg(long)]
    json: bool,
}

pub fn megaflows(args: MegaflowsArgs) -> ExitCode {
    let filter = MegaflowFilter {
        flow: args.filter,
        tier: args.tier,
        worker: args.worker,
        count_only: args.count,
    };
    let text = serde_json::to_string(&filter).expect("a filter serialises");
    let data = match ask(args.control, Op::Megaflows, text) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("flowpath dump-megaflows: {e}");
            return ExitCode::from(1);
        }
    };
    let workers: Vec<WorkerMegaflows> = match serde_json::from_value(data) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("flowpath dump-megaflows: the switch's answer: {e}");
            return ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&workers).expect("serialises")
        );
        return ExitCode::SUCCESS;
    }
    if workers.is_empty() {
        let _ = writeln!(out, "no datapath workers: nothing is cached");
    }
    for w in &workers {
        let _ = writeln!(out, "{}", w.summary());
        for f in &w.flows {
            let _ = writeln!(out, "  {}", f.line());
        }
    }
    ExitCode::SUCCESS
}

const EXPLAIN_ABOUT: &str =
    "Every frame of a capture as flowpath's parser sees it: its flow key, or why it is dropped.

One line per frame: its number (from 1, as in tshark), length, and the key's fields in
flow syntax (dl_src, dl_dst, dl_vlan, dl_type, nw_src, nw_proto, tp_dst, ...; paste one
into `flowpath trace`), or `drop:` and the parser's drop reason (the name its counters
use). With --classify --flows FILE, also the rules each frame meets, the megaflow it would
install and its actions. --json prints one JSON object per line and frame: `frame`,
`bytes`, the fields by the same names (numbers as numbers), or `drop`.

  flowpath explain capture.pcap
  flowpath explain capture.pcapng --json
  flowpath explain capture.pcap --classify --flows flows.txt";

#[derive(clap::Args)]
#[command(long_about = EXPLAIN_ABOUT)]
pub struct ExplainArgs {
    /// A pcap or pcapng capture of Ethernet frames.
    file: PathBuf,
    /// Add each frame's rules, megaflow and actions (needs --flows).
    #[arg(long, requires = "flows")]
    classify: bool,
    /// The flows to classify against (flow syntax, one per line).
    #[arg(long)]
    flows: Option<PathBuf>,
    /// The port the frames are taken to arrive on.
    #[arg(long, default_value_t = 1)]
    in_port: u32,
    /// Only this frame (from 1).
    #[arg(long)]
    frame: Option<usize>,
    /// One JSON object per frame and line.
    #[arg(long)]
    json: bool,
}

pub fn explain(args: ExplainArgs) -> ExitCode {
    let cap = match read_capture_file(&args.file) {
        Ok(c) => {
            if let Some(w) = c.warning() {
                eprintln!("flowpath explain: warning: {}: {w}", args.file.display());
            }
            c
        }
        Err(e) => {
            eprintln!("flowpath explain: {}: {e}", args.file.display());
            return ExitCode::from(1);
        }
    };
    let pipeline = match (&args.flows, args.classify) {
        (Some(f), true) => match load_flows(f, Backend::TupleSpace) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("flowpath explain: {e}");
                return ExitCode::from(1);
            }
        },
        _ => None,
    };
    if let Some(n) = args.frame {
        if n == 0 || n > cap.frames.len() {
            eprintln!(
                "flowpath explain: --frame {n}: no such frame ({} has {} frames, counted from 1)",
                args.file.display(),
                cap.frames.len()
            );
            return ExitCode::from(1);
        }
    }
    let opts = ParseOptions::default();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (i, f) in cap.frames.iter().enumerate() {
        let n = i + 1;
        if args.frame.is_some_and(|want| want != n) {
            continue;
        }
        let e = explain_frame(n, f, args.in_port, &opts, pipeline.as_deref());
        let line = if args.json {
            e.json().to_string()
        } else {
            e.line()
        };
        if writeln!(out, "{line}").is_err() {
            break; // a closed pipe (`| head`): stop quietly
        }
    }
    let _ = out.flush();
    ExitCode::SUCCESS
}

/// Frame `n` (from 1) of a capture, as hex.
fn frame_hex(path: &Path, n: usize) -> Result<String, String> {
    let cap = read_capture_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(w) = cap.warning() {
        eprintln!("flowpath trace: warning: {}: {w}", path.display());
    }
    let f = n
        .checked_sub(1)
        .and_then(|i| cap.frames.get(i))
        .ok_or_else(|| {
            format!(
                "--frame {n}: no such frame ({} has {} frames, counted from 1)",
                path.display(),
                cap.frames.len()
            )
        })?;
    Ok(f.iter().map(|b| format!("{b:02x}")).collect())
}

/// A flows file (or a ClassBench filter file) as a rule snapshot; errors name the file,
/// line and column (the loader `flowpath bench classifier --rules` uses).
fn load_flows(path: &Path, backend: Backend) -> Result<Arc<Pipeline>, String> {
    let rules = flowpath_bench::classifier::load_rules(path)?;
    let store = RuleStore::new(backend);
    store
        .add(rules)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(store.snapshot())
}

/// One request to the running switch; its `data` on success.
fn ask(control: Option<PathBuf>, op: Op, text: String) -> Result<serde_json::Value, String> {
    let socket = control.unwrap_or_else(default_socket);
    let resp =
        call(&socket, &Request { op, text }, Duration::from_secs(30)).map_err(|e| e.to_string())?;
    if let Some(e) = resp.error {
        return Err(e);
    }
    resp.data
        .ok_or_else(|| format!("the switch at {} sent no data", socket.display()))
}
