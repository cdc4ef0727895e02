//! The `actions=` part: OVS action names mapped onto flowpath's [`Action`]s, with
//! `goto_table:N` (or `resubmit(,N)`) allowed only as the last action.
//!
//! Here: the walk over the actions and the instructions (`drop`, `clear_actions`,
//! `write_actions`, the jump), and the dispatch of each action word to its family's parser:
//! `forward` (where the packet goes), `rewrite` and `set_field` (header rewrites), `ct`
//! (connection tracking). `words`
//! names the action words, `ctx` holds what every parser uses.

mod ct;
mod ctx;
mod forward;
mod rewrite;
mod set_field;
mod words;

use crate::error::SyntaxError;
use crate::lex::{Key, Lexer};
use ctx::{Arg, Ctx};
use flowpath_packet::Action;
use words::A;

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
                    A::Drop | A::GotoTable | A::Resubmit | A::Ct | A::CtClear => {
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

    /// An action that becomes one flowpath [`Action`]: each word's own parser, by family
    /// (where the packet goes in `forward`, header rewrites in `rewrite` and `set_field`).
    fn action(&self, a: A, k: &Key, arg: Arg) -> Result<Action, SyntaxError> {
        Ok(match a {
            A::Output => self.output(k, arg)?,
            A::InPort => {
                self.no_arg(k, arg)?;
                Action::InPort
            }
            A::Controller => self.controller(k, arg)?,
            A::Normal | A::Flood | A::All => self.reserved_port(a, k, arg)?,
            A::Group => self.group(k, arg)?,
            A::ModDlSrc | A::ModDlDst => self.mod_dl(a, k, arg)?,
            A::ModNwSrc | A::ModNwDst => self.mod_nw(a, k, arg)?,
            A::ModNwTos => self.mod_nw_tos(k, arg)?,
            A::ModTpSrc | A::ModTpDst => self.mod_tp(a, k, arg)?,
            A::SetField => {
                let v = self.plain(k, arg)?;
                self.set_field(k, v)?
            }
            A::PushVlan => self.push_vlan(k, arg)?,
            A::PopVlan => {
                self.no_arg(k, arg)?;
                Action::PopVlan
            }
            A::ModVlanVid => self.mod_vlan_vid(k, arg)?,
            A::ModVlanPcp => self.mod_vlan_pcp(k, arg)?,
            A::DecTtl => self.dec_ttl(k, arg)?,
            A::SetTunnel => self.set_tunnel(k, arg)?,
            A::WriteMetadata => self.write_metadata(k, arg)?,
            A::Ct => self.ct(k, arg)?,
            A::CtClear => {
                self.no_arg(k, arg)?;
                Action::CtClear
            }
            A::Drop | A::GotoTable | A::Resubmit => {
                unreachable!("drop, goto_table and resubmit are not actions of their own")
            }
        })
    }
}
