//! The megaflow cache keeps the passes apart: a recirculated key (`recirc_id` set) never
//! matches a first-pass megaflow, whatever its mask leaves out, nor a first-pass key a
//! recirculated one; by one lookup, a batch, the signature check, and after revalidation.

use flowpath_datapath::megaflow::normalize_pass_mask;
use flowpath_datapath::MegaflowCache;
use flowpath_packet::ct::recirc_id;
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};

/// Every IPv4 packet to port 2: a megaflow that looks at nothing but the EtherType (the
/// slow path's mask has no `recirc_id`, whichever pass it classified).
fn store() -> RuleStore {
    let s = RuleStore::new(Backend::TupleSpace);
    s.add([
        RuleSpec::new(0, 1, Match::any().exact(Field::EthType, 0x0800))
            .actions([Action::Output(2)]),
    ])
    .unwrap();
    s
}

fn key(recirc_table: Option<u8>) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, 1);
    k.set(Field::EthType, 0x0800);
    k.set(Field::Ipv4Src, 0x0a00_0001);
    if let Some(t) = recirc_table {
        k.set(Field::RecircId, u128::from(recirc_id(t)));
        k.set(Field::CtState, 0x22);
    }
    k
}

#[test]
fn first_pass_and_recirculated_megaflows_never_match_each_others_keys() {
    let s = store();
    let p = s.snapshot();
    let mut c = MegaflowCache::new(64, 3);
    let (first, again, other) = (key(None), key(Some(1)), key(Some(2)));

    let f = c.install(&first, p.translate(&first), &p);
    assert_eq!(c.mask_of(f).get(Field::RecircId), 0);
    assert_eq!(
        c.lookup(&again),
        None,
        "a recirculated key misses first-pass megaflows"
    );
    let mut out = [0u32; 1];
    assert_eq!(c.lookup_batch_pass(&[again], 1, &mut out, true), 1);
    assert_eq!(
        c.verify(f, &again),
        None,
        "nor does the signature check let it in"
    );
    assert_eq!(c.verify_pass(f, &again, true), None);
    assert!(c.verify(f, &first).is_some());

    let r = c.install(&again, p.translate(&again), &p);
    assert_eq!(c.mask_of(r).get(Field::RecircId), u128::from(u32::MAX));
    assert_eq!(c.recirc_subtables(), 1);
    assert_eq!(c.lookup(&again), Some(r));
    assert_eq!(c.lookup_batch_pass(&[again], 1, &mut out, true), 0);
    assert_eq!(out[0], r);
    // Another recirculation table is another recirculated megaflow.
    assert_eq!(c.lookup(&other), None);
    // First-pass keys find the first-pass megaflow only.
    assert_eq!(c.lookup(&first), Some(f));
    assert_eq!(c.lookup_batch(&[first], 1, &mut out), 0);
    assert_eq!(out[0], f);
    assert_eq!(c.verify(r, &first), None);

    // Revalidation re-translates each from its stored key and keeps both.
    assert_eq!(c.revalidate(&p, &p), (2, 0));
    assert_eq!(c.lookup(&again), Some(r));
    assert_eq!(c.lookup(&first), Some(f));
}

#[test]
fn the_pass_decides_recirc_id_in_a_mask() {
    let mut m = FlowKey::ZERO;
    m.set_all(Field::EthType);
    assert!(!normalize_pass_mask(&key(None), &mut m));
    assert!(normalize_pass_mask(&key(Some(0)), &mut m));
    assert_eq!(m.get(Field::RecircId), u128::from(u32::MAX));
    assert!(normalize_pass_mask(&key(None), &mut m));
    assert_eq!(m.get(Field::RecircId), 0);
    assert_eq!(m.get(Field::EthType), 0xffff);
}
