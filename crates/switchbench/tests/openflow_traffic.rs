//! Established flows lose nothing while flow_mods arrive: the scenario of
//! `flowpath bench openflow`'s traffic row — an in-process worker forwards 64 established
//! flows from port 1 to port 2 (memory ports, one frame per flow every millisecond, so the
//! worker is not saturated) while a client sends 10,000 unrelated flow_mods over OpenFlow
//! (half in the established flows' own table at a higher priority, so their megaflows are
//! revalidated) and a barrier. Every frame injected must come out of port 2, and the
//! worker must drop nothing. No timing thresholds: the bench measures.

use flowpath_switchbench::openflow::packets::traffic;
use std::time::Duration;

const FLOWS: u32 = 64;
const FLOW_MODS: u32 = 10_000;

#[test]
fn established_flows_lose_nothing_while_10000_flow_mods_arrive() {
    let t = traffic(FLOWS, FLOW_MODS, Duration::from_millis(1)).unwrap();
    assert_eq!(t.flow_mod_errors, 0, "a flow_mod was refused");
    assert_eq!(t.rules_after, (FLOWS + FLOW_MODS) as usize);
    assert!(
        t.injected_during_storm > 0,
        "traffic kept flowing during the storm: {t:?}"
    );
    assert_eq!(
        t.transmitted, t.injected,
        "injected vs transmitted on port 2"
    );
    assert_eq!(
        t.worker_received,
        t.injected + u64::from(FLOWS),
        "the worker received every frame"
    );
    assert_eq!(t.worker_sent, t.worker_received, "and sent every one");
    assert_eq!(t.worker_drops, 0, "the worker dropped nothing");
    assert_eq!(t.miss_budget_drops, 0);
    // The storm's rules are unrelated: the established flows' megaflows survive
    // revalidation, so at most a handful of their packets go to the slow path again.
    eprintln!(
        "{} frames ({FLOWS} flows), {FLOW_MODS} flow_mods: misses {} and upcalls {} during the storm",
        t.injected, t.misses_during_storm, t.upcalls_during_storm
    );
}
