//! Running one packet's actions ([`execute`]): outputs (to a tunnel port, encapsulated),
//! FLOOD/ALL over the datapath's port list, the controller queue, tunnel metadata, header
//! rewrites and connection tracking (`recirc.rs`); a packet none of them sends (or
//! recirculates) is counted as a drop, with its reason.

use crate::controller::ControllerQueue;
use crate::encap::{encap_output, EncapState, TunSet};
use crate::recirc::{ct_action, CtRun};
use crate::sink::OutputSink;
use crate::stats::{DatapathDrop, DatapathStats};
use crate::tunnel::Tunnels;
use flowpath_packet::rewrite::{self, RewriteDrop};
use flowpath_packet::{Action, FlowKey, Packet, PacketMeta};
use flowpath_pipeline::Ending;

/// What one packet's actions need besides the packet.
pub(crate) struct Ctx<'a> {
    pub(crate) in_port: u32,
    pub(crate) controller: &'a ControllerQueue,
    /// Where FLOOD/ALL send (but the ingress port).
    pub(crate) ports: &'a [u32],
    /// The tunnel ports (an output to one encapsulates), if any.
    pub(crate) tunnels: Option<&'a Tunnels>,
    /// The last encapsulation's hop and outer headers, and the hold queue.
    pub(crate) encap: &'a EncapState,
}

/// Run one packet's actions.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn execute<S: OutputSink>(
    actions: &[Action],
    ending: Ending,
    pkt: &mut Packet<'_>,
    meta: &mut PacketMeta,
    key: &mut FlowKey,
    ctx: &Ctx<'_>,
    ct: &mut CtRun<'_>,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    let mut sent = false;
    // Tunnel metadata set by this packet's actions (else the key's, as received).
    let mut tun = TunSet::default();
    for (n, a) in actions.iter().enumerate() {
        match *a {
            Action::Ct(id) => {
                if ct_action(id, &actions[n + 1..], pkt, meta, key, ct, st) {
                    // Recirculated (or dropped, counted): done in this pass.
                    return;
                }
            }
            // A later recirculation of this packet is untracked again.
            Action::CtClear => flowpath_packet::ct::clear(key),
            Action::Output(p) => {
                if p != ctx.in_port {
                    output(p, pkt, key, &tun, ctx, sink, st);
                    sent = true;
                }
            }
            Action::InPort => {
                output(ctx.in_port, pkt, key, &tun, ctx, sink, st);
                sent = true;
            }
            Action::Flood | Action::All | Action::Normal => {
                // (A megaflow's NORMAL was resolved on the slow path; one left here floods.)
                for &p in ctx.ports {
                    if p != ctx.in_port {
                        sink.output(p, pkt.data());
                        sent = true;
                    }
                }
                if let Some(t) = ctx.tunnels {
                    for tp in t.ports() {
                        if tp.number != ctx.in_port {
                            output(tp.number, pkt, key, &tun, ctx, sink, st);
                            sent = true;
                        }
                    }
                }
            }
            Action::SetTunnel(id) => tun.id = Some(id),
            Action::SetTunnelDst(b) => tun.dst = Some(Action::tunnel_dst(b)),
            Action::Table => {} // a packet-out's only, run by Datapath::packet_out
            Action::Controller { .. } => {
                if ctx.controller.push(ctx.in_port, a, pkt.data()) {
                    st.controller_sent += 1;
                } else {
                    st.drop(DatapathDrop::ControllerQueueFull);
                }
                sent = true;
            }
            _ => {
                if let Err(e) = rewrite::apply(a, pkt, meta) {
                    st.drop(match e {
                        RewriteDrop::TtlExpired => DatapathDrop::TtlExpired,
                        RewriteDrop::NoRoom => DatapathDrop::NoRoom,
                        RewriteDrop::TooManyVlans => DatapathDrop::TooManyVlansPushed,
                    });
                    return;
                }
            }
        }
    }
    if !sent {
        st.drop(no_output_drop(ending));
    }
}

/// Why a packet whose actions sent it nowhere was dropped.
pub(crate) fn no_output_drop(ending: Ending) -> DatapathDrop {
    match ending {
        Ending::TableMiss(_) => DatapathDrop::TableMiss,
        _ => DatapathDrop::RuleDrop,
    }
}

/// Send the packet as it is now to port `p`: a tunnel port encapsulates.
#[inline(always)]
fn output<S: OutputSink>(
    p: u32,
    pkt: &mut Packet<'_>,
    key: &FlowKey,
    tun: &TunSet,
    ctx: &Ctx<'_>,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    if let Some(t) = ctx.tunnels {
        if let Some(tp) = t.port(p) {
            encap_output(t, tp, ctx.encap, pkt, key, tun, sink, st);
            return;
        }
    }
    sink.output(p, pkt.data());
}
