//! pcap port: replays a capture file (once) as received traffic and writes sent frames to
//! another; also the pcap writer the tracer shares.

use crate::{PacketBatch, Port, PortInfo, PortStats};
use flowpath_base::capture::{is_pcapng, PcapFileWriter};
use pcap_file::pcap::PcapReader;
use pcap_file::{DataLink, PcapError};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn pcap_err(path: &Path, e: PcapError) -> io::Error {
    match e {
        PcapError::IoError(e) => io::Error::new(e.kind(), format!("{}: {e}", path.display())),
        e => io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        ),
    }
}

/// Wall-clock time since the Unix epoch, for record timestamps.
pub(crate) fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// A classic pcap file (little-endian, nanosecond timestamps, Ethernet) being written
/// through a buffer, flushable at any time (the foundation's [`PcapFileWriter`]).
pub(crate) struct PcapSink {
    w: PcapFileWriter<BufWriter<File>>,
    path: PathBuf,
}

impl PcapSink {
    pub(crate) fn create(path: &Path, buffer: usize) -> io::Result<PcapSink> {
        let ctx = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let f = BufWriter::with_capacity(buffer, File::create(path).map_err(ctx)?);
        Ok(PcapSink {
            w: PcapFileWriter::new(f, true).map_err(ctx)?,
            path: path.to_path_buf(),
        })
    }

    /// Append one record; goes to the file when the buffer fills or on [`PcapSink::flush`].
    pub(crate) fn write(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()> {
        self.w.write(ts, frame)
    }

    /// Bytes written but still in the buffer.
    pub(crate) fn buffered(&self) -> usize {
        self.w.get_ref().buffer().len()
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.w.get_mut().flush()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Where replayed frames come from: a classic pcap file is streamed (`at`: the byte offset
/// and number of the next record, for a warning if the file ends inside it); a pcapng file
/// is read whole when opened (through the foundation's capture reader).
enum RxSource {
    Pcap {
        r: PcapReader<BufReader<File>>,
        at: (usize, usize),
    },
    Frames(std::vec::IntoIter<Vec<u8>>),
}

/// Replays `rx` (pcap in either byte order or resolution, or pcapng; Ethernet only) once and writes what
/// is sent to `tx`. Either may be absent: then nothing is received, or sent frames are
/// discarded and counted as tx drops.
pub struct PcapPort {
    name: String,
    rx: Option<RxSource>,
    rx_path: Option<PathBuf>,
    /// The rx file has been replayed to its end.
    rx_done: bool,
    /// The warning for an rx file that ends inside a record (its complete records are
    /// replayed; printed once, and kept for [`Port::info`]).
    rx_cut: Option<String>,
    tx: Option<PcapSink>,
    stats: PortStats,
}

impl PcapPort {
    pub fn open(name: &str, rx: Option<&Path>, tx: Option<&Path>) -> io::Result<PcapPort> {
        let (reader, rx_cut) = match rx {
            Some(path) => {
                let (r, cut) = open_reader(path)?;
                (Some(r), cut)
            }
            None => (None, None),
        };
        let tx = match tx {
            Some(path) => Some(PcapSink::create(path, 1 << 16)?),
            None => None,
        };
        Ok(PcapPort {
            name: name.into(),
            rx_done: reader.is_none(),
            rx: reader,
            rx_cut: None,
            rx_path: rx.map(Path::to_path_buf),
            tx,
            stats: PortStats::default(),
        }
        .cut_short(rx_cut))
    }

    /// Note (and say once, on stderr) that the rx file ends inside a record.
    fn cut_short(mut self, why: Option<String>) -> PcapPort {
        if let Some(w) = why {
            eprintln!("flowpath: pcap port '{}': warning: {w}", self.name);
            self.rx_cut = Some(w);
        }
        self
    }

    /// Whether every frame of the rx file has been delivered (true without an rx file).
    pub fn rx_done(&self) -> bool {
        self.rx_done
    }
}

fn open_reader(path: &Path) -> io::Result<(RxSource, Option<String>)> {
    let ctx = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut f = File::open(path).map_err(ctx)?;
    let mut magic = [0u8; 4];
    let got = f.read(&mut magic).map_err(ctx)?;
    if got == 4 && is_pcapng(&magic) {
        let cap = flowpath_base::capture::read_capture_file(path).map_err(ctx)?;
        let cut = cap.warning().map(|w| format!("{}: {w}", path.display()));
        return Ok((RxSource::Frames(cap.frames.into_iter()), cut));
    }
    drop(f);
    let f = File::open(path).map_err(ctx)?;
    let r = PcapReader::new(BufReader::with_capacity(1 << 16, f)).map_err(|e| pcap_err(path, e))?;
    let link = r.header().datalink;
    if link != DataLink::ETHERNET {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: link type {link:?}: only Ethernet captures can be replayed",
                path.display()
            ),
        ));
    }
    Ok((RxSource::Pcap { r, at: (24, 1) }, None))
}

impl Port for PcapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let Some(r) = self.rx.as_mut().filter(|_| !self.rx_done) else {
            return Ok(0);
        };
        let mut n = 0;
        match r {
            RxSource::Frames(frames) => {
                while batch.room() > 0 {
                    let Some(f) = frames.next() else {
                        self.rx_done = true;
                        break;
                    };
                    if batch.push(&f) {
                        self.stats.rx_packets += 1;
                        self.stats.rx_bytes += f.len() as u64;
                        n += 1;
                    } else {
                        self.stats.rx_dropped += 1;
                    }
                }
            }
            RxSource::Pcap { r, at } => {
                while batch.room() > 0 {
                    match r.next_packet() {
                        None => {
                            self.rx_done = true;
                            break;
                        }
                        Some(Err(PcapError::IoError(e)))
                            if e.kind() == io::ErrorKind::UnexpectedEof =>
                        {
                            // The file ends inside a record: what came before is replayed.
                            self.rx_done = true;
                            let path = self.rx_path.as_deref().unwrap_or(Path::new("?"));
                            let w = format!(
                                "{}: cut short: the file ends inside record {} at byte {}; the {} complete packet(s) before it are replayed",
                                path.display(),
                                at.1,
                                at.0,
                                at.1 - 1
                            );
                            eprintln!("flowpath: pcap port '{}': warning: {w}", self.name);
                            self.rx_cut = Some(w);
                            break;
                        }
                        Some(Ok(p)) => {
                            *at = (at.0 + 16 + p.data.len(), at.1 + 1);
                            if batch.push(&p.data) {
                                self.stats.rx_packets += 1;
                                self.stats.rx_bytes += p.data.len() as u64;
                                n += 1;
                            } else {
                                self.stats.rx_dropped += 1;
                            }
                        }
                        Some(Err(e)) => {
                            // A truncated or corrupt tail ends the replay; the error names
                            // the file.
                            self.rx_done = true;
                            self.stats.errors += 1;
                            let path = self.rx_path.as_deref().unwrap_or(Path::new("?"));
                            return Err(pcap_err(path, e));
                        }
                    }
                }
            }
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        let Some(tx) = &mut self.tx else {
            self.stats.tx_dropped += 1;
            return false;
        };
        match tx.write(now(), frame) {
            Ok(()) => {
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += frame.len() as u64;
                true
            }
            Err(_) => {
                self.stats.errors += 1;
                self.stats.tx_dropped += 1;
                false
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.tx {
            Some(tx) if tx.buffered() > 0 => tx.flush().map_err(|e| {
                self.stats.errors += 1;
                io::Error::new(e.kind(), format!("{}: {e}", tx.path().display()))
            }),
            _ => Ok(()),
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn info(&self) -> PortInfo {
        let show = |p: &Option<PathBuf>| {
            p.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "-".into())
        };
        PortInfo {
            kind: "pcap",
            detail: format!(
                "rx {}{}, tx {}",
                show(&self.rx_path),
                match (&self.rx_cut, self.rx_done && self.rx_path.is_some()) {
                    (Some(_), true) => " (replayed, cut short)",
                    (None, true) => " (replayed)",
                    _ => "",
                },
                show(&self.tx.as_ref().map(|t| t.path().to_path_buf()))
            ),
        }
    }
}

impl Drop for PcapPort {
    fn drop(&mut self) {
        if let Some(tx) = &mut self.tx {
            let _ = tx.flush();
        }
    }
}
