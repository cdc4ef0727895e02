//! Golden tests on real captures: every packet of `tests/data/<name>.pcap` is parsed and
//! rendered as one line, which must equal line for line `tests/data/<name>.expected`.
//!
//! Where the files come from:
//! - The captures were made with tcpdump on a veth pair between two network namespaces
//!   (`tests/data/capture.sh`): ping, ping -6 (with neighbour discovery), UDP, a TCP
//!   connection, ARP, IPv4 and IPv6 fragments and VXLAN over IPv4 and IPv6. The container
//!   kernel had no 802.1Q module, so `vlan.pcap` holds tagged frames sent through an
//!   AF_PACKET socket (`tests/data/vlan_send.py`) instead of from a VLAN device.
//! - The `.expected` files were generated from tshark's dissection, not from this parser:
//!   `python3 tests/data/gen_expected.py tests/data/*.pcap` (tshark, reassembly off).
//!
//! To regenerate after a deliberate format or parser change: `FLOWPATH_BLESS=1 cargo test
//! -p flowpath-packet --test golden` rewrites the `.expected` files from the parser; then
//! re-run `gen_expected.py` and check that `git diff` of the `.expected` files is empty,
//! so the committed files stay tshark's view.

use flowpath_packet::key::{Field, FlowKey, TUN_IPV6};
use flowpath_packet::{parse, ParseOptions};
use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

const CAPTURES: &[&str] = &[
    "arp", "icmp", "icmp6", "udp", "tcp", "vlan", "frag4", "frag6", "vxlan", "vxlan6",
];

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = PcapReader::new(file).expect("pcap header");
    assert_eq!(
        reader.header().datalink,
        DataLink::ETHERNET,
        "{}",
        path.display()
    );
    let mut out = Vec::new();
    while let Some(pkt) = reader.next_packet() {
        out.push(pkt.expect("pcap record").data.into_owned());
    }
    out
}

fn mac(k: &FlowKey, f: Field) -> String {
    let (off, len) = f.range();
    let b = &k.bytes()[off..off + len];
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn ip(k: &FlowKey, f: Field, v6: bool) -> String {
    let (off, _) = f.range();
    let b = &k.bytes()[off..off + 16];
    if v6 {
        Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap()).to_string()
    } else {
        Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string()
    }
}

/// One line per packet; the format `gen_expected.py` writes.
fn render(data: &[u8]) -> String {
    let mut k = FlowKey::ZERO;
    let m = match parse(data, 1, &ParseOptions::default(), &mut k) {
        Ok(m) => m,
        Err(r) => return format!("drop={r}"),
    };
    let g = |f| k.get(f);
    let v6 = g(Field::EthType) == 0x86dd;
    let tun_v6 = g(Field::TunFlags) as u8 & TUN_IPV6 != 0;
    let mut s = String::new();
    write!(
        s,
        "l2={} l3={} l4={} vlans={} eth_dst={} eth_src={} eth_type={:#06x} vlan_tci={:#06x} \
         vlan_inner_tci={:#06x} nw_proto={} nw_tos={} nw_ttl={} nw_frag={} ip_src={} ip_dst={} \
         tp_src={} tp_dst={} tcp_flags=0x{:03x} tun_id={} tun_flags={} tun_src={} tun_dst={}",
        m.l2,
        m.l3,
        m.l4,
        m.vlans,
        mac(&k, Field::EthDst),
        mac(&k, Field::EthSrc),
        g(Field::EthType),
        g(Field::VlanTci),
        g(Field::VlanInnerTci),
        g(Field::NwProto),
        g(Field::NwTos),
        g(Field::NwTtl),
        g(Field::NwFrag),
        ip(&k, Field::Ipv6Src, v6),
        ip(&k, Field::Ipv6Dst, v6),
        g(Field::TpSrc),
        g(Field::TpDst),
        g(Field::TcpFlags),
        g(Field::TunId),
        g(Field::TunFlags),
        ip(&k, Field::TunSrc, tun_v6),
        ip(&k, Field::TunDst, tun_v6),
    )
    .unwrap();
    assert_eq!(g(Field::InPort), 1);
    s
}

fn check(name: &str) {
    let dir = data_dir();
    let packets = read_pcap(&dir.join(format!("{name}.pcap")));
    assert!(!packets.is_empty(), "{name}.pcap is empty");
    let actual: Vec<String> = packets.iter().map(|p| render(p)).collect();
    let expected_path = dir.join(format!("{name}.expected"));
    if std::env::var_os("FLOWPATH_BLESS").is_some() {
        std::fs::write(&expected_path, actual.join("\n") + "\n").unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&expected_path)
        .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(actual.len(), expected.len(), "{name}: packet count");
    for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
        assert_eq!(a, e, "{name}.pcap packet #{} (1-based)", i + 1);
    }
}

#[test]
fn every_capture_has_a_test() {
    let mut on_disk: Vec<String> = std::fs::read_dir(data_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".pcap").map(str::to_owned)
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = CAPTURES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

macro_rules! golden {
    ($($name:ident),*) => {$(
        #[test]
        fn $name() {
            check(stringify!($name));
        }
    )*};
}

golden!(arp, icmp, icmp6, udp, tcp, vlan, frag4, frag6, vxlan, vxlan6);
