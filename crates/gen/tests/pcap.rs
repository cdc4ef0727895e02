//! Pcap files: generated ones are valid for an independent parser (and tshark, when
//! installed) for every encapsulation and protocol, and a replayed capture comes back
//! byte for byte, in order, in a loop.

mod common;

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

use flowpath_base::capture::{read_capture, read_capture_file};
use flowpath_gen::pcap::{
    replay_pcap_file, replay_source, write_pcap, write_pcap_file, CaptureReplay,
};
use flowpath_gen::spec::{Churn, Encap, Flows, IpVersion, Proto, Sizes, TrafficSpec};
use flowpath_gen::{InMemorySource, Lifetime};

/// A path in the system temp directory, unique to this test process.
fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("flowpath-gen-{}-{name}", std::process::id()))
}

fn encaps() -> Vec<Encap> {
    let mut v = vec![Encap::Ipv4, Encap::Ipv6];
    for outer in [IpVersion::V4, IpVersion::V6] {
        for inner in [IpVersion::V4, IpVersion::V6] {
            v.push(Encap::Vxlan {
                outer,
                inner,
                vni: 0x00ab_cdef,
            });
        }
    }
    v
}

fn ver(v: IpVersion) -> u8 {
    match v {
        IpVersion::V4 => 4,
        IpVersion::V6 => 6,
    }
}

/// tshark's name of a stack, e.g. `eth:ethertype:ip:udp:vxlan:eth:ethertype:ipv6:icmpv6`.
fn tshark_stack(ips: &[u8], l4: &str) -> String {
    let ip = |v: u8| if v == 4 { "ip" } else { "ipv6" };
    let mut s = String::from("eth:ethertype:");
    if ips.len() == 2 {
        s += &format!("{}:udp:vxlan:eth:ethertype:", ip(ips[0]));
    }
    s += &format!("{}:{l4}", ip(*ips.last().unwrap()));
    s
}

#[test]
fn every_encap_and_proto_gives_valid_pcaps() {
    const PACKETS: usize = 3000;
    let tshark = common::tshark_available();
    if !tshark {
        eprintln!(
            "every_encap_and_proto_gives_valid_pcaps: skipping the tshark check: `tshark` is \
             not on PATH (apt-get install tshark); the etherparse checks still ran"
        );
    }
    for encap in encaps() {
        for proto in [Proto::Udp, Proto::Tcp, Proto::Icmp] {
            let name = format!("{encap}-{proto}");
            let spec = TrafficSpec {
                flows: Flows {
                    count: 64,
                    proto,
                    ..Flows::default()
                },
                // Every size class: small frames grow to fit VXLAN/IPv6 headers.
                sizes: Sizes::Mix(vec![(64, 4), (65, 1), (570, 2), (1518, 1), (9018, 1)]),
                // Both stamping paths: one-packet new flows and replaced flows.
                churn: Churn {
                    new_flow_share: 0.3,
                    lifetime: Some(Lifetime::Packets(5)),
                },
                encap,
                seed: 17,
                ..TrafficSpec::default()
            };
            let path = temp(&format!("{name}.pcap"));
            let summary = write_pcap_file(&path, &mut spec.source().unwrap(), PACKETS as u64)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let bytes = std::fs::read(&path).unwrap();
            let (link, frames) = common::read_pcap_by_hand(&bytes);
            assert_eq!(link, 1, "{name}: link type Ethernet");
            assert_eq!(frames.len(), PACKETS, "{name}");
            assert_eq!(summary.packets, PACKETS as u64);
            assert_eq!(
                summary.bytes,
                frames.iter().map(|f| f.len() as u64).sum::<u64>()
            );
            assert_eq!(
                summary.unparsed, 0,
                "{name}: flowpath's parser rejected frames"
            );
            // Lengths the spec allows: each size, or the headers' minimum.
            let allowed: Vec<usize> = [64, 65, 570, 1518, 9018]
                .iter()
                .map(|&s| spec.frame_spec(0, s).frame_len())
                .collect();
            let (outer, inner) = match encap {
                Encap::Ipv4 => (None, 4),
                Encap::Ipv6 => (None, 6),
                Encap::Vxlan { outer, inner, .. } => (Some(ver(outer)), ver(inner)),
            };
            let want_ips: Vec<u8> = outer.into_iter().chain([inner]).collect();
            let want_l4 = match (proto, inner) {
                (Proto::Udp, _) => "udp",
                (Proto::Tcp, _) => "tcp",
                (Proto::Icmp, 4) => "icmp",
                (Proto::Icmp, _) => "icmpv6",
            };
            for (i, f) in frames.iter().enumerate() {
                let what = format!("{name} frame {i}");
                let seen = common::check_frame(f, &what);
                assert_eq!(seen.ips, want_ips, "{what}");
                assert_eq!(seen.l4, want_l4, "{what}");
                assert_eq!(seen.vni, outer.map(|_| 0x00ab_cdef), "{what}");
                assert!(allowed.contains(&f.len()), "{what}: length {}", f.len());
            }
            if tshark {
                let stacks = common::tshark_protocols(&path);
                assert_eq!(stacks.len(), PACKETS, "{name}: tshark read every frame");
                let want = tshark_stack(&want_ips, want_l4);
                for (i, s) in stacks.iter().enumerate() {
                    let s = s.strip_suffix(":data").unwrap_or(s);
                    assert_eq!(s, want, "{name} frame {i}: tshark's protocols");
                }
            }
            std::fs::remove_file(&path).unwrap();
        }
    }
}

/// Frames of a spec with churn, so consecutive frames differ in many ways.
fn some_frames(packets: u64) -> (Vec<u8>, Vec<Vec<u8>>) {
    let spec = TrafficSpec {
        flows: Flows {
            count: 40,
            ..Flows::default()
        },
        sizes: Sizes::Imix,
        churn: Churn {
            new_flow_share: 0.5,
            lifetime: None,
        },
        encap: Encap::Vxlan {
            outer: IpVersion::V4,
            inner: IpVersion::V6,
            vni: 3,
        },
        seed: 5,
        ..TrafficSpec::default()
    };
    let mut bytes = Vec::new();
    write_pcap(&mut bytes, &mut spec.source().unwrap(), packets).unwrap();
    let (_, frames) = common::read_pcap_by_hand(&bytes);
    (bytes, frames)
}

/// Pull `loops` times the frames from `src` and compare them in order; scribble over
/// some packets on the way (the source restores them).
fn assert_replays(src: &mut InMemorySource, frames: &[Vec<u8>], loops: f64) {
    let total = (frames.len() as f64 * loops) as usize;
    let mut i = 0;
    while i < total {
        let mut b = src.lend((total - i).min(32));
        assert!(!b.is_empty());
        for p in b.iter_mut() {
            assert_eq!(p.data(), &frames[i % frames.len()][..], "packet {i}");
            if i % 7 == 0 {
                p.data_mut()[0] ^= 0xff;
            }
            i += 1;
        }
    }
}

#[test]
fn a_replayed_capture_comes_back_byte_for_byte_in_order() {
    let (bytes, frames) = some_frames(777);
    assert!(frames.windows(2).any(|w| w[0].len() != w[1].len()));
    let path = temp("replay.pcap");
    std::fs::write(&path, &bytes).unwrap();

    let cap = read_capture_file(&path).unwrap();
    assert_eq!(cap.format, "pcap");
    assert_eq!(cap.truncated, 0);
    assert_eq!(cap.frames, frames);
    let mut src = replay_pcap_file(&path).unwrap();
    assert_replays(&mut src, &frames, 2.5);
    assert_eq!(src.new_flows(), 0, "replay adds no churn unless asked");

    // Looped into a new pcap: the same frames, in order, over and over.
    let out = temp("replay-out.pcap");
    let s = write_pcap_file(&out, &mut replay_pcap_file(&path).unwrap(), 2000).unwrap();
    assert_eq!(s.packets, 2000);
    let (_, again) = common::read_pcap_by_hand(&std::fs::read(&out).unwrap());
    for (i, f) in again.iter().enumerate() {
        assert_eq!(f, &frames[i % frames.len()], "looped frame {i}");
    }

    // A capture shorter than a batch still gives whole batches, in order.
    let three = frames[..3].to_vec();
    assert_eq!(replay_source(three.clone()).lend(32).len(), 32);
    assert_replays(&mut replay_source(three.clone()), &three, 20.0);

    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn pcapng_and_big_endian_nanosecond_pcap_replay_too() {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::{DataLink, Endianness, TsResolution};

    let (_, frames) = some_frames(100);
    let mut ng = PcapNgWriter::new(Vec::new()).unwrap();
    ng.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 0,
        options: vec![],
    })
    .unwrap();
    for f in &frames {
        ng.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_secs(1),
            original_len: f.len() as u32,
            data: Cow::Borrowed(&f[..]),
            options: vec![],
        })
        .unwrap();
    }
    let cap = read_capture(&ng.into_inner()[..]).unwrap();
    assert_eq!(cap.format, "pcapng");
    assert_eq!(cap.frames, frames);
    assert_replays(&mut cap.into_source().unwrap(), &frames, 1.5);

    let header = PcapHeader {
        endianness: Endianness::Big,
        ts_resolution: TsResolution::NanoSecond,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for f in &frames {
        // Captured with a snap length of 100 bytes.
        let cut = &f[..f.len().min(100)];
        w.write_packet(&PcapPacket::new(Duration::ZERO, f.len() as u32, cut))
            .unwrap();
    }
    let cap = read_capture(&w.into_writer()[..]).unwrap();
    assert_eq!(cap.frames.len(), frames.len());
    assert_eq!(
        cap.truncated,
        frames.iter().filter(|f| f.len() > 100).count() as u64
    );
    assert!(cap.frames.iter().all(|f| f.len() <= 100));
}

#[test]
fn unusable_captures_are_errors() {
    assert!(read_capture(&b"not a capture at all"[..]).is_err());
    assert!(read_capture(&b"ab"[..]).is_err());
    use pcap_file::pcap::{PcapHeader, PcapWriter};
    use pcap_file::DataLink;
    let empty = PcapWriter::new(Vec::new()).unwrap().into_writer();
    let cap = read_capture(&empty[..]).unwrap();
    assert!(cap.frames.is_empty());
    assert!(cap.into_source().is_err(), "nothing to replay");
    let header = PcapHeader {
        datalink: DataLink::RAW,
        ..PcapHeader::default()
    };
    let raw = PcapWriter::with_header(Vec::new(), header)
        .unwrap()
        .into_writer();
    let e = read_capture(&raw[..]).unwrap_err();
    assert!(e.to_string().contains("Ethernet"), "{e}");
}
