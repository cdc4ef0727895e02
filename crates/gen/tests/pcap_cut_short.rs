//! Captures cut short (a capture tool killed mid-write): read up to the last complete
//! packet with a warning naming where the file ends, as tshark reads them (compared with
//! tshark's count when it is installed); a file too short for its header, or not a
//! capture, stays an error.

mod common;

use std::path::{Path, PathBuf};

use flowpath_base::capture::{read_capture, CutShort};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("flowpath-cut-{}-{name}", std::process::id()))
}

/// A real capture (tcpdump's, from the packet crate's test data).
fn real_capture() -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packet/tests/data/tcp.pcap");
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The byte offsets where the records of a classic pcap start (and the file's end).
fn record_starts(pcap: &[u8]) -> Vec<usize> {
    let le = pcap[..4] == [0xd4, 0xc3, 0xb2, 0xa1] || pcap[..4] == [0x4d, 0x3c, 0xb2, 0xa1];
    let mut v = vec![24];
    let mut o = 24;
    while o + 16 <= pcap.len() {
        let b: [u8; 4] = pcap[o + 8..o + 12].try_into().unwrap();
        let incl = if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        } as usize;
        o += 16 + incl;
        v.push(o);
    }
    assert_eq!(o, pcap.len(), "the test capture is whole");
    v
}

/// tshark's count of the packets in `path` (it prints the complete ones and warns), or
/// None without tshark.
fn tshark_count(path: &Path) -> Option<usize> {
    if !common::tshark_available() {
        return None;
    }
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-e", "frame.number"])
        .output()
        .expect("run tshark");
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count(),
    )
}

#[test]
fn a_pcap_cut_anywhere_reads_its_complete_packets() {
    let whole = real_capture();
    let starts = record_starts(&whole);
    let packets = starts.len() - 1;
    assert!(packets >= 2, "a capture of a few packets");
    let all = read_capture(&whole[..]).unwrap();
    assert_eq!(all.frames.len(), packets);
    assert_eq!(all.cut_short, None);
    assert_eq!(all.warning(), None);
    if !common::tshark_available() {
        eprintln!("tshark not on PATH: the counts are checked against the file's layout only");
    }
    // Cut inside every record: in its header (1, 8 and 15 bytes in) and in its data.
    for (i, w) in starts.windows(2).enumerate() {
        let (start, end) = (w[0], w[1]);
        let mut cuts = vec![start + 1, start + 8, start + 15];
        if end - start > 17 {
            cuts.extend([start + 16, start + 17, (start + end) / 2, end - 1]);
        }
        for cut in cuts {
            let data = &whole[..cut];
            let cap = read_capture(data).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert_eq!(cap.frames.len(), i, "cut at byte {cut}");
            assert_eq!(cap.frames[..], all.frames[..i]);
            assert_eq!(
                cap.cut_short,
                Some(CutShort {
                    record: i + 1,
                    byte: start
                })
            );
            let w = cap.warning().unwrap();
            assert!(
                w.contains(&format!("record {} at byte {start}", i + 1)),
                "{w}"
            );
            // tshark (a process a cut) on the first records and the last.
            if i < 3 || i + 1 == packets {
                let path = temp(&format!("{cut}.pcap"));
                std::fs::write(&path, data).unwrap();
                if let Some(n) = tshark_count(&path) {
                    assert_eq!(n, i, "tshark's count of the packets cut at byte {cut}");
                }
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    // Cut between records: no warning, the packets before.
    for (i, &at) in starts.iter().enumerate() {
        let cap = read_capture(&whole[..at]).unwrap();
        assert_eq!((cap.frames.len(), cap.cut_short), (i, None));
    }
}

#[test]
fn a_pcapng_cut_inside_a_block_reads_the_blocks_before() {
    let frames: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 60 + i as usize]).collect();
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 0xffff,
        options: vec![],
    })
    .unwrap();
    let mut ends = vec![w.get_ref().len()];
    for f in &frames {
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: std::time::Duration::from_secs(1),
            original_len: f.len() as u32,
            data: f.clone().into(),
            options: vec![],
        })
        .unwrap();
        ends.push(w.get_ref().len());
    }
    let whole = w.into_inner();
    for (i, win) in ends.windows(2).enumerate() {
        for cut in [win[0] + 1, win[0] + 7, (win[0] + win[1]) / 2, win[1] - 1] {
            let data = &whole[..cut];
            let cap = read_capture(data).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert_eq!(cap.frames[..], frames[..i], "cut at byte {cut}");
            // Records count the interface block too (the section header is the file's).
            assert_eq!(
                cap.cut_short,
                Some(CutShort {
                    record: i + 2,
                    byte: win[0]
                })
            );
            let path = temp(&format!("{cut}.pcapng"));
            std::fs::write(&path, data).unwrap();
            if let Some(n) = tshark_count(&path) {
                assert_eq!(n, i, "tshark's count of the packets cut at byte {cut}");
            }
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[test]
fn a_file_cut_inside_its_header_or_not_a_capture_is_an_error() {
    let whole = real_capture();
    for cut in [0, 3, 4, 10, 23] {
        let e = read_capture(&whole[..cut]).unwrap_err();
        assert!(
            e.to_string().contains("too short") || e.to_string().contains("file header"),
            "cut at {cut}: {e}"
        );
    }
    let mut bad = whole.clone();
    bad[..4].copy_from_slice(b"JUNK");
    assert!(read_capture(&bad[..]).is_err(), "bad magic");
}
