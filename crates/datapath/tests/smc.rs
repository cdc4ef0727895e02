//! The signature-match cache in the datapath: it answers the flows the EMC does not hold
//! (EMC off here, so it is the only exact tier), every answer is the rules' answer, a
//! signature whose megaflow was evicted (its slot reused by another megaflow) is never
//! followed to a wrong decision, and it is used only while it pays; likewise EMC lookups
//! pause while they never hit.

mod common;

use flowpath_datapath::{CaptureSink, Datapath, DatapathConfig, MissLimits};
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// Eight /24 routes to ports 2..=9, one subtable; the default drops.
fn store() -> Arc<RuleStore> {
    store_with(false)
}

/// With `exact_src`, a never-hit rule on one source address puts the source into every
/// megaflow: each flow is its own megaflow, and its first packet a miss. (Its mask leaves
/// out the top bit, not a prefix, so the prefix tries cannot shorten it.)
fn store_with(exact_src: bool) -> Arc<RuleStore> {
    let s = Arc::new(RuleStore::new(Backend::TupleSpace));
    let mut rules: Vec<RuleSpec> = (0..8u32)
        .map(|k| {
            RuleSpec::new(
                0,
                100,
                Match::any().exact(Field::EthType, 0x0800).prefix(
                    Field::Ipv4Dst,
                    (0x0a00_0000 | (k << 8)) as u128,
                    24,
                ),
            )
            .actions([Action::Output(2 + k)])
        })
        .collect();
    rules.push(RuleSpec::new(0, 0, Match::any()));
    if exact_src {
        rules.push(RuleSpec::new(
            0,
            200,
            Match::any().exact(Field::EthType, 0x0800).with(
                Field::Ipv4Src,
                0x0102_0304,
                0x7fff_ffff,
            ),
        ));
    }
    s.add(rules).unwrap();
    s
}

/// Flow i: from 192.168.x.y to 10.0.(i % 8).1; the port its route sends it to.
fn flow(i: u32) -> (Vec<u8>, u32) {
    let f = build(&FrameSpec::udp4(
        Ipv4Addr::from(0xc0a8_0000 | i),
        Ipv4Addr::from(0x0a00_0001 | ((i % 8) << 8)),
        1000 + (i % 100) as u16,
        53,
        64,
    ));
    (f, 2 + i % 8)
}

/// Send flows `ids` in batches of 32; check every packet went to its route's port.
fn send(dp: &mut Datapath, ids: &[u32]) {
    for chunk in ids.chunks(32) {
        let frames: Vec<(Vec<u8>, u32)> = chunk.iter().map(|&i| flow(i)).collect();
        let mut sink = CaptureSink::default();
        common::process(dp, 1, frames.iter().map(|(f, _)| f.as_slice()), &mut sink);
        let got: Vec<u32> = sink.packets.iter().map(|(p, _)| *p).collect();
        let want: Vec<u32> = frames.iter().map(|(_, p)| *p).collect();
        assert_eq!(got, want, "flows {chunk:?}");
    }
}

fn config(smc_entries: usize, megaflow_max: usize) -> DatapathConfig {
    DatapathConfig {
        emc: false,
        smc_entries,
        megaflow_max,
        miss: MissLimits::off(),
        // The SMC runs while it pays, reconsidered with the subtable ranking: often here.
        rerank_every: 4,
        ..DatapathConfig::default()
    }
}

#[test]
fn the_smc_answers_flows_once_the_megaflow_search_has_found_them() {
    let mut dp = Datapath::new(store(), config(1 << 16, 65536));
    let ids: Vec<u32> = (0..4000).collect();
    send(&mut dp, &ids); // misses, then searches that teach the SMC
    send(&mut dp, &ids);
    dp.reset_stats();
    send(&mut dp, &ids);
    let st = dp.stats();
    assert_eq!(st.upcalls, 0);
    assert_eq!(st.megaflow_hits, 4000);
    assert!(
        st.smc_hits >= 3600,
        "most flows found by signature: {} of 4000",
        st.smc_hits
    );
    // Off: every hit is a search.
    let mut off = Datapath::new(store(), config(0, 65536));
    send(&mut off, &ids);
    off.reset_stats();
    send(&mut off, &ids);
    assert_eq!((off.stats().smc_hits, off.stats().megaflow_hits), (0, 4000));
}

#[test]
fn the_smc_stays_off_while_most_packets_are_misses() {
    // Every packet a new flow: the megaflow search answers nothing, so the SMC would
    // only cost; it is not used.
    let mut dp = Datapath::new(store_with(true), config(1 << 16, 65536));
    let ids: Vec<u32> = (0..4000).collect();
    send(&mut dp, &ids);
    assert_eq!(dp.stats().smc_hits, 0);
    assert_eq!(dp.stats().smc_switches, 0);
    // Then the same flows again: now it pays, and it is switched on.
    send(&mut dp, &ids);
    send(&mut dp, &ids);
    assert_eq!(dp.stats().smc_switches, 1);
    assert!(dp.stats().smc_hits > 0);
}

#[test]
fn the_tier_reviews_run_with_subtable_ranking_off() {
    // Ranking off (the attack bench's "no defence") leaves the subtables in the order
    // they were made, and nothing else: the SMC is still switched on once it pays.
    let cfg = DatapathConfig {
        rank_subtables: false,
        ..config(1 << 16, 65536)
    };
    let mut dp = Datapath::new(store_with(true), cfg);
    let ids: Vec<u32> = (0..4000).collect();
    for _ in 0..3 {
        send(&mut dp, &ids);
    }
    assert_eq!(dp.stats().smc_switches, 1);
    assert!(dp.stats().smc_hits > 0);
    assert_eq!(dp.megaflows().counters.reranks, 0);
    // Ranking on: the same traffic re-ranks at every review.
    let mut ranked = Datapath::new(store_with(true), config(1 << 16, 65536));
    for _ in 0..3 {
        send(&mut ranked, &ids);
    }
    assert!(ranked.megaflows().counters.reranks > 0);
}

#[test]
fn a_signature_left_by_an_evicted_megaflow_never_misforwards() {
    // Two megaflow slots for eight routes: every new route evicts, and the slots are
    // reused by other routes, so the SMC (8 entries: ways replaced constantly) is full
    // of signatures pointing at slots that now hold another megaflow.
    let mut dp = Datapath::new(store(), config(8, 2));
    let ids: Vec<u32> = (0..3000).map(|i| (i * 7919) % 5000).collect();
    send(&mut dp, &ids);
    send(&mut dp, &ids);
    assert!(dp.megaflows().len() <= 2);
    assert!(dp.megaflows().counters.evictions > 100);
}

#[test]
fn emc_lookups_pause_while_they_never_hit_and_resume_when_they_do() {
    let cfg = DatapathConfig {
        emc: true,
        emc_insert_inv_prob: 1,
        // Reconsidered every 32 batches: while paused, 2 of them are sampled.
        rerank_every: 32,
        ..config(1 << 16, 65536)
    };
    let mut dp = Datapath::new(store(), cfg);
    // 20,000 flows, each once: the EMC never hits, so its lookups pause.
    let once: Vec<u32> = (0..20_000).collect();
    send(&mut dp, &once);
    assert_eq!(dp.stats().emc_switches, 1, "paused");
    // Then 16 flows over and over: a sampled batch hits, lookups resume, most packets
    // are EMC hits again. Every packet still goes where its route says (send checks).
    let few: Vec<u32> = (0..40_000).map(|i| i % 16).collect();
    dp.reset_stats();
    send(&mut dp, &few);
    assert_eq!(dp.stats().emc_switches, 1, "resumed");
    assert_eq!(dp.stats().upcalls, 0);
    assert!(
        dp.stats().emc_hits > 30_000,
        "EMC hits after resuming: {}",
        dp.stats().emc_hits
    );
}
