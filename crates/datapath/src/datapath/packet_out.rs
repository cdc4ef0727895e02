//! What the datapath sends outside a batch: a controller's packet-outs (their actions on
//! their frame, TABLE through the pipeline and the caches), and tunnel packets held for an
//! underlay neighbour, released once it is known.

use super::Datapath;
use crate::actions::{execute, Ctx};
use crate::controller::{PacketOut, CONTROLLER_PORT};
use crate::l2::resolve_normal;
use crate::recirc::{CtRun, Src};
use crate::sink::OutputSink;
use flowpath_packet::{parse_into, Action, FlowKey, Packet, PacketMeta};
use flowpath_pipeline::Ending;
use smallvec::SmallVec;

impl Datapath {
    /// Run a packet-out (OpenFlow PACKET_OUT) now: its actions on its frame, outputs to
    /// `sink`; a `Table` action sends the frame as it is then through the pipeline (and
    /// the caches) as if it had come in on `in_port`. NORMAL is resolved with the MAC table
    /// (a packet-out does not learn). A frame that does not parse gets its outputs only
    /// (rewrites, NORMAL's lookup and TABLE need the parsed headers; NORMAL then floods).
    pub fn packet_out<S: OutputSink>(&mut self, po: &PacketOut, sink: &mut S) {
        if self.rules_changed() {
            self.sync_rules();
        }
        self.stats.packet_outs += 1;
        let in_port = po.in_port.unwrap_or(CONTROLLER_PORT);
        let len = po.data.len();
        let mut buf = vec![0u8; PACKET_OUT_ROOM + len + PACKET_OUT_ROOM];
        buf[PACKET_OUT_ROOM..PACKET_OUT_ROOM + len].copy_from_slice(&po.data);
        let mut pkt = Packet::new(&mut buf, PACKET_OUT_ROOM, len);
        let mut key = FlowKey::ZERO;
        let mut meta = PacketMeta::default();
        let parsed = parse_into(pkt.data(), in_port, &self.cfg.parse, &mut key, &mut meta).is_ok();
        let table = po.actions.iter().position(|a| *a == Action::Table);
        let mut actions: SmallVec<[Action; 4]> = po.actions[..table.unwrap_or(po.actions.len())]
            .iter()
            .copied()
            .filter(|a| parsed || a.is_output())
            .collect();
        if parsed {
            resolve_normal(&mut actions, &key, &self.mac, false);
        }
        let ctx = Ctx {
            in_port,
            controller: &self.controller,
            ports: &self.ports,
            tunnels: self.cfg.tunnels.as_deref(),
            encap: &self.encap,
        };
        // Without TABLE, a packet-out that sends nothing counts as a rule drop.
        let mut ct = CtRun {
            tracker: &mut self.tracker,
            rc: &mut self.recirc,
            src: Src::Detached,
        };
        if !actions.is_empty() || table.is_none() {
            execute(
                &actions,
                Ending::Done,
                &mut pkt,
                &mut meta,
                &mut key,
                &ctx,
                &mut ct,
                sink,
                &mut self.stats,
            );
        }
        // What its `ct(table=)` actions recirculated (copies) goes its passes now.
        if !self.recirc.next.is_empty() {
            self.recirculate(in_port, &mut [], sink);
        }
        if table.is_some() && parsed {
            let mut pkts = [pkt];
            self.process(in_port, &mut pkts, sink);
        }
    }

    /// Are packets waiting for an underlay neighbour ([`NeighbourHoldQueue`](crate::hold::NeighbourHoldQueue))?
    #[inline(always)]
    pub fn has_held(&self) -> bool {
        self.encap.has_held()
    }

    /// Send the held packets whose neighbour is now known, drop those that waited past
    /// [`HOLD_MAX_AGE_SECS`](crate::hold::HOLD_MAX_AGE_SECS) (`tunnel_neigh_unresolved`), keep the rest. Does nothing
    /// until the underlay changes or the oldest expires. Returns the packets sent.
    pub fn release_held<S: OutputSink>(&mut self, sink: &mut S) -> usize {
        let Some(t) = self.cfg.tunnels.as_deref() else {
            return 0;
        };
        self.encap.release_held(t, sink, &mut self.stats)
    }
}

/// Head- and tailroom around a packet-out's frame (VLAN pushes).
const PACKET_OUT_ROOM: usize = 128;
