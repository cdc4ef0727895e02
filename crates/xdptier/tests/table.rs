//! The kernel flow table (`fp_flows`, a 2-way bucketed hash table in an mmapped array):
//! the program must find exactly what user space wrote, where `table_hash` put it; a
//! bucket holds two flows and refuses a third; an entry being rewritten is a miss.

mod common;

use common::*;
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::{Action, FlowKey};
use flowpath_xdptier::table::bucket_of;
use flowpath_xdptier::{actions_from, flow_key, xdp_action, FlowTier, Reason};

const DEV: u32 = 3;

fn setup() -> Option<FlowTier> {
    let mut t = tier()?;
    t.set_output_dev(DEV, LO).unwrap();
    t.set_masks(&[(0, FlowKey::ONES)]).unwrap();
    Some(t)
}

fn frame(sport: u16, dport: u16) -> Vec<u8> {
    build(&FrameSpec::udp4(v4(1, 1), v4(2, 2), sport, dport, 64))
}

fn verdict(t: &FlowTier, f: &[u8]) -> (u32, Reason) {
    let r = t.test_run(f, LO).unwrap();
    let reason = Reason::from_u32(t.last_debug().unwrap().reason).unwrap();
    (r.action, reason)
}

/// Three frames whose exact keys fall into one bucket (found by search).
fn three_in_one_bucket() -> [Vec<u8>; 3] {
    let bucket = |f: &[u8]| bucket_of(&flow_key(0, &FlowKey::ONES, &key_of(f)).unwrap());
    let first = frame(1, 7);
    let b = bucket(&first);
    let mut found = vec![first];
    'outer: for dport in 7..64u16 {
        for sport in 2..=u16::MAX {
            let f = frame(sport, dport);
            if bucket(&f) == b {
                found.push(f);
                if found.len() == 3 {
                    break 'outer;
                }
            }
        }
    }
    found.try_into().expect("three keys in one bucket")
}

#[test]
fn a_bucket_holds_two_flows_and_refuses_a_third() {
    let Some(t) = setup() else { return };
    let out = actions_from(&[Action::Output(5)], |p| (p == 5).then_some(DEV)).unwrap();
    let [f1, f2, f3] = three_in_one_bucket();
    let (k1, k2, k3) = (key_of(&f1), key_of(&f2), key_of(&f3));
    t.insert(0, &FlowKey::ONES, &k1, out, 1).unwrap();
    t.insert(0, &FlowKey::ONES, &k2, out, 2).unwrap();
    let e = t.insert(0, &FlowKey::ONES, &k3, out, 3).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
    assert_eq!(t.flow_count(), 2);
    let hit = (xdp_action::REDIRECT, Reason::HitOutput);
    let miss = (xdp_action::PASS, Reason::Miss);
    assert_eq!(verdict(&t, &f1), hit);
    assert_eq!(verdict(&t, &f2), hit);
    assert_eq!(verdict(&t, &f3), miss);
    // Replacing an entry in place keeps the bucket's other flow.
    let drop = actions_from(&[], |_| None).unwrap();
    t.insert(0, &FlowKey::ONES, &k2, drop, 2).unwrap();
    assert_eq!(verdict(&t, &f2), (xdp_action::DROP, Reason::HitDrop));
    assert_eq!(verdict(&t, &f1), hit);
    // A removal frees a way for the third.
    t.remove(0, &FlowKey::ONES, &k1).unwrap();
    assert_eq!(verdict(&t, &f1), miss);
    t.insert(0, &FlowKey::ONES, &k3, out, 3).unwrap();
    assert_eq!(verdict(&t, &f3), hit);
    assert_eq!(verdict(&t, &f1), miss);
    assert_eq!(t.flow_count(), 2);
    assert!(t.remove(0, &FlowKey::ONES, &k1).is_err(), "removed twice");
}

#[test]
fn an_entry_being_written_is_a_miss_not_a_forward() {
    let Some(mut t) = setup() else { return };
    let out = actions_from(&[Action::Output(5)], |p| (p == 5).then_some(DEV)).unwrap();
    let f = frame(1000, 2000);
    let k = key_of(&f);
    t.insert(0, &FlowKey::ONES, &k, out, 9).unwrap();
    assert_eq!(verdict(&t, &f), (xdp_action::REDIRECT, Reason::HitOutput));
    let i = t
        .table()
        .find(&flow_key(0, &FlowKey::ONES, &k).unwrap())
        .unwrap();
    t.table_mut().hold(i, true); // seq odd: a writer is in the middle of the entry
    assert_eq!(verdict(&t, &f), (xdp_action::PASS, Reason::Miss));
    t.table_mut().hold(i, false);
    assert_eq!(verdict(&t, &f), (xdp_action::REDIRECT, Reason::HitOutput));
}

#[test]
fn thousands_of_flows_are_all_found_where_rust_hashed_them() {
    let Some(t) = setup() else { return };
    let out = actions_from(&[Action::Output(5)], |p| (p == 5).then_some(DEV)).unwrap();
    let frames: Vec<Vec<u8>> = (0..3000u16).map(|i| frame(10_000 + i, 53)).collect();
    let mut installed = Vec::new();
    for (slot, f) in frames.iter().enumerate() {
        if t.insert(0, &FlowKey::ONES, &key_of(f), out, slot as u32)
            .is_ok()
        {
            installed.push(f);
        }
    }
    // 3,000 flows in 65,536 two-way buckets: a third in one bucket is rare.
    assert!(installed.len() >= 2990, "{} installed", installed.len());
    assert_eq!(t.flow_count(), installed.len());
    for f in installed {
        assert_eq!(verdict(&t, f), (xdp_action::REDIRECT, Reason::HitOutput));
    }
}

#[test]
fn workers_insert_and_remove_at_once_without_losing_a_flow() {
    // Two writers share the table (as two workers' tier agents do), each inserting its own
    // flows and removing every other one; the program then finds exactly the survivors.
    let Some(t) = setup() else { return };
    let out = actions_from(&[Action::Output(5)], |p| (p == 5).then_some(DEV)).unwrap();
    let sets: Vec<Vec<Vec<u8>>> = (0..2u16)
        .map(|w| {
            (0..1500u16)
                .map(|i| frame(20_000 + w * 2000 + i, 53))
                .collect()
        })
        .collect();
    let kept: Vec<Vec<&Vec<u8>>> = std::thread::scope(|s| {
        let handles: Vec<_> = sets
            .iter()
            .enumerate()
            .map(|(w, frames)| {
                let t = &t;
                s.spawn(move || {
                    let mut kept = Vec::new();
                    for (i, f) in frames.iter().enumerate() {
                        let slot = (w * 2000 + i) as u32;
                        if t.insert(0, &FlowKey::ONES, &key_of(f), out, slot).is_err() {
                            continue; // a full bucket: rare, and not what this checks
                        }
                        if i % 2 == 0 {
                            t.remove(0, &FlowKey::ONES, &key_of(f)).unwrap();
                        } else {
                            kept.push(f);
                        }
                    }
                    kept
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let survivors: Vec<&Vec<u8>> = kept.into_iter().flatten().collect();
    assert!(survivors.len() >= 1480, "{} kept", survivors.len());
    assert_eq!(t.flow_count(), survivors.len());
    for f in survivors {
        assert_eq!(verdict(&t, f), (xdp_action::REDIRECT, Reason::HitOutput));
    }
    for frames in &sets {
        for f in frames.iter().step_by(2) {
            assert_eq!(verdict(&t, f).1, Reason::Miss, "a removed flow still hits");
        }
    }
}
