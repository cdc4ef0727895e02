//! `flowpath xdp-forward`: every frame from one interface to another in XDP, no lookup.
//! The floor for in-kernel forwarding, which `flowpath lab` measures the XDP tier against.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const ABOUT: &str = "Forward every frame from one interface to another inside XDP, with no \
parsing and no lookup, until SIGTERM or Ctrl-C.

A one-line XDP program (`xdp_fwd_all`: bpf_redirect_map to a one-entry devmap) is attached to \
--from, natively where the driver allows, else in generic mode. It is the cheapest XDP \
forwarding there is: `flowpath lab` runs it as the `xdp-forward` row, the baseline for the XDP \
tier (which parses, looks up and rewrites on top of the same redirect). Prints `ready` once \
attached; the program is detached on exit (and by the kernel if the process dies).

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
}

pub fn run(args: XdpForwardArgs) -> ExitCode {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("flowpath xdp-forward: cannot handle signals: {e}");
            return ExitCode::from(1);
        }
    }
    let guard = match flowpath_ports::xdp::attach_xdp_forward(&args.from, &args.to) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("flowpath xdp-forward: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!(
        "flowpath xdp-forward: {} -> {} ({})",
        args.from,
        args.to,
        guard.mode().as_str()
    );
    println!("ready");
    let _ = std::io::stdout().flush();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(guard);
    ExitCode::SUCCESS
}
