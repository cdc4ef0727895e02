//! Parsing one flow: keywords and match fields, prerequisites, then the actions.
//!
//! This module holds the entry points and the parser's state (which slots a flow has
//! claimed, and where); `run.rs` walks the words of a flow, `fields.rs` parses each match
//! field by family, `values.rs` reads numbers, addresses and masks with errors that name
//! the column, `prereq.rs` checks OVS's prerequisites.

mod ct;
mod fields;
mod prereq;
mod run;
mod values;

use values::{parse_tcp_flags, split_mask};

use crate::actions::{parse_actions, ActionsOut, MAX_COLS};
use crate::error::{column, did_you_mean, err_at, shown, FileError, SyntaxError};
use crate::lex::{Delim, Key, Lexer};
use crate::names::{self, F, FRAG_NAMES, TCP_FLAG_NAMES};
use crate::value::{
    mac_u128, parse_ipv4, parse_ipv6, parse_mac, parse_max, parse_u64, prefix_mask,
};
use flowpath_packet::key::{ethertype, ipproto, VLAN_PRESENT};
use flowpath_packet::Field;
use flowpath_pipeline::{Match, PortRange, RuleError, RuleSpec};

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
///   `tun_ipv6_dst`, `tun_flags`; connection tracking: `ct_state` (`+trk+est-new`,
///   `est|trk`, `0x22/0x22`), `ct_zone`, `ct_mark[/mask]`, `ct_label[/mask]` (128 bits),
///   `ct_nw_src`/`ct_nw_dst`, `ct_ipv6_src`/`ct_ipv6_dst`, `ct_nw_proto`,
///   `ct_tp_src`/`ct_tp_dst` (these seven need a `ct_state` that says the connection is
///   valid, as in OVS).
/// - Actions: `output:N` (also a bare `N`, `output(port=N)`), `in_port`, `controller`,
///   `controller:MAX_LEN`, `controller(max_len=N)`, `drop` (alone), `goto_table:N` (last,
///   to a later table), `resubmit(,N)` (only as the last action: it becomes
///   `goto_table:N`), `mod_dl_src`, `mod_dl_dst`, `mod_nw_src`, `mod_nw_dst`,
///   `mod_nw_tos`, `mod_tp_src`, `mod_tp_dst`, `set_field:V->F` (F: eth/ipv4/ipv6
///   src/dst, `nw_tos`, `ip_dscp`, tp/tcp/udp src/dst, `vlan_vid`, `vlan_pcp`, `tun_id`),
///   `push_vlan:0x8100|0x88a8`, `strip_vlan`/`pop_vlan`, `mod_vlan_vid`, `mod_vlan_pcp`,
///   `dec_ttl`, `set_tunnel`/`set_tunnel64` (at most 0xffffff), `ct(commit, force,
///   table=T, zone=N|FIELD[a..b], nat[(src|dst=RANGE,...)], exec(set_field:V[/M]->ct_mark
///   |ct_label))`, `ct_clear`. Action names are case-insensitive, field names are not (as
///   in OVS).
///
/// Where this differs from OVS: prerequisites (`nw_src` needs `ip` or `arp`, `tp_dst`
/// needs `tcp` or `udp`, ...) are checked here, in any order, rather than by the switch;
/// a field given twice is an error rather than "last wins"; ports are numbers (plus
/// `in_port`, `controller`), not names; numbers are decimal or `0x` hex (no octal);
/// `icmp_type`/`icmp_code` also take a mask and `ip_frag` a numeric value/mask, so that
/// every key mask prints back; `tun_flags` holds flowpath's bits (1 = arrived tunnelled,
/// 2 = outer header IPv6), not OVS's named flags; `tun_src`/`tun_dst` match the first 4
/// bytes of the 16-byte outer address; actions other than `ct` are not checked against
/// the match (a rewrite of a header the packet lacks is a no-op in flowpath; `ct` is
/// checked as OVS's `check_CT` does: ip or ipv6, the NAT range's family, no commit of
/// `+inv`); a non-strict delete
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
    pub const METADATA: usize = 29;
    pub const CT_STATE: usize = 30;
    pub const CT_ZONE: usize = 31;
    pub const CT_MARK: usize = 32;
    pub const CT_LABEL: usize = 33;
    pub const CT_SRC: usize = 34;
    pub const CT_DST: usize = 35;
    pub const CT_PROTO: usize = 36;
    pub const CT_TP_SRC: usize = 37;
    pub const CT_TP_DST: usize = 38;
    pub const N: usize = 39;
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
        F::Metadata => one(METADATA),
        F::CtState => one(CT_STATE),
        F::CtZone => one(CT_ZONE),
        F::CtMark => one(CT_MARK),
        F::CtLabel => one(CT_LABEL),
        F::CtNwSrc | F::CtIpv6Src => one(CT_SRC),
        F::CtNwDst | F::CtIpv6Dst => one(CT_DST),
        F::CtNwProto => one(CT_PROTO),
        F::CtTpSrc => one(CT_TP_SRC),
        F::CtTpDst => one(CT_TP_DST),
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
    used: u64,
    recs: [Rec; slot::N],
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
        let bit = 1u64 << s;
        if self.used & bit != 0 {
            let prev = self.recs[s];
            let prev_name = shown(&self.text[prev.at..prev.end]);
            let pcol = column(self.text, prev.at);
            let name = shown(&self.text[at..end]);
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
            let prev_text = shown(&self.text[prev.at..prev.end]);
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
}
