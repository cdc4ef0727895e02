//! The ct memo (a flow's second pass after `ct(table=)`, remembered): it answers an
//! established flow's packets in their first pass, and never forwards by what it
//! remembered once the connection, its state or the rules changed.

mod ct_common;

use ct_common::*;

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const SYN_ACK: u8 = 0x12;

/// Open UDP connections 0..n from port 1 and answer each from port 2.
fn open_udp(dp: &mut flowpath_datapath::Datapath, n: u16) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let out: Vec<Vec<u8>> = (0..n).map(|i| udp(1, 1000 + i, 2, 53)).collect();
    let back: Vec<Vec<u8>> = (0..n).map(|i| udp(2, 53, 1, 1000 + i)).collect();
    assert_eq!(send(dp, 1, &out).len(), n as usize);
    assert_eq!(send(dp, 2, &back).len(), n as usize);
    (out, back)
}

#[test]
fn established_flows_are_answered_by_the_memo() {
    let mut dp = datapath(security_group(1));
    let (out, back) = open_udp(&mut dp, 16);
    // One more round each way teaches the memo the established second passes.
    send(&mut dp, 1, &out);
    send(&mut dp, 2, &back);
    let before = dp.stats().ct_memo_hits;
    let sent = send(&mut dp, 1, &out);
    assert_eq!(sent, out.iter().map(|f| (2, f.clone())).collect::<Vec<_>>());
    let sent = send(&mut dp, 2, &back);
    assert_eq!(
        sent,
        back.iter().map(|f| (1, f.clone())).collect::<Vec<_>>()
    );
    assert_eq!(
        dp.stats().ct_memo_hits - before,
        32,
        "every packet answered by the memo"
    );
}

#[test]
fn a_flushed_connection_is_not_forwarded_by_the_memo() {
    let mut dp = datapath(security_group(0));
    let (_, back) = open_udp(&mut dp, 4);
    send(&mut dp, 2, &back);
    assert_eq!(send(&mut dp, 2, &back).len(), 4);
    assert_eq!(dp.tracker().flush(None), 4);
    // Port 2 may not open connections: with them gone, its packets are new, and dropped.
    assert_eq!(send(&mut dp, 2, &back), vec![]);
    assert_eq!(dp.tracker().len(), 0);
}

#[test]
fn a_rule_change_is_followed_at_once() {
    let store = security_group(0);
    let mut dp = datapath(store.clone());
    let (out, back) = open_udp(&mut dp, 4);
    send(&mut dp, 2, &back);
    assert_eq!(send(&mut dp, 2, &back).len(), 4);
    delete_established_from_2(&store, 0);
    dp.sync_rules();
    assert_eq!(
        send(&mut dp, 2, &back),
        vec![],
        "established from port 2 now dropped"
    );
    assert_eq!(send(&mut dp, 1, &out).len(), 4, "port 1's rule stays");
}

#[test]
fn a_segment_outside_the_window_is_invalid_not_remembered() {
    let mut dp = datapath(security_group(0));
    let syn = tcp(1, 40000, 2, 80, SYN, 1000, 0);
    let syn_ack = tcp(2, 80, 1, 40000, SYN_ACK, 5000, 1001);
    assert_eq!(send1(&mut dp, 1, &syn).len(), 1);
    assert_eq!(send1(&mut dp, 2, &syn_ack).len(), 1);
    let mut seq = 1001;
    for _ in 0..4 {
        let data = tcp(1, 40000, 2, 80, ACK, seq, 5001);
        assert_eq!(send1(&mut dp, 1, &data).len(), 1);
        seq += 6;
    }
    let hits = dp.stats().ct_memo_hits;
    assert!(
        hits > 0,
        "the established segments were answered by the memo"
    );
    // Far outside the receiver's window: +inv, which the security group drops.
    let wild = tcp(1, 40000, 2, 80, ACK, seq.wrapping_add(1 << 30), 5001);
    assert_eq!(send1(&mut dp, 1, &wild), vec![]);
    assert_eq!(dp.stats().ct_memo_hits, hits);
    // The flow goes on in its window, answered again once remembered again.
    let data = tcp(1, 40000, 2, 80, ACK, seq, 5001);
    assert_eq!(send(&mut dp, 1, &[data.clone(), data]).len(), 2);
}

#[test]
fn a_flow_keeps_its_order_when_its_state_changes_in_a_batch() {
    let mut dp = datapath(security_group(0));
    let (out, _) = open_udp(&mut dp, 1);
    send(&mut dp, 1, &out);
    // The memo knows the flow's established pass; flush, then one batch of the flow from
    // port 1: the first packet is new again (committed in its second pass), the rest are
    // new too in their first pass (the commit comes after): all go the same way.
    dp.tracker().flush(None);
    let batch: Vec<Vec<u8>> = (0..8u8)
        .map(|n| {
            let mut f = out[0].clone();
            f[18..20].copy_from_slice(&[0, n]);
            f
        })
        .collect();
    let sent = send(&mut dp, 1, &batch);
    assert_eq!(
        sent,
        batch.iter().map(|f| (2, f.clone())).collect::<Vec<_>>()
    );
}
