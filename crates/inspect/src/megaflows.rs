//! `flowpath dump-megaflows`: the datapath's cached megaflows, like `ovs-appctl
//! dpctl/dump-flows`: match with masks (in flow syntax), counters, age, the tier that
//! holds each, and the actions.

use crate::render::{format_action_list, format_megaflow_match};
use flowpath_flowsyntax::{parse_flow, FlowCommand};
use flowpath_packet::{Action, FlowKey};
use flowpath_pipeline::{Ending, Match};
use serde::{Deserialize, Serialize};

/// A megaflow as the worker copies it out (formatting is left to the control thread, so
/// the worker's pause stays a copy).
#[derive(Clone, Debug)]
pub struct RawMegaflow {
    /// The masked key and the mask.
    pub key: FlowKey,
    pub mask: FlowKey,
    pub actions: Vec<Action>,
    pub ending: Ending,
    pub packets: u64,
    pub bytes: u64,
    /// Seconds since a packet last used it; `None`: never used since installed.
    pub used: Option<f64>,
    /// `"megaflow"` (user space) or `"xdp"` (also held by the XDP tier in the kernel).
    pub tier: &'static str,
}

/// A megaflow as dumps show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MegaflowRecord {
    pub worker: usize,
    pub tier: String,
    /// The match in flow syntax; masked fields print as `value/mask`.
    #[serde(rename = "match")]
    pub matches: String,
    pub packets: u64,
    pub bytes: u64,
    /// Seconds since last used; `None` (JSON `null`): never.
    pub used: Option<f64>,
    pub actions: String,
}

/// One worker's caches: how much each tier holds, and (unless only counts were asked
/// for) the megaflows that passed the filter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerMegaflows {
    pub worker: usize,
    /// Exact-match cache entries in use.
    pub emc_entries: u64,
    /// Megaflows cached in user space (all of them, filtered or not).
    pub megaflows: u64,
    /// Of those, the ones the XDP tier also holds in the kernel.
    pub xdp_entries: u64,
    /// Megaflows that passed the filter.
    pub shown: u64,
    pub flows: Vec<MegaflowRecord>,
}

/// What a dump shows (also the control socket's `megaflows` request, as JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MegaflowFilter {
    /// Flow-syntax match fields: a megaflow is shown if some packet could match both
    /// (they agree on every bit both look at), e.g. `tcp` or `nw_dst=10.0.0.0/8`.
    #[serde(default)]
    pub flow: Option<String>,
    /// `megaflow` or `xdp`.
    #[serde(default)]
    pub tier: Option<String>,
    #[serde(default)]
    pub worker: Option<usize>,
    /// Counts only, no megaflows.
    #[serde(default)]
    pub count_only: bool,
}

/// A filter ready to apply.
pub struct CompiledFilter {
    matches: Option<Match>,
    tier: Option<String>,
    worker: Option<usize>,
    pub count_only: bool,
}

impl MegaflowFilter {
    /// Check the filter; an error names what is wrong (the flow syntax's column).
    pub fn compile(&self) -> Result<CompiledFilter, String> {
        let matches = match &self.flow {
            Some(f) if !f.trim().is_empty() => Some(
                parse_flow(f, FlowCommand::Delete)
                    .map_err(|e| format!("filter: {e}"))?
                    .spec
                    .matches,
            ),
            _ => None,
        };
        if let Some(t) = &self.tier {
            if t != "megaflow" && t != "xdp" {
                return Err(format!("--tier {t}: the tiers are megaflow and xdp"));
            }
        }
        Ok(CompiledFilter {
            matches,
            tier: self.tier.clone(),
            worker: self.worker,
            count_only: self.count_only,
        })
    }
}

impl CompiledFilter {
    pub fn wants_worker(&self, worker: usize) -> bool {
        self.worker.is_none_or(|w| w == worker)
    }

    /// Does `m` pass? (Tier, then overlap with the filter's match.)
    pub fn selects(&self, m: &RawMegaflow) -> bool {
        if self.tier.as_deref().is_some_and(|t| t != m.tier) {
            return false;
        }
        let Some(f) = &self.matches else {
            return true;
        };
        m.key
            .words
            .iter()
            .zip(&m.mask.words)
            .zip(f.value.words.iter().zip(&f.mask.words))
            .all(|((k, km), (v, vm))| (k ^ v) & km & vm == 0)
    }
}

impl RawMegaflow {
    pub fn record(&self, worker: usize) -> MegaflowRecord {
        let mut actions = format_action_list(&self.actions);
        if let Ending::TableMiss(t) = self.ending {
            if self.actions.is_empty() {
                actions = format!("drop (table-miss in table {t})");
            }
        }
        MegaflowRecord {
            worker,
            tier: self.tier.to_string(),
            matches: format_megaflow_match(&self.key, &self.mask),
            packets: self.packets,
            bytes: self.bytes,
            used: self.used,
            actions,
        }
    }
}

impl MegaflowRecord {
    /// `in_port=1,udp,nw_src=10.1.0.1, packets:12, bytes:720, used:0.004s, tier:xdp,
    /// actions:output:2` (ovs-dpctl's order, flow syntax for the match).
    pub fn line(&self) -> String {
        let used = match self.used {
            Some(s) => format!("{s:.3}s"),
            None => "never".into(),
        };
        format!(
            "{}, packets:{}, bytes:{}, used:{used}, tier:{}, actions:{}",
            self.matches, self.packets, self.bytes, self.tier, self.actions
        )
    }
}

impl WorkerMegaflows {
    /// `worker 0: emc 12 entries, megaflows 3 (xdp 2), shown 3`.
    pub fn summary(&self) -> String {
        format!(
            "worker {}: exact-match cache {} entries, megaflows {} (of which in the XDP tier {}), shown {}",
            self.worker, self.emc_entries, self.megaflows, self.xdp_entries, self.shown
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_packet::Field;

    fn raw(nw_src: u32, len: u32) -> RawMegaflow {
        let m = Match::any()
            .exact(Field::InPort, 1)
            .exact(Field::EthType, 0x0800)
            .prefix(Field::Ipv4Src, nw_src as u128, len);
        RawMegaflow {
            key: m.value,
            mask: m.mask,
            actions: vec![Action::Output(2)],
            ending: Ending::Done,
            packets: 5,
            bytes: 300,
            used: Some(0.25),
            tier: "megaflow",
        }
    }

    #[test]
    fn a_megaflow_prints_in_flow_syntax_with_its_counters() {
        let r = raw(0x0a000000, 8).record(0);
        assert_eq!(
            r.line(),
            "ip,in_port=1,nw_src=10.0.0.0/8, packets:5, bytes:300, used:0.250s, tier:megaflow, actions:output:2"
        );
    }

    #[test]
    fn the_filter_shows_megaflows_a_packet_could_share_with_it() {
        let f = |s: &str| {
            MegaflowFilter {
                flow: Some(s.into()),
                ..Default::default()
            }
            .compile()
            .unwrap()
        };
        let m = raw(0x0a000000, 8);
        assert!(f("ip,nw_src=10.1.2.3").selects(&m));
        assert!(!f("ip,nw_src=11.1.2.3").selects(&m));
        assert!(
            f("tcp").selects(&m),
            "the megaflow does not look at nw_proto"
        );
        assert!(!f("arp").selects(&m));
        let e = MegaflowFilter {
            flow: Some("ip,nw_sr=1.2.3.4".into()),
            ..Default::default()
        }
        .compile()
        .err()
        .unwrap();
        assert!(e.contains("column"), "{e}");
        let tier = MegaflowFilter {
            tier: Some("xdp".into()),
            ..Default::default()
        }
        .compile()
        .unwrap();
        assert!(!tier.selects(&m));
    }
}
