//! The `pcap_read` check: any bytes as a capture file through the pcap/pcapng reader, and
//! what it read back through the pcap writer and the reader again (shared with a stable test).
//!
//! Compiled twice: by the fuzz crate (`fuzz/fuzz_targets/pcap_read.rs`) and, through
//! `#[path]`, by `crates/base/tests/fuzz_corpus.rs`, so it only uses `flowpath_base`.

use flowpath_base::capture::{is_pcapng, read_capture, Capture, PcapFileWriter};
use std::io;
use std::time::Duration;

/// Read `data` as a capture; panics when an invariant breaks. Returns what was read, or
/// the kind of error.
pub fn check(data: &[u8]) -> Result<Capture, io::ErrorKind> {
    let cap = match read_capture(data) {
        Ok(c) => c,
        Err(e) => {
            // Bad input is bad data (or a file that ends early), with a message.
            assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
                ),
                "unexpected error kind {:?}: {e}",
                e.kind()
            );
            assert!(!e.to_string().is_empty());
            return Err(e.kind());
        }
    };
    let want = if data.len() >= 4 && is_pcapng(&data[..4]) {
        "pcapng"
    } else {
        "pcap"
    };
    assert_eq!(cap.format, want);
    let bytes: usize = cap.frames.iter().map(Vec::len).sum();
    assert!(
        bytes <= data.len(),
        "{bytes} bytes of frames from {} bytes",
        data.len()
    );
    assert!(cap.truncated as usize <= cap.frames.len());
    // A capture cut short ends inside a record that starts past the file header and
    // before the end, after the complete ones.
    if let Some(c) = cap.cut_short {
        assert!(
            c.byte >= 24 && c.byte < data.len(),
            "{c:?} of {}",
            data.len()
        );
        assert!(
            c.record > cap.frames.len(),
            "{c:?}: {} frames",
            cap.frames.len()
        );
        assert!(cap
            .warning()
            .is_some_and(|w| w.contains(&c.byte.to_string())));
    }

    // What was read writes as a classic pcap that reads back the same (frames up to the
    // writer's 65,535-byte snap length).
    for nanos in [false, true] {
        let mut w = PcapFileWriter::new(Vec::new(), nanos).expect("pcap header into a Vec");
        for (i, f) in cap.frames.iter().enumerate() {
            w.write(Duration::from_micros(i as u64 * 1001), f)
                .expect("pcap record into a Vec");
        }
        let back = read_capture(&w.into_inner()[..]).expect("our own pcap reads back");
        assert_eq!(back.format, "pcap");
        assert_eq!(back.frames.len(), cap.frames.len());
        for (a, b) in back.frames.iter().zip(&cap.frames) {
            assert_eq!(a[..], b[..b.len().min(65535)]);
        }
        let cut = cap.frames.iter().filter(|f| f.len() > 65535).count();
        assert_eq!(back.truncated as usize, cut);
    }
    Ok(cap)
}
