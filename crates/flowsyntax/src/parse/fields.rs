//! One match field, parsed by family (L2, VLAN, L3, L4, tunnel) into the match.

use super::*;

const U16: &str = "a number 0..65535";
const U8: &str = "a number 0..255";

impl<'a> Parser<'a> {
    /// One match field with its value: claim its slots, then parse it by family.
    pub(super) fn field(&mut self, f: F, k: &Key, v: &str) -> Result<(), SyntaxError> {
        let (s1, s2) = slots_of(f);
        let end = k.at + k.name.len();
        self.claim(s1, k.at, end, f as u8)?;
        if s2 != usize::MAX {
            self.claim(s2, k.at, end, f as u8)?;
        }
        match f {
            F::InPort | F::EthSrc | F::EthDst | F::EthType => self.field_l2(f, k, v),
            F::DlVlan
            | F::DlVlan1
            | F::DlVlanPcp
            | F::DlVlanPcp1
            | F::VlanPcp
            | F::VlanTci
            | F::VlanTci1
            | F::VlanVid => self.field_vlan(f, k, v, s1),
            F::TpSrc
            | F::TcpSrc
            | F::UdpSrc
            | F::TpDst
            | F::TcpDst
            | F::UdpDst
            | F::TcpFlags
            | F::IcmpType
            | F::IcmpCode
            | F::Icmpv6Type
            | F::Icmpv6Code => self.field_l4(f, k, v),
            F::TunId
            | F::TunSrc
            | F::TunDst
            | F::TunIpv6Src
            | F::TunIpv6Dst
            | F::TunFlags
            | F::Metadata => self.field_tunnel(f, k, v),
            F::CtState
            | F::CtZone
            | F::CtMark
            | F::CtLabel
            | F::CtNwSrc
            | F::CtNwDst
            | F::CtIpv6Src
            | F::CtIpv6Dst
            | F::CtNwProto
            | F::CtTpSrc
            | F::CtTpDst => self.field_ct(f, k, v),
            _ => self.field_l3(f, k, v),
        }
    }

    /// Ingress port and Ethernet.
    fn field_l2(&mut self, f: F, k: &Key, v: &str) -> Result<(), SyntaxError> {
        match f {
            F::InPort => {
                let n = self.exact(k, v, u32::MAX as u64, "a port number 0..4294967295")?;
                self.set(Field::InPort, n, u32::MAX as u128);
            }
            F::EthSrc | F::EthDst => {
                let (a, m) = self.mac(k, v)?;
                let field = if f == F::EthSrc {
                    Field::EthSrc
                } else {
                    Field::EthDst
                };
                self.set(field, a, m);
            }
            F::EthType => {
                let n = self.exact(k, v, 0xffff, "an ethertype 0..0xffff")?;
                self.set(Field::EthType, n, 0xffff);
            }
            _ => unreachable!("field_l2 is called for its own fields only"),
        }
        Ok(())
    }

    /// VLAN tags (the outer one, or the inner one for the `*1` fields: slot `s1`).
    fn field_vlan(&mut self, f: F, k: &Key, v: &str, s1: usize) -> Result<(), SyntaxError> {
        match f {
            F::DlVlan | F::DlVlan1 => {
                let n = self.exact(k, v, 0xffff, "a VLAN id 0..4095, or 0xffff for no VLAN tag")?;
                let (value, mask) = match n {
                    0xffff => (0, 0xffff),
                    0..=0xfff => (VLAN_PRESENT as u128 | n, 0x1fff),
                    _ => {
                        return Err(self.bad_value(
                            k,
                            v,
                            "a VLAN id 0..4095, or 0xffff for no VLAN tag",
                        ))
                    }
                };
                self.set_tci(k, s1, value, mask)?;
            }
            F::DlVlanPcp | F::DlVlanPcp1 | F::VlanPcp => {
                let n = self.exact(k, v, 7, "a VLAN priority 0..7")?;
                self.set_tci(k, s1, VLAN_PRESENT as u128 | n << 13, 0xf000)?;
            }
            F::VlanTci | F::VlanTci1 => {
                let (n, m) = self.masked(k, v, 0xffff, U16)?;
                self.set_tci(k, s1, n, m)?;
            }
            F::VlanVid => {
                let (n, m) = self.masked(
                    k,
                    v,
                    0x1fff,
                    "a number 0..0x1fff (0x1000 = tagged, plus the VLAN id)",
                )?;
                self.set_tci(k, s1, n, m)?;
            }
            _ => unreachable!("field_vlan is called for its own fields only"),
        }
        Ok(())
    }

    /// IPv4, IPv6 and ARP addresses, protocol, TOS/DSCP/ECN, TTL, fragments.
    fn field_l3(&mut self, f: F, k: &Key, v: &str) -> Result<(), SyntaxError> {
        match f {
            F::NwSrc | F::IpSrc | F::ArpSpa | F::NwDst | F::IpDst | F::ArpTpa => {
                let (a, m) = self.ipv4(k, v)?;
                let field = if matches!(f, F::NwSrc | F::IpSrc | F::ArpSpa) {
                    Field::Ipv4Src
                } else {
                    Field::Ipv4Dst
                };
                self.set(field, a, m);
            }
            F::Ipv6Src | F::Ipv6Dst => {
                let (a, m) = self.ipv6(k, v)?;
                let field = if f == F::Ipv6Src {
                    Field::Ipv6Src
                } else {
                    Field::Ipv6Dst
                };
                self.set(field, a, m);
            }
            F::NwProto => {
                let n = self.exact(k, v, 255, U8)?;
                self.set(Field::NwProto, n, 0xff);
            }
            F::ArpOp => {
                let n = self.exact(
                    k,
                    v,
                    255,
                    "a number 0..255 (flowpath keys hold the low byte of the ARP opcode)",
                )?;
                self.set(Field::NwProto, n, 0xff);
            }
            F::NwTos => {
                const WHAT: &str =
                    "a TOS value 0..255 whose low 2 (ECN) bits are 0, e.g. 184 (or use ip_dscp=46)";
                let n = self.exact(k, v, 255, WHAT)?;
                if n & 3 != 0 {
                    return Err(self.bad_value(k, v, WHAT));
                }
                self.set(Field::NwTos, n, 0xfc);
            }
            F::IpDscp => {
                let n = self.exact(k, v, 63, "a DSCP value 0..63")?;
                self.set(Field::NwTos, n << 2, 0xfc);
            }
            F::NwEcn => {
                let n = self.exact(k, v, 3, "an ECN value 0..3")?;
                self.set(Field::NwTos, n, 0x03);
            }
            F::NwTtl => {
                let n = self.exact(k, v, 255, U8)?;
                self.set(Field::NwTtl, n, 0xff);
            }
            F::IpFrag => {
                let (n, m) = match FRAG_NAMES.iter().find(|(name, _, _)| name.eq_ignore_ascii_case(v)) {
                    Some(&(_, val, mask)) => (val as u128, mask as u128),
                    None => self.masked(
                        k,
                        v,
                        0xff,
                        "one of no, yes, first, later, not_later (or value/mask over 1 = fragment, 2 = later fragment)",
                    )?,
                };
                self.set(Field::NwFrag, n, m);
            }
            _ => unreachable!("field_l3 is called for its own fields only"),
        }
        Ok(())
    }

    /// TCP/UDP ports, TCP flags, ICMP type and code.
    fn field_l4(&mut self, f: F, k: &Key, v: &str) -> Result<(), SyntaxError> {
        match f {
            F::TpSrc | F::TcpSrc | F::UdpSrc | F::TpDst | F::TcpDst | F::UdpDst => {
                let field = if matches!(f, F::TpSrc | F::TcpSrc | F::UdpSrc) {
                    Field::TpSrc
                } else {
                    Field::TpDst
                };
                // flowpath extension: `LOW-HIGH`, an inclusive range.
                if let Some(r) = self.port_range(k, v)? {
                    self.m = self.m.port_range(field, r);
                } else {
                    let (n, m) = self.masked(k, v, 0xffff, U16)?;
                    self.set(field, n, m);
                }
            }
            F::TcpFlags => {
                let (n, m) = parse_tcp_flags(v).ok_or_else(|| {
                    self.bad_value(
                        k,
                        v,
                        "+flag-flag... (fin, syn, rst, psh, ack, urg, ece, cwr, ns, each once), flag|flag..., or value/mask 0..0xfff",
                    )
                })?;
                self.set(Field::TcpFlags, n, m);
            }
            F::IcmpType | F::IcmpCode | F::Icmpv6Type | F::Icmpv6Code => {
                let (a, m) = split_mask(v);
                let n = parse_max(a, 255).ok_or_else(|| self.bad_value(k, a, U8))?;
                let mask = match m {
                    None => 0xffff,
                    Some(m) => parse_max(m, 0xffff).ok_or_else(|| self.bad_mask(k, m, U16))?,
                };
                let field = if matches!(f, F::IcmpType | F::Icmpv6Type) {
                    Field::TpSrc
                } else {
                    Field::TpDst
                };
                self.set(field, n as u128, mask as u128);
            }
            _ => unreachable!("field_l4 is called for its own fields only"),
        }
        Ok(())
    }

    /// Tunnel metadata (VXLAN).
    fn field_tunnel(&mut self, f: F, k: &Key, v: &str) -> Result<(), SyntaxError> {
        match f {
            F::TunId => {
                const WHAT: &str =
                    "a number 0..0xffffff (flowpath keys hold 24 bits of tun_id, the VXLAN VNI)";
                let (a, m) = split_mask(v);
                let n = parse_max(a, 0xff_ffff).ok_or_else(|| self.bad_value(k, a, WHAT))?;
                let mask = match m {
                    None => 0xff_ffff,
                    Some(m) => parse_max(m, 0xff_ffff).ok_or_else(|| self.bad_mask(k, m, WHAT))?,
                };
                self.set(Field::TunId, n as u128, mask as u128);
            }
            F::Metadata => {
                const WHAT: &str =
                    "a number 0..0xffffff (flowpath keeps 24 bits of OpenFlow metadata)";
                let (a, m) = split_mask(v);
                let n = parse_max(a, 0xff_ffff).ok_or_else(|| self.bad_value(k, a, WHAT))?;
                let mask = match m {
                    None => 0xff_ffff,
                    Some(m) => parse_max(m, 0xff_ffff).ok_or_else(|| self.bad_mask(k, m, WHAT))?,
                };
                self.set(Field::Metadata, n as u128, mask as u128);
            }
            F::TunSrc | F::TunDst => {
                let (a, m) = self.ipv4(k, v)?;
                let field = if f == F::TunSrc {
                    Field::TunSrc
                } else {
                    Field::TunDst
                };
                self.set(field, a << 96, m << 96);
            }
            F::TunIpv6Src | F::TunIpv6Dst => {
                let (a, m) = self.ipv6(k, v)?;
                let field = if f == F::TunIpv6Src {
                    Field::TunSrc
                } else {
                    Field::TunDst
                };
                self.set(field, a, m);
            }
            F::TunFlags => {
                let (n, m) = self.masked(
                    k,
                    v,
                    0xff,
                    "a number 0..255 (1 = arrived tunnelled, 2 = outer header IPv6)",
                )?;
                self.set(Field::TunFlags, n, m);
            }
            _ => unreachable!("field_tunnel is called for its own fields only"),
        }
        Ok(())
    }
}
