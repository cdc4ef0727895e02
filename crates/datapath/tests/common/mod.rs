//! What the datapath tests share: a rule set under which every IPv4 source is a megaflow
//! of its own, a UDP frame from a given source, and a batch of frames run through a
//! datapath.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use flowpath_base::{Packet, HEADROOM};
use flowpath_datapath::{CaptureSink, Datapath};
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// Everything IPv4 to port 2, under a never-hit rule on one source address whose mask
/// leaves out the top bit (not a prefix, so the tries cannot shorten it): every source
/// is a megaflow of its own.
pub fn every_source_its_own_megaflow() -> Arc<RuleStore> {
    let s = Arc::new(RuleStore::new(Backend::TupleSpace));
    let ip = || Match::any().exact(Field::EthType, 0x0800);
    s.add([
        RuleSpec::new(0, 200, ip().with(Field::Ipv4Src, 0x0102_0304, 0x7fff_ffff)),
        RuleSpec::new(0, 100, ip()).actions([Action::Output(2)]),
    ])
    .unwrap();
    s
}

/// A UDP frame from `src` to 10.0.0.1 (port 1000 to 53), after `HEADROOM` bytes of room:
/// make its packet with `Packet::new(&mut buf, HEADROOM, buf.len() - HEADROOM)`.
pub fn udp_from(src: Ipv4Addr) -> Vec<u8> {
    let f = build(&FrameSpec::udp4(
        src,
        Ipv4Addr::new(10, 0, 0, 1),
        1000,
        53,
        64,
    ));
    let mut buf = vec![0u8; HEADROOM + f.len()];
    buf[HEADROOM..].copy_from_slice(&f);
    buf
}

/// Run `frames` in on `port` as one batch into `sink`, each in a buffer with 128 bytes of
/// headroom and 64 of tailroom.
pub fn process<'f>(
    dp: &mut Datapath,
    port: u32,
    frames: impl IntoIterator<Item = &'f [u8]>,
    sink: &mut CaptureSink,
) {
    let frames: Vec<&[u8]> = frames.into_iter().collect();
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
        .zip(&frames)
        .map(|(b, f)| Packet::new(b, 128, f.len()))
        .collect();
    dp.process(port, &mut pkts, sink);
}
