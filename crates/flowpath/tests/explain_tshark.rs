//! `flowpath explain --json` against tshark on captures made by tools no one here wrote:
//! wireshark's `randpkt` (random frames of 15 Ethernet protocols, ≥ 10,000 of them) and
//! scapy (every kind of frame flowpath parses, and scapy's `fuzz()` of each layer); and
//! the scapy frames once more as a pcapng file written by `text2pcap` from tshark's hex.
//!
//! For every frame tshark dissects cleanly (no malformed mark, no expert error), flowpath
//! must give a key, and the key must agree with tshark on ethertype, VLANs, addresses,
//! protocol and ports (the inner frame for VXLAN). For a frame tshark finds malformed,
//! flowpath must give a parse drop reason, or else a key that agrees on everything tshark
//! did dissect: never a wrong key. Frames flowpath drops by design though tshark accepts
//! them are listed (three VLAN tags), and so are frames with the old QinQ TPID 0x9100,
//! which tshark takes for a tag and flowpath (like OVS) keys as the ethertype. Needs
//! tshark and randpkt (wireshark-common); scapy where python3 has it. Skips with a
//! message when they are missing.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_flowpath");

/// randpkt's types whose frames are Ethernet.
const RANDPKT_TYPES: [&str; 15] = [
    "arp", "bgp", "bvlc", "dns", "eth", "giop", "icmp", "ip", "ipv6", "megaco", "nbns", "sctp",
    "syslog", "tds", "udp",
];
const PER_TYPE: usize = 700;

/// Drop reasons flowpath gives by design to frames tshark dissects cleanly.
const BY_DESIGN: [&str; 1] = ["too_many_vlans"];

/// tshark's fields, in this order.
const FIELDS: [&str; 31] = [
    "frame.number",
    "frame.protocols",
    "eth.type",
    "eth.len",
    "ieee8021ad.id",
    "vlan.id",
    "vlan.etype",
    "ip.src",
    "ip.dst",
    "ip.proto",
    "ip.flags.mf",
    "ip.frag_offset",
    "ipv6.src",
    "ipv6.dst",
    "ipv6.nxt",
    "tcp.srcport",
    "tcp.dstport",
    "udp.srcport",
    "udp.dstport",
    "icmp.type",
    "icmp.code",
    "arp.hw.type",
    "arp.proto.type",
    "arp.hw.size",
    "arp.proto.size",
    "arp.opcode",
    "arp.src.proto_ipv4",
    "arp.dst.proto_ipv4",
    "_ws.malformed",
    "_ws.expert.severity",
    "_ws.expert.message",
];

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .output()
        .map(|o| o.status.success() || !o.stdout.is_empty() || !o.stderr.is_empty())
        .unwrap_or(false)
}

fn tmpdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("fp-explain-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// tshark's view of every frame: field name → occurrences.
fn tshark(pcap: &Path) -> Vec<BTreeMap<&'static str, Vec<String>>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(pcap).args([
        "-n",
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=;",
    ]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            FIELDS
                .iter()
                .zip(l.split('|'))
                .map(|(f, v)| {
                    let occ = v.split(';').filter(|s| !s.is_empty()).map(str::to_string);
                    (*f, occ.collect())
                })
                .collect()
        })
        .collect()
}

fn explain(pcap: &Path) -> Vec<Value> {
    let out = Command::new(BIN)
        .arg("explain")
        .arg(pcap)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "flowpath explain {}: {}",
        pcap.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The old, non-standard QinQ TPID that tshark dissects as a VLAN tag by default.
const OLD_QINQ_TPID: u64 = 0x9100;

/// Whether tshark took a 0x9100 ethertype (outer or after a tag) for a VLAN tag.
fn old_qinq_tag(t: &BTreeMap<&str, Vec<String>>) -> bool {
    t["eth.type"]
        .iter()
        .chain(&t["vlan.etype"])
        .any(|s| num(s) == Some(OLD_QINQ_TPID))
}

/// flowpath's `dl_type`.
fn fp_dl_type(k: &Value) -> Option<u64> {
    k.get("dl_type").and_then(Value::as_u64)
}

/// Where one frame disagrees, if it does: (what, tshark's, flowpath's).
type Diff = (String, String, String);

/// Compare flowpath's key with what tshark dissected. VXLAN frames compare their inner
/// headers (tshark's last occurrences); other frames their outer ones (the first: an ICMP
/// error's quoted header comes after).
fn compare(t: &BTreeMap<&str, Vec<String>>, k: &Value) -> Vec<Diff> {
    let protos = t["frame.protocols"].join("");
    let vxlan = protos.contains(":vxlan:");
    let pick = |f: &str| -> Option<&String> {
        let v = &t[f];
        if vxlan {
            v.last()
        } else {
            v.first()
        }
    };
    let mut d = Vec::new();
    let mut check = |what: &str, ts: Option<String>, fp: Option<String>| {
        if ts != fp {
            d.push((
                what.to_string(),
                ts.unwrap_or_else(|| "-".into()),
                fp.unwrap_or_else(|| "-".into()),
            ));
        }
    };
    let fp_num = |n: &str| k.get(n).and_then(Value::as_u64).map(|v| v.to_string());
    let fp_str = |n: &str| k.get(n).and_then(Value::as_str).map(str::to_string);
    let ts_num = |f: &str| pick(f).and_then(|s| num(s)).map(|v| v.to_string());

    // VLAN tags, outer first: an 802.1ad service tag, then 802.1Q tags. (VXLAN frames here
    // carry tags only inside.)
    let vlans: Vec<&String> = t["ieee8021ad.id"].iter().chain(&t["vlan.id"]).collect();
    // Ethertype: after the tags; an 802.3 length (or a value tshark takes for neither type
    // nor length, 1501-1535, or a type of 0) is keyed 0x05ff.
    let etype = if !t["vlan.etype"].is_empty() {
        t["vlan.etype"].last().and_then(|s| num(s))
    } else if !t["ieee8021ad.id"].is_empty() {
        // tshark has no field for the type after a lone 802.1ad tag: not compared.
        return d;
    } else if vxlan {
        t["eth.type"].last().and_then(|s| num(s))
    } else if !t["eth.type"].is_empty() {
        t["eth.type"].first().and_then(|s| num(s))
    } else {
        Some(0x05ff)
    };
    // Any value below 0x0600 is a length to flowpath (as to OVS), also where tshark
    // reports it as a type (it does for 0).
    let etype = etype.map(|v| if v < 0x0600 { 0x05ff } else { v });
    check("dl_type", etype.map(|v| v.to_string()), fp_num("dl_type"));
    check(
        "dl_vlan",
        vlans.first().and_then(|s| num(s)).map(|v| v.to_string()),
        fp_num("dl_vlan"),
    );
    check(
        "dl_vlan1",
        vlans.get(1).and_then(|s| num(s)).map(|v| v.to_string()),
        fp_num("dl_vlan1"),
    );
    let Some(etype) = etype else { return d };
    let later = pick("ip.frag_offset").and_then(|s| num(s)).unwrap_or(0) > 0;
    let fragment = later || pick("ip.flags.mf").is_some_and(|s| s == "1" || s == "True");
    match etype {
        0x0800 if pick("ip.src").is_some() => {
            check("nw_src", pick("ip.src").cloned(), fp_str("nw_src"));
            check("nw_dst", pick("ip.dst").cloned(), fp_str("nw_dst"));
            check("nw_proto", ts_num("ip.proto"), fp_num("nw_proto"));
            let want = match (fragment, later) {
                (false, _) => "no",
                (true, false) => "first",
                (true, true) => "later",
            };
            check("ip_frag", Some(want.into()), fp_str("ip_frag"));
        }
        0x86dd if pick("ipv6.src").is_some() => {
            check("ipv6_src", pick("ipv6.src").cloned(), fp_str("ipv6_src"));
            check("ipv6_dst", pick("ipv6.dst").cloned(), fp_str("ipv6_dst"));
        }
        // Only Ethernet/IPv4 ARP has ARP fields in the key (as in OVS); others are keyed
        // on the ethertype alone.
        0x0806
            if pick("arp.opcode").is_some()
                && ts_num("arp.hw.type").as_deref() == Some("1")
                && ts_num("arp.proto.type").as_deref() == Some("2048")
                && ts_num("arp.hw.size").as_deref() == Some("6")
                && ts_num("arp.proto.size").as_deref() == Some("4") =>
        {
            check("arp_op", ts_num("arp.opcode"), fp_num("arp_op"));
            check(
                "arp_spa",
                pick("arp.src.proto_ipv4").cloned(),
                fp_str("arp_spa"),
            );
            check(
                "arp_tpa",
                pick("arp.dst.proto_ipv4").cloned(),
                fp_str("arp_tpa"),
            );
        }
        _ => {}
    }
    // Transport: tshark does not dissect fragments' payloads (reassembly), so only whole
    // packets are compared.
    if !fragment {
        // A VXLAN frame's inner transport header is tshark's second UDP occurrence, or
        // its only TCP/ICMP one.
        let inner = protos.split(":vxlan:").nth(1).unwrap_or(&protos);
        // Whole protocol names: "udplite" is not "udp" (tshark fills udp.srcport for
        // UDP-Lite, which flowpath, like OVS, does not key).
        let has = |p: &str| inner.split(':').any(|x| x == p);
        let outer_udp = usize::from(vxlan);
        for (proto, src, dst, skip) in [
            ("tcp", "tcp.srcport", "tcp.dstport", 0),
            ("udp", "udp.srcport", "udp.dstport", outer_udp),
        ] {
            if t[src].len() > skip && has(proto) {
                check("tp_src", ts_num(src), fp_num("tp_src"));
                check("tp_dst", ts_num(dst), fp_num("tp_dst"));
            }
        }
        if etype == 0x0800 && pick("icmp.type").is_some() && has("icmp") {
            check("icmp_type", ts_num("icmp.type"), fp_num("icmp_type"));
            check("icmp_code", ts_num("icmp.code"), fp_num("icmp_code"));
        }
    }
    d
}

/// tshark's warnings that say a header's length does not fit the frame: tshark dissects
/// on, flowpath calls such a frame malformed (its drop reason names the length).
const LENGTH_WARNINGS: [&str; 3] = ["exceeds framing length", "Bogus", "too short"];

/// tshark found the frame malformed, raised an error-level expert item, or warned that a
/// header's length does not fit.
fn tshark_error(t: &BTreeMap<&str, Vec<String>>) -> bool {
    !t["_ws.malformed"].is_empty()
        || t["_ws.expert.severity"]
            .iter()
            .any(|s| num(s).is_some_and(|v| v >= 0x0080_0000))
        || t["_ws.expert.message"]
            .iter()
            .any(|m| LENGTH_WARNINGS.iter().any(|w| m.contains(w)))
}

#[derive(Default, Debug)]
struct Tally {
    frames: usize,
    clean_agree: usize,
    malformed_dropped: usize,
    malformed_key_agrees: usize,
    by_design: BTreeMap<String, usize>,
    failures: Vec<String>,
}

fn check_capture(pcap: &Path, tally: &mut Tally) {
    let ts = tshark(pcap);
    let fp = explain(pcap);
    assert_eq!(
        ts.len(),
        fp.len(),
        "{}: frame counts differ",
        pcap.display()
    );
    for (t, k) in ts.iter().zip(&fp) {
        tally.frames += 1;
        let n = &t["frame.number"][0];
        let drop = k.get("drop").and_then(Value::as_str);
        let bad = tshark_error(t);
        let where_ = || {
            format!(
                "{} frame {n} ({})",
                pcap.display(),
                t["frame.protocols"].join("")
            )
        };
        match (bad, drop) {
            (false, Some(r)) if BY_DESIGN.contains(&r) => {
                *tally.by_design.entry(r.to_string()).or_default() += 1;
            }
            (false, Some(r)) => tally.failures.push(format!(
                "{}: tshark dissects it cleanly, flowpath drops it: {r}",
                where_()
            )),
            (true, Some(_)) => tally.malformed_dropped += 1,
            // tshark's VLAN dissector also takes the old QinQ TPID 0x9100 as a tag;
            // flowpath, like OVS, keys only 0x8100 and 0x88a8 as tags and 0x9100 as the
            // ethertype, so the tags tshark lists past it are not compared. It must be
            // keyed so, though.
            (_, None) if old_qinq_tag(t) => {
                let dl_type = fp_dl_type(k);
                if dl_type == Some(OLD_QINQ_TPID) {
                    *tally
                        .by_design
                        .entry("tpid_0x9100_keyed_as_ethertype".into())
                        .or_default() += 1;
                } else {
                    tally.failures.push(format!(
                        "{}: a 0x9100 tag, but flowpath's dl_type is {dl_type:?}",
                        where_()
                    ));
                }
            }
            (_, None) => {
                let d = compare(t, k);
                if d.is_empty() {
                    if bad {
                        tally.malformed_key_agrees += 1;
                    } else {
                        tally.clean_agree += 1;
                    }
                } else {
                    tally.failures.push(format!(
                        "{}: {}key disagrees: {}",
                        where_(),
                        if bad { "tshark: malformed; " } else { "" },
                        d.iter()
                            .map(|(w, a, b)| format!("{w}: tshark {a}, flowpath {b}"))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ));
                }
            }
        }
    }
}

/// The same frames through tshark's hex dump and `text2pcap` (a pcapng file written by
/// wireshark's own tool) explain exactly as the original capture does.
fn text2pcap_round_trip(pcap: &Path, dir: &Path) {
    if !have("text2pcap", "-h") {
        eprintln!("text2pcap part skipped: no text2pcap");
        return;
    }
    let hex = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        // The frames only (no reassembled data), and no ASCII column: text2pcap would
        // take ASCII that looks like hex for bytes.
        .args(["--hexdump", "frames", "--hexdump", "noascii"])
        .output()
        .unwrap();
    let dump = dir.join("frames.hex");
    std::fs::write(&dump, &hex.stdout).unwrap();
    let ng = dir.join("text2pcap.pcapng");
    let st = Command::new("text2pcap")
        .arg("-q")
        .arg(&dump)
        .arg(&ng)
        .status()
        .unwrap();
    assert!(st.success(), "text2pcap");
    let (a, b) = (explain(&ng), explain(pcap));
    assert_eq!(
        a.len(),
        b.len(),
        "text2pcap's pcapng has another frame count"
    );
    if let Some((x, y)) = a.iter().zip(&b).find(|(x, y)| x != y) {
        panic!("text2pcap's pcapng explains differently: {x} against {y}");
    }
}

#[test]
fn explain_agrees_with_tshark_on_randpkt_and_scapy_captures() {
    if !have("tshark", "--version") || !have("randpkt", "-h") {
        eprintln!("skipped: needs tshark and randpkt (apt-get install tshark wireshark-common)");
        return;
    }
    let dir = tmpdir();
    let mut tally = Tally::default();
    for ty in RANDPKT_TYPES {
        let p = dir.join(format!("randpkt-{ty}.pcap"));
        let st = Command::new("randpkt")
            .args(["-b", "400", "-c", &PER_TYPE.to_string(), "-t", ty])
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success(), "randpkt -t {ty}");
        check_capture(&p, &mut tally);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scapy_frames.py");
    let scapy = dir.join("scapy.pcap");
    let made = Command::new("python3")
        .arg(&script)
        .arg(&scapy)
        .arg("7")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if made {
        check_capture(&scapy, &mut tally);
        text2pcap_round_trip(&scapy, &dir);
    } else {
        eprintln!("scapy part skipped: python3 has no scapy (pip install scapy)");
    }
    eprintln!(
        "{} frames: {} clean and agreeing, {} malformed and dropped, {} malformed with an agreeing key, dropped by design {:?}",
        tally.frames,
        tally.clean_agree,
        tally.malformed_dropped,
        tally.malformed_key_agrees,
        tally.by_design
    );
    let keep = !tally.failures.is_empty();
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    // Grouped by kind (the text after the frame's place), three examples each.
    let mut kinds: BTreeMap<String, Vec<&String>> = BTreeMap::new();
    for f in &tally.failures {
        let kind = f.split("): ").nth(1).unwrap_or(f);
        let kind: String = kind
            .split("; ")
            .map(|p| p.split(": tshark").next().unwrap_or(p))
            .collect::<Vec<_>>()
            .join("; ");
        kinds.entry(kind).or_default().push(f);
    }
    assert!(
        tally.failures.is_empty(),
        "{} disagreements (captures kept in {}):\n{}",
        tally.failures.len(),
        dir.display(),
        kinds
            .iter()
            .map(|(k, v)| format!(
                "{} x {k}, e.g.\n    {}",
                v.len(),
                v.iter()
                    .take(3)
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n    ")
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(tally.frames >= RANDPKT_TYPES.len() * PER_TYPE);
    assert!(tally.clean_agree >= 500, "{tally:?}");
}
