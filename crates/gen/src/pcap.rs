//! Pcap files: write what a source hands out (tcpdump and tshark read them), read any
//! capture back (pcap or pcapng, Ethernet) and replay it from memory in a loop.
//!
//! Written files are classic little-endian pcap with nanosecond timestamps and link type
//! Ethernet; frames carry no FCS (as captures made by the kernel). Timestamps are
//! synthetic and deterministic ([`Pace`]): the first packet at 2024-01-01T00:00:00Z, then
//! each packet after the previous one as if sent back to back at 10 Gb/s (frame + FCS +
//! preamble + gap: 67.2 ns for a 64-byte frame), or evenly at a given packet rate. So a
//! replay tool that keeps the file's timing (`tcpreplay` without `--topspeed`) sends at
//! that rate, and the same source, seeded alike, always writes the same bytes.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use flowpath_packet::{parse, FlowKey, ParseOptions};
use serde::Serialize;

use crate::build::FCS_LEN;
use crate::source::{InMemorySource, SLOT_TAILROOM};
use flowpath_base::capture::PcapFileWriter;
pub use flowpath_base::capture::{read_capture, read_capture_file, Capture};
use flowpath_base::BATCH;

/// Timestamp of the first packet written: 2024-01-01T00:00:00Z.
pub const START_SECS: u64 = 1_704_067_200;
/// Line rate the synthetic timestamps assume, in bits per second.
pub const LINE_RATE_BPS: u64 = 10_000_000_000;
/// Preamble, start-of-frame delimiter and inter-frame gap, in bytes.
const WIRE_OVERHEAD: u64 = 20;
/// Largest arena a replayed capture may take.
pub const MAX_REPLAY_ARENA: usize = 2 << 30;

/// What a stream of frames held.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub packets: u64,
    /// Sum of the frame lengths as stored (without FCS).
    pub bytes: u64,
    /// Distinct flow keys, as flowpath's parser sees them (VXLAN: tunnel + inner fields).
    pub distinct_flows: u64,
    /// Packets the generator stamped as new flows while writing (0 for a capture read).
    pub new_flows: u64,
    /// Frames the parser rejects (not counted as flows).
    pub unparsed: u64,
    /// Packets per frame size, FCS included (RFC 2544: length in the file + 4).
    pub sizes: BTreeMap<usize, u64>,
}

/// Builds a [`Summary`] one frame at a time.
#[derive(Default)]
pub struct Tally {
    summary: Summary,
    flows: HashSet<u64>,
    key: FlowKey,
}

impl Tally {
    pub fn new() -> Tally {
        Tally::default()
    }

    /// Count one frame (without FCS).
    pub fn add(&mut self, frame: &[u8]) {
        let s = &mut self.summary;
        s.packets += 1;
        s.bytes += frame.len() as u64;
        *s.sizes.entry(frame.len() + FCS_LEN).or_insert(0) += 1;
        if parse(frame, 0, &ParseOptions::default(), &mut self.key).is_ok() {
            // A 64-bit hash of the 104-byte key keeps the set small; the chance of any
            // collision among n flows is about n^2 / 2^65 (3e-4 at 100 million flows).
            let mut h = DefaultHasher::new();
            self.key.bytes().hash(&mut h);
            self.flows.insert(h.finish());
        } else {
            s.unparsed += 1;
        }
    }

    pub fn finish(mut self) -> Summary {
        self.summary.distinct_flows = self.flows.len() as u64;
        self.summary
    }
}

/// How far apart the timestamps of written packets are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pace {
    /// Back to back at [`LINE_RATE_BPS`]: each packet one wire time of the one before
    /// (its frame, FCS, preamble and gap), so the file's rate is line rate for its sizes.
    #[default]
    LineRate,
    /// Evenly at this many packets per second (at least 1).
    PacketsPerSecond(u64),
}

impl Pace {
    /// The timestamp of packet `i` (from 0) of a file whose packets so far took `wire_ps`
    /// picoseconds on the wire, in picoseconds from the first.
    fn at(self, i: u64, wire_ps: u64) -> u128 {
        match self {
            Pace::LineRate => u128::from(wire_ps),
            Pace::PacketsPerSecond(r) => u128::from(i) * 1_000_000_000_000 / u128::from(r.max(1)),
        }
    }
}

/// Write `packets` packets from `source` (as its `lend` hands them out, churn
/// included) to `out` as a pcap file, and summarise them. Timestamps at line rate
/// ([`Pace::LineRate`]).
pub fn write_pcap<W: Write>(
    out: W,
    source: &mut InMemorySource,
    packets: u64,
) -> io::Result<Summary> {
    write_pcap_paced(out, source, packets, Pace::LineRate)
}

/// [`write_pcap`] with the timestamps `pace` gives.
pub fn write_pcap_paced<W: Write>(
    out: W,
    source: &mut InMemorySource,
    packets: u64,
    pace: Pace,
) -> io::Result<Summary> {
    let mut w = PcapFileWriter::new(out, true)?;
    let mut tally = Tally::new();
    let new0 = source.new_flows();
    // Packets written, and picoseconds on the wire they took at line rate.
    let (mut i, mut wire_ps) = (0u64, 0u64);
    let mut left = packets;
    while left > 0 {
        let b = source.lend(left.min(BATCH as u64) as usize);
        for p in b.iter() {
            let data = p.data();
            let ns = (pace.at(i, wire_ps) / 1000) as u64;
            w.write(
                Duration::from_secs(START_SECS) + Duration::from_nanos(ns),
                data,
            )?;
            tally.add(data);
            let wire = (data.len() + FCS_LEN) as u64 + WIRE_OVERHEAD;
            wire_ps += wire * 8 * 1_000_000_000_000 / LINE_RATE_BPS;
            i += 1;
        }
        left -= b.len() as u64;
    }
    w.into_inner().flush()?;
    let mut s = tally.finish();
    s.new_flows = source.new_flows() - new0;
    Ok(s)
}

/// [`write_pcap`] to a file (created or truncated).
pub fn write_pcap_file(
    path: impl AsRef<Path>,
    source: &mut InMemorySource,
    packets: u64,
) -> io::Result<Summary> {
    write_pcap_file_paced(path, source, packets, Pace::LineRate)
}

/// [`write_pcap_paced`] to a file (created or truncated).
pub fn write_pcap_file_paced(
    path: impl AsRef<Path>,
    source: &mut InMemorySource,
    packets: u64,
    pace: Pace,
) -> io::Result<Summary> {
    let f = BufWriter::with_capacity(1 << 20, File::create(path)?);
    write_pcap_paced(f, source, packets, pace)
}

/// What the generator adds to a [`Capture`] read by the foundation: a summary of its
/// flows, and a looping source of its frames.
pub trait CaptureReplay {
    /// Summarise the frames (flows as flowpath's parser sees them).
    fn summary(&self) -> Summary;
    /// A source that loops over the frames in file order: see [`replay_source`].
    ///
    /// # Errors
    /// If the capture holds no frames, or its slots would take more than
    /// [`MAX_REPLAY_ARENA`] bytes.
    fn into_source(self) -> io::Result<InMemorySource>;
}

impl CaptureReplay for Capture {
    fn summary(&self) -> Summary {
        let mut t = Tally::new();
        for f in &self.frames {
            t.add(f);
        }
        t.finish()
    }

    fn into_source(self) -> io::Result<InMemorySource> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        if self.frames.is_empty() {
            return Err(bad("the capture holds no packets".into()));
        }
        let longest = self.frames.iter().map(Vec::len).max().unwrap_or(0);
        let slot = (flowpath_base::HEADROOM + longest + SLOT_TAILROOM).div_ceil(64) * 64;
        let slots = replay_slots(self.frames.len());
        if slots.saturating_mul(slot) > MAX_REPLAY_ARENA {
            return Err(bad(format!(
                "{} frames of up to {longest} bytes need more than {} MiB to replay from memory",
                self.frames.len(),
                MAX_REPLAY_ARENA >> 20
            )));
        }
        Ok(replay_source(self.frames))
    }
}

/// Slots for replaying `n` frames: whole copies of the sequence, at least [`BATCH`].
fn replay_slots(n: usize) -> usize {
    n * BATCH.div_ceil(n)
}

/// A source that hands out `frames` in order, looping forever, byte for byte (one
/// template per frame; the sequence is repeated whole until there are at least
/// [`BATCH`] slots, so full batches are possible). Churn and lifetimes work as on any
/// source.
///
/// # Panics
/// If `frames` is empty.
pub fn replay_source(frames: Vec<Vec<u8>>) -> InMemorySource {
    let n = frames.len();
    assert!(n > 0, "nothing to replay");
    let slots = (0..replay_slots(n)).map(|i| (i % n) as u32).collect();
    InMemorySource::from_slot_templates(frames, slots)
}

/// Read a capture file and make a looping source of it ([`CaptureReplay::into_source`]).
pub fn replay_pcap_file(path: impl AsRef<Path>) -> io::Result<InMemorySource> {
    read_capture_file(path)?.into_source()
}
