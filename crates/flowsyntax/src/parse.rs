//! Parsing one flow: keywords and match fields, prerequisites, then the actions.

use crate::actions::{parse_actions, ActionsOut, MAX_COLS};
use crate::error::{column, did_you_mean, err_at, FileError, SyntaxError};
use crate::lex::{Delim, Key, Lexer};
use crate::names::{self, F, FRAG_NAMES, TCP_FLAG_NAMES};
use crate::value::{
    mac_u128, parse_ipv4, parse_ipv6, parse_mac, parse_max, parse_u64, prefix_mask,
};
use flowpath_packet::key::{ethertype, ipproto, VLAN_PRESENT};
use flowpath_packet::Field;
use flowpath_pipeline::{Match, RuleError, RuleSpec};

/// OVS's default priority (`OFP_DEFAULT_PRIORITY`), used when a flow gives none.
pub const DEFAULT_PRIORITY: u16 = 32768;

/// Which `ovs-ofctl` command a flow is written for; it decides which parts are allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowCommand {
    /// `add-flow`: actions required; `cookie=V` sets the cookie (no mask allowed).
    Add,
    /// `mod-flows`: actions required; `cookie=V` sets the new cookie, `cookie=V/M` selects.
    Modify,
    /// `mod-flows --strict`.
    ModifyStrict,
    /// `del-flows`: no actions, no timeouts; `cookie=V/M` selects (a bare `cookie=V` is
    /// refused, as by OVS).
    Delete,
    /// `del-flows --strict`.
    DeleteStrict,
}

impl FlowCommand {
    fn takes_actions(self) -> bool {
        matches!(
            self,
            FlowCommand::Add | FlowCommand::Modify | FlowCommand::ModifyStrict
        )
    }

    fn is_delete(self) -> bool {
        matches!(self, FlowCommand::Delete | FlowCommand::DeleteStrict)
    }
}

/// A parsed flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedFlow {
    /// Table (0 when not given), priority (32768 when not given), match, actions,
    /// `goto_table`, cookie (for a `cookie=V/M` selection: `V & M`), timeouts. For
    /// deletes, `actions` is empty and `goto` is `None`.
    pub spec: RuleSpec,
    /// The cookie selection mask from `cookie=V/M` (modify and delete); `u64::MAX` when an
    /// add gives `cookie=V`; 0 when no cookie is given, and for a modify's `cookie=V`
    /// (which sets the new cookie, as in OVS, rather than selecting).
    pub cookie_mask: u64,
    /// `table=` was given (modify and delete without it mean every table).
    pub table_given: bool,
    /// `priority=` was given (it only selects for the strict commands).
    pub priority_given: bool,
}

/// Parse one flow in `ovs-ofctl` syntax for `cmd`.
///
/// The syntax is `ovs-ofctl(8)`'s "Flow Syntax": `field=value` items separated by commas
/// and/or white space (`field:value` also works, as in OVS), then `actions=` and the
/// action list, which runs to the end of the text.
///
/// - Keywords: `table` (0..254), `priority` (default 32768), `cookie=V` (add, modify) or
///   `cookie=V/M` (modify, delete; `M` may be `-1`), `idle_timeout`, `hard_timeout` (not
///   for deletes). `duration`, `n_packets`, `n_bytes`, `idle_age`, `hard_age` are ignored,
///   so a `dump-flows` line can be fed back, as OVS allows.
/// - Shorthands: `ip`/`ipv4`/`ip4`, `tcp`, `udp`, `icmp`, `sctp`, `arp`, `ipv6`/`ip6`,
///   `tcp6`, `udp6`, `icmp6`, `sctp6`, `rarp`, `mpls`, `mplsm`.
/// - Fields: `in_port`; `dl_src`/`eth_src`, `dl_dst`/`eth_dst` (MAC[/mask]);
///   `dl_type`/`eth_type`; `dl_vlan` (0..4095, 0xffff = untagged), `dl_vlan_pcp`,
///   `vlan_tci[/mask]` (raw TCI, 0x1000 = tag present), `vlan_vid[/mask]` (13 bits with
///   0x1000), `vlan_pcp`, and `dl_vlan1`, `dl_vlan_pcp1`, `vlan_tci1` for the inner tag;
///   `nw_src`/`nw_dst` (ip or arp), `ip_src`/`ipv4_src`, `ip_dst`/`ipv4_dst` (ip),
///   `arp_spa`, `arp_tpa`, `arp_op` (arp) as `a.b.c.d[/len|/mask]`; `ipv6_src`,
///   `ipv6_dst` (`addr[/len|/mask]`); `nw_proto`/`ip_proto`; `nw_tos` (DSCP bits, low 2
///   bits must be 0), `ip_dscp` (0..63), `nw_ecn`/`ip_ecn`, `nw_ttl`; `ip_frag`/`nw_frag`
///   (`no`, `yes`, `first`, `later`, `not_later`, mapped onto the key's `FRAG_ANY` = 1 and
///   `FRAG_LATER` = 2 bits exactly as OVS maps them: no = 0/3, yes = 1/1, first = 1/3,
///   later = 3/3, not_later = 0/2); `tp_src`/`tp_dst` (tcp or udp), `tcp_src`/`tcp_dst`,
///   `udp_src`/`udp_dst` (value[/mask]); `tcp_flags` (`+syn-ack`, `syn|ack`, value/mask);
///   `icmp_type`/`icmp_code` (icmp or icmp6), `icmpv6_type`/`icmpv6_code` (icmp6);
///   `tun_id`/`tunnel_id` (24 bits), `tun_src`/`tun_dst` (IPv4), `tun_ipv6_src`/
///   `tun_ipv6_dst`, `tun_flags`.
/// - Actions: `output:N` (also a bare `N`, `output(port=N)`), `in_port`, `controller`,
///   `controller:MAX_LEN`, `controller(max_len=N)`, `drop` (alone), `goto_table:N` (last,
///   to a later table), `resubmit(,N)` (only as the last action: it becomes
///   `goto_table:N`), `mod_dl_src`, `mod_dl_dst`, `mod_nw_src`, `mod_nw_dst`,
///   `mod_nw_tos`, `mod_tp_src`, `mod_tp_dst`, `set_field:V->F` (F: eth/ipv4/ipv6
///   src/dst, `nw_tos`, `ip_dscp`, tp/tcp/udp src/dst, `vlan_vid`, `vlan_pcp`, `tun_id`),
///   `push_vlan:0x8100|0x88a8`, `strip_vlan`/`pop_vlan`, `mod_vlan_vid`, `mod_vlan_pcp`,
///   `dec_ttl`, `set_tunnel`/`set_tunnel64` (at most 0xffffff). Action names are
///   case-insensitive, field names are not (as in OVS).
///
/// Where this differs from OVS: prerequisites (`nw_src` needs `ip` or `arp`, `tp_dst`
/// needs `tcp` or `udp`, ...) are checked here, in any order, rather than by the switch;
/// a field given twice is an error rather than "last wins"; ports are numbers (plus
/// `in_port`, `controller`), not names; numbers are decimal or `0x` hex (no octal);
/// `icmp_type`/`icmp_code` also take a mask and `ip_frag` a numeric value/mask, so that
/// every key mask prints back; `tun_flags` holds flowpath's bits (1 = arrived tunnelled,
/// 2 = outer header IPv6), not OVS's named flags; `tun_src`/`tun_dst` match the first 4
/// bytes of the 16-byte outer address; actions are not checked against the match (a
/// rewrite of a header the packet lacks is a no-op in flowpath); a non-strict delete
/// accepts `priority` and records it in [`ParsedFlow::priority_given`] (OVS refuses it).
///
/// ```
/// use flowpath_flowsyntax::{parse_flow, FlowCommand};
/// let f = parse_flow("table=1,priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2", FlowCommand::Add).unwrap();
/// assert_eq!(f.spec.priority, 100);
/// let e = parse_flow("ip,nw_sr=1.2.3.4 actions=drop", FlowCommand::Add).unwrap_err();
/// assert_eq!(e.to_string(), "unknown field 'nw_sr' at column 4; did you mean nw_src?");
/// ```
pub fn parse_flow(text: &str, cmd: FlowCommand) -> Result<ParsedFlow, SyntaxError> {
    Parser::new(text).run(cmd)
}

/// Parse a flows file: one flow per line; blank lines and lines whose first non-blank
/// character is `#` are skipped. Stops at the first bad line.
pub fn parse_flows_file(text: &str, cmd: FlowCommand) -> Result<Vec<ParsedFlow>, FileError> {
    let lines = text.bytes().filter(|&b| b == b'\n').count() + 1;
    let mut out = Vec::with_capacity(lines);
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        match parse_flow(line, cmd) {
            Ok(f) => out.push(f),
            Err(e) => {
                return Err(FileError {
                    line: i + 1,
                    column: e.column,
                    message: e.message,
                })
            }
        }
    }
    Ok(out)
}

/// Things a flow may set only once; each match field claims one or two of these.
mod slot {
    pub const TABLE: usize = 0;
    pub const PRIORITY: usize = 1;
    pub const COOKIE: usize = 2;
    pub const IDLE: usize = 3;
    pub const HARD: usize = 4;
    pub const IN_PORT: usize = 5;
    pub const ETH_SRC: usize = 6;
    pub const ETH_DST: usize = 7;
    pub const ETH_TYPE: usize = 8;
    pub const VID0: usize = 9;
    pub const PCP0: usize = 10;
    pub const VID1: usize = 11;
    pub const PCP1: usize = 12;
    pub const NW_SRC: usize = 13;
    pub const NW_DST: usize = 14;
    pub const IP6_SRC: usize = 15;
    pub const IP6_DST: usize = 16;
    pub const NW_PROTO: usize = 17;
    pub const DSCP: usize = 18;
    pub const ECN: usize = 19;
    pub const TTL: usize = 20;
    pub const FRAG: usize = 21;
    pub const TP_SRC: usize = 22;
    pub const TP_DST: usize = 23;
    pub const TCP_FLAGS: usize = 24;
    pub const TUN_ID: usize = 25;
    pub const TUN_SRC: usize = 26;
    pub const TUN_DST: usize = 27;
    pub const TUN_FLAGS: usize = 28;
    pub const N: usize = 29;
}

/// The slots a field claims (the second is `usize::MAX` when there is one).
fn slots_of(f: F) -> (usize, usize) {
    use slot::*;
    let one = |s| (s, usize::MAX);
    match f {
        F::InPort => one(IN_PORT),
        F::EthSrc => one(ETH_SRC),
        F::EthDst => one(ETH_DST),
        F::EthType => one(ETH_TYPE),
        F::DlVlan | F::VlanVid => one(VID0),
        F::DlVlanPcp | F::VlanPcp => one(PCP0),
        F::VlanTci => (VID0, PCP0),
        F::DlVlan1 => one(VID1),
        F::DlVlanPcp1 => one(PCP1),
        F::VlanTci1 => (VID1, PCP1),
        F::NwSrc | F::IpSrc | F::ArpSpa => one(NW_SRC),
        F::NwDst | F::IpDst | F::ArpTpa => one(NW_DST),
        F::Ipv6Src => one(IP6_SRC),
        F::Ipv6Dst => one(IP6_DST),
        F::NwProto | F::ArpOp => one(NW_PROTO),
        F::NwTos | F::IpDscp => one(DSCP),
        F::NwEcn => one(ECN),
        F::NwTtl => one(TTL),
        F::IpFrag => one(FRAG),
        F::TpSrc | F::TcpSrc | F::UdpSrc | F::IcmpType | F::Icmpv6Type => one(TP_SRC),
        F::TpDst | F::TcpDst | F::UdpDst | F::IcmpCode | F::Icmpv6Code => one(TP_DST),
        F::TcpFlags => one(TCP_FLAGS),
        F::TunId => one(TUN_ID),
        F::TunSrc | F::TunIpv6Src => one(TUN_SRC),
        F::TunDst | F::TunIpv6Dst => one(TUN_DST),
        F::TunFlags => one(TUN_FLAGS),
    }
}

/// What a field needs the rest of the match to say (OVS's prerequisites).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pre {
    None,
    IpOrArp,
    Ip,
    Ipv6,
    Arp,
    IpAny,
    IpAnyOrArp,
    TcpUdp,
    Tcp,
    Udp,
    IcmpAny,
    Icmp6,
}

fn prereq(f: F) -> Pre {
    match f {
        F::NwSrc | F::NwDst => Pre::IpOrArp,
        F::IpSrc | F::IpDst => Pre::Ip,
        F::ArpSpa | F::ArpTpa | F::ArpOp => Pre::Arp,
        F::Ipv6Src | F::Ipv6Dst => Pre::Ipv6,
        F::NwProto => Pre::IpAnyOrArp,
        F::NwTos | F::IpDscp | F::NwEcn | F::NwTtl | F::IpFrag => Pre::IpAny,
        F::TpSrc | F::TpDst => Pre::TcpUdp,
        F::TcpSrc | F::TcpDst | F::TcpFlags => Pre::Tcp,
        F::UdpSrc | F::UdpDst => Pre::Udp,
        F::IcmpType | F::IcmpCode => Pre::IcmpAny,
        F::Icmpv6Type | F::Icmpv6Code => Pre::Icmp6,
        _ => Pre::None,
    }
}

impl Pre {
    fn ok(self, eth: Option<u16>, proto: Option<u8>) -> bool {
        let ip4 = eth == Some(ethertype::IPV4);
        let ip6 = eth == Some(ethertype::IPV6);
        let arp = eth == Some(ethertype::ARP);
        let ip = ip4 || ip6;
        match self {
            Pre::None => true,
            Pre::IpOrArp => ip4 || arp,
            Pre::Ip => ip4,
            Pre::Ipv6 => ip6,
            Pre::Arp => arp,
            Pre::IpAny => ip,
            Pre::IpAnyOrArp => ip || arp,
            Pre::TcpUdp => ip && matches!(proto, Some(ipproto::TCP | ipproto::UDP)),
            Pre::Tcp => ip && proto == Some(ipproto::TCP),
            Pre::Udp => ip && proto == Some(ipproto::UDP),
            Pre::IcmpAny => {
                (ip4 && proto == Some(ipproto::ICMP)) || (ip6 && proto == Some(ipproto::ICMPV6))
            }
            Pre::Icmp6 => ip6 && proto == Some(ipproto::ICMPV6),
        }
    }

    /// What is required, and the shorthand to suggest adding.
    fn describe(self) -> (&'static str, &'static str) {
        match self {
            Pre::None => ("nothing", ""),
            Pre::IpOrArp => ("ip or arp", "ip"),
            Pre::Ip => ("ip", "ip"),
            Pre::Ipv6 => ("ipv6", "ipv6"),
            Pre::Arp => ("arp", "arp"),
            Pre::IpAny => ("ip or ipv6", "ip"),
            Pre::IpAnyOrArp => ("ip, ipv6 or arp", "ip"),
            Pre::TcpUdp => ("tcp, udp, tcp6 or udp6", "tcp"),
            Pre::Tcp => ("tcp or tcp6", "tcp"),
            Pre::Udp => ("udp or udp6", "udp"),
            Pre::IcmpAny => ("icmp or icmp6", "icmp"),
            Pre::Icmp6 => ("icmp6", "icmp6"),
        }
    }
}

/// How a flow's ethertype and IP protocol read, for messages: `tcp6`, `ip,nw_proto=47`,
/// `dl_type=0x88cc`.
fn describe_protocol(eth: u16, proto: Option<u8>) -> String {
    if let Some(&(n, _, _)) = names::PROTOCOLS
        .iter()
        .find(|&&(_, e, p)| e == eth && p == proto && p.is_some())
    {
        return n.to_string();
    }
    let base = match eth {
        ethertype::IPV4 => "ip".to_string(),
        ethertype::IPV6 => "ipv6".to_string(),
        ethertype::ARP => "arp".to_string(),
        _ => format!("dl_type=0x{eth:04x}"),
    };
    match proto {
        Some(p) if eth == ethertype::ARP => format!("{base},arp_op={p}"),
        Some(p) => format!("{base},nw_proto={p}"),
        None => base,
    }
}

/// Where a slot was claimed: the text of the claiming word and the field (or `NO_FIELD`
/// for a shorthand or keyword).
#[derive(Clone, Copy, Default)]
struct Rec {
    at: usize,
    end: usize,
    f: u8,
}

const NO_FIELD: u8 = u8::MAX;

fn f_from_u8(v: u8) -> Option<F> {
    names::ALL_FIELDS.get(v as usize).copied()
}

struct Parser<'a> {
    text: &'a str,
    m: Match,
    used: u32,
    recs: [Rec; slot::N],
}

/// `value` and the text after `/`, if any.
fn split_mask(v: &str) -> (&str, Option<&str>) {
    match v.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (v, None),
    }
}

/// `tcp_flags` values: `V/M` numbers, `+syn-ack`, or `syn|ack` / a number (exact).
fn parse_tcp_flags(s: &str) -> Option<(u128, u128)> {
    let b = s.as_bytes();
    if b.is_empty() {
        return None;
    }
    if let Some((v, m)) = s.split_once('/') {
        return Some((parse_max(v, 0xfff)? as u128, parse_max(m, 0xfff)? as u128));
    }
    let bit_of = |name: &str| TCP_FLAG_NAMES.iter().position(|n| *n == name);
    if b[0] == b'+' || b[0] == b'-' {
        let (mut flags, mut mask) = (0u128, 0u128);
        let mut i = 0;
        while i < b.len() {
            let set = match b[i] {
                b'+' => true,
                b'-' => false,
                _ => return None,
            };
            i += 1;
            let rest = &s[i..];
            let len = rest.find(['+', '-']).unwrap_or(rest.len());
            let bit = 1u128 << bit_of(&rest[..len])?;
            if mask & bit != 0 {
                return None;
            }
            mask |= bit;
            if set {
                flags |= bit;
            }
            i += len;
        }
        return Some((flags, mask));
    }
    let mut flags = 0u128;
    for part in s.split('|') {
        flags |= match parse_max(part, 0xfff) {
            Some(n) => n as u128,
            None => 1u128 << bit_of(part)?,
        };
    }
    Some((flags, 0xfff))
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        Parser {
            text,
            m: Match::any(),
            used: 0,
            recs: [Rec::default(); slot::N],
        }
    }

    fn err(&self, at: usize, msg: impl FnOnce(usize) -> String) -> SyntaxError {
        err_at(self.text, at, msg)
    }

    fn claim(&mut self, s: usize, at: usize, end: usize, f: u8) -> Result<(), SyntaxError> {
        let bit = 1u32 << s;
        if self.used & bit != 0 {
            let prev = self.recs[s];
            let prev_name = &self.text[prev.at..prev.end];
            let pcol = column(self.text, prev.at);
            let name = &self.text[at..end];
            return Err(self.err(at, |c| {
                format!(
                    "duplicate field '{name}' at column {c}: already set by '{prev_name}' at column {pcol}"
                )
            }));
        }
        self.used |= bit;
        self.recs[s] = Rec { at, end, f };
        Ok(())
    }

    fn bad_value(&self, k: &Key, v: &str, expected: &str) -> SyntaxError {
        self.err(k.at, |c| {
            format!(
                "bad value '{v}' for {} at column {c}: expected {expected}",
                k.name
            )
        })
    }

    fn bad_mask(&self, k: &Key, m: &str, expected: &str) -> SyntaxError {
        self.err(k.at, |c| {
            format!(
                "bad mask '{m}' for {} at column {c}: expected {expected}",
                k.name
            )
        })
    }

    /// An unmaskable number no larger than `max`.
    fn exact(&self, k: &Key, v: &str, max: u64, expected: &str) -> Result<u128, SyntaxError> {
        if v.contains('/') {
            return Err(self.err(k.at, |c| {
                format!(
                    "bad value '{v}' for {} at column {c}: {} takes no mask",
                    k.name, k.name
                )
            }));
        }
        parse_max(v, max)
            .map(|n| n as u128)
            .ok_or_else(|| self.bad_value(k, v, expected))
    }

    /// `value[/mask]`, both no larger than `max`; no mask means `max`.
    fn masked(
        &self,
        k: &Key,
        v: &str,
        max: u64,
        expected: &str,
    ) -> Result<(u128, u128), SyntaxError> {
        let (a, m) = split_mask(v);
        let val = parse_max(a, max).ok_or_else(|| self.bad_value(k, a, expected))?;
        let mask = match m {
            None => max,
            Some(m) => parse_max(m, max).ok_or_else(|| self.bad_mask(k, m, expected))?,
        };
        Ok((val as u128, mask as u128))
    }

    fn ipv4(&self, k: &Key, v: &str) -> Result<(u128, u128), SyntaxError> {
        let (a, m) = split_mask(v);
        let addr = parse_ipv4(a).ok_or_else(|| {
            self.bad_value(k, a, "an IPv4 address a.b.c.d, optionally /len or /mask")
        })?;
        let mask = match m {
            None => u32::MAX as u128,
            Some(m) if m.contains('.') => parse_ipv4(m)
                .ok_or_else(|| self.bad_mask(k, m, "a netmask a.b.c.d or a prefix length 0..32"))?
                as u128,
            Some(m) => match parse_u64(m) {
                Some(len) if len <= 32 => prefix_mask(32, len as u32),
                Some(_) => {
                    return Err(self.err(k.at, |c| {
                        format!("bad prefix length /{m} for {} at column {c}", k.name)
                    }))
                }
                None => {
                    return Err(self.bad_mask(k, m, "a netmask a.b.c.d or a prefix length 0..32"))
                }
            },
        };
        Ok((addr as u128, mask))
    }

    fn ipv6(&self, k: &Key, v: &str) -> Result<(u128, u128), SyntaxError> {
        let (a, m) = split_mask(v);
        let addr = parse_ipv6(a)
            .ok_or_else(|| self.bad_value(k, a, "an IPv6 address, optionally /len or /mask"))?;
        let mask = match m {
            None => u128::MAX,
            Some(m) if m.contains(':') => parse_ipv6(m).ok_or_else(|| {
                self.bad_mask(k, m, "an IPv6 mask address or a prefix length 0..128")
            })?,
            Some(m) => match parse_u64(m) {
                Some(len) if len <= 128 => prefix_mask(128, len as u32),
                Some(_) => {
                    return Err(self.err(k.at, |c| {
                        format!("bad prefix length /{m} for {} at column {c}", k.name)
                    }))
                }
                None => {
                    return Err(self.bad_mask(
                        k,
                        m,
                        "an IPv6 mask address or a prefix length 0..128",
                    ))
                }
            },
        };
        Ok((addr, mask))
    }

    fn mac(&self, k: &Key, v: &str) -> Result<(u128, u128), SyntaxError> {
        const WHAT: &str = "a MAC address xx:xx:xx:xx:xx:xx, optionally /mask";
        let (a, m) = split_mask(v);
        let addr = parse_mac(a).ok_or_else(|| self.bad_value(k, a, WHAT))?;
        let mask = match m {
            None => [0xff; 6],
            Some(m) => parse_mac(m).ok_or_else(|| self.bad_mask(k, m, WHAT))?,
        };
        Ok((mac_u128(addr), mac_u128(mask)))
    }

    /// `Match::with`, in place (a `Match` is 208 bytes; copying it per field shows).
    fn set(&mut self, field: Field, value: u128, mask: u128) {
        let mask = mask & field.full_mask();
        let old_mask = self.m.mask.get(field);
        self.m.mask.set(field, old_mask | mask);
        let old_value = self.m.value.get(field) & !mask;
        self.m.value.set(field, old_value | (value & mask));
    }

    /// Set VLAN TCI bits, refusing to contradict bits an earlier field set (`dl_vlan=0xffff`
    /// says "no tag", `dl_vlan_pcp` needs one).
    fn set_tci(
        &mut self,
        k: &Key,
        slot: usize,
        value: u128,
        mask: u128,
    ) -> Result<(), SyntaxError> {
        let field = if slot == slot::VID0 || slot == slot::PCP0 {
            Field::VlanTci
        } else {
            Field::VlanInnerTci
        };
        let (ov, om) = (self.m.value.get(field), self.m.mask.get(field));
        if (ov ^ value) & om & mask != 0 {
            let other = match slot {
                slot::VID0 => slot::PCP0,
                slot::PCP0 => slot::VID0,
                slot::VID1 => slot::PCP1,
                _ => slot::VID1,
            };
            let prev = self.recs[other];
            let prev_text = &self.text[prev.at..prev.end];
            let pcol = column(self.text, prev.at);
            return Err(self.err(k.at, |c| {
                format!(
                    "{} at column {c} contradicts '{prev_text}' at column {pcol} (one needs a VLAN tag, the other excludes it)",
                    k.name
                )
            }));
        }
        self.set(field, value, mask);
        Ok(())
    }

    /// One match field with its value.
    fn field(&mut self, f: F, k: &Key, v: &str) -> Result<(), SyntaxError> {
        let (s1, s2) = slots_of(f);
        let end = k.at + k.name.len();
        self.claim(s1, k.at, end, f as u8)?;
        if s2 != usize::MAX {
            self.claim(s2, k.at, end, f as u8)?;
        }
        const U16: &str = "a number 0..65535";
        const U8: &str = "a number 0..255";
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
            F::TpSrc | F::TcpSrc | F::UdpSrc | F::TpDst | F::TcpDst | F::UdpDst => {
                let (n, m) = self.masked(k, v, 0xffff, U16)?;
                let field = if matches!(f, F::TpSrc | F::TcpSrc | F::UdpSrc) {
                    Field::TpSrc
                } else {
                    Field::TpDst
                };
                self.set(field, n, m);
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
        }
        Ok(())
    }

    /// The first field (by column) whose prerequisites the match does not meet.
    fn check_prereqs(&self) -> Result<(), SyntaxError> {
        let full = |f: Field| self.m.mask.get(f) == f.full_mask();
        let eth = full(Field::EthType).then(|| self.m.value.get(Field::EthType) as u16);
        let proto = full(Field::NwProto).then(|| self.m.value.get(Field::NwProto) as u8);
        let mut worst: Option<(usize, Pre, Rec)> = None;
        for s in 0..slot::N {
            if self.used & (1 << s) == 0 {
                continue;
            }
            let r = self.recs[s];
            let Some(f) = f_from_u8(r.f) else { continue };
            let pre = prereq(f);
            if !pre.ok(eth, proto) && worst.is_none_or(|(at, _, _)| r.at < at) {
                worst = Some((r.at, pre, r));
            }
        }
        let Some((at, pre, r)) = worst else {
            return Ok(());
        };
        let name = &self.text[r.at..r.end];
        let (need, add) = pre.describe();
        Err(match eth {
            None => self.err(at, |c| {
                format!("{name} at column {c} requires {need} (add '{add},' before it)")
            }),
            Some(e) => {
                let has = describe_protocol(e, proto);
                self.err(at, |c| {
                    format!("{name} at column {c} requires {need}, but the flow matches {has}")
                })
            }
        })
    }

    fn run(mut self, cmd: FlowCommand) -> Result<ParsedFlow, SyntaxError> {
        let text = self.text;
        let mut lx = Lexer::new(text, 0);
        let (mut table, mut priority, mut cookie, mut cookie_mask) =
            (0u8, DEFAULT_PRIORITY, 0u64, 0u64);
        let (mut idle, mut hard) = (0u16, 0u16);
        let mut actions: Option<(usize, usize)> = None; // (key offset, value offset)
        while let Some(k) = lx.next_key() {
            if k.name.is_empty() {
                let ch = text[k.at..].chars().next().unwrap_or(' ');
                return Err(self.err(k.at, |c| {
                    format!("unexpected '{ch}' at column {c}: expected a field name")
                }));
            }
            let word = names::classify(k.name);
            let end = k.at + k.name.len();
            let v = match (word, k.delim) {
                (names::Word::Actions, Delim::Value) => {
                    actions = Some((k.at, lx.pos));
                    break;
                }
                (names::Word::Actions, _) => {
                    return Err(self.err(k.at, |c| {
                        format!("expected '=' after '{}' at column {c}", k.name)
                    }));
                }
                (names::Word::Protocol(..), Delim::None) => "",
                (names::Word::Protocol(..), _) => {
                    return Err(self.err(k.at, |c| {
                        format!("'{}' at column {c} takes no value", k.name)
                    }));
                }
                (names::Word::Unknown, _) => return Err(self.unknown_field(&k)),
                (_, Delim::Paren) => {
                    return Err(self.err(end, |c| {
                        format!("unexpected '(' at column {c} after '{}'", k.name)
                    }))
                }
                (_, Delim::Value) => lx.value().0,
                (_, Delim::None) => "",
            };
            if v.is_empty() && !matches!(word, names::Word::Protocol(..)) {
                let hint = match lx.peek_non_blank() {
                    Some((b'=' | b':', _)) if k.delim == Delim::None => {
                        format!(" (write {}=VALUE, without spaces around '=')", k.name)
                    }
                    _ => String::new(),
                };
                return Err(self.err(k.at, |c| {
                    format!("missing value for {} at column {c}{hint}", k.name)
                }));
            }
            match word {
                names::Word::Field(f) => self.field(f, &k, v)?,
                names::Word::Protocol(eth, proto) => {
                    self.claim(slot::ETH_TYPE, k.at, end, NO_FIELD)?;
                    self.set(Field::EthType, eth as u128, 0xffff);
                    if let Some(p) = proto {
                        self.claim(slot::NW_PROTO, k.at, end, NO_FIELD)?;
                        self.set(Field::NwProto, p as u128, 0xff);
                    }
                }
                names::Word::Table => {
                    self.claim(slot::TABLE, k.at, end, NO_FIELD)?;
                    table = self.exact(&k, v, 254, "a table number 0..254")? as u8;
                }
                names::Word::Priority => {
                    self.claim(slot::PRIORITY, k.at, end, NO_FIELD)?;
                    priority = self.exact(&k, v, 65535, "a number 0..65535")? as u16;
                }
                names::Word::IdleTimeout | names::Word::HardTimeout => {
                    if cmd.is_delete() {
                        return Err(self.err(k.at, |c| {
                            format!("{} at column {c} is not valid when deleting flows", k.name)
                        }));
                    }
                    let idle_word = word == names::Word::IdleTimeout;
                    let s = if idle_word { slot::IDLE } else { slot::HARD };
                    self.claim(s, k.at, end, NO_FIELD)?;
                    let n = self.exact(&k, v, 65535, "a number of seconds 0..65535")? as u16;
                    if idle_word {
                        idle = n;
                    } else {
                        hard = n;
                    }
                }
                names::Word::Cookie => {
                    self.claim(slot::COOKIE, k.at, end, NO_FIELD)?;
                    const WHAT: &str = "a 64-bit number (decimal or 0x hex)";
                    let (a, m) = split_mask(v);
                    let val = parse_u64(a).ok_or_else(|| self.bad_value(&k, a, WHAT))?;
                    match m {
                        Some(m) => {
                            if cmd == FlowCommand::Add {
                                return Err(self.err(k.at, |c| {
                                    format!("cookie mask at column {c} is only valid when modifying or deleting flows (adding sets the cookie: cookie={a})")
                                }));
                            }
                            let mask = if m == "-1" {
                                Some(u64::MAX)
                            } else {
                                parse_u64(m)
                            };
                            let mask = mask.ok_or_else(|| self.bad_mask(&k, m, WHAT))?;
                            cookie = val & mask;
                            cookie_mask = mask;
                        }
                        None => {
                            if cmd.is_delete() {
                                return Err(self.err(k.at, |c| {
                                    format!("cookie at column {c} cannot be set when deleting flows (to select by cookie, give a mask, e.g. cookie={a}/-1)")
                                }));
                            }
                            cookie = val;
                            cookie_mask = if cmd == FlowCommand::Add { u64::MAX } else { 0 };
                        }
                    }
                }
                names::Word::Ignored | names::Word::Actions | names::Word::Unknown => {}
            }
        }

        self.check_prereqs()?;

        let mut spec = RuleSpec::new(table, priority, self.m);
        spec.cookie = cookie;
        spec.idle_timeout = idle;
        spec.hard_timeout = hard;

        match (cmd.takes_actions(), actions) {
            (true, None) => {
                let at = text.len();
                return Err(self.err(at, |c| {
                    format!("missing actions at column {c}: end the flow with actions=..., e.g. actions=drop")
                }));
            }
            (false, Some((kat, _))) => {
                return Err(self.err(kat, |c| {
                    format!("actions at column {c} are not allowed when deleting flows")
                }));
            }
            (true, Some((_, vat))) => {
                let mut out = ActionsOut {
                    actions: Vec::new(),
                    goto: None,
                    cols: [0; MAX_COLS],
                };
                parse_actions(text, vat, table, &mut out)?;
                spec.actions = out.actions;
                spec.goto = out.goto.map(|(t, _)| t);
                if let Err(e) = spec.validate() {
                    let at = match e {
                        RuleError::BadAction { index, .. } if index < MAX_COLS => out.cols[index],
                        RuleError::BadGoto { .. } => out.goto.map_or(vat, |(_, at)| at),
                        RuleError::BadTable(_) => self.recs[slot::TABLE].at,
                        _ => vat,
                    };
                    return Err(self.err(at, |c| format!("invalid flow at column {c}: {e}")));
                }
            }
            (false, None) => {}
        }

        Ok(ParsedFlow {
            spec,
            cookie_mask,
            table_given: self.used & (1 << slot::TABLE) != 0,
            priority_given: self.used & (1 << slot::PRIORITY) != 0,
        })
    }

    fn unknown_field(&self, k: &Key) -> SyntaxError {
        let name = k.name;
        if names::UNSUPPORTED_FIELDS.contains(&name) || names::is_register(name) {
            return self.err(k.at, |c| {
                format!("'{name}' at column {c} is not supported by flowpath")
            });
        }
        let mut cands = names::match_part_names();
        cands.extend(names::UNSUPPORTED_FIELDS.iter().copied());
        let hint = did_you_mean(name, &cands);
        self.err(k.at, |c| {
            format!("unknown field '{name}' at column {c}{hint}")
        })
    }
}
