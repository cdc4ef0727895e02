//! Actions that say where the packet goes: `output` and the port names, `controller`, and
//! the jump to a later table (`goto_table`, `resubmit(,N)`).

use super::ctx::{Arg, Ctx};
use super::words::A;
use crate::error::{shown, SyntaxError};
use crate::lex::Key;
use crate::value::parse_max;
use flowpath_packet::Action;

/// Reserved OpenFlow port names flowpath has no equivalent for.
const UNSUPPORTED_PORTS: &[&str] = &["local", "table", "none", "any"];

const PORT_WHAT: &str = "a port number 1..4294967295, in_port, controller, normal, flood or all";

impl Ctx<'_> {
    pub(super) fn port(&self, k: &Key, v: &str) -> Result<Action, SyntaxError> {
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
            let v = shown(v);
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

    pub(super) fn table(&self, k: &Key, v: &str, table: u8) -> Result<u8, SyntaxError> {
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
    pub(super) fn controller(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
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
                            let n = shown(n);
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

    /// `output:N`, `output(port=N)`.
    pub(super) fn output(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
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
                            let n = shown(n);
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

    /// `resubmit(,TABLE)` (or `resubmit(in_port,TABLE)`): the table it jumps to.
    pub(super) fn resubmit(&self, k: &Key, arg: Arg, table: u8) -> Result<u8, SyntaxError> {
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

    /// `normal`, `flood`, `all`: OpenFlow's reserved ports, as actions.
    pub(super) fn reserved_port(&self, a: A, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        self.no_arg(k, arg)?;
        Ok(match a {
            A::Normal => Action::Normal,
            A::Flood => Action::Flood,
            _ => Action::All,
        })
    }

    /// `group:N`.
    pub(super) fn group(&self, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        let v = self.plain(k, arg)?;
        Ok(Action::Group(
            self.num(k, v, 0xffff_ff00, "a group id 0..4294967040")? as u32,
        ))
    }
}
