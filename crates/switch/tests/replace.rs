//! `replace` of 100,000 flows is atomic: a traffic thread running the real datapath
//! during the swap sees, batch by batch, only the old set's decisions and then only the
//! new set's — never a mix, never the old set again.

use flowpath_datapath::{Datapath, DatapathConfig, OutputSink};
use flowpath_gen::{FrameSpec, InMemorySource};
use flowpath_switch::{Op, Request, Switch, SwitchConfig};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const N: u32 = 100_000;

fn addr(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x0a00_0000 + i)
}

/// Old set: every address → port 1. New set: even addresses → port 2, odd ones are gone
/// (table miss: dropped).
fn flows_text(new: bool) -> String {
    let mut s = String::with_capacity(N as usize * 64);
    for i in 0..N {
        if new && i % 2 == 1 {
            continue;
        }
        let port = if new { 2 } else { 1 };
        s.push_str(&format!(
            "table=0,priority=100,ip,nw_dst={} actions=output:{port}\n",
            addr(i)
        ));
    }
    s
}

/// Records (port, IPv4 destination) of every packet sent.
struct BatchSink {
    outputs: Vec<(u32, u32)>,
}

impl OutputSink for BatchSink {
    fn output(&mut self, port: u32, data: &[u8]) {
        let dst = u32::from_be_bytes(data[30..34].try_into().unwrap());
        self.outputs.push((port, dst));
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Old,
    New,
}

#[test]
fn replace_is_atomic_for_traffic() {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let r = sw.handle(&Request {
        op: Op::Add,
        text: flows_text(false),
    });
    assert!(r.error.is_none(), "{:?}", r.error);
    let v_old = r.version;

    // 4,096 flows spread over the address range, even and odd.
    let templates: Vec<Vec<u8>> = (0..4096u32)
        .map(|i| {
            flowpath_gen::build(&FrameSpec::udp4(
                Ipv4Addr::new(192, 168, 0, 1),
                addr((i * 24_413) % N),
                1000 + (i % 100) as u16,
                53,
                64,
            ))
        })
        .collect();
    let store = sw.store().clone();
    let swapped = Arc::new(AtomicBool::new(false));
    let traffic = {
        let swapped = swapped.clone();
        std::thread::spawn(move || {
            let mut dp = Datapath::new(store, DatapathConfig::default());
            let mut src = InMemorySource::new(templates);
            let mut sink = BatchSink {
                outputs: Vec::new(),
            };
            let mut seen = Vec::new();
            let mut after = 0;
            // Run until well after the swap has been published.
            while after < 2_000 {
                if swapped.load(Ordering::Acquire) {
                    after += 1;
                }
                let mut batch = src.lend(32);
                let dsts: Vec<u32> = batch
                    .iter()
                    .map(|p| u32::from_be_bytes(p.data()[30..34].try_into().unwrap()))
                    .collect();
                sink.outputs.clear();
                dp.process(5, &mut batch, &mut sink);
                drop(batch);
                let old: Vec<(u32, u32)> = dsts.iter().map(|&d| (1, d)).collect();
                let new: Vec<(u32, u32)> = dsts
                    .iter()
                    .filter(|&&d| (d - 0x0a00_0000) % 2 == 0)
                    .map(|&d| (2, d))
                    .collect();
                let verdict = if sink.outputs == old {
                    Seen::Old
                } else if sink.outputs == new {
                    Seen::New
                } else {
                    panic!(
                        "a batch matches neither rule set: {:?} for {dsts:?}",
                        sink.outputs
                    );
                };
                seen.push(verdict);
            }
            seen
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let r = sw.handle(&Request {
        op: Op::Replace,
        text: flows_text(true),
    });
    swapped.store(true, Ordering::Release);
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.version, v_old + 1, "one replace is one version");
    let seen = traffic.join().unwrap();

    let first_new = seen
        .iter()
        .position(|s| *s == Seen::New)
        .expect("the new set was seen");
    assert!(first_new > 0, "the old set was seen first");
    assert!(
        seen[first_new..].iter().all(|s| *s == Seen::New),
        "the old set came back after the new one"
    );
    assert_eq!(sw.store().snapshot().rules().count(), N as usize / 2);
}
