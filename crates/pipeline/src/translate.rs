//! Translating actions while a key is classified: each action changes the key later
//! tables see and un-wildcards every bit it depended on, so the megaflow stays exact; an
//! action may also end the walk ([`Ending`]).

use crate::rule::{Match, RuleSpec};
use flowpath_packet::ct::{CtId, CtSpec, CtZoneSrc};
use flowpath_packet::key::{ethertype, ipproto, FRAG_LATER, VLAN_PRESENT, VLAN_VID_MASK};
use flowpath_packet::{packet_in_reason, Action, Field, FlowKey};
use smallvec::SmallVec;

/// How classification of one key ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    /// The last rule had no `goto_table`.
    Done,
    /// No rule matched in this table: the packet is dropped (OpenFlow 1.3 table-miss).
    TableMiss(u8),
    /// `dec_ttl` found TTL 0 or 1: the packet is dropped there.
    TtlExpired,
    /// A third VLAN tag was pushed: more than flowpath parses, so it is dropped there.
    TooManyVlans,
}

/// The actions a megaflow runs, as the translation collects them.
pub(crate) type ActionList = SmallVec<[Action; 4]>;

/// Apply one action to the key being classified, recording what it depended on.
///
/// Later tables match on the key as the actions left it. Bits an action reads are
/// un-wildcarded in the original key's field; where an action moves a value between fields
/// (VLAN push/pop) both fields are un-wildcarded whole, so a later match on the moved value
/// is covered. Extra mask bits only make a megaflow narrower; a missing one would be wrong.
pub(crate) fn translate_action(
    a: &Action,
    k: &mut FlowKey,
    wc: &mut FlowKey,
    out: &mut ActionList,
) -> Option<Ending> {
    match *a {
        Action::Output(_)
        | Action::InPort
        | Action::Controller { .. }
        | Action::Flood
        | Action::All => out.push(*a),
        Action::Normal => normal(wc, out),
        // TABLE is for packet-outs only (the flow syntax refuses it in a rule, and so
        // should the OpenFlow channel): in a rule it does nothing.
        Action::Table => {}
        // Expanded into its buckets by the walk (group.rs) before it gets here.
        Action::Group(_) => {}
        // The key's metadata for later tables; nothing for the datapath to do. The bits
        // kept from before are read, so they are un-wildcarded (the parser keys every
        // packet with metadata 0, so this narrows no real megaflow).
        Action::WriteMetadata { value, mask } => {
            let full = Field::Metadata.full_mask();
            let mask = mask as u128 & full;
            wc.or_field(Field::Metadata, !mask & full);
            let old = k.get(Field::Metadata);
            k.set(Field::Metadata, (old & !mask) | (value as u128 & mask));
        }
        Action::SetTunnel(id) => set(k, out, a, Field::TunId, id as u128),
        Action::SetTunnelDst(b) => set(k, out, a, Field::TunDst, tun_addr(b)),
        Action::SetEthSrc(m) => set(k, out, a, Field::EthSrc, mac(m)),
        Action::SetEthDst(m) => set(k, out, a, Field::EthDst, mac(m)),
        Action::SetIpv4Src(ip) | Action::SetIpv4Dst(ip) => {
            let f = if matches!(a, Action::SetIpv4Src(_)) {
                Field::Ipv4Src
            } else {
                Field::Ipv4Dst
            };
            let v = u32::from_be_bytes(ip) as u128;
            set_if_eth_type(k, wc, out, a, ethertype::IPV4, f, v);
        }
        Action::SetIpv6Src(ip) | Action::SetIpv6Dst(ip) => {
            let f = if matches!(a, Action::SetIpv6Src(_)) {
                Field::Ipv6Src
            } else {
                Field::Ipv6Dst
            };
            set_if_eth_type(k, wc, out, a, ethertype::IPV6, f, u128::from_be_bytes(ip));
        }
        Action::SetNwTos(tos) => set_tos(k, wc, out, a, tos),
        Action::SetTpSrc(p) | Action::SetTpDst(p) => set_tp(k, wc, out, a, p),
        Action::PushVlan { .. } => return push_vlan(k, wc, out, a),
        Action::PopVlan => pop_vlan(k, wc, out, a),
        Action::SetVlanVid(_) | Action::SetVlanPcp(_) => set_vlan(k, wc, out, a),
        Action::DecTtl => return dec_ttl(k, wc, out, a),
        // Tracking reads the packet at run time, not the key: only the type it needs
        // (and a zone taken from a key field, read here).
        Action::Ct(id) => {
            wc.set_all(Field::EthType);
            out.push(ct_with_zone(id, k, wc));
        }
        Action::CtClear => {
            flowpath_packet::ct::clear(k);
            out.push(*a);
        }
    }
    None
}

/// Fill in what a PACKET_IN says about the controller actions `rule` (in `table`) just
/// added: the rule's table and cookie, and the reason — `NO_MATCH` for a table-miss rule
/// (priority 0, every field wildcarded: OpenFlow 1.3 §6.4), `ACTION` for any other.
pub(crate) fn stamp_controller(added: &mut [Action], table: u8, rule: &RuleSpec) {
    for a in added {
        if let Action::Controller {
            reason,
            table: t,
            cookie,
            ..
        } = a
        {
            *reason = if rule.priority == 0 && rule.matches == Match::any() {
                packet_in_reason::NO_MATCH
            } else {
                packet_in_reason::ACTION
            };
            *t = table;
            *cookie = Action::cookie_halves(rule.cookie);
        }
    }
}

/// `NORMAL`: the MAC learning switch's decision depends on the ingress port (always in the
/// mask), the VLAN (VID and whether tagged) and both MACs as the packet is at this point.
/// The datapath resolves it with its MAC learning table (`flowpath_datapath::l2`); here
/// the bits it reads are un-wildcarded. Where an earlier action set one of them the original
/// field is un-wildcarded all the same (narrower than needed, never wrong).
fn normal(wc: &mut FlowKey, out: &mut ActionList) {
    wc.or_field(Field::VlanTci, (VLAN_PRESENT | VLAN_VID_MASK) as u128);
    wc.set_all(Field::EthSrc);
    wc.set_all(Field::EthDst);
    out.push(Action::Normal);
}

/// Replay one translated action's effect on a key (what later tables, or a NORMAL after
/// it, see): for the datapath's resolution of `NORMAL`, which needs the key as the
/// actions before it left it. `actions` of a [`crate::Translation`] replayed in order
/// from the classified key give exactly the keys the walk saw.
pub fn replay_on_key(a: &Action, k: &mut FlowKey) {
    let mut wc = FlowKey::ZERO;
    let mut out = ActionList::new();
    let _ = translate_action(a, k, &mut wc, &mut out);
}

/// A field set unconditionally (its value is not read, so nothing is un-wildcarded).
/// A `SetTunnelDst` address as the key holds tunnel addresses: IPv4 in the first 4 bytes.
pub(crate) fn tun_addr(b: [u8; 16]) -> u128 {
    match Action::tunnel_dst(b) {
        std::net::IpAddr::V4(v4) => (u32::from(v4) as u128) << 96,
        std::net::IpAddr::V6(v6) => u128::from(v6),
    }
}

fn set(k: &mut FlowKey, out: &mut ActionList, a: &Action, f: Field, v: u128) {
    k.set(f, v);
    out.push(*a);
}

/// An address set only on packets of `eth_type` (the type is un-wildcarded).
fn set_if_eth_type(
    k: &mut FlowKey,
    wc: &mut FlowKey,
    out: &mut ActionList,
    a: &Action,
    eth_type: u16,
    f: Field,
    v: u128,
) {
    wc.set_all(Field::EthType);
    if k.get(Field::EthType) as u16 == eth_type {
        set(k, out, a, f, v);
    }
}

/// `mod_nw_tos`: IPv4 and IPv6 only; the ECN bits stay.
fn set_tos(k: &mut FlowKey, wc: &mut FlowKey, out: &mut ActionList, a: &Action, tos: u8) {
    wc.set_all(Field::EthType);
    if is_ip(k.get(Field::EthType) as u16) {
        let old = k.get(Field::NwTos) as u8;
        set(
            k,
            out,
            a,
            Field::NwTos,
            ((tos & 0xfc) | (old & 0x03)) as u128,
        );
    }
}

/// `mod_tp_src`/`mod_tp_dst`: TCP and UDP with an L4 header (not later fragments).
fn set_tp(k: &mut FlowKey, wc: &mut FlowKey, out: &mut ActionList, a: &Action, p: u16) {
    wc.set_all(Field::EthType);
    wc.set_all(Field::NwProto);
    wc.or_field(Field::NwFrag, FRAG_LATER as u128);
    let proto = k.get(Field::NwProto) as u8;
    let later = k.get(Field::NwFrag) as u8 & FRAG_LATER != 0;
    let ip = is_ip(k.get(Field::EthType) as u16);
    if ip && (proto == ipproto::TCP || proto == ipproto::UDP) && !later {
        let f = if matches!(a, Action::SetTpSrc(_)) {
            Field::TpSrc
        } else {
            Field::TpDst
        };
        set(k, out, a, f, p as u128);
    }
}

/// `push_vlan`: the outer tag moves inside; a third tag ends the walk (dropped).
fn push_vlan(
    k: &mut FlowKey,
    wc: &mut FlowKey,
    out: &mut ActionList,
    a: &Action,
) -> Option<Ending> {
    wc.set_all(Field::VlanTci);
    wc.set_all(Field::VlanInnerTci);
    let outer = k.get(Field::VlanTci) as u16;
    let inner = k.get(Field::VlanInnerTci) as u16;
    out.push(*a);
    if inner & VLAN_PRESENT != 0 {
        return Some(Ending::TooManyVlans);
    }
    k.set(Field::VlanInnerTci, outer as u128);
    k.set(Field::VlanTci, (outer | VLAN_PRESENT) as u128);
    None
}

/// `strip_vlan`: the inner tag (if any) becomes the outer one.
fn pop_vlan(k: &mut FlowKey, wc: &mut FlowKey, out: &mut ActionList, a: &Action) {
    wc.set_all(Field::VlanTci);
    wc.set_all(Field::VlanInnerTci);
    if k.get(Field::VlanTci) as u16 & VLAN_PRESENT != 0 {
        let inner = k.get(Field::VlanInnerTci);
        k.set(Field::VlanTci, inner);
        k.set(Field::VlanInnerTci, 0);
        out.push(*a);
    }
}

/// `mod_vlan_vid`/`mod_vlan_pcp`: an untagged packet gets an 802.1Q tag with TCI 0 first.
fn set_vlan(k: &mut FlowKey, wc: &mut FlowKey, out: &mut ActionList, a: &Action) {
    wc.set_all(Field::VlanTci);
    wc.set_all(Field::VlanInnerTci);
    let mut tci = k.get(Field::VlanTci) as u16;
    if tci & VLAN_PRESENT == 0 {
        tci = VLAN_PRESENT;
    }
    tci = match *a {
        Action::SetVlanVid(v) => (tci & !VLAN_VID_MASK) | (v & VLAN_VID_MASK),
        Action::SetVlanPcp(p) => (tci & 0x1fff) | ((p as u16 & 7) << 13),
        _ => unreachable!("set_vlan is called for the VLAN set actions only"),
    };
    set(k, out, a, Field::VlanTci, tci as u128);
}

/// `dec_ttl`: IP only; TTL 0 or 1 ends the walk (dropped), so the TTL is matched exactly.
fn dec_ttl(k: &mut FlowKey, wc: &mut FlowKey, out: &mut ActionList, a: &Action) -> Option<Ending> {
    wc.set_all(Field::EthType);
    if is_ip(k.get(Field::EthType) as u16) {
        wc.set_all(Field::NwTtl);
        out.push(*a);
        let ttl = k.get(Field::NwTtl) as u8;
        if ttl <= 1 {
            return Some(Ending::TtlExpired);
        }
        k.set(Field::NwTtl, (ttl - 1) as u128);
    }
    None
}

/// A `ct` whose zone comes from a key field (`zone=metadata[0..15]`) takes it from the key
/// as the walk has it now (after an earlier `write_metadata`, say), so the datapath gets
/// the zone as a number; the bits read are un-wildcarded. (Interning takes a lock: this
/// is the slow path's translation, once per megaflow.)
fn ct_with_zone(id: CtId, k: &FlowKey, wc: &mut FlowKey) -> Action {
    let spec = id.spec();
    let CtZoneSrc::Field { field, ofs, bits } = spec.zone else {
        return Action::Ct(id);
    };
    let n = bits.min(16) as u32;
    wc.or_field(field, ((1u128 << n) - 1) << ofs);
    let fixed = CtSpec {
        zone: CtZoneSrc::Value(spec.zone.zone(k)),
        ..*spec
    };
    // Past the interner's bound the zone is left to be read at run time.
    Action::Ct(CtId::intern(fixed).unwrap_or(id))
}

fn is_ip(eth_type: u16) -> bool {
    eth_type == ethertype::IPV4 || eth_type == ethertype::IPV6
}

fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |acc, &b| (acc << 8) | b as u128)
}
