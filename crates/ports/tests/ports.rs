//! Ports that need no privileges: in-memory, generated, pcap, and the tracing and
//! fault-injecting wrappers.

use flowpath_gen::{GeneratedPort, InMemorySource};
use flowpath_packet::{parse, FlowKey, ParseOptions};
use flowpath_ports::pcap::PcapPort;
use flowpath_ports::{
    FaultConfig, FaultInjector, MemoryPort, PacketBatch, PcapTracer, Port, BATCH, MAX_FRAME,
};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("flowpath-ports-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Frame `i`: distinct contents and lengths (60..=1514), sequence number in bytes 14..18.
fn frame(i: u32) -> Vec<u8> {
    let len = 60 + (i as usize * 37) % (1514 - 60 + 1);
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..18].copy_from_slice(&i.to_be_bytes());
    for (j, b) in f[18..].iter_mut().enumerate() {
        *b = (i as usize * 7 + j) as u8;
    }
    f
}

fn frames(n: u32) -> Vec<Vec<u8>> {
    (0..n).map(frame).collect()
}

/// Receive from `port` until `want` frames arrived or `polls` calls returned nothing new.
fn drain(port: &mut impl Port, want: usize, polls: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut b = PacketBatch::new();
    let mut idle = 0;
    while out.len() < want && idle < polls {
        b.clear();
        let n = port.recv(&mut b).unwrap();
        assert_eq!(n, b.len(), "recv returns what it appended");
        if n == 0 {
            idle += 1;
        } else {
            idle = 0;
        }
        out.extend((0..b.len()).map(|i| b.frame(i).to_vec()));
    }
    out
}

#[test]
fn memory_port_round_trip() {
    let (mut port, h) = MemoryPort::new("m0");
    let sent = frames(100);
    h.inject_many(&sent);
    h.inject(&vec![0u8; MAX_FRAME + 1]);
    assert_eq!(h.pending(), 101);
    let got = drain(&mut port, 101, 3);
    assert_eq!(got, sent, "every injected frame, byte-exact and in order");
    let s = port.stats();
    assert_eq!(s.rx_packets, 100);
    assert_eq!(s.rx_dropped, 1, "the oversized frame is counted");
    assert_eq!(s.rx_bytes, sent.iter().map(|f| f.len() as u64).sum::<u64>());

    // The batch takes at most BATCH at a time; the rest waits.
    h.inject_many(frames(BATCH as u32 + 5));
    let mut b = PacketBatch::new();
    assert_eq!(port.recv(&mut b).unwrap(), BATCH);
    assert_eq!(h.pending(), 5);

    for f in &got {
        assert!(port.send(f));
    }
    port.flush().unwrap();
    assert_eq!(h.sent_len(), 100);
    assert_eq!(h.take_sent(), sent);
    assert_eq!(h.sent_len(), 0);
    assert_eq!(port.stats().tx_packets, 100);
    assert_eq!(port.info().kind, "memory");
}

#[test]
fn generated_port_delivers_valid_frames() {
    let src = InMemorySource::udp4_flows(100, 64);
    let templates: Vec<Vec<u8>> = (0..100).map(|i| src.template(i).to_vec()).collect();
    let mut port = GeneratedPort::new("gen", src);
    let mut b = PacketBatch::new();
    let mut key = FlowKey::default();
    let mut seen = 0;
    for _ in 0..10 {
        b.clear();
        let n = port.recv(&mut b).unwrap();
        assert_eq!(n, BATCH);
        for i in 0..n {
            let f = b.frame(i);
            assert_eq!(f.len(), 60, "64 bytes with FCS");
            parse(f, 0, &ParseOptions::default(), &mut key).expect("a valid UDP frame");
            assert_eq!(
                f,
                &templates[seen % 100][..],
                "the source's frames, in order"
            );
            seen += 1;
        }
    }
    // Appending to a partly full batch takes only the room left.
    b.clear();
    assert!(b.push(&[0; 60]));
    assert_eq!(port.recv(&mut b).unwrap(), BATCH - 1);
    assert!(port.send(b.frame(0)));
    let s = port.stats();
    assert_eq!(s.rx_packets, 10 * BATCH as u64 + BATCH as u64 - 1);
    assert_eq!(s.rx_bytes, s.rx_packets * 60);
    assert_eq!((s.tx_packets, s.tx_bytes), (1, 60));
    assert_eq!(port.info().kind, "generator");
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    flowpath_gen::read_capture_file(path).unwrap().frames
}

#[test]
fn pcap_port_replays_and_writes() {
    let dir = TempDir::new("pcap");
    let rx = dir.path("rx.pcap");
    let tx = dir.path("tx.pcap");
    let mut src = InMemorySource::udp4_flows(50, 128);
    flowpath_gen::write_pcap_file(&rx, &mut src, 1000).unwrap();
    let want = read_pcap(&rx);
    assert_eq!(want.len(), 1000);

    let mut port = PcapPort::open("p", Some(&rx), Some(&tx)).unwrap();
    let got = drain(&mut port, usize::MAX, 3);
    assert_eq!(got, want, "the file replayed once, byte-exact");
    assert!(port.rx_done());
    let mut b = PacketBatch::new();
    assert_eq!(port.recv(&mut b).unwrap(), 0, "once only");
    assert_eq!(port.stats().rx_packets, 1000);

    let out = frames(300);
    for f in &out {
        assert!(port.send(f));
    }
    port.flush().unwrap();
    assert_eq!(read_pcap(&tx), out, "flush writes through");
    port.send(&frame(300));
    drop(port);
    assert_eq!(read_pcap(&tx).len(), 301, "drop flushes");

    // Without a tx file, sent frames are dropped and counted.
    let mut port = PcapPort::open("p", Some(&rx), None).unwrap();
    assert!(!port.send(&frame(0)));
    assert_eq!(port.stats().tx_dropped, 1);
}

/// An rx file cut short (inside a record header, inside packet data) replays its complete
/// packets, then ends without failing the port; its info says it was cut short.
#[test]
fn pcap_port_replays_a_capture_cut_short() {
    let dir = TempDir::new("pcap-cut");
    let whole = dir.path("whole.pcap");
    let mut src = InMemorySource::udp4_flows(5, 100);
    flowpath_gen::write_pcap_file(&whole, &mut src, 10).unwrap();
    let bytes = std::fs::read(&whole).unwrap();
    let want = read_pcap(&whole);
    let record = (bytes.len() - 24) / 10;
    for (name, cut) in [
        ("in-header", 24 + 3 * record + 5),
        ("in-data", 24 + 7 * record + 40),
    ] {
        let path = dir.path(&format!("{name}.pcap"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let n = (cut - 24) / record;
        let mut port = PcapPort::open("p", Some(&path), None).unwrap();
        let got = drain(&mut port, usize::MAX, 3);
        assert_eq!(got[..], want[..n], "{name}: the complete packets");
        assert!(port.rx_done());
        assert_eq!(port.stats().errors, 0, "{name}");
        assert!(
            port.info().detail.contains("cut short"),
            "{}",
            port.info().detail
        );
    }
}

#[test]
fn pcap_port_refuses_other_link_types_naming_the_file() {
    use pcap_file::pcap::{PcapHeader, PcapWriter};
    let dir = TempDir::new("pcap-link");
    let path = dir.path("raw-ip.pcap");
    let header = PcapHeader {
        datalink: pcap_file::DataLink::RAW,
        ..PcapHeader::default()
    };
    let w = PcapWriter::with_header(std::fs::File::create(&path).unwrap(), header).unwrap();
    drop(w);
    let err = PcapPort::open("p", Some(&path), None)
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(msg.contains("raw-ip.pcap"), "{msg}");
    assert!(msg.contains("Ethernet"), "{msg}");
    let err = PcapPort::open("p", Some(&dir.path("missing.pcap")), None)
        .err()
        .expect("missing file");
    assert!(err.to_string().contains("missing.pcap"), "{err}");
}

#[test]
fn tracer_records_rx_and_tx_in_order() {
    let dir = TempDir::new("trace");
    let path = dir.path("trace.pcap");
    let (inner, h) = MemoryPort::new("m");
    let mut t = PcapTracer::new(inner, &path).unwrap();
    let mut expect = Vec::new();
    let mut b = PacketBatch::new();
    for round in 0..20u32 {
        let rx: Vec<Vec<u8>> = (0..5).map(|i| frame(round * 100 + i)).collect();
        h.inject_many(&rx);
        b.clear();
        // A frame already in the batch is not the port's and is not recorded.
        b.push(&[0xee; 60]);
        assert_eq!(t.recv(&mut b).unwrap(), 5);
        expect.extend(rx);
        for i in 0..3 {
            let f = frame(round * 100 + 50 + i);
            assert!(t.send(&f));
            expect.push(f);
        }
        t.flush().unwrap();
    }
    assert_eq!(h.sent_len(), 60, "the inner port got every sent frame");
    drop(t);
    assert_eq!(read_pcap(&path), expect);

    // Timestamps are present and do not go backwards.
    let data = std::fs::read(&path).unwrap();
    let mut r = pcap_file::pcap::PcapReader::new(&data[..]).unwrap();
    let mut last = std::time::Duration::ZERO;
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        assert!(p.timestamp >= last && p.timestamp.as_secs() > 1_600_000_000);
        last = p.timestamp;
    }
}

fn faulty(cfg: FaultConfig) -> (FaultInjector<MemoryPort>, flowpath_ports::MemoryPortHandle) {
    let (inner, h) = MemoryPort::new("m");
    (FaultInjector::new(inner, cfg), h)
}

#[test]
fn fault_drop_all_delivers_nothing() {
    let (mut p, h) = faulty(FaultConfig {
        drop: 1.0,
        seed: 1,
        ..FaultConfig::default()
    });
    h.inject_many(frames(500));
    assert!(drain(&mut p, 1, 30).is_empty());
    assert_eq!(h.pending(), 0, "all were received, then dropped");
    for f in frames(10) {
        assert!(!p.send(&f));
    }
    assert_eq!(h.sent_len(), 0);
    let s = p.stats();
    assert_eq!((s.rx_packets, s.rx_dropped, s.tx_dropped), (500, 500, 10));
}

#[test]
fn fault_drop_share_is_close_and_counted() {
    let cfg = FaultConfig {
        drop: 0.3,
        seed: 42,
        ..FaultConfig::default()
    };
    let run = |cfg: FaultConfig| {
        let (mut p, h) = faulty(cfg);
        let sent = frames(10_000);
        h.inject_many(&sent);
        let got = drain(&mut p, usize::MAX, 3);
        (got, p.stats())
    };
    let (got, s) = run(cfg.clone());
    let dropped = 10_000 - got.len() as u64;
    // Binomial(10000, 0.3): sd ~46; 4 sd either side.
    assert!((2815..=3185).contains(&dropped), "{dropped} dropped");
    assert_eq!(s.rx_dropped, dropped);
    assert_eq!(s.rx_packets, 10_000);
    // Survivors arrive intact and in order.
    let mut last = None;
    for f in &got {
        let i = u32::from_be_bytes(f[14..18].try_into().unwrap());
        assert_eq!(f, &frame(i));
        assert!(last.is_none_or(|l| l < i));
        last = Some(i);
    }
    // The same seed makes the same decisions; another seed different ones.
    assert_eq!(run(cfg.clone()).0, got);
    assert_ne!(run(FaultConfig { seed: 43, ..cfg }).0, got);

    // Sent frames too.
    let (mut p, h) = faulty(FaultConfig {
        drop: 0.3,
        seed: 7,
        ..FaultConfig::default()
    });
    let ok = frames(10_000).iter().filter(|f| p.send(f)).count() as u64;
    assert_eq!(h.sent_len() as u64, ok);
    assert!((2815..=3185).contains(&(10_000 - ok)), "{ok} sent");
    assert_eq!(p.stats().tx_dropped, 10_000 - ok);
}

fn bit_distance(a: &[u8], b: &[u8]) -> u32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[test]
fn fault_corrupt_flips_exactly_one_bit() {
    let (mut p, h) = faulty(FaultConfig {
        corrupt: 0.5,
        seed: 3,
        ..FaultConfig::default()
    });
    let sent = frames(2000);
    h.inject_many(&sent);
    let got = drain(&mut p, usize::MAX, 3);
    assert_eq!(got.len(), 2000, "corruption drops nothing");
    let dist: Vec<u32> = got
        .iter()
        .zip(&sent)
        .map(|(g, s)| bit_distance(g, s))
        .collect();
    assert!(dist.iter().all(|&d| d <= 1), "at most one bit per frame");
    let corrupted = dist.iter().filter(|&&d| d == 1).count();
    assert!((850..=1150).contains(&corrupted), "{corrupted} corrupted");
    assert_eq!(p.injected().2, corrupted as u64);

    for f in &sent {
        assert!(p.send(f));
    }
    let out = h.take_sent();
    let d: Vec<u32> = out
        .iter()
        .zip(&sent)
        .map(|(o, s)| bit_distance(o, s))
        .collect();
    assert!(d.iter().all(|&d| d <= 1));
    assert_eq!(d.iter().filter(|&&d| d == 1).count() as u64, p.injected().3);
    assert!(p.injected().3 > 850);
}

#[test]
fn fault_delay_delivers_every_frame_once() {
    let (mut p, h) = faulty(FaultConfig {
        delay: 0.4,
        delay_polls: 5,
        seed: 9,
        ..FaultConfig::default()
    });
    let sent = frames(3000);
    let mut got = Vec::new();
    let mut b = PacketBatch::new();
    // Trickle frames in so delayed ones overtake later arrivals.
    for chunk in sent.chunks(10) {
        h.inject_many(chunk);
        b.clear();
        p.recv(&mut b).unwrap();
        got.extend((0..b.len()).map(|i| b.frame(i).to_vec()));
    }
    assert!(p.held() > 0, "some frames are held back");
    for _ in 0..1000 {
        if p.held() == 0 && h.pending() == 0 {
            break;
        }
        b.clear();
        p.recv(&mut b).unwrap();
        got.extend((0..b.len()).map(|i| b.frame(i).to_vec()));
    }
    assert_eq!(p.held(), 0);
    assert_eq!(got.len(), 3000);
    assert_ne!(
        got, sent,
        "delayed frames arrive later than their successors"
    );
    let mut sorted = got.clone();
    sorted.sort_by_key(|f| u32::from_be_bytes(f[14..18].try_into().unwrap()));
    assert_eq!(sorted, sent, "each frame exactly once, intact");
    let delayed = p.injected().4;
    assert!((1000..=1400).contains(&delayed), "{delayed} delayed");
    assert_eq!(p.stats().rx_dropped, 0);
}

#[test]
fn fault_delay_holds_for_the_configured_polls() {
    let (mut p, h) = faulty(FaultConfig {
        delay: 1.0,
        delay_polls: 3,
        ..FaultConfig::default()
    });
    h.inject(&frame(1));
    let mut b = PacketBatch::new();
    for poll in 1..=3 {
        assert_eq!(p.recv(&mut b).unwrap(), 0, "poll {poll}");
    }
    assert_eq!(p.recv(&mut b).unwrap(), 1);
    assert_eq!(b.frame(0), &frame(1)[..]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// With every share 0 the injector changes nothing, whatever the seed and traffic.
    #[test]
    fn zero_fault_injector_is_transparent(
        seed in any::<u64>(),
        delay_polls in 0u32..10,
        rx in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..120),
        tx in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..50),
    ) {
        let (mut p, h) = faulty(FaultConfig { seed, delay_polls, ..FaultConfig::default() });
        h.inject_many(&rx);
        let got = drain(&mut p, rx.len(), 2);
        prop_assert_eq!(&got, &rx);
        for f in &tx {
            prop_assert!(p.send(f));
        }
        prop_assert_eq!(h.take_sent(), tx.clone());
        let s = p.stats();
        prop_assert_eq!(s.rx_dropped + s.tx_dropped, 0);
        prop_assert_eq!(s.rx_packets, rx.len() as u64);
        prop_assert_eq!(s.tx_packets, tx.len() as u64);
    }
}
