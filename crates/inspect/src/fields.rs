//! A flow key as named fields: what the parser found in a frame, in the flow syntax's names
//! (`dl_src`, `dl_type`, `nw_src`, `tp_dst`, ...), only the fields the frame has.

use flowpath_packet::ct::state;
use flowpath_packet::key::{
    ethertype, ipproto, FRAG_ANY, FRAG_LATER, TUN_IPV6, TUN_PRESENT, VLAN_PRESENT, VLAN_VID_MASK,
};
use flowpath_packet::{Field, FlowKey};
use serde::ser::{Serialize, Serializer};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// One field's value: a number (printed in decimal, or in hex where the flow syntax
/// prints hex) or text (addresses, `ip_frag`). JSON gets numbers as numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldValue {
    Num(u64),
    /// Printed `0x` + at least this many hex digits.
    Hex(u64, usize),
    Text(String),
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Num(n) => write!(f, "{n}"),
            FieldValue::Hex(n, w) => write!(f, "{n:#0w$x}", w = w + 2),
            FieldValue::Text(t) => f.write_str(t),
        }
    }
}

impl Serialize for FieldValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FieldValue::Num(n) | FieldValue::Hex(n, _) => s.serialize_u64(*n),
            FieldValue::Text(t) => s.serialize_str(t),
        }
    }
}

fn mac(v: u128) -> FieldValue {
    let b = (v as u64).to_be_bytes();
    FieldValue::Text(format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    ))
}

fn text(t: impl ToString) -> FieldValue {
    FieldValue::Text(t.to_string())
}

fn num(k: &FlowKey, f: Field) -> FieldValue {
    FieldValue::Num(k.get(f) as u64)
}

/// The fields present in `key`, in the order `ovs-ofctl` prints a match: tunnel, `in_port`
/// (when not 0), Ethernet and VLANs, `dl_type`, L3, L4. Transport fields are left out for
/// later fragments (they have none), as the parser leaves them zero.
pub fn key_fields(key: &FlowKey) -> Vec<(&'static str, FieldValue)> {
    let mut v = Vec::with_capacity(16);
    push_ct(key, &mut v);
    push_tunnel(key, &mut v);
    if key.get(Field::InPort) != 0 {
        v.push(("in_port", num(key, Field::InPort)));
    }
    v.push(("dl_src", mac(key.get(Field::EthSrc))));
    v.push(("dl_dst", mac(key.get(Field::EthDst))));
    for (f, vid, pcp) in [
        (Field::VlanTci, "dl_vlan", "dl_vlan_pcp"),
        (Field::VlanInnerTci, "dl_vlan1", "dl_vlan_pcp1"),
    ] {
        let tci = key.get(f) as u16;
        if tci & VLAN_PRESENT != 0 {
            v.push((vid, FieldValue::Num((tci & VLAN_VID_MASK) as u64)));
            v.push((pcp, FieldValue::Num((tci >> 13) as u64)));
        }
    }
    let eth = key.get(Field::EthType) as u16;
    v.push(("dl_type", FieldValue::Hex(eth as u64, 4)));
    let proto = key.get(Field::NwProto) as u8;
    match eth {
        ethertype::ARP => {
            v.push(("arp_spa", text(key.ipv4_src())));
            v.push(("arp_tpa", text(key.ipv4_dst())));
            v.push(("arp_op", FieldValue::Num(proto as u64)));
            return v;
        }
        ethertype::IPV4 => {
            v.push(("nw_src", text(key.ipv4_src())));
            v.push(("nw_dst", text(key.ipv4_dst())));
        }
        ethertype::IPV6 => {
            v.push(("ipv6_src", text(key.ipv6_src())));
            v.push(("ipv6_dst", text(key.ipv6_dst())));
        }
        _ => return v,
    }
    v.push(("nw_proto", FieldValue::Num(proto as u64)));
    // As OVS prints them: the DSCP bits as nw_tos, the ECN bits apart.
    let tos = key.get(Field::NwTos) as u64;
    v.push(("nw_tos", FieldValue::Num(tos & 0xfc)));
    v.push(("nw_ecn", FieldValue::Num(tos & 0x03)));
    v.push(("nw_ttl", num(key, Field::NwTtl)));
    let frag = key.get(Field::NwFrag) as u8;
    v.push((
        "ip_frag",
        text(match (frag & FRAG_ANY != 0, frag & FRAG_LATER != 0) {
            (false, _) => "no",
            (true, false) => "first",
            (true, true) => "later",
        }),
    ));
    if frag & FRAG_LATER != 0 {
        return v;
    }
    push_l4(key, eth, proto, &mut v);
    v
}

/// `ct_state` of a tracked key as its set flags, OVS's names in OVS's order: `+new+trk`.
pub fn ct_state_flags(st: u8) -> String {
    let mut s = String::new();
    for (bit, name) in state::NAMES {
        if st & bit != 0 {
            s.push('+');
            s.push_str(name);
        }
    }
    s
}

/// The connection-tracking fields of a tracked key (after a `ct` action): the state, the
/// zone, mark and label when not 0, and the connection's original-direction tuple when
/// the tracker gave one.
fn push_ct(key: &FlowKey, v: &mut Vec<(&'static str, FieldValue)>) {
    let st = key.get(Field::CtState) as u8;
    if st == 0 {
        return;
    }
    v.push(("ct_state", text(ct_state_flags(st))));
    if key.get(Field::CtZone) != 0 {
        v.push(("ct_zone", num(key, Field::CtZone)));
    }
    if key.get(Field::CtMark) != 0 {
        v.push(("ct_mark", FieldValue::Hex(key.get(Field::CtMark) as u64, 1)));
    }
    let label = key.get(Field::CtLabel);
    if label != 0 {
        v.push(("ct_label", text(format!("{label:#x}"))));
    }
    if key.get(Field::CtNwProto) == 0 {
        return;
    }
    if key.get(Field::EthType) as u16 == ethertype::IPV6 {
        v.push((
            "ct_ipv6_src",
            text(Ipv6Addr::from(key.get(Field::CtIpv6Src))),
        ));
        v.push((
            "ct_ipv6_dst",
            text(Ipv6Addr::from(key.get(Field::CtIpv6Dst))),
        ));
    } else {
        v.push((
            "ct_nw_src",
            text(Ipv4Addr::from(key.get(Field::CtNwSrc) as u32)),
        ));
        v.push((
            "ct_nw_dst",
            text(Ipv4Addr::from(key.get(Field::CtNwDst) as u32)),
        ));
    }
    v.push(("ct_nw_proto", num(key, Field::CtNwProto)));
    v.push(("ct_tp_src", num(key, Field::CtTpSrc)));
    v.push(("ct_tp_dst", num(key, Field::CtTpDst)));
}

/// The tunnel fields, for a packet that came through a tunnel.
fn push_tunnel(key: &FlowKey, v: &mut Vec<(&'static str, FieldValue)>) {
    let tun = key.get(Field::TunFlags) as u8;
    if tun & TUN_PRESENT != 0 {
        v.push(("tun_id", FieldValue::Hex(key.get(Field::TunId) as u64, 1)));
        if tun & TUN_IPV6 != 0 {
            v.push(("tun_ipv6_src", text(Ipv6Addr::from(key.get(Field::TunSrc)))));
            v.push(("tun_ipv6_dst", text(Ipv6Addr::from(key.get(Field::TunDst)))));
        } else {
            let v4 = |f| Ipv4Addr::from((key.get(f) >> 96) as u32);
            v.push(("tun_src", text(v4(Field::TunSrc))));
            v.push(("tun_dst", text(v4(Field::TunDst))));
        }
    }
}

/// The transport fields of an IP packet that has them (not a later fragment): the ports
/// (and TCP's flags), or ICMP's type and code.
fn push_l4(key: &FlowKey, eth: u16, proto: u8, v: &mut Vec<(&'static str, FieldValue)>) {
    match (eth, proto) {
        (_, ipproto::TCP) | (_, ipproto::UDP) => {
            v.push(("tp_src", num(key, Field::TpSrc)));
            v.push(("tp_dst", num(key, Field::TpDst)));
            if proto == ipproto::TCP {
                v.push((
                    "tcp_flags",
                    FieldValue::Hex(key.get(Field::TcpFlags) as u64, 3),
                ));
            }
        }
        (ethertype::IPV4, ipproto::ICMP) => {
            v.push(("icmp_type", num(key, Field::TpSrc)));
            v.push(("icmp_code", num(key, Field::TpDst)));
        }
        (ethertype::IPV6, ipproto::ICMPV6) => {
            v.push(("icmpv6_type", num(key, Field::TpSrc)));
            v.push(("icmpv6_code", num(key, Field::TpDst)));
        }
        _ => {}
    }
}

/// The key on one line, `name=value` joined by commas: valid flow syntax for
/// `flowpath trace` (prerequisites included: `dl_type` and `nw_proto` are always given).
pub fn format_key(key: &FlowKey) -> String {
    let mut s = String::with_capacity(200);
    for (i, (n, v)) in key_fields(key).iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(n);
        s.push('=');
        s.push_str(&v.to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_packet::parse::{parse, ParseOptions};

    fn udp_frame() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        f[38..40].copy_from_slice(&26u16.to_be_bytes());
        f
    }

    #[test]
    fn a_udp_frame_prints_its_fields_in_flow_syntax() {
        let mut k = FlowKey::ZERO;
        parse(&udp_frame(), 3, &ParseOptions::default(), &mut k).unwrap();
        assert_eq!(
            format_key(&k),
            "in_port=3,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,dl_type=0x0800,\
             nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_proto=17,nw_tos=0,nw_ecn=0,nw_ttl=64,ip_frag=no,\
             tp_src=1234,tp_dst=80"
        );
        let json = serde_json::to_value(
            key_fields(&k)
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>(),
        )
        .unwrap();
        assert_eq!(json["dl_type"], 2048);
        assert_eq!(json["nw_src"], "10.0.0.1");
    }

    #[test]
    fn a_tracked_key_prints_its_ct_fields_and_parses_back() {
        let mut k = FlowKey::ZERO;
        parse(&udp_frame(), 3, &ParseOptions::default(), &mut k).unwrap();
        k.set(Field::CtState, 0x22);
        k.set(Field::CtZone, 5);
        k.set(Field::CtMark, 0x10);
        k.set(Field::CtNwSrc, 0x0a00_0001);
        k.set(Field::CtNwDst, 0x0a00_0002);
        k.set(Field::CtNwProto, 17);
        k.set(Field::CtTpSrc, 1234);
        k.set(Field::CtTpDst, 80);
        let s = format_key(&k);
        assert!(
            s.starts_with(
                "ct_state=+est+trk,ct_zone=5,ct_mark=0x10,ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,\
                 ct_nw_proto=17,ct_tp_src=1234,ct_tp_dst=80,in_port=3,"
            ),
            "{s}"
        );
        let f =
            flowpath_flowsyntax::parse_flow(&s, flowpath_flowsyntax::FlowCommand::Delete).unwrap();
        assert!(f.spec.matches.matches(&k));
        assert_eq!(f.spec.matches.value.get(Field::CtState), 0x22);
    }

    #[test]
    fn the_printed_key_parses_back_as_a_flow_matching_the_same_key() {
        let mut k = FlowKey::ZERO;
        parse(&udp_frame(), 3, &ParseOptions::default(), &mut k).unwrap();
        let f = flowpath_flowsyntax::parse_flow(
            &format_key(&k),
            flowpath_flowsyntax::FlowCommand::Delete,
        )
        .unwrap();
        assert!(f.spec.matches.matches(&k));
    }
}
