//! The kernel flow table (`fp_index` buckets of 16 signature slots naming `fp_flows`
//! entries, both mmapped arrays): the program must find exactly what user space wrote,
//! where `table_hash` put it; a bucket holds sixteen flows and refuses a seventeenth;
//! entries are packed from index 0 whatever the hashes; an entry being rewritten is a miss;
//! a bucket's hot line (`fp_hot`) serves one plain flow of it and follows every change.

mod common;

use bytemuck::Zeroable;
use common::*;
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_xdptier::table::{bucket_of, TableFull, INDEX_WAYS, TABLE_ENTRIES};
use flowpath_xdptier::{
    actions_from, flow_key, xdp_action, FlowTier, FpFlowKey, FpFlowValue, Reason,
};

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

/// The exact lookup key of frame `f`.
fn lookup_key(f: &[u8]) -> FpFlowKey {
    flow_key(0, &FlowKey::ONES, &key_of(f)).unwrap()
}

fn verdict(t: &FlowTier, f: &[u8]) -> (u32, Reason) {
    let r = t.test_run(f, LO).unwrap();
    let reason = Reason::from_u32(t.last_debug().unwrap().reason).unwrap();
    (r.action, reason)
}

/// `n` frames whose exact keys fall into one bucket (found by search).
fn in_one_bucket(n: usize) -> Vec<Vec<u8>> {
    let bucket = |f: &[u8]| bucket_of(&flow_key(0, &FlowKey::ONES, &key_of(f)).unwrap());
    let first = frame(1, 7);
    let b = bucket(&first);
    let mut found = vec![first];
    'outer: for dport in 7..64u16 {
        for sport in 2..=u16::MAX {
            let f = frame(sport, dport);
            if bucket(&f) == b {
                found.push(f);
                if found.len() == n {
                    break 'outer;
                }
            }
        }
    }
    assert_eq!(found.len(), n, "keys in one bucket");
    found
}

#[test]
fn a_bucket_holds_sixteen_flows_and_refuses_a_seventeenth() {
    let Some(t) = setup() else { return };
    let out = actions_from(&[Action::Output(5)], |p| (p == 5).then_some(DEV)).unwrap();
    let ways = INDEX_WAYS as usize;
    let frames = in_one_bucket(ways + 1);
    let keys: Vec<FlowKey> = frames.iter().map(|f| key_of(f)).collect();
    for (i, k) in keys[..ways].iter().enumerate() {
        t.insert(0, &FlowKey::ONES, k, out, i as u32).unwrap();
    }
    let (last, lastf) = (&keys[ways], &frames[ways]);
    let e = t.insert(0, &FlowKey::ONES, last, out, 99).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
    assert_eq!(t.flow_count(), ways);
    let hit = (xdp_action::REDIRECT, Reason::HitOutput);
    let miss = (xdp_action::PASS, Reason::Miss);
    for f in &frames[..ways] {
        assert_eq!(verdict(&t, f), hit);
    }
    assert_eq!(verdict(&t, lastf), miss);
    // Replacing an entry in place keeps the bucket's other flows.
    let drop = actions_from(&[], |_| None).unwrap();
    t.insert(0, &FlowKey::ONES, &keys[1], drop, 1).unwrap();
    assert_eq!(verdict(&t, &frames[1]), (xdp_action::DROP, Reason::HitDrop));
    assert_eq!(verdict(&t, &frames[0]), hit);
    // A removal frees a slot for the seventeenth.
    t.remove(0, &FlowKey::ONES, &keys[0]).unwrap();
    assert_eq!(verdict(&t, &frames[0]), miss);
    t.insert(0, &FlowKey::ONES, last, out, 99).unwrap();
    assert_eq!(verdict(&t, lastf), hit);
    assert_eq!(verdict(&t, &frames[0]), miss);
    assert_eq!(t.flow_count(), ways);
    assert!(
        t.remove(0, &FlowKey::ONES, &keys[0]).is_err(),
        "removed twice"
    );
    assert!(t.table().alone_marks_agree());
}

/// A lookup key with `i` in its address words.
fn numbered(i: u32) -> FpFlowKey {
    let mut k = FpFlowKey::zeroed();
    k.key[32..36].copy_from_slice(&i.to_be_bytes());
    k
}

#[test]
fn entries_are_packed_from_the_start_and_reused_after_a_removal() {
    let Some(t) = setup() else { return };
    let table = t.table();
    let idx: Vec<u32> = (0..1000)
        .map(|i| table.insert(numbered(i), FpFlowValue::zeroed()).unwrap())
        .collect();
    assert_eq!(idx, (0..1000).collect::<Vec<u32>>(), "entries not packed");
    assert!(table.remove(&numbered(500)));
    assert_eq!(table.insert(numbered(5000), FpFlowValue::zeroed()), Ok(500));
    assert_eq!(table.find(&numbered(5000)), Some(500));
    assert_eq!(table.find(&numbered(500)), None);
    // Replacing a flow keeps its entry.
    assert_eq!(table.insert(numbered(7), FpFlowValue::zeroed()), Ok(7));
}

#[test]
fn a_full_table_refuses_a_flow_by_saying_so() {
    let Some(t) = setup() else { return };
    let table = t.table();
    let mut refused_by_bucket = 0;
    for i in 0..TABLE_ENTRIES {
        match table.insert(numbered(i), FpFlowValue::zeroed()) {
            Ok(_) => {}
            Err(TableFull::Bucket) => refused_by_bucket += 1,
            Err(e) => panic!("flow {i}: {e:?}"),
        }
    }
    // 65,536 flows in 16,384 buckets of 16: a bucket past 16 is a one-in-a-million event;
    // a flow whose 15-bit signature another flow of its bucket has (~4 expected over the
    // whole fill, at two flows per bucket on average) is refused too.
    assert!(
        refused_by_bucket <= 24,
        "{refused_by_bucket} refused by their buckets"
    );
    // Then flows until the entries run out (those refused above left theirs free).
    let mut next = TABLE_ENTRIES;
    while table.insert(numbered(next), FpFlowValue::zeroed()) != Err(TableFull::Entries) {
        next += 1;
        assert!(
            next < 2 * TABLE_ENTRIES,
            "never refused for want of entries"
        );
    }
    assert_eq!(table.len(), TABLE_ENTRIES as usize);
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
    assert!(
        t.table().in_hot_line(&lookup_key(&f)),
        "held below with its hot line"
    );
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
    // 3,000 flows in 16,384 buckets of 16 slots: none is refused.
    assert_eq!(installed.len(), frames.len());
    assert_eq!(t.flow_count(), installed.len());
    for f in installed {
        assert_eq!(verdict(&t, f), (xdp_action::REDIRECT, Reason::HitOutput));
    }
    assert!(t.table().alone_marks_agree());
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
    assert_eq!(survivors.len(), 1500);
    assert_eq!(t.flow_count(), survivors.len());
    assert!(t.table().alone_marks_agree(), "after two writers at once");
    for f in survivors {
        assert_eq!(verdict(&t, f), (xdp_action::REDIRECT, Reason::HitOutput));
    }
    for frames in &sets {
        for f in frames.iter().step_by(2) {
            assert_eq!(verdict(&t, f).1, Reason::Miss, "a removed flow still hits");
        }
    }
}

#[test]
fn a_hot_line_serves_one_plain_flow_of_its_bucket_and_passes_to_the_next_when_it_goes() {
    let Some(t) = setup() else { return };
    let out = actions_from(&[Action::Output(5)], |p| (p == 5).then_some(DEV)).unwrap();
    let frames = in_one_bucket(3);
    let (a, b, stranger) = (&frames[0], &frames[1], &frames[2]);
    t.insert(0, &FlowKey::ONES, &key_of(a), out, 0).unwrap();
    t.insert(0, &FlowKey::ONES, &key_of(b), out, 1).unwrap();
    let table = t.table();
    assert!(
        table.in_hot_line(&lookup_key(a)),
        "the first flow takes the line"
    );
    assert!(!table.in_hot_line(&lookup_key(b)), "one flow a line");
    assert_eq!(table.hot_len(), 1);
    let hit = (xdp_action::REDIRECT, Reason::HitOutput);
    let miss = (xdp_action::PASS, Reason::Miss);
    assert_eq!(verdict(&t, a), hit);
    assert_eq!(verdict(&t, b), hit, "found through the bucket");
    // Same bucket, same line read, other ports: the line's key must be compared whole.
    assert_eq!(verdict(&t, stranger), miss);
    assert_eq!(
        t.stats(0).unwrap().packets,
        1,
        "a hot hit counts in the entry's slot"
    );
    // The line's flow goes: the bucket's other flow takes the line.
    t.remove(0, &FlowKey::ONES, &key_of(a)).unwrap();
    assert_eq!(verdict(&t, a), miss);
    assert!(t.table().in_hot_line(&lookup_key(b)), "the line passed on");
    assert_eq!(verdict(&t, b), hit);
    // Now the line's flow is the bucket's only one: other keys of the bucket are told
    // absent by the line alone, and come back when they are cached again.
    assert!(t.table().alone_marks_agree());
    assert_eq!(verdict(&t, a), miss);
    assert_eq!(verdict(&t, stranger), miss);
    t.insert(0, &FlowKey::ONES, &key_of(a), out, 0).unwrap();
    assert_eq!(verdict(&t, a), hit, "found through the bucket again");
    t.remove(0, &FlowKey::ONES, &key_of(a)).unwrap();
    t.remove(0, &FlowKey::ONES, &key_of(b)).unwrap();
    assert_eq!(verdict(&t, b), miss);
    assert_eq!(t.table().hot_len(), 0);
    assert!(t.table().alone_marks_agree());
}

#[test]
fn a_flow_whose_actions_become_rewrites_leaves_the_hot_line_and_is_rewritten() {
    let Some(t) = setup() else { return };
    let f = frame(4000, 53);
    let k = key_of(&f);
    let dev = |p: u32| (p == 5).then_some(DEV);
    let out = actions_from(&[Action::Output(5)], dev).unwrap();
    t.insert(0, &FlowKey::ONES, &k, out, 3).unwrap();
    assert!(t.table().in_hot_line(&lookup_key(&f)));
    let mac = [2, 0, 0, 0, 0, 9];
    let rewrite = actions_from(&[Action::SetEthDst(mac), Action::Output(5)], dev).unwrap();
    t.insert(0, &FlowKey::ONES, &k, rewrite, 3).unwrap();
    assert!(
        !t.table().in_hot_line(&lookup_key(&f)),
        "a rewrite is not plain"
    );
    // The bucket's one flow is not the line's: the line must not say it holds nothing.
    assert!(t.table().alone_marks_agree());
    let r = t.test_run(&f, LO).unwrap();
    assert_eq!(r.action, xdp_action::REDIRECT);
    assert_eq!(r.data[..6], mac, "the new actions ran, not the old line's");
    // Back to plain (a drop): the line is the flow's again, with the drop.
    let drop = actions_from(&[], dev).unwrap();
    t.insert(0, &FlowKey::ONES, &k, drop, 3).unwrap();
    assert!(t.table().in_hot_line(&lookup_key(&f)));
    assert_eq!(verdict(&t, &f), (xdp_action::DROP, Reason::HitDrop));
}

#[test]
fn ipv6_flows_are_found_through_their_bucket_not_a_hot_line() {
    let Some(mut t) = setup() else { return };
    let out = actions_from(&[Action::Output(5)], |p| (p == 5).then_some(DEV)).unwrap();
    let f = build(&FrameSpec::udp6(v6(1), v6(2), 1000, 53, 80));
    t.insert(0, &FlowKey::ONES, &key_of(&f), out, 4).unwrap();
    assert!(
        !t.table().in_hot_line(&lookup_key(&f)),
        "an IPv6 address fills word 5"
    );
    assert_eq!(t.table().hot_len(), 0);
    assert_eq!(verdict(&t, &f), (xdp_action::REDIRECT, Reason::HitOutput));
    // Under a mask that keeps only a /64 of the destination, the masked key's words 5 and
    // 7 are zero: the line serves it, and every address of that /64.
    let mut m64 = FlowKey::ZERO;
    m64.set_all(Field::InPort);
    m64.set_all(Field::EthType);
    m64.set(Field::Ipv6Dst, u128::MAX << 64);
    t.set_masks(&[(0, FlowKey::ONES), (1, m64)]).unwrap();
    let g = build(&FrameSpec::udp6(v6(1), v6(7), 1000, 53, 80));
    t.insert(1, &m64, &key_of(&g), out, 5).unwrap();
    assert!(t
        .table()
        .in_hot_line(&flow_key(1, &m64, &key_of(&g)).unwrap()));
    let same64 = build(&FrameSpec::udp6(v6(9), v6(8), 7, 8, 80));
    assert_eq!(
        verdict(&t, &same64),
        (xdp_action::REDIRECT, Reason::HitOutput)
    );
    assert_eq!(t.stats(5).unwrap().packets, 1);
    let other64 = FrameSpec::udp6(v6(9), "fd00:0:0:1::8".parse().unwrap(), 7, 8, 80);
    assert_eq!(
        verdict(&t, &build(&other64)),
        (xdp_action::PASS, Reason::Miss)
    );
}
