//! The `actions=` part: OVS action names mapped onto flowpath's [`Action`]s, with
//! `goto_table:N` (or `resubmit(,N)`) allowed only as the last action.

use crate::error::{did_you_mean, err_at, SyntaxError};
use crate::lex::{Delim, Key, Lexer};
use crate::names;
use crate::value::{parse_ipv4, parse_ipv6, parse_mac, parse_max};
use flowpath_packet::Action;

mod set_field;

/// How many action columns are remembered (for mapping `RuleSpec::validate` errors).
pub(crate) const MAX_COLS: usize = 32;

pub(crate) struct ActionsOut {
    pub actions: Vec<Action>,
    /// `write_actions(...)`: OpenFlow's write-actions instruction.
    pub write_actions: Vec<Action>,
    /// `clear_actions`: OpenFlow's clear-actions instruction.
    pub clear_actions: bool,
    /// Target table and the byte offset of the `goto_table`/`resubmit` that set it.
    pub goto: Option<(u8, usize)>,
    /// Byte offset of each of the first `MAX_COLS` actions.
    pub cols: [usize; MAX_COLS],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum A {
    Output,
    InPort,
    Controller,
    Drop,
    GotoTable,
    Resubmit,
    ModDlSrc,
    ModDlDst,
    ModNwSrc,
    ModNwDst,
    ModNwTos,
    ModTpSrc,
    ModTpDst,
    SetField,
    PushVlan,
    PopVlan,
    ModVlanVid,
    ModVlanPcp,
    DecTtl,
    SetTunnel,
    Group,
    Normal,
    Flood,
    All,
    WriteMetadata,
}

/// Action names flowpath supports (matched case-insensitively, as OVS does).
const ACTIONS: &[(&str, A)] = &[
    ("output", A::Output),
    ("in_port", A::InPort),
    ("controller", A::Controller),
    ("drop", A::Drop),
    ("goto_table", A::GotoTable),
    ("resubmit", A::Resubmit),
    ("mod_dl_src", A::ModDlSrc),
    ("mod_dl_dst", A::ModDlDst),
    ("mod_nw_src", A::ModNwSrc),
    ("mod_nw_dst", A::ModNwDst),
    ("mod_nw_tos", A::ModNwTos),
    ("mod_tp_src", A::ModTpSrc),
    ("mod_tp_dst", A::ModTpDst),
    ("set_field", A::SetField),
    ("push_vlan", A::PushVlan),
    ("strip_vlan", A::PopVlan),
    ("pop_vlan", A::PopVlan),
    ("mod_vlan_vid", A::ModVlanVid),
    ("mod_vlan_pcp", A::ModVlanPcp),
    ("dec_ttl", A::DecTtl),
    ("set_tunnel", A::SetTunnel),
    ("set_tunnel64", A::SetTunnel),
    ("group", A::Group),
    ("write_metadata", A::WriteMetadata),
    ("normal", A::Normal),
    ("flood", A::Flood),
    ("all", A::All),
];

const SUPPORTED: &str = "output, in_port, controller, drop, goto_table, resubmit(,TABLE), \
mod_dl_src, mod_dl_dst, mod_nw_src, mod_nw_dst, mod_nw_tos, mod_tp_src, mod_tp_dst, set_field, \
push_vlan, strip_vlan, pop_vlan, mod_vlan_vid, mod_vlan_pcp, dec_ttl, set_tunnel, set_tunnel64, \
group, normal, flood, all";

/// OVS actions (and reserved ports usable as actions) that flowpath does not have.
const UNSUPPORTED: &[&str] = &[
    "local",
    "table",
    "none",
    "any",
    "enqueue",
    "output_reg",
    "output_trunc",
    "bundle",
    "bundle_load",
    "set_vlan_vid",
    "set_vlan_pcp",
    "mod_nw_ecn",
    "mod_nw_ttl",
    "set_nw_ttl",
    "move",
    "load",
    "push",
    "pop",
    "set_mpls_label",
    "set_mpls_tc",
    "set_mpls_ttl",
    "dec_mpls_ttl",
    "push_mpls",
    "pop_mpls",
    "dec_nsh_ttl",
    "delete_field",
    "encap",
    "decap",
    "set_queue",
    "pop_queue",
    "fin_timeout",
    "learn",
    "conjunction",
    "multipath",
    "note",
    "exit",
    "sample",
    "ct",
    "ct_clear",
    "nat",
    "clone",
    "check_pkt_larger",
    "meter",
    "write_metadata",
    "apply_actions",
];

/// Reserved OpenFlow port names flowpath has no equivalent for.
const UNSUPPORTED_PORTS: &[&str] = &["local", "table", "none", "any"];

const TOS_WHAT: &str = "a TOS value 0..255 whose low 2 (ECN) bits are 0, e.g. 184";
const TUN_WHAT: &str = "a tunnel id 0..0xffffff (flowpath tunnel ids are 24 bits, the VXLAN VNI)";
const PORT_WHAT: &str = "a port number 1..4294967295, in_port, controller, normal, flood or all";

/// What follows an action name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arg<'a> {
    None,
    /// After `:` or `=`.
    Plain(&'a str),
    /// Inside `( )`.
    Paren(&'a str, usize),
}

struct Ctx<'a> {
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, at: usize, msg: impl FnOnce(usize) -> String) -> SyntaxError {
        err_at(self.text, at, msg)
    }

    fn bad(&self, k: &Key, v: &str, what: &str) -> SyntaxError {
        self.err(k.at, |c| {
            format!(
                "bad value '{v}' for {} at column {c}: expected {what}",
                k.name
            )
        })
    }

    fn unsupported(&self, k: &Key, what: &str) -> SyntaxError {
        self.err(k.at, |c| {
            format!("{what} at column {c} is not supported by flowpath")
        })
    }

    fn no_arg(&self, k: &Key, arg: Arg) -> Result<(), SyntaxError> {
        if arg == Arg::None {
            Ok(())
        } else {
            Err(self.err(k.at, |c| {
                format!("{} at column {c} takes no argument", k.name)
            }))
        }
    }

    /// The plain (`:`/`=`) argument, which must be present.
    fn plain<'b>(&self, k: &Key, arg: Arg<'b>) -> Result<&'b str, SyntaxError> {
        match arg {
            Arg::Plain(v) if !v.is_empty() => Ok(v),
            Arg::Paren(..) => Err(self.err(k.at, |c| {
                format!(
                    "{} at column {c} takes its argument after ':', e.g. {}:VALUE",
                    k.name, k.name
                )
            })),
            _ => Err(self.err(k.at, |c| {
                format!("missing value for {} at column {c}", k.name)
            })),
        }
    }

    fn num(&self, k: &Key, v: &str, max: u64, what: &str) -> Result<u64, SyntaxError> {
        parse_max(v, max).ok_or_else(|| self.bad(k, v, what))
    }

    fn port(&self, k: &Key, v: &str) -> Result<Action, SyntaxError> {
        if v.eq_ignore_ascii_case("in_port") {
            return Ok(Action::InPort);
        }
        if v.eq_ignore_ascii_case("controller") {
            return Ok(Action::controller(u16::MAX));
        }
        for (name, a) in [
            ("normal", Action::Normal),
            ("flood", Action::Flood),
            ("all", Action::All),
        ] {
            if v.eq_ignore_ascii_case(name) {
                return Ok(a);
            }
        }
        if UNSUPPORTED_PORTS.iter().any(|p| p.eq_ignore_ascii_case(v)) {
            return Err(self.err(k.at, |c| {
                format!(
                    "port '{v}' for {} at column {c} is not supported by flowpath (use a port number, in_port, controller, normal, flood or all)",
                    k.name
                )
            }));
        }
        match parse_max(v, u32::MAX as u64) {
            Some(n) if n != 0 => Ok(Action::Output(n as u32)),
            _ => Err(self.bad(k, v, PORT_WHAT)),
        }
    }

    fn table(&self, k: &Key, v: &str, table: u8) -> Result<u8, SyntaxError> {
        let t = self.num(k, v, 254, "a table number 0..254")? as u8;
        if t <= table {
            return Err(self.err(k.at, |c| {
                format!(
                    "{}:{v} at column {c} must name a later table than this flow's table {table}",
                    k.name
                )
            }));
        }
        Ok(t)
    }

    /// `controller`, `controller:N`, `controller(max_len=N)`.
    fn controller(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let max_len = match arg {
            Arg::None => u16::MAX,
            Arg::Plain(v) => self.num(k, v, 65535, "a max_len 0..65535")? as u16,
            Arg::Paren(inner, at) => {
                let mut max_len = u16::MAX;
                self.options(inner, at, |ik, v| {
                    match ik.name {
                        "max_len" => {
                            max_len = self.num(&ik, v, 65535, "a max_len 0..65535")? as u16;
                        }
                        "reason" | "id" | "userdata" | "pause" | "meter_id" => {
                            return Err(self.err(ik.at, |c| {
                                format!("controller option '{}' at column {c} is not supported by flowpath (only max_len)", ik.name)
                            }))
                        }
                        n => {
                            return Err(self.err(ik.at, |c| {
                                format!("unknown controller option '{n}' at column {c} (flowpath supports max_len)")
                            }))
                        }
                    }
                    Ok(())
                })?;
                max_len
            }
        };
        Ok(Action::controller(max_len))
    }

    /// Each `key=value` of a parenthesised argument `inner` (at byte `at` of the flow).
    fn options<'t>(
        &self,
        inner: &'t str,
        at: usize,
        mut each: impl FnMut(Key<'t>, &'t str) -> Result<(), SyntaxError>,
    ) -> Result<(), SyntaxError> {
        let mut lx = Lexer::new(inner, 0);
        while let Some(ik) = lx.next_key() {
            let v = match ik.delim {
                Delim::Value => lx.value().0,
                _ => "",
            };
            each(
                Key {
                    at: at + ik.at,
                    ..ik
                },
                v,
            )?;
        }
        Ok(())
    }

    /// `output:N`, `output(port=N)`.
    fn output(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        match arg {
            Arg::Paren(inner, at) => {
                let mut port = None;
                self.options(inner, at, |ik, v| {
                    match ik.name {
                        "port" => port = Some(self.port(&ik, v)?),
                        "max_len" => {
                            return Err(self.err(ik.at, |c| {
                                format!("output truncation (max_len) at column {c} is not supported by flowpath")
                            }))
                        }
                        n => {
                            return Err(self.err(ik.at, |c| {
                                format!("unknown output option '{n}' at column {c} (expected port=N)")
                            }))
                        }
                    }
                    Ok(())
                })?;
                port.ok_or_else(|| {
                    self.err(k.at, |c| format!("missing port=N in output at column {c}"))
                })
            }
            _ => {
                let v = self.plain(k, arg)?;
                self.port(k, v)
            }
        }
    }
}

/// Parse the actions that start at byte `start` of `text` into `out`, for a flow in
/// `table`.
pub(crate) fn parse_actions(
    text: &str,
    start: usize,
    table: u8,
    out: &mut ActionsOut,
) -> Result<(), SyntaxError> {
    let cx = Ctx { text };
    let mut lx = Lexer::new(text, start);
    let mut drop_at: Option<usize> = None;
    // The goto_table/resubmit seen so far (which must be last): offset and name.
    let mut last: Option<(usize, &str)> = None;
    while let Some(k) = lx.next_key() {
        if let Some((at, name)) = last {
            return Err(cx.not_last(at, name));
        }
        let arg = cx.arg(&mut lx, &k)?;
        if k.name.eq_ignore_ascii_case("clear_actions") {
            cx.no_arg(&k, arg)?;
            out.clear_actions = true;
            continue;
        }
        if k.name.eq_ignore_ascii_case("write_actions") {
            let Arg::Paren(inner, at) = arg else {
                return Err(cx.err(k.at, |c| {
                    format!("write_actions at column {c} takes its actions in parentheses, e.g. write_actions(output:1)")
                }));
            };
            cx.write_actions(text, inner, at, &mut out.write_actions)?;
            continue;
        }
        let action = if k.name.bytes().all(|b| b.is_ascii_digit()) {
            cx.no_arg(&k, arg)?;
            cx.port(&k, k.name)?
        } else {
            match cx.lookup(&k)? {
                A::Drop => {
                    cx.no_arg(&k, arg)?;
                    drop_at.get_or_insert(k.at);
                    continue;
                }
                A::GotoTable => {
                    let v = cx.plain(&k, arg)?;
                    out.goto = Some((cx.table(&k, v, table)?, k.at));
                    last = Some((k.at, k.name));
                    continue;
                }
                A::Resubmit => {
                    out.goto = Some((cx.resubmit(&k, arg, table)?, k.at));
                    last = Some((k.at, k.name));
                    continue;
                }
                a => cx.action(a, &k, arg)?,
            }
        };
        if let Some(slot) = out.cols.get_mut(out.actions.len()) {
            *slot = k.at;
        }
        out.actions.push(action);
    }
    if let Some(at) = drop_at {
        if !out.actions.is_empty()
            || out.goto.is_some()
            || !out.write_actions.is_empty()
            || out.clear_actions
        {
            return Err(cx.err(at, |c| {
                format!("'drop' at column {c} must be the only action")
            }));
        }
    }
    Ok(())
}

impl Ctx<'_> {
    /// The actions inside `write_actions(...)` (`inner`, at byte `at` of `text`): plain
    /// actions only (no drop, goto_table or nested instructions).
    fn write_actions(
        &self,
        text: &str,
        inner: &str,
        at: usize,
        out: &mut Vec<Action>,
    ) -> Result<(), SyntaxError> {
        let mut lx = Lexer::new(&text[..at + inner.len()], at);
        while let Some(k) = lx.next_key() {
            let arg = self.arg(&mut lx, &k)?;
            let action = if k.name.bytes().all(|b| b.is_ascii_digit()) {
                self.no_arg(&k, arg)?;
                self.port(&k, k.name)?
            } else {
                match self.lookup(&k)? {
                    A::Drop | A::GotoTable | A::Resubmit => {
                        return Err(self.err(k.at, |c| {
                            format!("{} at column {c} cannot be inside write_actions", k.name)
                        }))
                    }
                    a => self.action(a, &k, arg)?,
                }
            };
            out.push(action);
        }
        Ok(())
    }

    /// An action after `goto_table`/`resubmit` (named `name`, at `at`).
    fn not_last(&self, at: usize, name: &str) -> SyntaxError {
        if name.eq_ignore_ascii_case("resubmit") {
            self.err(at, |c| {
                format!("resubmit at column {c} must be the last action: flowpath supports resubmit(,TABLE) only as a jump to a later table at the end of the actions")
            })
        } else {
            self.err(at, |c| {
                format!("{name} at column {c} must be the last action")
            })
        }
    }

    /// The argument of action word `k`: none, `:value`, or `(value)`.
    fn arg<'t>(&self, lx: &mut Lexer<'t>, k: &Key) -> Result<Arg<'t>, SyntaxError> {
        if k.name.is_empty() {
            let ch = self.text[k.at..].chars().next().unwrap_or(' ');
            return Err(self.err(k.at, |c| {
                format!("unexpected '{ch}' at column {c}: expected an action")
            }));
        }
        Ok(match k.delim {
            Delim::None => Arg::None,
            Delim::Value => Arg::Plain(lx.value().0),
            Delim::Paren => match lx.paren_value() {
                Some((v, at)) => Arg::Paren(v, at),
                None => {
                    return Err(self.err(k.at, |c| {
                        format!("missing ')' for '{}(' at column {c}", k.name)
                    }))
                }
            },
        })
    }

    /// Which action `k` names, or why it is none flowpath runs.
    fn lookup(&self, k: &Key) -> Result<A, SyntaxError> {
        if let Some(&(_, a)) = ACTIONS.iter().find(|(n, _)| n.eq_ignore_ascii_case(k.name)) {
            return Ok(a);
        }
        let lower = k.name.to_ascii_lowercase();
        if UNSUPPORTED.contains(&lower.as_str()) {
            return Err(self.err(k.at, |c| {
                format!(
                    "action '{}' at column {c} is not supported by flowpath (supported: {SUPPORTED})",
                    k.name
                )
            }));
        }
        let mut cands: Vec<&str> = ACTIONS.iter().map(|&(n, _)| n).collect();
        cands.extend(UNSUPPORTED.iter().copied());
        let hint = did_you_mean(k.name, &cands);
        Err(self.err(k.at, |c| {
            format!("unknown action '{}' at column {c}{hint}", k.name)
        }))
    }

    /// `resubmit(,TABLE)` (or `resubmit(in_port,TABLE)`): the table it jumps to.
    fn resubmit(&self, k: &Key, arg: Arg, table: u8) -> Result<u8, SyntaxError> {
        let Arg::Paren(inner, _) = arg else {
            let shown = match arg {
                Arg::Plain(v) => format!("{}:{v}", k.name),
                _ => k.name.to_string(),
            };
            return Err(self.err(k.at, |c| {
                format!("{shown} at column {c} is not supported by flowpath: only resubmit(,TABLE) to a later table, as the last action")
            }));
        };
        let mut parts = inner.split(',');
        let port = parts.next().unwrap_or("").trim();
        let t = parts.next().unwrap_or("").trim();
        if (!port.is_empty() && !port.eq_ignore_ascii_case("in_port"))
            || t.is_empty()
            || parts.next().is_some()
        {
            return Err(self.err(k.at, |c| {
                format!("{}({inner}) at column {c} is not supported by flowpath: only resubmit(,TABLE) to a later table, as the last action", k.name)
            }));
        }
        self.table(k, t, table)
    }

    /// An action that becomes one flowpath [`Action`].
    fn action(&self, a: A, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        Ok(match a {
            A::Output => self.output(k, arg)?,
            A::InPort => {
                self.no_arg(k, arg)?;
                Action::InPort
            }
            A::Controller => self.controller(k, arg)?,
            A::Normal | A::Flood | A::All => {
                self.no_arg(k, arg)?;
                match a {
                    A::Normal => Action::Normal,
                    A::Flood => Action::Flood,
                    _ => Action::All,
                }
            }
            A::ModDlSrc | A::ModDlDst => {
                let v = self.plain(k, arg)?;
                let mac = parse_mac(v)
                    .ok_or_else(|| self.bad(k, v, "a MAC address xx:xx:xx:xx:xx:xx"))?;
                if a == A::ModDlSrc {
                    Action::SetEthSrc(mac)
                } else {
                    Action::SetEthDst(mac)
                }
            }
            A::ModNwSrc | A::ModNwDst => {
                let v = self.plain(k, arg)?;
                let ip = parse_ipv4(v)
                    .ok_or_else(|| self.bad(k, v, "an IPv4 address a.b.c.d"))?
                    .to_be_bytes();
                if a == A::ModNwSrc {
                    Action::SetIpv4Src(ip)
                } else {
                    Action::SetIpv4Dst(ip)
                }
            }
            A::ModNwTos => {
                let v = self.plain(k, arg)?;
                let n = parse_max(v, 255)
                    .filter(|n| n & 3 == 0)
                    .ok_or_else(|| self.bad(k, v, TOS_WHAT))?;
                Action::SetNwTos(n as u8)
            }
            A::ModTpSrc | A::ModTpDst => {
                let v = self.plain(k, arg)?;
                let n = self.num(k, v, 65535, "a number 0..65535")? as u16;
                if a == A::ModTpSrc {
                    Action::SetTpSrc(n)
                } else {
                    Action::SetTpDst(n)
                }
            }
            A::SetField => {
                let v = self.plain(k, arg)?;
                self.set_field(k, v)?
            }
            A::PushVlan => {
                let v = self.plain(k, arg)?;
                match parse_max(v, 0xffff) {
                    Some(t @ (0x8100 | 0x88a8)) => Action::PushVlan { tpid: t as u16 },
                    _ => return Err(self.bad(k, v, "a VLAN ethertype, 0x8100 or 0x88a8")),
                }
            }
            A::PopVlan => {
                self.no_arg(k, arg)?;
                Action::PopVlan
            }
            A::ModVlanVid => {
                let v = self.plain(k, arg)?;
                Action::SetVlanVid(self.num(k, v, 4095, "a VLAN id 0..4095")? as u16)
            }
            A::ModVlanPcp => {
                let v = self.plain(k, arg)?;
                Action::SetVlanPcp(self.num(k, v, 7, "a VLAN priority 0..7")? as u8)
            }
            A::DecTtl => {
                if matches!(arg, Arg::Paren(..)) {
                    return Err(self.unsupported(k, "dec_ttl with controller ids"));
                }
                self.no_arg(k, arg)?;
                Action::DecTtl
            }
            A::SetTunnel => {
                let v = self.plain(k, arg)?;
                Action::SetTunnel(self.num(k, v, 0xff_ffff, TUN_WHAT)? as u32)
            }
            A::Group => {
                let v = self.plain(k, arg)?;
                Action::Group(self.num(k, v, 0xffff_ff00, "a group id 0..4294967040")? as u32)
            }
            A::WriteMetadata => {
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
                Action::WriteMetadata { value, mask }
            }
            A::Drop | A::GotoTable | A::Resubmit => {
                unreachable!("drop, goto_table and resubmit are not actions of their own")
            }
        })
    }
}
