//! Actions that rewrite the packet's headers: `mod_dl_*`, `mod_nw_*`, `mod_tp_*`, the VLAN
//! tag actions, `dec_ttl`, `set_tunnel` and `write_metadata` (`set_field` has its own file).

use super::ctx::{Arg, Ctx};
use super::words::A;
use crate::error::SyntaxError;
use crate::lex::Key;
use crate::value::{parse_ipv4, parse_mac, parse_max};
use flowpath_packet::Action;

pub(super) const TOS_WHAT: &str = "a TOS value 0..255 whose low 2 (ECN) bits are 0, e.g. 184";
pub(super) const TUN_WHAT: &str =
    "a tunnel id 0..0xffffff (flowpath tunnel ids are 24 bits, the VXLAN VNI)";

impl Ctx<'_> {
    /// `mod_dl_src:MAC`, `mod_dl_dst:MAC`.
    pub(super) fn mod_dl(&self, a: A, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let v = self.plain(k, arg)?;
        let mac = parse_mac(v).ok_or_else(|| self.bad(k, v, "a MAC address xx:xx:xx:xx:xx:xx"))?;
        Ok(if a == A::ModDlSrc {
            Action::SetEthSrc(mac)
        } else {
            Action::SetEthDst(mac)
        })
    }

    /// `mod_nw_src:IP`, `mod_nw_dst:IP` (IPv4).
    pub(super) fn mod_nw(&self, a: A, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let v = self.plain(k, arg)?;
        let ip = parse_ipv4(v)
            .ok_or_else(|| self.bad(k, v, "an IPv4 address a.b.c.d"))?
            .to_be_bytes();
        Ok(if a == A::ModNwSrc {
            Action::SetIpv4Src(ip)
        } else {
            Action::SetIpv4Dst(ip)
        })
    }

    /// `mod_nw_tos:TOS` (the ECN bits must be 0).
    pub(super) fn mod_nw_tos(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let v = self.plain(k, arg)?;
        let n = parse_max(v, 255)
            .filter(|n| n & 3 == 0)
            .ok_or_else(|| self.bad(k, v, TOS_WHAT))?;
        Ok(Action::SetNwTos(n as u8))
    }

    /// `mod_tp_src:N`, `mod_tp_dst:N`.
    pub(super) fn mod_tp(&self, a: A, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let v = self.plain(k, arg)?;
        let n = self.num(k, v, 65535, "a number 0..65535")? as u16;
        Ok(if a == A::ModTpSrc {
            Action::SetTpSrc(n)
        } else {
            Action::SetTpDst(n)
        })
    }

    /// `push_vlan:TPID` (0x8100 or 0x88a8).
    pub(super) fn push_vlan(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let v = self.plain(k, arg)?;
        match parse_max(v, 0xffff) {
            Some(t @ (0x8100 | 0x88a8)) => Ok(Action::PushVlan { tpid: t as u16 }),
            _ => Err(self.bad(k, v, "a VLAN ethertype, 0x8100 or 0x88a8")),
        }
    }

    /// `mod_vlan_vid:VID`.
    pub(super) fn mod_vlan_vid(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let v = self.plain(k, arg)?;
        Ok(Action::SetVlanVid(
            self.num(k, v, 4095, "a VLAN id 0..4095")? as u16,
        ))
    }

    /// `mod_vlan_pcp:PCP`.
    pub(super) fn mod_vlan_pcp(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let v = self.plain(k, arg)?;
        Ok(Action::SetVlanPcp(
            self.num(k, v, 7, "a VLAN priority 0..7")? as u8,
        ))
    }

    /// `dec_ttl` (without controller ids).
    pub(super) fn dec_ttl(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        if matches!(arg, Arg::Paren(..)) {
            return Err(self.unsupported(k, "dec_ttl with controller ids"));
        }
        self.no_arg(k, arg)?;
        Ok(Action::DecTtl)
    }

    /// `set_tunnel:ID`, `set_tunnel64:ID` (24 bits).
    pub(super) fn set_tunnel(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let v = self.plain(k, arg)?;
        Ok(Action::SetTunnel(
            self.num(k, v, 0xff_ffff, TUN_WHAT)? as u32
        ))
    }

    /// `write_metadata:VALUE[/MASK]` (24 bits).
    pub(super) fn write_metadata(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        const WHAT: &str =
            "a number 0..0xffffff[/mask] (flowpath keeps 24 bits of OpenFlow metadata)";
        let v = self.plain(k, arg)?;
        let (a, m) = match v.split_once('/') {
            Some((a, m)) => (a, Some(m)),
            None => (v, None),
        };
        let value = self.num(k, a, 0xff_ffff, WHAT)? as u32;
        let mask = match m {
            Some(m) => self.num(k, m, 0xff_ffff, WHAT)? as u32,
            None => 0xff_ffff,
        };
        Ok(Action::WriteMetadata { value, mask })
    }
}
