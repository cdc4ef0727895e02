//! The bridge between the OpenFlow channel and the datapath workers: packet-ins the
//! workers queued for the controller come out through [`PacketIo::poll_packet_ins`], and
//! packet-outs go in through [`PacketIo::packet_out`].

use crate::pmd::WorkerHandle;
use flowpath_datapath::{ControllerQueue, PacketOut, PacketOutQueue};
use flowpath_openflow::consts::*;
use flowpath_openflow::OfError;
use flowpath_packet::Action;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A packet a worker handed to the controller (a `controller` action or a table-miss
/// flow that sends there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketInItem {
    pub in_port: u32,
    /// OFPR_NO_MATCH, OFPR_ACTION or OFPR_INVALID_TTL.
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    /// The frame's length before truncation to the action's max_len.
    pub total_len: u16,
    pub data: Vec<u8>,
}

/// Where packet-ins come from and packet-outs go: the daemon's workers.
pub trait PacketIo: Send + Sync {
    /// Move up to `max` waiting packet-ins into `out`.
    fn poll_packet_ins(&self, out: &mut Vec<PacketInItem>, max: usize);
    /// Run `actions` on `data` as if it came in on `in_port` (OFPP_CONTROLLER: no port).
    fn packet_out(&self, in_port: u32, actions: Vec<Action>, data: Vec<u8>) -> Result<(), OfError>;
    /// The port numbers packets can be sent out of (packet-out checks its outputs).
    fn has_port(&self, port: u32) -> bool;
}

/// A switch without datapath workers (`flowpath run`): no packet-ins; packet-out refused.
pub struct NoPacketIo;

impl PacketIo for NoPacketIo {
    fn poll_packet_ins(&self, _: &mut Vec<PacketInItem>, _: usize) {}
    fn packet_out(&self, _: u32, _: Vec<Action>, _: Vec<u8>) -> Result<(), OfError> {
        Err(OfError {
            type_: et::BAD_REQUEST,
            code: brc::BAD_PORT,
        })
    }
    fn has_port(&self, _: u32) -> bool {
        false
    }
}

/// Datapath workers as the OpenFlow channel's packet source and sink: packet-ins
/// from every worker's controller queue (taken in turn), packet-outs to worker 0, which
/// like every worker can transmit on every port.
pub struct WorkerPacketIo {
    controllers: Vec<Arc<ControllerQueue>>,
    packet_out: Arc<PacketOutQueue>,
    /// Worker 0's thread: unparked after a push, so a napping worker runs the packet-out
    /// now rather than after its nap.
    wake: std::thread::Thread,
    ports: Vec<u32>,
    next: AtomicUsize,
}

impl WorkerPacketIo {
    /// `workers`' queues; `ports`: the port numbers packet-outs may name.
    pub fn new(workers: &[WorkerHandle], ports: Vec<u32>) -> WorkerPacketIo {
        WorkerPacketIo {
            controllers: workers.iter().map(|w| w.controller.clone()).collect(),
            packet_out: workers[0].packet_out.clone(),
            wake: workers[0].thread.thread().clone(),
            ports,
            next: AtomicUsize::new(0),
        }
    }
}

impl PacketIo for WorkerPacketIo {
    fn poll_packet_ins(&self, out: &mut Vec<PacketInItem>, max: usize) {
        let n = self.controllers.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            let q = &self.controllers[(start + i) % n];
            while out.len() < max {
                let Some(p) = q.pop() else { break };
                out.push(PacketInItem {
                    in_port: p.in_port,
                    reason: p.reason,
                    table_id: p.table_id,
                    cookie: p.cookie,
                    total_len: p.total_len.min(u16::MAX as u32) as u16,
                    data: p.data.clone(),
                });
                q.recycle(p);
            }
        }
    }

    fn packet_out(&self, in_port: u32, actions: Vec<Action>, data: Vec<u8>) -> Result<(), OfError> {
        let p = PacketOut {
            in_port: (in_port != OFPP_CONTROLLER).then_some(in_port),
            actions,
            data,
        };
        let r = self.packet_out.push(p);
        self.wake.unpark();
        r.map_err(|_| {
            // The worker is behind by a whole queue of packet-outs: refuse, not block.
            OfError {
                type_: et::BAD_REQUEST,
                code: brc::EPERM,
            }
        })
    }

    fn has_port(&self, port: u32) -> bool {
        self.ports.contains(&port)
    }
}
