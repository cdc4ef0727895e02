//! What every action's parser uses: the argument after an action word, and the error
//! messages and value readers of [`Ctx`], which knows the flow's text for columns.

use crate::error::{err_at, shown, SyntaxError};
use crate::lex::{Delim, Key, Lexer};
use crate::value::parse_max;

/// What follows an action name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Arg<'a> {
    None,
    /// After `:` or `=`.
    Plain(&'a str),
    /// Inside `( )`.
    Paren(&'a str, usize),
}

pub(super) struct Ctx<'a> {
    pub(super) text: &'a str,
}

impl Ctx<'_> {
    pub(super) fn err(&self, at: usize, msg: impl FnOnce(usize) -> String) -> SyntaxError {
        err_at(self.text, at, msg)
    }

    pub(super) fn bad(&self, k: &Key, v: &str, what: &str) -> SyntaxError {
        let v = shown(v);
        self.err(k.at, |c| {
            format!(
                "bad value '{v}' for {} at column {c}: expected {what}",
                k.name
            )
        })
    }

    pub(super) fn unsupported(&self, k: &Key, what: &str) -> SyntaxError {
        self.err(k.at, |c| {
            format!("{what} at column {c} is not supported by flowpath")
        })
    }

    pub(super) fn no_arg(&self, k: &Key, arg: Arg) -> Result<(), SyntaxError> {
        if arg == Arg::None {
            Ok(())
        } else {
            Err(self.err(k.at, |c| {
                format!("{} at column {c} takes no argument", k.name)
            }))
        }
    }

    /// The plain (`:`/`=`) argument, which must be present.
    pub(super) fn plain<'b>(&self, k: &Key, arg: Arg<'b>) -> Result<&'b str, SyntaxError> {
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

    pub(super) fn num(&self, k: &Key, v: &str, max: u64, what: &str) -> Result<u64, SyntaxError> {
        parse_max(v, max).ok_or_else(|| self.bad(k, v, what))
    }

    /// Each `key=value` of a parenthesised argument `inner` (at byte `at` of the flow).
    pub(super) fn options<'t>(
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

    /// The argument of action word `k`: none, `:value`, or `(value)`.
    pub(super) fn arg<'t>(&self, lx: &mut Lexer<'t>, k: &Key) -> Result<Arg<'t>, SyntaxError> {
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
}
