//! Connection tracking in a flow: the ct match fields (`ct_state`, `ct_zone`, `ct_mark`,
//! `ct_label`, the connection's addresses, protocol and ports), the prerequisite OVS puts
//! on the connection's tuple (a valid tracked state), and the checks of `ct` actions
//! against the match (OVS's `check_CT`, `check_NAT`).

use super::*;
use crate::value::parse_u128;
use flowpath_packet::ct::{state, NatKind};
use flowpath_packet::Action;
use std::net::IpAddr;

const CT_STATE_WHAT: &str = "+flag-flag... (new, est, rel, rpl, inv, trk, snat, dnat, each once), flag|flag..., a number, or value/mask";

/// `ct_state` values as OVS's `parse_flags` reads them: `V/M` numbers, `+trk-new...`
/// (only the named flags matter), or `trk|est` and numbers (every flag matched).
pub(super) fn parse_ct_state(s: &str) -> Option<(u128, u128)> {
    if s.is_empty() {
        return None;
    }
    if let Some((v, m)) = s.split_once('/') {
        return Some((parse_max(v, 0xff)? as u128, parse_max(m, 0xff)? as u128));
    }
    let bit_of = |name: &str| {
        state::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|&(b, _)| b as u128)
    };
    if s.starts_with(['+', '-']) {
        let (mut flags, mut mask) = (0u128, 0u128);
        let mut rest = s;
        while let Some(c) = rest.chars().next() {
            let set = match c {
                '+' => true,
                '-' => false,
                _ => return None,
            };
            rest = &rest[1..];
            let len = rest.find(['+', '-']).unwrap_or(rest.len());
            let bit = bit_of(&rest[..len])?;
            if mask & bit != 0 {
                return None;
            }
            mask |= bit;
            if set {
                flags |= bit;
            }
            rest = &rest[len..];
        }
        return Some((flags, mask));
    }
    let mut flags = 0u128;
    for part in s.split('|') {
        flags |= match parse_max(part, 0xff) {
            Some(n) => n as u128,
            None => bit_of(part)?,
        };
    }
    Some((flags, 0xff))
}

/// Does a match on `ct_state` (value, mask) say the connection is one the tracker knows
/// (OVS's `is_ct_valid` for a match: a flag only a valid entry has, or `+trk-inv`)?
pub(super) fn ct_valid(value: u8, mask: u8) -> bool {
    let valid = state::NEW
        | state::ESTABLISHED
        | state::RELATED
        | state::REPLY_DIR
        | state::SRC_NAT
        | state::DST_NAT;
    value & mask & valid != 0
        || (value & mask & state::TRACKED != 0
            && mask & state::INVALID != 0
            && value & state::INVALID == 0)
}

impl<'a> Parser<'a> {
    /// One ct match field.
    pub(super) fn field_ct(&mut self, f: F, k: &Key, v: &str) -> Result<(), SyntaxError> {
        match f {
            F::CtState => {
                let (n, m) =
                    parse_ct_state(v).ok_or_else(|| self.bad_value(k, v, CT_STATE_WHAT))?;
                self.set(Field::CtState, n, m);
            }
            F::CtZone => {
                let n = self.exact(k, v, 0xffff, "a zone 0..65535")?;
                self.set(Field::CtZone, n, 0xffff);
            }
            F::CtMark => {
                let (n, m) = self.masked(k, v, u32::MAX as u64, "a number 0..0xffffffff")?;
                self.set(Field::CtMark, n, m);
            }
            F::CtLabel => {
                const WHAT: &str = "a 128-bit number (decimal or 0x hex), optionally /mask";
                let (a, m) = values::split_mask(v);
                let n = parse_u128(a).ok_or_else(|| self.bad_value(k, a, WHAT))?;
                let mask = match m {
                    None => u128::MAX,
                    Some(m) => parse_u128(m).ok_or_else(|| self.bad_mask(k, m, WHAT))?,
                };
                self.set(Field::CtLabel, n, mask);
            }
            F::CtNwSrc | F::CtNwDst => {
                let (a, m) = self.ipv4(k, v)?;
                let field = if f == F::CtNwSrc {
                    Field::CtNwSrc
                } else {
                    Field::CtNwDst
                };
                self.set(field, a, m);
            }
            F::CtIpv6Src | F::CtIpv6Dst => {
                let (a, m) = self.ipv6(k, v)?;
                let field = if f == F::CtIpv6Src {
                    Field::CtIpv6Src
                } else {
                    Field::CtIpv6Dst
                };
                self.set(field, a, m);
            }
            F::CtNwProto => {
                let n = self.exact(k, v, 255, "a number 0..255")?;
                self.set(Field::CtNwProto, n, 0xff);
            }
            F::CtTpSrc | F::CtTpDst => {
                let (n, m) = self.masked(k, v, 0xffff, "a number 0..65535")?;
                let field = if f == F::CtTpSrc {
                    Field::CtTpSrc
                } else {
                    Field::CtTpDst
                };
                self.set(field, n, m);
            }
            _ => unreachable!("field_ct is called for the ct fields only"),
        }
        Ok(())
    }

    /// The match's `ct_state` condition: (value, mask).
    pub(super) fn ct_state(&self) -> (u8, u8) {
        (
            self.m.value.get(Field::CtState) as u8,
            self.m.mask.get(Field::CtState) as u8,
        )
    }

    /// OVS's checks of each `ct` action against the match: tracking needs IPv4 or IPv6,
    /// a NAT range's family must be the flow's, and a packet the match says is invalid
    /// cannot be committed. `cols[i]` is where action `i` starts (`fallback` past them).
    pub(super) fn check_ct_actions(
        &self,
        actions: &[Action],
        cols: &[usize],
        fallback: usize,
    ) -> Result<(), SyntaxError> {
        let full = |f: Field| self.m.mask.get(f) == f.full_mask();
        let eth = full(Field::EthType).then(|| self.m.value.get(Field::EthType) as u16);
        let proto = full(Field::NwProto).then(|| self.m.value.get(Field::NwProto) as u8);
        for (i, a) in actions.iter().enumerate() {
            let Action::Ct(id) = a else { continue };
            let spec = id.spec();
            let at = cols.get(i).copied().unwrap_or(fallback);
            let ip = matches!(eth, Some(ethertype::IPV4 | ethertype::IPV6));
            if !ip {
                return Err(match eth {
                    None => self.err(at, |c| {
                        format!(
                            "ct at column {c} requires ip or ipv6 (add 'ip,' before the actions)"
                        )
                    }),
                    Some(e) => {
                        let has = prereq::describe_protocol(e, proto);
                        self.err(at, |c| {
                            format!(
                                "ct at column {c} requires ip or ipv6, but the flow matches {has}"
                            )
                        })
                    }
                });
            }
            let (v, m) = self.ct_state();
            if spec.commit && v & m & state::INVALID != 0 {
                return Err(self.err(at, |c| {
                    format!("ct(commit) at column {c} cannot commit a packet the flow matches as invalid (ct_state=+inv)")
                }));
            }
            let family = spec.nat.and_then(|n| n.addrs).map(|(lo, _)| lo);
            let bad_family = match family {
                Some(IpAddr::V4(_)) => eth != Some(ethertype::IPV4),
                Some(IpAddr::V6(_)) => eth != Some(ethertype::IPV6),
                None => false,
            };
            if bad_family {
                let kind = match spec.nat.and_then(|n| n.kind) {
                    Some(NatKind::Dst) => "dst",
                    _ => "src",
                };
                let (fam, has) = match family {
                    Some(IpAddr::V4(_)) => ("an IPv4", "ipv6"),
                    _ => ("an IPv6", "ip"),
                };
                return Err(self.err(at, |c| {
                    format!("nat({kind}=...) in ct at column {c} gives {fam} range, but the flow matches {has}")
                }));
            }
        }
        Ok(())
    }
}
