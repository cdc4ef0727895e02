//! The timestamps of written pcaps follow a rate, so a replay tool that keeps the file's
//! timing sends at it: back to back at 10 Gb/s line rate by default, or evenly at a given
//! packet rate. Read back with the foundation's reader and by hand, and with tshark's
//! `frame.time_delta` when it is installed.

mod common;

use std::path::{Path, PathBuf};

use flowpath_gen::pcap::{write_pcap_file_paced, Pace, LINE_RATE_BPS, START_SECS};
use flowpath_gen::spec::{Sizes, TrafficSpec};

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("flowpath-times-{}-{name}", std::process::id()))
}

/// (nanoseconds since START_SECS, frame length) of every record of a little-endian
/// nanosecond pcap.
fn stamps(bytes: &[u8]) -> Vec<(u64, usize)> {
    assert_eq!(bytes[..4], 0xa1b2_3c4du32.to_le_bytes(), "nanosecond pcap");
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let mut v = Vec::new();
    let mut o = 24;
    while o < bytes.len() {
        let ns = (u64::from(u32_at(o)) - START_SECS) * 1_000_000_000 + u64::from(u32_at(o + 4));
        let len = u32_at(o + 8) as usize;
        v.push((ns, len));
        o += 16 + len;
    }
    v
}

/// tshark's `frame.time_delta` of every frame, in nanoseconds, or None without tshark.
fn tshark_deltas(path: &Path) -> Option<Vec<u64>> {
    if !common::tshark_available() {
        return None;
    }
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-e", "frame.time_delta"])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let s: f64 = l.trim().parse().expect("a delta in seconds");
                (s * 1e9).round() as u64
            })
            .collect(),
    )
}

fn write(name: &str, sizes: Sizes, packets: u64, pace: Pace) -> (PathBuf, Vec<(u64, usize)>) {
    let spec = TrafficSpec {
        sizes,
        ..TrafficSpec::default()
    };
    let path = temp(name);
    let s = write_pcap_file_paced(&path, &mut spec.source().unwrap(), packets, pace).unwrap();
    assert_eq!(s.packets, packets);
    let bytes = std::fs::read(&path).unwrap();
    // The foundation's reader takes it whole.
    let cap = flowpath_base::capture::read_capture(&bytes[..]).unwrap();
    assert_eq!(cap.frames.len() as u64, packets);
    (path, stamps(&bytes))
}

#[test]
fn a_given_rate_spaces_the_packets_evenly() {
    for (rate, gap_ns) in [(1_000_000u64, 1000u64), (250_000, 4000), (100, 10_000_000)] {
        let (path, st) = write(
            &format!("{rate}.pcap"),
            Sizes::Imix,
            500,
            Pace::PacketsPerSecond(rate),
        );
        assert_eq!(st[0].0, 0, "the first packet at the start time");
        for (i, w) in st.windows(2).enumerate() {
            assert_eq!(w[1].0 - w[0].0, gap_ns, "{rate} pps, packet {}", i + 1);
        }
        if let Some(d) = tshark_deltas(&path) {
            assert_eq!(d.len(), 500);
            assert!(
                d[1..].iter().all(|&x| x == gap_ns),
                "tshark's deltas at {rate} pps: {:?}",
                &d[..5]
            );
        }
        let _ = std::fs::remove_file(&path);
    }
    // A rate that does not divide a second: each stamp is i/rate, rounded down, never drifting.
    let (path, st) = write("3.pcap", Sizes::Fixed(64), 10, Pace::PacketsPerSecond(3));
    for (i, (ns, _)) in st.iter().enumerate() {
        assert_eq!(*ns, i as u64 * 1_000_000_000 / 3);
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn by_default_packets_follow_each_other_at_line_rate() {
    let (path, st) = write("line.pcap", Sizes::Imix, 2000, Pace::LineRate);
    let mut ps = 0u64;
    for (i, w) in st.windows(2).enumerate() {
        // Frame + FCS + preamble, delimiter and gap, at 10 Gb/s.
        ps += (w[0].1 as u64 + 4 + 20) * 8 * 1_000_000_000_000 / LINE_RATE_BPS;
        assert_eq!(w[1].0, ps / 1000, "packet {}", i + 1);
        assert!(w[1].0 > w[0].0, "strictly increasing at packet {}", i + 1);
    }
    if let Some(d) = tshark_deltas(&path) {
        assert!(
            d[1..].iter().all(|&x| x > 0),
            "tshark sees every packet after the last"
        );
        // 64-byte frames: 67.2 ns apart.
        let small = st
            .windows(2)
            .zip(&d[1..])
            .filter(|(w, _)| w[0].1 == 60)
            .map(|(_, &x)| x)
            .collect::<Vec<_>>();
        assert!(
            !small.is_empty() && small.iter().all(|&x| (67..=68).contains(&x)),
            "{small:?}"
        );
    }
    let _ = std::fs::remove_file(&path);
}
