//! Capture files: read any pcap or pcapng file of Ethernet frames, and write classic pcap
//! records (flushable at any time), for pcap ports, tracers and the traffic generator.

use pcap_file::pcap::{PcapHeader, PcapParser};
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;

/// A `pcap-file` error as an I/O error (the I/O error itself where there is one).
pub fn pcap_error(e: PcapError) -> io::Error {
    match e {
        PcapError::IoError(e) => e,
        e => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
    }
}

/// Whether `magic` (a file's first four bytes) starts a pcapng file.
pub fn is_pcapng(magic: &[u8]) -> bool {
    magic == [0x0a, 0x0d, 0x0d, 0x0a]
}

/// The frames of a capture, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    pub frames: Vec<Vec<u8>>,
    /// Frames captured shorter than they were on the wire (snap length): replayed as
    /// captured.
    pub truncated: u64,
    /// `"pcap"` or `"pcapng"`.
    pub format: &'static str,
    /// Where the file ends inside a record (a capture cut short, as a capture tool killed
    /// mid-write leaves it): the frames of the complete records before it are read, as
    /// tshark reads them. `None` for a file that ends between records.
    pub cut_short: Option<CutShort>,
}

/// The record a capture file ends inside: its number (from 1, counting pcapng's
/// non-packet blocks too) and the byte offset where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutShort {
    pub record: usize,
    pub byte: usize,
}

impl Capture {
    /// The warning to print for a capture cut short, naming where it ends, or `None`.
    pub fn warning(&self) -> Option<String> {
        self.cut_short.map(|c| {
            format!(
                "cut short: the file ends inside record {} at byte {}; the {} complete packet(s) before it are read",
                c.record,
                c.byte,
                self.frames.len()
            )
        })
    }
}

/// Read a capture (pcap, either byte order and resolution, or pcapng) of Ethernet frames.
///
/// # Errors
/// I/O errors, a file that is neither format (or too short for its file header), or a
/// link type other than Ethernet; a malformed record is reported with its number and byte
/// offset (`record 3 at byte 172: ...`). A file that ends inside a record is not an error:
/// the records before it are read and [`Capture::cut_short`] says where it ends.
pub fn read_capture(mut input: impl Read) -> io::Result<Capture> {
    let mut data = Vec::new();
    input.read_to_end(&mut data)?;
    let magic = data.get(..4).ok_or_else(|| {
        bad(format!(
            "file too short for a capture ({} bytes)",
            data.len()
        ))
    })?;
    if is_pcapng(magic) {
        read_pcapng(&data)
    } else {
        read_pcap(&data)
    }
}

fn bad(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

fn not_ethernet(l: DataLink) -> io::Error {
    bad(format!(
        "link type {l:?}: only Ethernet captures can be replayed"
    ))
}

/// Record `n` (0: the file header) of `data`, starting where `rest` does, could not be
/// read: `record N at byte B: ...`.
fn record_error(data: &[u8], n: usize, rest: &[u8], e: PcapError) -> io::Error {
    let what = match e {
        PcapError::IncompleteBuffer => "truncated: the file ends inside it".to_string(),
        e => e.to_string(),
    };
    match n {
        0 => bad(format!("the file header: {what}")),
        n => bad(format!(
            "record {n} at byte {}: {what}",
            data.len() - rest.len()
        )),
    }
}

fn cut_at(data: &[u8], record: usize, rest: &[u8]) -> CutShort {
    CutShort {
        record,
        byte: data.len() - rest.len(),
    }
}

fn read_pcapng(data: &[u8]) -> io::Result<Capture> {
    let mut cap = Capture {
        format: "pcapng",
        ..Capture::default()
    };
    let at = |n, rest, e| record_error(data, n, rest, e);
    let (mut rest, mut parser) = PcapNgParser::new(data).map_err(|e| at(0, data, e))?;
    let mut n = 1;
    while !rest.is_empty() {
        let (next, block) = match parser.next_block(rest) {
            Ok(b) => b,
            Err(PcapError::IncompleteBuffer) => {
                cap.cut_short = Some(cut_at(data, n, rest));
                break;
            }
            Err(e) => return Err(at(n, rest, e)),
        };
        let packet = match block {
            Block::EnhancedPacket(p) => Some((p.interface_id, p.data.into_owned(), p.original_len)),
            Block::SimplePacket(p) => Some((0, p.data.into_owned(), p.original_len)),
            Block::Packet(p) => Some((p.interface_id as u32, p.data.into_owned(), p.original_len)),
            _ => None,
        };
        if let Some((iface, frame, orig)) = packet {
            let link = parser
                .interfaces()
                .get(iface as usize)
                .map(|i| i.linktype)
                .ok_or_else(|| {
                    at(
                        n,
                        rest,
                        PcapError::InvalidField("packet on an undeclared interface"),
                    )
                })?;
            if link != DataLink::ETHERNET {
                return Err(not_ethernet(link));
            }
            cap.truncated += (orig as usize > frame.len()) as u64;
            cap.frames.push(frame);
        }
        rest = next;
        n += 1;
    }
    Ok(cap)
}

fn read_pcap(data: &[u8]) -> io::Result<Capture> {
    let mut cap = Capture {
        format: "pcap",
        ..Capture::default()
    };
    let at = |n, rest, e| record_error(data, n, rest, e);
    let (mut rest, parser) = PcapParser::new(data).map_err(|e| at(0, data, e))?;
    let link = parser.header().datalink;
    if link != DataLink::ETHERNET {
        return Err(not_ethernet(link));
    }
    let mut n = 1;
    while !rest.is_empty() {
        let (next, p) = match parser.next_packet(rest) {
            Ok(p) => p,
            Err(PcapError::IncompleteBuffer) => {
                cap.cut_short = Some(cut_at(data, n, rest));
                break;
            }
            Err(e) => return Err(at(n, rest, e)),
        };
        cap.truncated += (p.orig_len as usize > p.data.len()) as u64;
        cap.frames.push(p.data.into_owned());
        rest = next;
        n += 1;
    }
    Ok(cap)
}

/// [`read_capture`] from a file.
pub fn read_capture_file(path: impl AsRef<Path>) -> io::Result<Capture> {
    read_capture(File::open(path)?)
}

/// Writes a classic little-endian pcap file of Ethernet frames: the header when created,
/// then one record per [`PcapFileWriter::write`]. Unlike `pcap_file`'s writer it keeps its
/// writer reachable, so a buffered file can be flushed without being consumed.
pub struct PcapFileWriter<W: Write> {
    w: W,
    nanos: bool,
}

impl<W: Write> PcapFileWriter<W> {
    /// Write the file header; timestamps in nanoseconds when `nanos`, else microseconds.
    pub fn new(mut w: W, nanos: bool) -> io::Result<PcapFileWriter<W>> {
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: 65535,
            datalink: DataLink::ETHERNET,
            ts_resolution: if nanos {
                TsResolution::NanoSecond
            } else {
                TsResolution::MicroSecond
            },
            endianness: Endianness::Little,
        };
        header.write_to(&mut w).map_err(pcap_error)?;
        Ok(PcapFileWriter { w, nanos })
    }

    /// Append one record (frames over 65,535 bytes are cut there, with the original length
    /// kept in the record).
    pub fn write(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()> {
        let len = frame.len().min(65535) as u32;
        let sub = if self.nanos {
            ts.subsec_nanos()
        } else {
            ts.subsec_micros()
        };
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&(ts.as_secs() as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&sub.to_le_bytes());
        rec[8..12].copy_from_slice(&len.to_le_bytes());
        rec[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        self.w.write_all(&rec)?;
        self.w.write_all(&frame[..len as usize])
    }

    pub fn get_ref(&self) -> &W {
        &self.w
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.w
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}
