//! What the connection-tracking tests share: the security-group pipeline (untracked IP
//! is tracked and recirculated; new connections from port 1 are committed and forwarded,
//! established ones forwarded to the other port), real UDP and TCP frames, and a datapath
//! that runs batches of them.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use flowpath_base::Packet;
use flowpath_datapath::{CaptureSink, Datapath, DatapathConfig, MissLimits};
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::ct::state::{ESTABLISHED, NEW, TRACKED};
use flowpath_packet::ct::CtZoneSrc;
use flowpath_packet::{Action, CtId, CtSpec, Field};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// `ct(...)` as an action.
pub fn ct(spec: CtSpec) -> Action {
    Action::Ct(CtId::intern(spec).expect("few ct specs"))
}

/// `ct(table=T,zone=1)`.
pub fn ct_recirc(table: u8) -> Action {
    ct(CtSpec {
        zone: CtZoneSrc::Value(1),
        table: Some(table),
        ..CtSpec::new()
    })
}

/// `ct(commit,zone=1)`.
pub fn ct_commit() -> Action {
    ct(CtSpec {
        commit: true,
        zone: CtZoneSrc::Value(1),
        ..CtSpec::new()
    })
}

pub fn ip() -> Match {
    Match::any().exact(Field::EthType, 0x0800)
}

/// `ip` with the `ct_state` flags `on` set and `off` clear.
pub fn ct_state(on: u8, off: u8) -> Match {
    ip().with(Field::CtState, u128::from(on), u128::from(on | off))
}

/// The security group: table 0 sends untracked IP through `ct(table=target,zone=1)`; in
/// `target`, `+trk+new` from port 1 is committed and sent to port 2, `+trk+est` goes to
/// the other port, and anything else (new from port 2, invalid) is dropped. With target 0
/// the whole walk is in table 0 (the untracked rule does not match a tracked key), so
/// the decisions do not depend on where a recirculated walk starts.
pub fn security_group(target: u8) -> Arc<RuleStore> {
    let s = Arc::new(RuleStore::new(Backend::TupleSpace));
    let trk_in = |on: u8, port: u32| ct_state(TRACKED | on, 0).exact(Field::InPort, port as u128);
    s.add([
        RuleSpec::new(0, 100, ct_state(0, TRACKED)).actions([ct_recirc(target)]),
        RuleSpec::new(target, 90, trk_in(NEW, 1)).actions([ct_commit(), Action::Output(2)]),
        RuleSpec::new(target, 90, trk_in(ESTABLISHED, 1)).actions([Action::Output(2)]),
        RuleSpec::new(target, 90, trk_in(ESTABLISHED, 2)).actions([Action::Output(1)]),
    ])
    .unwrap();
    s
}

/// Delete [`security_group`]'s rule (in `table`) that forwards established traffic from
/// port 2.
pub fn delete_established_from_2(store: &RuleStore, table: u8) {
    let est2 = ct_state(TRACKED | ESTABLISHED, 0).exact(Field::InPort, 2);
    store
        .apply(vec![flowpath_pipeline::Change::DeleteStrict {
            table,
            priority: 90,
            matches: est2,
        }])
        .unwrap();
}

/// A datapath over `store` with every flow cached in the EMC and no miss budget (what it
/// drops depends on timing).
pub fn datapath(store: Arc<RuleStore>) -> Datapath {
    datapath_with(store, true, 0)
}

/// [`datapath`] with the EMC on or off and `smc_entries` of signature-match cache.
pub fn datapath_with(store: Arc<RuleStore>, emc: bool, smc_entries: usize) -> Datapath {
    Datapath::new(
        store,
        DatapathConfig {
            emc,
            emc_insert_inv_prob: 1,
            smc_entries,
            megaflow_max: 4096,
            miss: MissLimits::unbudgeted(),
            ..DatapathConfig::default()
        },
    )
}

pub fn addr(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, last)
}

/// A UDP frame from 10.0.0.`src`:`sport` to 10.0.0.`dst`:`dport`.
pub fn udp(src: u8, sport: u16, dst: u8, dport: u16) -> Vec<u8> {
    build(&FrameSpec::udp4(addr(src), addr(dst), sport, dport, 64))
}

/// A TCP segment with `flags`, sequence number `seq` and acknowledgement `ack`, its
/// checksum computed.
pub fn tcp(src: u8, sport: u16, dst: u8, dport: u16, flags: u8, seq: u32, ack: u32) -> Vec<u8> {
    let mut f = build(&FrameSpec::tcp4(
        addr(src),
        addr(dst),
        sport,
        dport,
        flags,
        64,
    ));
    let t = 14 + 20;
    f[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
    f[t + 8..t + 12].copy_from_slice(&ack.to_be_bytes());
    let tcp_len = u16::from_be_bytes([f[16], f[17]]) as usize - 20;
    f[t + 16..t + 18].copy_from_slice(&[0, 0]);
    // The pseudo-header (addresses, protocol, length) and the segment, one's complement.
    let mut sum: u32 = 6 + tcp_len as u32;
    for c in f[26..34].chunks(2).chain(f[t..t + tcp_len].chunks(2)) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[t + 16..t + 18].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f
}

/// Run `frames` in on `port` as one batch; what left, in order.
pub fn send(dp: &mut Datapath, port: u32, frames: &[Vec<u8>]) -> Vec<(u32, Vec<u8>)> {
    let mut bufs: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut b = vec![0u8; 128 + f.len() + 64];
            b[128..128 + f.len()].copy_from_slice(f);
            b
        })
        .collect();
    let mut pkts: Vec<Packet<'_>> = bufs
        .iter_mut()
        .zip(frames)
        .map(|(b, f)| Packet::new(b, 128, f.len()))
        .collect();
    let mut sink = CaptureSink::default();
    dp.process(port, &mut pkts, &mut sink);
    sink.packets
}

/// [`send`] for one frame.
pub fn send1(dp: &mut Datapath, port: u32, frame: &[u8]) -> Vec<(u32, Vec<u8>)> {
    send(dp, port, &[frame.to_vec()])
}

/// Live megaflows of first passes and of recirculated ones.
pub fn megaflows_by_pass(dp: &Datapath) -> (usize, usize) {
    let (mut first, mut recirc) = (0, 0);
    for (_, v) in dp.megaflow_entries() {
        if v.key().get(Field::RecircId) == 0 {
            first += 1;
        } else {
            recirc += 1;
        }
    }
    (first, recirc)
}
