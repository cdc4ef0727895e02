//! `ct(...)`: OVS's connection-tracking action (`parse_CT`, `parse_NAT` in OVS's
//! `lib/ofp-actions.c`) read into a [`CtSpec`]: `commit`, `force`, `table=T`, `zone=N` or
//! `zone=FIELD[start..end]`, `nat` / `nat(src|dst=RANGE, persistent, hash, random)`,
//! `exec(set_field:V[/M]->ct_mark|ct_label, load:V->FIELD[..])`. `alg=` is refused.

use super::ctx::{Arg, Ctx};
use crate::error::{shown, SyntaxError};
use crate::lex::{Delim, Key, Lexer};
use crate::names::{is_any_register, SUBFIELDS};
use crate::value::{parse_max, parse_u128};
use flowpath_packet::ct::{CtId, CtSpec, CtZoneSrc, NatFlags, NatKind, NatSpec};
use flowpath_packet::{Action, Field};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const NAT_RANGE: &str =
    "ADDR[-ADDR][:PORT[-PORT]] (IPv6 in brackets when ports follow: [ADDR]-[ADDR]:PORT-PORT)";

/// One `key[=value|(value)]` of a parenthesised list, its value and where that starts.
struct Item<'a> {
    key: Key<'a>,
    value: &'a str,
    paren: bool,
}

impl<'a> Ctx<'a> {
    /// The items of the parenthesised list `inner`, at byte `at` of the flow.
    fn items(&self, inner: &str, at: usize) -> Result<Vec<Item<'a>>, SyntaxError> {
        let text: &'a str = self.text;
        let mut lx = Lexer::new(&text[..at + inner.len()], at);
        let mut out = Vec::new();
        while let Some(key) = lx.next_key() {
            let (value, paren) = match key.delim {
                Delim::None => ("", false),
                Delim::Value => (lx.value().0, false),
                Delim::Paren => match lx.paren_value() {
                    Some((v, _)) => (v, true),
                    None => {
                        return Err(self.err(key.at, |c| {
                            format!("missing ')' for '{}(' at column {c}", key.name)
                        }))
                    }
                },
            };
            out.push(Item { key, value, paren });
        }
        Ok(out)
    }

    /// `ct`, `ct()` or `ct(ARGS)`.
    pub(super) fn ct(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let (inner, at) = match arg {
            Arg::None => ("", k.at),
            Arg::Paren(v, at) => (v, at),
            Arg::Plain(_) => {
                return Err(self.err(k.at, |c| {
                    format!(
                    "ct at column {c} takes its arguments in parentheses, e.g. ct(commit,zone=1)"
                )
                }))
            }
        };
        let mut spec = CtSpec::new();
        for it in self.items(inner, at)? {
            let ik = &it.key;
            match ik.name {
                "commit" | "force" => {
                    self.flag_only(&it)?;
                    if ik.name == "commit" {
                        spec.commit = true;
                    } else {
                        spec.force = true;
                    }
                }
                "table" => {
                    let v = self.item_value(&it)?;
                    spec.table = Some(self.num(ik, v, 254, "a table number 0..254")? as u8);
                }
                "zone" => spec.zone = self.zone(ik, self.item_value(&it)?)?,
                "nat" => spec.nat = Some(self.nat(&it)?),
                "exec" if it.paren => self.exec(ik, it.value, &mut spec)?,
                "exec" => {
                    return Err(self.err(ik.at, |c| {
                        format!("exec at column {c} takes its actions in parentheses, e.g. exec(set_field:1->ct_mark)")
                    }))
                }
                "alg" => return Err(self.unsupported(ik, "alg (a connection-tracking helper)")),
                other => {
                    let other = shown(other);
                    return Err(self.err(ik.at, |c| {
                        format!("invalid argument '{other}' to ct at column {c} (ct takes commit, force, table, zone, nat, exec)")
                    }))
                }
            }
        }
        self.ct_rules(k, &spec)?;
        CtId::intern(spec)
            .map(Action::Ct)
            .map_err(|e| self.err(k.at, |c| format!("ct at column {c}: {e}")))
    }

    /// What OVS refuses in a whole `ct`: `force` without `commit`, and anything but a
    /// bare `nat` without `commit`.
    fn ct_rules(&self, k: &Key, spec: &CtSpec) -> Result<(), SyntaxError> {
        if spec.force && !spec.commit {
            return Err(self.err(k.at, |c| {
                format!("ct at column {c}: \"force\" requires \"commit\"")
            }));
        }
        let nat_args = spec.nat.is_some_and(|n| n.kind.is_some());
        if !spec.commit && (nat_args || spec.set_mark.is_some() || spec.set_label.is_some()) {
            return Err(self.err(k.at, |c| {
                format!("ct at column {c} requires \"commit\" for exec(...) or nat with arguments (only a bare nat may go without)")
            }));
        }
        Ok(())
    }

    fn flag_only(&self, it: &Item) -> Result<(), SyntaxError> {
        if it.key.delim == Delim::None {
            return Ok(());
        }
        Err(self.err(it.key.at, |c| {
            format!("{} at column {c} takes no value", it.key.name)
        }))
    }

    fn item_value<'b>(&self, it: &Item<'b>) -> Result<&'b str, SyntaxError> {
        if it.key.delim == Delim::Value && !it.value.is_empty() {
            return Ok(it.value);
        }
        Err(self.err(it.key.at, |c| {
            format!("missing value for {} at column {c}", it.key.name)
        }))
    }

    /// `zone=N` or `zone=FIELD[start..end]` (a 16-bit slice, as OVS requires).
    fn zone(&self, k: &Key, v: &str) -> Result<CtZoneSrc, SyntaxError> {
        if v.bytes().all(|b| b.is_ascii_alphanumeric()) && !v.contains('[') {
            if let Some(n) = parse_max(v, 0xffff) {
                return Ok(CtZoneSrc::Value(n as u16));
            }
            if v.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.bad(k, v, "a zone 0..65535 or FIELD[start..end]"));
            }
        }
        let (field, ofs, bits) = self.subfield(k, v)?;
        if bits != 16 {
            return Err(self.err(k.at, |c| {
                format!("zone={v} at column {c}: a zone field slice must be 16 bits wide (it is {bits})")
            }));
        }
        Ok(CtZoneSrc::Field { field, ofs, bits })
    }

    /// `NAME[]`, `NAME[start..end]` or `NAME[bit]`: field, offset, width.
    fn subfield(&self, k: &Key, v: &str) -> Result<(Field, u8, u8), SyntaxError> {
        let (name, range) = match v.split_once('[') {
            Some((n, r)) if r.ends_with(']') => (n, &r[..r.len() - 1]),
            _ => return Err(self.bad(k, v, "FIELD[], FIELD[start..end] or FIELD[bit]")),
        };
        let Some(&(_, _, field, width)) = SUBFIELDS
            .iter()
            .find(|(a, b, _, _)| *a == name || *b == name)
        else {
            let known: Vec<&str> = SUBFIELDS.iter().map(|(_, n, _, _)| *n).collect();
            let why = if is_any_register(name) {
                format!("{name} is an OVS register, which flowpath does not have")
            } else {
                format!("{name} is no field flowpath can read here")
            };
            return Err(self.err(k.at, |c| {
                format!(
                    "{v} in {} at column {c}: {why} (fields: {})",
                    k.name,
                    known.join(", ")
                )
            }));
        };
        let pair = if range.is_empty() {
            Some((0, width - 1))
        } else {
            let (a, b) = range.split_once("..").unwrap_or((range, range));
            a.parse::<u32>().ok().zip(b.parse::<u32>().ok())
        };
        let Some((ofs, end)) = pair.filter(|&(o, e)| o <= e && e < width) else {
            return Err(self.err(k.at, |c| {
                format!("{v} in {} at column {c}: bits [{range}] do not fit {name}, which is {width} bits wide", k.name)
            }));
        };
        Ok((field, ofs as u8, (end - ofs + 1) as u8))
    }

    /// `nat` or `nat(src|dst[=RANGE], persistent, hash, random)`.
    fn nat(&self, it: &Item) -> Result<NatSpec, SyntaxError> {
        let mut n = NatSpec {
            kind: None,
            addrs: None,
            ports: None,
            flags: NatFlags::default(),
        };
        match it.key.delim {
            Delim::None => return Ok(n),
            Delim::Paren => {}
            Delim::Value => {
                return Err(self.err(it.key.at, |c| {
                    format!(
                    "nat at column {c} takes its arguments in parentheses, e.g. nat(src=10.0.0.1)"
                )
                }))
            }
        }
        let at = it.key.at + it.key.name.len() + 1;
        let mut flag_at = None;
        for x in self.items(it.value, at)? {
            let xk = &x.key;
            match xk.name {
                "src" | "dst" => {
                    let kind = if xk.name == "src" {
                        NatKind::Src
                    } else {
                        NatKind::Dst
                    };
                    if n.kind.is_some_and(|k| k != kind) {
                        return Err(self.err(xk.at, |c| {
                            format!("nat at column {c} may have only one of src and dst")
                        }));
                    }
                    n.kind = Some(kind);
                    if xk.delim == Delim::Value {
                        let (addrs, ports) = self.nat_range(xk, x.value)?;
                        n.addrs = Some(addrs);
                        n.ports = ports;
                    }
                }
                "persistent" | "hash" | "random" => {
                    self.flag_only(&x)?;
                    flag_at.get_or_insert(xk.at);
                    match xk.name {
                        "persistent" => n.flags.persistent = true,
                        "hash" => n.flags.hash = true,
                        _ => n.flags.random = true,
                    }
                }
                other => {
                    let other = shown(other);
                    return Err(self.err(xk.at, |c| {
                        format!("invalid argument '{other}' to nat at column {c} (nat takes src, dst, persistent, hash, random)")
                    }));
                }
            }
        }
        if let Some(fat) = flag_at {
            let why = if n.flags.hash && n.flags.random {
                Some("hash and random exclude each other")
            } else if n.addrs.is_none() {
                Some("persistent, hash and random need an address range (nat(src=ADDR...,random))")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(self.err(fat, |c| format!("nat at column {c}: {why}")));
            }
        }
        Ok(n)
    }

    /// `ADDR[-ADDR][:PORT[-PORT]]`, IPv6 addresses in brackets when ports follow.
    #[allow(clippy::type_complexity)]
    fn nat_range(
        &self,
        k: &Key,
        v: &str,
    ) -> Result<((IpAddr, IpAddr), Option<(u16, u16)>), SyntaxError> {
        let bad = || self.bad(k, v, NAT_RANGE);
        let (addrs, ports) = parse_nat_range(v).ok_or_else(bad)?;
        let ok_addrs = match addrs {
            (IpAddr::V4(a), IpAddr::V4(b)) => a <= b,
            (IpAddr::V6(a), IpAddr::V6(b)) => a <= b,
            _ => false,
        };
        if !ok_addrs || ports.is_some_and(|(lo, hi)| lo == 0 || lo > hi) {
            let v = shown(v);
            return Err(self.err(k.at, |c| {
                format!("bad nat range '{v}' at column {c}: addresses of one family, low to high, and ports 1..65535 low to high")
            }));
        }
        Ok((addrs, ports))
    }

    /// `exec(...)`: the writes to the connection's mark and label (and a `nat(...)`, where
    /// OVS prints one that came after them).
    fn exec(&self, k: &Key, inner: &str, spec: &mut CtSpec) -> Result<(), SyntaxError> {
        let at = k.at + k.name.len() + 1;
        for it in self.items(inner, at)? {
            let ik = &it.key;
            if ik.name == "nat" {
                // How OVS prints a ct whose nested actions have the NAT after a write.
                spec.nat = Some(self.nat(&it)?);
                continue;
            }
            let v = match ik.name.to_ascii_lowercase().as_str() {
                "set_field" | "load" if it.key.delim == Delim::Value => it.value,
                _ => {
                    return Err(self.err(ik.at, |c| {
                        format!("{} at column {c} cannot be inside ct's exec: only set_field (or load) to ct_mark and ct_label", ik.name)
                    }))
                }
            };
            let load = ik.name.eq_ignore_ascii_case("load");
            let (field, value, mask) = self.ct_write(ik, v, load)?;
            let merge = |old: Option<(u128, u128)>| {
                let (ov, om) = old.unwrap_or((0, 0));
                ((ov & !mask) | (value & mask), om | mask)
            };
            if field == Field::CtMark {
                let (v, m) = merge(spec.set_mark.map(|(v, m)| (v as u128, m as u128)));
                spec.set_mark = Some((v as u32, m as u32));
            } else {
                spec.set_label = Some(merge(spec.set_label));
            }
        }
        Ok(())
    }

    /// One write in `exec`: `V[/M]->ct_mark|ct_label` or (`load`) `V->FIELD[..]`.
    fn ct_write(&self, k: &Key, v: &str, load: bool) -> Result<(Field, u128, u128), SyntaxError> {
        let Some((val, target)) = v.split_once("->") else {
            return Err(self.bad(k, v, "VALUE->ct_mark or VALUE->ct_label"));
        };
        let (field, ofs, bits) = if load {
            self.subfield(k, target)?
        } else {
            match target {
                "ct_mark" => (Field::CtMark, 0, 32),
                "ct_label" => (Field::CtLabel, 0, 128),
                _ => (Field::InPort, 0, 0),
            }
        };
        if !matches!(field, Field::CtMark | Field::CtLabel) || (!load && bits == 0) {
            return Err(self.err(k.at, |c| {
                format!("{} to '{target}' at column {c} cannot be inside ct's exec: only ct_mark and ct_label", k.name)
            }));
        }
        let what = if field == Field::CtMark {
            "a number 0..0xffffffff, optionally /mask (not 0)"
        } else {
            "a 128-bit number, optionally /mask (not 0)"
        };
        let (a, m) = match val.split_once('/') {
            Some((a, m)) if !load => (a, Some(m)),
            _ => (val, None),
        };
        let width = if load { bits as u32 } else { field.bits() };
        let fits = |n: u128| width >= 128 || n >> width == 0;
        let value = parse_u128(a).filter(|&n| fits(n));
        let mask = match m {
            None => Some(if width >= 128 {
                u128::MAX
            } else {
                (1u128 << width) - 1
            }),
            Some(m) => parse_u128(m).filter(|&n| fits(n) && n != 0),
        };
        let (Some(value), Some(mask)) = (value, mask) else {
            let val = shown(val);
            return Err(self.err(k.at, |c| {
                format!(
                    "bad value '{val}' for {} to {target} at column {c}: expected {what}",
                    k.name
                )
            }));
        };
        Ok((field, (value & mask) << ofs, mask << ofs))
    }
}

/// The address range and ports of a `nat(src=...)`, without the order checks.
#[allow(clippy::type_complexity)]
fn parse_nat_range(v: &str) -> Option<((IpAddr, IpAddr), Option<(u16, u16)>)> {
    let ports = |p: &str| -> Option<(u16, u16)> {
        let (lo, hi) = p.split_once('-').unwrap_or((p, p));
        let num = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| s.parse().ok())?
        };
        Some((num(lo)?, num(hi)?))
    };
    if let Some(rest) = v.strip_prefix('[') {
        // [ADDR][-[ADDR]][:PORTS]
        let (a, rest) = rest.split_once(']')?;
        let lo: Ipv6Addr = a.parse().ok()?;
        let (hi, rest) = match rest.strip_prefix("-[") {
            Some(r) => {
                let (b, r) = r.split_once(']')?;
                (b.parse().ok()?, r)
            }
            None => (lo, rest),
        };
        let p = match rest {
            "" => None,
            r => Some(ports(r.strip_prefix(':')?)?),
        };
        return Some(((IpAddr::V6(lo), IpAddr::V6(hi)), p));
    }
    let (addrs, p) = match v.split_once(':') {
        Some((a, p)) if !a.contains(':') && a.contains('.') => (a, Some(p)),
        _ => (v, None),
    };
    let (lo, hi) = addrs.split_once('-').unwrap_or((addrs, addrs));
    let pair = if let (Ok(a), Ok(b)) = (lo.parse::<Ipv4Addr>(), hi.parse::<Ipv4Addr>()) {
        (IpAddr::V4(a), IpAddr::V4(b))
    } else if p.is_none() {
        (IpAddr::V6(lo.parse().ok()?), IpAddr::V6(hi.parse().ok()?))
    } else {
        return None;
    };
    let p = match p {
        None => None,
        Some(p) => Some(ports(p)?),
    };
    Some((pair, p))
}
