//! The `packet_parse` check: any bytes as a frame through the parser, VXLAN stripping and
//! every header rewrite, with the invariants that must hold (shared with a stable test).
//!
//! Compiled twice: by the fuzz crate (`fuzz/fuzz_targets/packet_parse.rs`) and, through
//! `#[path]`, by `crates/packet/tests/fuzz_corpus.rs`, so it only uses `flowpath_packet`.

use flowpath_packet::action::Action;
use flowpath_packet::checksum;
use flowpath_packet::key::{ethertype, ipproto, FlowKey, FRAG_LATER, VLAN_PRESENT};
use flowpath_packet::packet::{Packet, HEADROOM};
use flowpath_packet::parse::{parse, DropReason, PacketMeta, ParseOptions};
use flowpath_packet::rewrite::apply;
use flowpath_packet::{Field, KEY_BYTES};

/// The port every frame is parsed as arriving on (any value; it must land in the key).
const IN_PORT: u32 = 0x0102_0304;

/// The rewrites applied, in turn, to every frame that parses: each field setter, the TTL,
/// and VLAN pushes and pops down to none and up to the two tags the parser accepts.
const ACTIONS: [Action; 18] = [
    Action::SetEthSrc([0x02, 0, 0, 0, 0, 0x01]),
    Action::SetEthDst([0x02, 0, 0, 0, 0, 0x02]),
    Action::SetIpv4Src([10, 9, 8, 7]),
    Action::SetIpv4Dst([192, 0, 2, 1]),
    Action::SetIpv6Src([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
    Action::SetIpv6Dst([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]),
    Action::SetNwTos(0xb9),
    Action::SetTpSrc(4321),
    Action::SetTpDst(80),
    Action::DecTtl,
    Action::SetVlanPcp(5),
    Action::PushVlan { tpid: 0x88a8 },
    Action::SetVlanVid(0x0abc),
    Action::PopVlan,
    Action::PopVlan,
    Action::PopVlan,
    Action::SetVlanVid(7),
    Action::PushVlan { tpid: 0x8100 },
];

/// Parse `data` and, when it parses, rewrite it; panics when an invariant breaks.
/// Returns what the parser made of the frame as given.
pub fn check(data: &[u8]) -> Result<FlowKey, DropReason> {
    let opts = ParseOptions::default();
    let mut key = FlowKey::ONES;
    let parsed = parse(data, IN_PORT, &opts, &mut key);
    // The result does not depend on what the key held before.
    let mut again = FlowKey::ZERO;
    assert_eq!(
        parse(data, IN_PORT, &opts, &mut again),
        parsed,
        "parse is not deterministic"
    );
    let mut meta = parsed?;
    assert_eq!(key, again, "parse left part of the key as it found it");
    check_meta(&meta, data.len());
    assert_eq!(key.get(Field::InPort), u128::from(IN_PORT));

    // Strip the outer headers as the datapath does: the rest is a frame that parses, with
    // VXLAN off, to the same key less the tunnel fields.
    let mut buf = vec![0u8; HEADROOM + data.len()];
    buf[HEADROOM..].copy_from_slice(data);
    let mut pkt = Packet::new(&mut buf, HEADROOM, data.len());
    meta.strip_outer(&mut pkt);
    let plain = ParseOptions { vxlan_port: None };
    let mut inner = key;
    for f in [Field::TunId, Field::TunFlags, Field::TunSrc, Field::TunDst] {
        inner.set(f, 0);
    }
    let (k, m) = reparse(pkt.data(), &plain, "after strip_outer");
    assert_eq!(k, inner, "the stripped frame parses to another key");
    assert_eq!(m, meta, "strip_outer's offsets differ from a fresh parse");

    for action in ACTIONS {
        let before = pkt.data().to_vec();
        let (old, old_l3) = (inner, usize::from(meta.l3));
        if let Err(e) = apply(&action, &mut pkt, &mut meta) {
            let d = pkt.data();
            assert_eq!(d, &before[..], "{action:?} refused ({e:?}) but wrote");
            continue;
        }
        let (k, m) = reparse(pkt.data(), &plain, &format!("after {action:?}"));
        assert_eq!(
            m, meta,
            "{action:?}: the offsets it kept differ from a fresh parse"
        );
        check_rewrite(&action, &old, &k, &meta);
        if ipv4_csum_ok(&before, old_l3) == Some(true) {
            let now = ipv4_csum_ok(pkt.data(), usize::from(meta.l3));
            assert_eq!(now, Some(true), "{action:?} broke the IPv4 header checksum");
        }
        inner = k;
    }
    Ok(key)
}

/// Parse a frame that must parse.
fn reparse(data: &[u8], opts: &ParseOptions, when: &str) -> (FlowKey, PacketMeta) {
    let mut k = FlowKey::ZERO;
    match parse(data, IN_PORT, opts, &mut k) {
        Ok(m) => {
            check_meta(&m, data.len());
            (k, m)
        }
        Err(e) => panic!("{when}: the frame no longer parses: {e}"),
    }
}

/// Offsets lie inside the frame and in order.
fn check_meta(m: &PacketMeta, len: usize) {
    let (l2, l3, l4) = (usize::from(m.l2), usize::from(m.l3), usize::from(m.l4));
    assert!(l2 + 14 <= len, "l2 {m:?} len {len}");
    assert!(l3 == 0 || (l3 >= l2 + 14 && l3 < len), "l3 {m:?} len {len}");
    assert!(
        l4 == 0 || (l3 != 0 && l4 > l3 && l4 < len),
        "l4 {m:?} len {len}"
    );
    assert!(m.vlans <= 2, "{m:?}");
}

/// The key after `action` differs from `old` only in the fields the action sets, and
/// holds what it set where the packet has that field.
fn check_rewrite(action: &Action, old: &FlowKey, new: &FlowKey, meta: &PacketMeta) {
    let eth = old.get(Field::EthType) as u16;
    let ip4 = eth == ethertype::IPV4;
    let ip6 = eth == ethertype::IPV6;
    let proto = old.get(Field::NwProto) as u8;
    let ports = (ip4 || ip6)
        && (proto == ipproto::TCP || proto == ipproto::UDP)
        && meta.l4 != 0
        && old.get(Field::NwFrag) as u8 & FRAG_LATER == 0;
    let vlan = |k: &FlowKey| k.get(Field::VlanTci) as u16;
    let (may, expect): (&[Field], Option<(Field, u128)>) = match *action {
        Action::SetEthSrc(m) => (&[Field::EthSrc], Some((Field::EthSrc, mac(m)))),
        Action::SetEthDst(m) => (&[Field::EthDst], Some((Field::EthDst, mac(m)))),
        Action::SetIpv4Src(a) => (
            &[Field::Ipv4Src],
            ip4.then(|| (Field::Ipv4Src, u32::from_be_bytes(a).into())),
        ),
        Action::SetIpv4Dst(a) => (
            &[Field::Ipv4Dst],
            ip4.then(|| (Field::Ipv4Dst, u32::from_be_bytes(a).into())),
        ),
        Action::SetIpv6Src(a) => (
            &[Field::Ipv6Src],
            ip6.then(|| (Field::Ipv6Src, u128::from_be_bytes(a))),
        ),
        Action::SetIpv6Dst(a) => (
            &[Field::Ipv6Dst],
            ip6.then(|| (Field::Ipv6Dst, u128::from_be_bytes(a))),
        ),
        Action::SetNwTos(t) => {
            let ecn = old.get(Field::NwTos) as u8 & 3;
            let want = u128::from((t & 0xfc) | ecn);
            (
                &[Field::NwTos],
                (ip4 || ip6).then_some((Field::NwTos, want)),
            )
        }
        Action::SetTpSrc(p) => (&[Field::TpSrc], ports.then_some((Field::TpSrc, p.into()))),
        Action::SetTpDst(p) => (&[Field::TpDst], ports.then_some((Field::TpDst, p.into()))),
        Action::DecTtl => {
            let ttl = old.get(Field::NwTtl);
            (
                &[Field::NwTtl],
                (ip4 || ip6).then(|| (Field::NwTtl, ttl - 1)),
            )
        }
        Action::PushVlan { .. } => {
            let inner = new.get(Field::VlanInnerTci);
            assert_eq!(inner, old.get(Field::VlanTci), "{action:?}: {new:?}");
            (
                &[Field::VlanTci, Field::VlanInnerTci],
                Some((Field::VlanTci, u128::from(vlan(old) | VLAN_PRESENT))),
            )
        }
        Action::PopVlan => (
            &[Field::VlanTci, Field::VlanInnerTci],
            Some((Field::VlanTci, old.get(Field::VlanInnerTci))),
        ),
        Action::SetVlanVid(v) => {
            let keep = if vlan(old) != 0 {
                vlan(old) & 0xf000
            } else {
                VLAN_PRESENT
            };
            (
                &[Field::VlanTci, Field::VlanInnerTci],
                Some((Field::VlanTci, u128::from(keep | (v & 0x0fff)))),
            )
        }
        Action::SetVlanPcp(p) => {
            let keep = if vlan(old) != 0 {
                vlan(old) & 0x1fff
            } else {
                VLAN_PRESENT
            };
            (
                &[Field::VlanTci, Field::VlanInnerTci],
                Some((Field::VlanTci, u128::from(keep | (u16::from(p & 7) << 13)))),
            )
        }
        Action::Output(_)
        | Action::InPort
        | Action::Controller { .. }
        | Action::SetTunnel(_)
        | Action::SetTunnelDst(_)
        | Action::Normal
        | Action::Flood
        | Action::All
        | Action::Table
        | Action::Group(_)
        | Action::WriteMetadata { .. }
        | Action::Ct(_)
        | Action::CtClear => (&[], None),
    };
    let (o, n) = (old.bytes(), new.bytes());
    for i in 0..KEY_BYTES {
        let covered = may.iter().any(|f| {
            let (at, len) = f.range();
            (at..at + len).contains(&i)
        });
        assert!(
            covered || o[i] == n[i],
            "{action:?} changed key byte {i}: {old:?} -> {new:?}"
        );
    }
    if let Some((f, v)) = expect {
        assert_eq!(new.get(f), v, "{action:?}: {f:?} in {new:?}");
    }
}

fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0, |acc, &b| (acc << 8) | u128::from(b))
}

/// Whether the IPv4 header at `l3` has a right checksum (`None`: no IPv4 header there).
fn ipv4_csum_ok(d: &[u8], l3: usize) -> Option<bool> {
    if l3 < 2 || d.get(l3 - 2..l3)? != ethertype::IPV4.to_be_bytes() {
        return None;
    }
    let ihl = usize::from(d.get(l3)? & 0x0f) * 4;
    Some(checksum::finish(checksum::sum16(d.get(l3..l3 + ihl)?, 0)) == 0)
}
