//! Figures, not a test: what the XDP tier's program costs per packet under
//! `BPF_PROG_TEST_RUN` (the kernel times a loop of runs; nothing is sent, so this is the
//! program alone: parse, lookups, actions, counters), next to an empty program's cost.
//! `cargo test --release -p flowpath-xdptier --test timing -- --ignored --nocapture`
//! (root). Where the lab's XDP-tier row goes against redirect-only, this says which part
//! of the program the difference is.
//!
//! `compare_objects` times two builds of the program against each other, alternating
//! (a slow spell of the VM falls on both), and gives the median of the per-round ratios:
//! `XDP_OBJ_A=old.o XDP_OBJ_B=new.o cargo test --release -p flowpath-xdptier --test timing
//! compare_objects -- --ignored --nocapture`, where an object is a build's
//! `target/release/build/flowpath-xdptier-*/out/flow_tier.bpf.o` (absolute paths: the test
//! runs in the crate's directory). Both are set up by this
//! build's user space, so they must share its map layouts.

mod common;

use common::*;
use flowpath_base::median;
use flowpath_gen::{build, FrameSpec, L3, L4};
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_xdptier::{actions_from, FlowTier};

const OUT: u32 = 5;
const DEV: u32 = 3;
const REPEAT: u32 = 2_000_000;

fn dev_of(p: u32) -> Option<u32> {
    (p == OUT).then_some(DEV)
}

/// The median of 7 timed loops, in ns per run.
fn ns(t: &FlowTier, frame: &[u8]) -> f64 {
    let v: Vec<f64> = (0..7)
        .map(|_| {
            let d = t.time_run(frame, LO, REPEAT).expect("BPF_PROG_TEST_RUN");
            d.as_nanos() as f64
        })
        .collect();
    median(&v).expect("seven samples")
}

/// A mask over the 5-tuple and in_port plus `extra` (so masks differ).
fn mask(extra: Field) -> FlowKey {
    let mut m = FlowKey::ZERO;
    for f in [
        Field::InPort,
        Field::EthType,
        Field::NwProto,
        Field::Ipv4Dst,
        Field::TpDst,
        extra,
    ] {
        m.set_all(f);
    }
    m
}

/// Four masks, ids 0..3: the 5-tuple mask with the source, the source port, the TOS or
/// the TTL added.
fn four_masks() -> Vec<(u32, FlowKey)> {
    [Field::Ipv4Src, Field::TpSrc, Field::NwTos, Field::NwTtl]
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u32, mask(*f)))
        .collect()
}

/// `frame` with one bit of the byte `at` bytes into its IP header flipped.
fn flipped(frame: &[u8], at: usize) -> Vec<u8> {
    let mut f = frame.to_vec();
    let i = l3_off(&f) + at;
    f[i] ^= 1;
    f
}

#[test]
#[ignore]
fn measure() {
    let Some(mut t) = tier() else { return };
    t.set_debug(false).unwrap();
    t.set_output_dev(DEV, LO).unwrap();
    let frame = build(&FrameSpec::new(
        L3::V4 {
            src: v4(1, 2),
            dst: v4(3, 4),
            ttl: 64,
            tos: 0,
        },
        L4::Udp {
            sport: 1234,
            dport: 53,
        },
        64,
    ));
    let key = key_of(&frame);
    let out = actions_from(&[Action::Output(OUT)], dev_of).unwrap();

    // No mask at all: the program hands the packet over without parsing it.
    t.set_masks(&[]).unwrap();
    let nothing = ns(&t, &frame);

    let masks = four_masks();
    // One mask, the flow in it: parse, one lookup, output.
    t.set_masks(&masks[..1]).unwrap();
    t.insert(0, &masks[0].1, &key, out, 1).unwrap();
    let hit1 = ns(&t, &frame);
    // One mask, another flow in it: parse, one lookup, a miss (to the AF_XDP socket).
    let other = flipped(&frame, 19); // destination address: not the cached flow
    let miss1 = ns(&t, &other);
    // Four masks; a second flow cached only under the last: three lookups miss first.
    t.set_masks(&masks).unwrap();
    let last = flipped(&frame, 15); // another source address: not under mask 0's entry
    t.insert(3, &masks[3].1, &key_of(&last), out, 2).unwrap();
    let hit_first_of4 = ns(&t, &frame);
    let hit_last_of4 = ns(&t, &last);

    // IPv6: the same, one mask over in_port, the ethertype and the destination.
    let frame6 = build(&FrameSpec::new(
        L3::V6 {
            src: v6(1),
            dst: v6(2),
            hop_limit: 64,
            tclass: 0,
        },
        L4::Udp {
            sport: 1234,
            dport: 53,
        },
        78,
    ));
    let mut m6 = FlowKey::ZERO;
    for f in [Field::InPort, Field::EthType, Field::Ipv6Dst] {
        m6.set_all(f);
    }
    t.set_masks(&[(9, m6)]).unwrap();
    t.insert(9, &m6, &key_of(&frame6), out, 3).unwrap();
    let hit6 = ns(&t, &frame6);

    // The lab's middle baseline: the same parser, then the redirect, nothing looked up.
    let mut base = FlowTier::load_parse_forward().expect("load parse_forward");
    base.set_output_dev(0, LO).unwrap();
    let parse_only = ns(&base, &frame);

    eprintln!("XDP tier under BPF_PROG_TEST_RUN, {REPEAT} runs x 7, median ns per packet:");
    eprintln!("  no mask (hand over unparsed)     {nothing:7.1}");
    eprintln!("  1 mask, hit, output              {hit1:7.1}");
    eprintln!("  1 mask, miss                     {miss1:7.1}");
    eprintln!("  4 masks, hit in the first        {hit_first_of4:7.1}");
    eprintln!("  4 masks, hit in the last         {hit_last_of4:7.1}");
    eprintln!("  IPv6, 1 mask, hit, output        {hit6:7.1}");
    eprintln!("  parse, then redirect (baseline)  {parse_only:7.1}");
}

/// Median (the base crate's) and quartiles of `v` (sorted here).
fn quartiles(v: &mut [f64]) -> (f64, f64, f64) {
    let m = median(v).expect("at least one round");
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (m, v[n / 4], v[3 * n / 4])
}

#[test]
#[ignore]
fn compare_objects() {
    let (Ok(a), Ok(b)) = (std::env::var("XDP_OBJ_A"), std::env::var("XDP_OBJ_B")) else {
        eprintln!("skipping: set XDP_OBJ_A and XDP_OBJ_B to two builds' flow_tier.bpf.o");
        return;
    };
    let Some(_) = tier() else { return };
    let rounds: usize = std::env::var("XDP_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(21);
    let frame = build(&FrameSpec::udp4(v4(1, 2), v4(3, 4), 1234, 53, 64));
    let masks = four_masks();
    // Cached under the last mask only (another source: not under mask 0's entry).
    let last = flipped(&frame, 15);
    // Cached nowhere (another destination).
    let miss = flipped(&frame, 19);
    let out = actions_from(&[Action::Output(OUT)], dev_of).unwrap();
    let load = |path: &str| {
        let obj = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut t = FlowTier::load_object(&obj).expect("load the object");
        t.set_in_port(LO, IN_PORT, 5).unwrap();
        t.set_debug(false).unwrap();
        t.set_output_dev(DEV, LO).unwrap();
        t.set_masks(&masks).unwrap();
        t.insert(0, &masks[0].1, &key_of(&frame), out, 1).unwrap();
        t.insert(3, &masks[3].1, &key_of(&last), out, 2).unwrap();
        t
    };
    let (ta, tb) = (load(&a), load(&b));
    eprintln!("{rounds} rounds of 1,000,000 runs each, alternating; ns per packet, median");
    for (name, f) in [
        ("hit under the first of 4 masks", &frame),
        ("hit under the last of 4 masks", &last),
        ("miss under 4 masks", &miss),
    ] {
        let (mut va, mut vb, mut ratio) = (vec![], vec![], vec![]);
        for _ in 0..rounds {
            let x = ta.time_run(f, LO, 1_000_000).unwrap().as_nanos() as f64;
            let y = tb.time_run(f, LO, 1_000_000).unwrap().as_nanos() as f64;
            va.push(x);
            vb.push(y);
            ratio.push(y / x);
        }
        let (r, lo, hi) = quartiles(&mut ratio);
        eprintln!(
            "  {name:32} A {:6.1}  B {:6.1}  B/A {r:.3} (middle half {lo:.3}..{hi:.3})",
            median(&va).expect("at least one round"),
            median(&vb).expect("at least one round")
        );
    }
}
