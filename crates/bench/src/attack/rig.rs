//! The attack rig: one worker polling two paced generated ports (established traffic on A,
//! the attacker on B) through the switch's worker loop, and the windows it is measured in.

use super::config::{Attack, AttackConfig, PORT_ATTACK, PORT_ESTABLISHED, RING};
use super::traffic;
use crate::classifier::trace::FiveTuple;
use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_datapath::{CountingSink, Datapath, DatapathConfig, Worker, WorkerPort};
use flowpath_gen::{GeneratedPort, InMemorySource, PacedPort};
use flowpath_pipeline::{RuleSpec, RuleStore};
use std::sync::Arc;

pub(crate) type AttackWorker = Worker<PacedPort<GeneratedPort>, CountingSink>;

/// The rules and both ports' traffic.
pub(crate) struct Scenario {
    pub rules: Vec<RuleSpec>,
    pub established: Vec<Vec<u8>>,
    pub attack: Vec<Vec<u8>>,
    /// The attacker's source stamps every packet as a new flow (flood).
    pub attack_new_flows: bool,
}

pub(crate) fn scenario(kind: Attack, cfg: &AttackConfig) -> Scenario {
    let flows = cfg.established_flows.unwrap_or(match kind {
        Attack::Flood => 1_000,
        Attack::Tse => 10_000,
    });
    let frames = |ts: &[FiveTuple]| -> Vec<Vec<u8>> {
        ts.iter()
            .map(|t| traffic::frame(t, cfg.frame_size))
            .collect()
    };
    match kind {
        // The miss pipeline (3 tables, 1,000 rules): every never-seen source is a miss
        // there (its /32 subtable pins the source). A: its established flows; B: the same
        // frames, each packet stamped with a never-seen source.
        Attack::Flood => {
            let (rules, src) = crate::workload::miss_pipeline(flows, cfg.frame_size);
            let rules = cfg.rules.clone().unwrap_or(rules);
            let established: Vec<Vec<u8>> = (0..src.template_count())
                .map(|i| src.template(i).to_vec())
                .collect();
            Scenario {
                rules,
                attack: established.clone(),
                established,
                attack_new_flows: true,
            }
        }
        Attack::Tse => {
            let rules = cfg.rules.clone().unwrap_or_else(traffic::default_acl);
            let est = traffic::established(&rules, flows, cfg.seed);
            Scenario {
                established: frames(&est),
                attack: frames(&traffic::tse(&rules, 100_000, cfg.seed)),
                rules,
                attack_new_flows: false,
            }
        }
    }
}

pub(crate) fn worker(sc: &Scenario, cfg: &AttackConfig, dp_cfg: DatapathConfig) -> AttackWorker {
    let store = Arc::new(RuleStore::new(cfg.backend));
    store
        .add(sc.rules.iter().cloned())
        .expect("attack rules are valid");
    let a_src = InMemorySource::new(sc.established.clone()).with_seed(cfg.seed);
    let mut b_src = InMemorySource::new(sc.attack.clone()).with_seed(cfg.seed ^ 1);
    if sc.attack_new_flows {
        b_src.set_new_flow_share(1.0);
    }
    let a = PacedPort::new(GeneratedPort::new("established", a_src), 0.0, RING);
    let b = PacedPort::new(GeneratedPort::new("attacker", b_src), 0.0, RING);
    Worker::new(
        Datapath::new(store, dp_cfg),
        vec![
            WorkerPort::new(PORT_ESTABLISHED, 0, a),
            WorkerPort::new(PORT_ATTACK, 0, b),
        ],
        CountingSink::default(),
        "attack bench",
    )
}

/// What one window saw.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Window {
    pub secs: f64,
    /// A's packets the datapath processed and did not drop for the budget.
    pub a_delivered: u64,
    pub a_ring_losses: u64,
    pub a_upcalls: u64,
    pub b_packets: u64,
    pub b_upcalls: u64,
    pub b_budget_drops: u64,
    pub b_uncached: u64,
    pub upcall_cycles: u64,
}

pub(crate) fn set_rates(w: &mut AttackWorker, a: f64, b: f64) {
    w.ports_mut()[0].port.set_rate(a);
    w.ports_mut()[1].port.set_rate(b);
}

/// Poll for `ms` milliseconds of TSC time.
pub(crate) fn spin(w: &mut AttackWorker, ms: u64) {
    let until = rdtsc() + (ms as f64 * 1e-3 * tsc_hz()) as u64;
    while rdtsc() < until {
        w.poll();
    }
}

/// One measured window of `ms` milliseconds: what each port saw.
pub(crate) fn window(w: &mut AttackWorker, ms: u64) -> Window {
    w.datapath_mut().reset_stats();
    let ring0 = w.ports()[0].port.overflow;
    let t0 = rdtsc();
    spin(w, ms);
    let secs = (rdtsc() - t0) as f64 / tsc_hz();
    let per = w.datapath().port_miss_stats();
    let of = |n: u32| {
        per.iter()
            .find(|(p, _)| *p == n)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    };
    let (a, b) = (of(PORT_ESTABLISHED), of(PORT_ATTACK));
    Window {
        secs,
        a_delivered: a.packets - a.budget_drops,
        a_ring_losses: w.ports()[0].port.overflow - ring0,
        a_upcalls: a.upcalls,
        b_packets: b.packets,
        b_upcalls: b.upcalls,
        b_budget_drops: b.budget_drops,
        b_uncached: b.uncached,
        upcall_cycles: a.upcall_cycles + b.upcall_cycles,
    }
}
