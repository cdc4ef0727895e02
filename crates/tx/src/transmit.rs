//! `--tx`: template frames from a spec's frame mix or a capture, sent out of an interface
//! by the ports' transmitter (XDP live frames, else a packet socket) while the kernel
//! program varies their flows; the report of what was sent.

use std::time::Duration;

use flowpath_gen::pcap::Capture;
use flowpath_gen::TrafficSpec;
use flowpath_ports::xdpgen::{FlowOrder, FrameTx, TxPlan, Vary, MAX_TEMPLATES};

use crate::report;
use crate::Failure;

/// Where and how long `--tx` transmits.
pub struct TxJob<'a> {
    pub iface: &'a str,
    pub duration: Duration,
    /// Stop after this many packets (or the duration, whichever comes first).
    pub packets: Option<u64>,
    pub rate_pps: Option<u64>,
    pub json: bool,
    /// Rewrite the outer UDP source port of VXLAN templates to this.
    pub outer_sport: Option<u16>,
    /// The sequence of the recurring flows (generated traffic only).
    pub order: FlowOrder,
}

/// What `--tx` sends.
pub enum TxFrames<'a> {
    /// A capture's frames as they are (the first [`MAX_TEMPLATES`]).
    Capture { path: &'a str, cap: Capture },
    /// The spec's frame mix, its flows and new flows made by the kernel program.
    Spec(TrafficSpec),
}

/// Template frames, how the kernel varies their flows, and the line that says so.
struct Templates<'a> {
    frames: Vec<Vec<u8>>,
    vary: Vary,
    head: String,
    spec: Option<TrafficSpec>,
    replay: Option<&'a str>,
}

/// Build the template frames, transmit them on the job's interface, report.
pub fn transmit(job: &TxJob<'_>, what: TxFrames<'_>) -> Result<String, Failure> {
    let mut t = match what {
        TxFrames::Capture { path, cap } => capture_templates(path, cap)?,
        TxFrames::Spec(spec) => spec_templates(spec, job.order)?,
    };
    if let Some(port) = job.outer_sport {
        for f in &mut t.frames {
            if !set_outer_udp_sport(f, port) {
                return Err(Failure::Tx(
                    "--outer-sport: a template is not VXLAN over UDP".into(),
                ));
            }
        }
        t.head += &format!(", outer UDP source port {port}");
    }
    let iface = job.iface;
    let tx_err = |e: std::io::Error| Failure::Tx(format!("{iface}: {e}"));
    let mut tx = FrameTx::open(iface).map_err(tx_err)?;
    let plan = TxPlan {
        duration: job.duration,
        packets: job.packets,
        rate_pps: job.rate_pps,
        vary: t.vary,
    };
    let r = tx.run(&t.frames, &plan).map_err(tx_err)?;
    if job.json {
        let v = serde_json::json!({
            "interface": iface,
            "packets": r.packets,
            "seconds": r.seconds,
            "mpps": r.mpps,
            "rate_pps": job.rate_pps,
            "vary": t.vary,
            "templates": t.frames.len(),
            "fast_calls": tx.fast_calls(),
            "transmitter": tx.kind(),
            "live_frames_refused": tx.why_not_live(),
            "spec": t.spec,
            "replay": t.replay,
        });
        return Ok(report::json(&v));
    }
    Ok(report::tx_text(
        &t.head,
        iface,
        tx.fast_calls(),
        tx.why_not_live(),
        &r,
        job.rate_pps,
    ))
}

/// A capture's frames, sent as they are.
fn capture_templates(path: &str, cap: Capture) -> Result<Templates<'_>, Failure> {
    let n = cap.frames.len();
    if n == 0 {
        return Err(Failure::Replay(format!("{path}: no frames")));
    }
    let mut frames = cap.frames;
    frames.truncate(MAX_TEMPLATES);
    Ok(Templates {
        head: report::tx_capture_head(path, n, MAX_TEMPLATES),
        frames,
        vary: Vary::AsIs,
        spec: None,
        replay: Some(path),
    })
}

/// The spec's frame mix as one flow's frames; the kernel program makes the flows (in
/// `order`) and new flows (the churn's long-run rate).
fn spec_templates(spec: TrafficSpec, order: FlowOrder) -> Result<Templates<'static>, Failure> {
    let frames = spec
        .frame_mix_templates(MAX_TEMPLATES)
        .map_err(Failure::Spec)?;
    let flows = u32::try_from(spec.flows.count).unwrap_or(u32::MAX);
    let share = spec.churn.new_flow_rate();
    Ok(Templates {
        head: report::tx_spec_head(&spec, share, order, frames.len()),
        frames,
        vary: Vary::for_flows_in(flows, share, order),
        spec: Some(spec),
        replay: None,
    })
}

/// Set the outer UDP source port of a VXLAN frame (Ethernet, optional VLAN tags, IPv4 or
/// IPv6, UDP), fixing a non-zero UDP checksum incrementally (RFC 1624). False when the
/// frame is not UDP over IP.
pub fn set_outer_udp_sport(f: &mut [u8], port: u16) -> bool {
    let be16 = |f: &[u8], at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
    let mut off = 12;
    while f.len() >= off + 6 && matches!(be16(f, off), 0x8100 | 0x88a8) {
        off += 4;
    }
    if f.len() < off + 2 {
        return false;
    }
    let ip = off + 2;
    let l4 = match be16(f, off) {
        0x0800 if f.len() >= ip + 20 && f[ip + 9] == 17 => ip + usize::from(f[ip] & 0xf) * 4,
        0x86dd if f.len() >= ip + 40 && f[ip + 6] == 17 => ip + 40,
        _ => return false,
    };
    if f.len() < l4 + 8 {
        return false;
    }
    let old = be16(f, l4);
    f[l4..l4 + 2].copy_from_slice(&port.to_be_bytes());
    let ck = be16(f, l4 + 6);
    if ck != 0 {
        let mut new = flowpath_packet::checksum::update16(ck, old, port);
        if new == 0 {
            new = 0xffff; // 0 means "no checksum" in UDP
        }
        f[l4 + 6..l4 + 8].copy_from_slice(&new.to_be_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outer_udp_source_port_is_rewritten_with_a_right_checksum() {
        use flowpath_gen::spec::IpVersion;
        use flowpath_gen::Encap;
        use flowpath_packet::checksum::{finish, sum16};
        for outer in [IpVersion::V4, IpVersion::V6] {
            let spec = TrafficSpec {
                encap: Encap::Vxlan {
                    outer,
                    inner: IpVersion::V4,
                    vni: 42,
                },
                ..TrafficSpec::default()
            };
            let mut f = spec.frame_mix_templates(1).unwrap().remove(0);
            assert!(set_outer_udp_sport(&mut f, 65535));
            let l4 = if outer == IpVersion::V4 { 34 } else { 54 };
            assert_eq!(&f[l4..l4 + 2], &[0xff, 0xff]);
            assert_eq!(&f[l4 + 2..l4 + 4], &4789u16.to_be_bytes());
            if outer == IpVersion::V4 {
                assert_eq!(&f[l4 + 6..l4 + 8], &[0, 0], "IPv4 outer: no UDP checksum");
            } else {
                // The pseudo-header (addresses, length, next header) and the segment sum to
                // 0xffff when the checksum is right.
                let udp_len = f.len() - l4;
                let mut acc = sum16(&f[22..54], 0);
                acc = sum16(&(udp_len as u32).to_be_bytes(), acc);
                acc = sum16(&[0, 0, 0, 17], acc);
                assert_eq!(finish(sum16(&f[l4..], acc)), 0);
            }
        }
        assert!(!set_outer_udp_sport(&mut [0u8; 20], 1));
    }
}
