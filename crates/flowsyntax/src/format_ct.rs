//! Printing connection tracking the way `ovs-ofctl dump-flows` does: the ct match fields
//! (OVS's `match_format`: `ct_state`, `ct_zone`, `ct_mark`, `ct_label`, `ct_nw_src`,
//! `ct_ipv6_src`, `ct_nw_dst`, `ct_ipv6_dst`, `ct_nw_proto`, `ct_tp_src`, `ct_tp_dst`,
//! before the protocol shorthand) and the `ct(...)` action (OVS's `format_CT`,
//! `format_NAT`).
//!
//! Where flowpath prints what OVS would not: `ct_tp_src`/`ct_tp_dst` print without
//! `ct_nw_proto` too (OVS leaves them out then), so every match prints back whole. A
//! `ct`'s `nat` prints before its `exec`, as OVS prints a ct whose first nested action is
//! the NAT (a `CtSpec` keeps no order between them).

use crate::names::SUBFIELDS;
use crate::value::{write_c_hex, write_ipv4_masked, write_ipv6_masked};
use flowpath_packet::ct::{state, CtSpec, CtZoneSrc, NatKind, NatSpec};
use flowpath_packet::key::ethertype;
use flowpath_packet::Field;
use flowpath_pipeline::Match;
use std::fmt::Write;
use std::net::IpAddr;

/// The low 96 bits of a 16-byte address: zero when it holds an IPv4 address.
const LOW96: u128 = (1u128 << 96) - 1;

/// OVS's `ct_state` printing: `est|trk` (or `0`) for a match on every flag, else
/// `+flag-flag` over the matched flags, lowest bit first (`-new+est+trk`).
pub(crate) fn write_ct_state(s: &mut String, v: u8, m: u8) {
    if m == 0xff {
        if v == 0 {
            s.push('0');
            return;
        }
        let mut first = true;
        for (bit, name) in state::NAMES {
            if v & bit != 0 {
                if !std::mem::take(&mut first) {
                    s.push('|');
                }
                s.push_str(name);
            }
        }
        return;
    }
    for (bit, name) in state::NAMES {
        if m & bit != 0 {
            s.push(if v & bit != 0 { '+' } else { '-' });
            s.push_str(name);
        }
    }
}

/// `,name=0xV[/0xM]` (OVS's `%#x`: `0` for zero), or nothing for no mask.
fn write_hex_masked(s: &mut String, name: &str, v: u128, m: u128, full: u128) {
    if m == 0 {
        return;
    }
    let _ = write!(s, ",{name}=");
    write_c_hex(s, v);
    if m != full {
        s.push('/');
        write_c_hex(s, m);
    }
}

/// The ct match fields, each `,name=value` (to go right after `priority=N`).
pub(crate) fn write_ct_match(s: &mut String, m: &Match) {
    let get = |f: Field| (m.value.get(f), m.mask.get(f));
    let (v, mk) = get(Field::CtState);
    if mk != 0 {
        s.push_str(",ct_state=");
        write_ct_state(s, v as u8, mk as u8);
    }
    let (v, mk) = get(Field::CtZone);
    if mk == 0xffff {
        let _ = write!(s, ",ct_zone={v}");
    } else if mk != 0 {
        let _ = write!(s, ",ct_zone=0x{v:x}/0x{mk:x}");
    }
    let (v, mk) = get(Field::CtMark);
    write_hex_masked(s, "ct_mark", v, mk, u32::MAX as u128);
    let (v, mk) = get(Field::CtLabel);
    write_hex_masked(s, "ct_label", v, mk, u128::MAX);
    let v6 = m.mask.get(Field::EthType) == 0xffff
        && m.value.get(Field::EthType) == ethertype::IPV6 as u128;
    for (v4n, v6n, f) in [
        ("ct_nw_src", "ct_ipv6_src", Field::CtIpv6Src),
        ("ct_nw_dst", "ct_ipv6_dst", Field::CtIpv6Dst),
    ] {
        let (v, mk) = get(f);
        if mk == 0 {
            continue;
        }
        if v6 || mk & LOW96 != 0 {
            let _ = write!(s, ",{v6n}=");
            write_ipv6_masked(s, v, mk);
        } else {
            let _ = write!(s, ",{v4n}=");
            write_ipv4_masked(s, (v >> 96) as u32, (mk >> 96) as u32);
        }
    }
    let (v, mk) = get(Field::CtNwProto);
    if mk != 0 {
        let _ = write!(s, ",ct_nw_proto={v}");
    }
    for (name, f) in [("ct_tp_src", Field::CtTpSrc), ("ct_tp_dst", Field::CtTpDst)] {
        let (v, mk) = get(f);
        if mk == 0xffff {
            let _ = write!(s, ",{name}={v}");
        } else if mk != 0 {
            let _ = write!(s, ",{name}=0x{v:x}/0x{mk:x}");
        }
    }
}

/// `ct(commit,force,table=T,zone=Z,nat(...),exec(...))`, each part only when set.
pub(crate) fn write_ct(s: &mut String, spec: &CtSpec) {
    s.push_str("ct(");
    let start = s.len();
    if spec.commit {
        s.push_str("commit,");
    }
    if spec.force {
        s.push_str("force,");
    }
    if let Some(t) = spec.table {
        let _ = write!(s, "table={t},");
    }
    match spec.zone {
        CtZoneSrc::Value(0) => {}
        CtZoneSrc::Value(z) => {
            let _ = write!(s, "zone={z},");
        }
        CtZoneSrc::Field { field, ofs, bits } => {
            s.push_str("zone=");
            write_subfield(s, field, ofs, bits);
            s.push(',');
        }
    }
    if let Some(n) = &spec.nat {
        write_nat(s, n);
        s.push(',');
    }
    if spec.set_mark.is_some() || spec.set_label.is_some() {
        s.push_str("exec(");
        let fields = [
            spec.set_mark
                .map(|(v, m)| (v as u128, m as u128, Field::CtMark)),
            spec.set_label.map(|(v, m)| (v, m, Field::CtLabel)),
        ];
        for (i, (v, m, f)) in fields.into_iter().flatten().enumerate() {
            if i > 0 {
                s.push(',');
            }
            write_ct_write(s, f, v, m);
        }
        s.push_str("),");
    }
    if s.len() > start && s.ends_with(',') {
        s.pop();
    }
    s.push(')');
}

/// A write of `f` (`ct_mark` or `ct_label`) in `exec`, as OVS prints what it sends: a
/// `set_field` for the whole field, else a `load` per run of mask bits (at most 64 bits
/// each, lowest first: OVS's `next_load_segment`), `load:0x5->NXM_NX_CT_MARK[0..3]`.
fn write_ct_write(s: &mut String, f: Field, value: u128, mask: u128) {
    let width = f.bits();
    if mask == f.full_mask() {
        s.push_str("set_field:");
        write_c_hex(s, value);
        let _ = write!(s, "->{}", f.name());
        return;
    }
    let mut pos = 0u32;
    let mut first = true;
    while pos < width && mask >> pos != 0 {
        let ofs = pos + (mask >> pos).trailing_zeros();
        let n = (!(mask >> ofs)).trailing_zeros().min(64).min(width - ofs);
        let v = (value >> ofs) & (u64::MAX >> (64 - n)) as u128;
        if !std::mem::take(&mut first) {
            s.push(',');
        }
        s.push_str("load:");
        write_c_hex(s, v);
        s.push_str("->");
        write_subfield(s, f, ofs as u8, n as u8);
        pos = ofs + n;
    }
}

/// OVS's `mf_format_subfield`: `OXM_OF_METADATA[0..15]`, `NXM_NX_CT_ZONE[]`, `NAME[bit]`.
fn write_subfield(s: &mut String, field: Field, ofs: u8, bits: u8) {
    let (name, width) = SUBFIELDS
        .iter()
        .find(|(_, _, f, _)| *f == field)
        .map_or((field.name(), field.bits()), |&(n, _, _, w)| (n, w));
    s.push_str(name);
    if ofs == 0 && bits as u32 == width {
        s.push_str("[]");
    } else if bits == 1 {
        let _ = write!(s, "[{ofs}]");
    } else {
        let _ = write!(s, "[{}..{}]", ofs, ofs as u32 + bits as u32 - 1);
    }
}

/// OVS's `format_NAT`: `nat`, `nat(src)`, `nat(dst=A-B:P-Q,persistent,hash,random)`;
/// IPv6 addresses in brackets when ports follow.
fn write_nat(s: &mut String, n: &NatSpec) {
    s.push_str("nat");
    let Some(kind) = n.kind else { return };
    s.push_str(if kind == NatKind::Src { "(src" } else { "(dst" });
    if let Some((lo, hi)) = n.addrs {
        s.push('=');
        let ports = n.ports.filter(|&(p, _)| p != 0);
        let addr = |s: &mut String, a: IpAddr| match a {
            IpAddr::V6(a) if ports.is_some() => {
                let _ = write!(s, "[{a}]");
            }
            a => {
                let _ = write!(s, "{a}");
            }
        };
        addr(s, lo);
        if hi != lo {
            s.push('-');
            addr(s, hi);
        }
        if let Some((p, q)) = ports {
            let _ = write!(s, ":{p}");
            if q != p && q != 0 {
                let _ = write!(s, "-{q}");
            }
        }
        for (on, name) in [
            (n.flags.persistent, ",persistent"),
            (n.flags.hash, ",hash"),
            (n.flags.random, ",random"),
        ] {
            if on {
                s.push_str(name);
            }
        }
    }
    s.push(')');
}
