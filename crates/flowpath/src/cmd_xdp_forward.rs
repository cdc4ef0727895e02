//! `flowpath xdp-forward`: every frame from one interface to another in XDP, no lookup.
//! The floor for in-kernel forwarding, which `flowpath lab` measures the XDP tier against.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const ABOUT: &str = "Forward every frame from one interface to another inside XDP, with no \
lookup and (without --parse) no parsing, until SIGTERM or Ctrl-C.

A one-line XDP program (`xdp_fwd_all`: bpf_redirect_map to a one-entry devmap) is attached to \
--from, natively where the driver allows, else in generic mode. It is the cheapest XDP \
forwarding there is: `flowpath lab` runs it as the `xdp-forward` row, the baseline for the XDP \
tier (which parses, looks up and rewrites on top of the same redirect). Prints `ready` once \
attached; the program is detached on exit (and by the kernel if the process dies).

With --parse the program is the XDP tier's own parser followed by the same redirect \
(`parse_forward` in the tier's object: no lookup, actions or counters; frames the tier would \
hand to user space unparsed go to the kernel stack). `flowpath lab` runs that as the \
`xdp-parse-forward` row: between redirect-only and the tier, it says how much of the tier's \
cost is reading the headers at all, which every switch pays.

On a veth --to, frames arrive only when --to's peer has an XDP program attached (the peer \
needs its XDP receive ring); physical NICs have no such requirement.";

#[derive(clap::Args)]
#[command(long_about = ABOUT)]
pub struct XdpForwardArgs {
    /// Interface whose received frames are forwarded.
    #[arg(long, value_name = "IFACE")]
    from: String,
    /// Interface they are transmitted on.
    #[arg(long, value_name = "IFACE")]
    to: String,
    /// Parse every frame as the XDP tier does before redirecting it (the baseline that
    /// reads the headers, without the tier's lookup, actions and counters).
    #[arg(long)]
    parse: bool,
}

/// Attach the program --parse asks for; the first value detaches it when dropped.
fn attach(args: &XdpForwardArgs) -> std::io::Result<(Box<dyn std::any::Any>, &'static str)> {
    if !args.parse {
        let g = flowpath_ports::xdp::attach_xdp_forward(&args.from, &args.to)?;
        let mode = g.mode().as_str();
        return Ok((Box::new(g), mode));
    }
    let mut t = flowpath_xdptier::FlowTier::load_parse_forward()?;
    t.set_output_dev(0, flowpath_xdptier::ifindex(&args.to)?)?;
    let mode = t.attach(&args.from, flowpath_xdptier::XdpMode::Auto)?;
    Ok((Box::new(t), mode.as_str()))
}

pub fn run(args: XdpForwardArgs) -> ExitCode {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("flowpath xdp-forward: cannot handle signals: {e}");
            return ExitCode::from(1);
        }
    }
    let (guard, mode) = match attach(&args) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("flowpath xdp-forward: {e}");
            return ExitCode::from(1);
        }
    };
    let what = if args.parse {
        "parse, then redirect"
    } else {
        "redirect only"
    };
    eprintln!(
        "flowpath xdp-forward: {} -> {} ({mode}, {what})",
        args.from, args.to
    );
    println!("ready");
    let _ = std::io::stdout().flush();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(guard);
    ExitCode::SUCCESS
}
