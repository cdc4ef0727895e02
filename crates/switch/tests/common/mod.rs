//! What more than one of the switch's test files needs.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

pub mod certs;
pub mod openflow;

use flowpath_gen::{GeneratedPort, InMemorySource};
use flowpath_switch::pmd::WorkerHandle;
use flowpath_switch::{spawn_worker, Op, Request, Switch, WorkerConfig, WorkerPort};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// A worker forwarding `frames` (over and over) as received on port 1, a batch every
/// 200 µs, until `stop`.
pub fn paced_worker(
    sw: &Arc<Switch>,
    frames: Vec<Vec<u8>>,
    stop: &Arc<AtomicBool>,
) -> WorkerHandle {
    let port = GeneratedPort::new("gen", InMemorySource::new(frames));
    spawn_worker(
        sw,
        WorkerConfig {
            idle_sleep_max: Duration::ZERO,
            pace: Some(Duration::from_micros(200)),
            ..WorkerConfig::default()
        },
        vec![WorkerPort::new(1, 0, Box::new(port))],
        stop.clone(),
    )
    .unwrap()
}

/// The switch's flows as `dump` lists them (a failed dump fails the test).
pub fn dump(sw: &Switch) -> Vec<String> {
    let r = sw.handle(&Request {
        op: Op::Dump,
        text: String::new(),
    });
    assert!(r.error.is_none(), "{:?}", r.error);
    r.lines
}
