//! What a transmitter is asked to send ([`TxPlan`]: how long, how many, how fast, how the
//! flows vary) and what it reports having sent ([`TxReport`]).

use std::time::{Duration, Instant};

/// How the program changes the flow of each packet.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Vary {
    /// Send the templates unchanged (program mode 0).
    AsIs,
    /// Spread packets over `flows` flows (in `order`) by rewriting the source port (then
    /// the source address once the ports run out), and make `new_share` (0.0..=1.0) of
    /// the packets never-seen flows, spread evenly. `flows: N, new_share: 0` is "vary the
    /// source port over N values"; `new_share: 1` is "every packet a new flow".
    Flows {
        flows: u32,
        new_share: f64,
        order: FlowOrder,
    },
}

/// The sequence in which packets visit the recurring flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowOrder {
    /// Flow 0, 1, …, N−1, 0, 1, …: each flow comes back every N packets. A cache whose
    /// entries were laid out in the order the flows arrived is then read as a sequential
    /// stream, which the hardware prefetcher runs ahead of.
    #[default]
    RoundRobin,
    /// Each packet's flow is a mix of its number, uniform over the N flows: no order a
    /// cache's layout could follow, as with traffic interleaved from many hosts.
    Random,
}

impl FlowOrder {
    /// `round-robin` or `random`.
    pub fn parse(s: &str) -> Option<FlowOrder> {
        match s {
            "round-robin" => Some(FlowOrder::RoundRobin),
            "random" => Some(FlowOrder::Random),
            _ => None,
        }
    }
}

impl Vary {
    /// Round-robin over `flows` flows with `new_share` of the packets new flows, or the
    /// templates as they are when that changes nothing (one flow, no new ones).
    pub fn for_flows(flows: u32, new_share: f64) -> Vary {
        Vary::for_flows_in(flows, new_share, FlowOrder::RoundRobin)
    }

    /// [`Vary::for_flows`] with the recurring flows visited in `order`.
    pub fn for_flows_in(flows: u32, new_share: f64, order: FlowOrder) -> Vary {
        if flows <= 1 && new_share == 0.0 {
            Vary::AsIs
        } else {
            Vary::Flows {
                flows,
                new_share,
                order,
            }
        }
    }

    /// Every packet a new flow.
    pub fn churn() -> Vary {
        Vary::Flows {
            flows: 1,
            new_share: 1.0,
            order: FlowOrder::RoundRobin,
        }
    }
}

/// What [`LiveFrameTx::run`](super::LiveFrameTx::run) or
/// [`PacketSocketTx::run`](super::PacketSocketTx::run) should do.
#[derive(Clone, Debug)]
pub struct TxPlan {
    /// Stop after this long.
    pub duration: Duration,
    /// Stop after this many packets (whichever comes first).
    pub packets: Option<u64>,
    /// Pace to this many packets per second: below
    /// [`KERNEL_PACE_FROM`](super::KERNEL_PACE_FROM) short bursts with sleeps between them,
    /// from it up paced by the program itself (see [`super::live`]); `None` sends as fast
    /// as the kernel goes.
    pub rate_pps: Option<u64>,
    pub vary: Vary,
}

/// What a run sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct TxReport {
    /// Packets the program ran for (handed to the interface; a veth peer without room drops
    /// silently, see [`super::live`]).
    pub packets: u64,
    pub seconds: f64,
    pub mpps: f64,
}

impl TxReport {
    /// `packets` sent from `start` until now.
    pub(super) fn since(start: Instant, packets: u64) -> TxReport {
        let seconds = start.elapsed().as_secs_f64();
        TxReport {
            packets,
            seconds,
            mpps: if seconds > 0.0 {
                packets as f64 / seconds / 1e6
            } else {
                0.0
            },
        }
    }
}
