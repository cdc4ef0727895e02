//! Walking the words of one flow: keywords (table, priority, timeouts, cookie), protocol
//! shorthands, match fields, then the actions.

use super::*;

/// What a flow says besides its match and actions.
pub(super) struct Header {
    table: u8,
    priority: u16,
    cookie: u64,
    cookie_mask: u64,
    idle: u16,
    hard: u16,
}

impl Default for Header {
    fn default() -> Header {
        Header {
            table: 0,
            priority: DEFAULT_PRIORITY,
            cookie: 0,
            cookie_mask: 0,
            idle: 0,
            hard: 0,
        }
    }
}

impl<'a> Parser<'a> {
    pub(super) fn run(mut self, cmd: FlowCommand) -> Result<ParsedFlow, SyntaxError> {
        let text = self.text;
        let mut lx = Lexer::new(text, 0);
        let mut h = Header::default();
        let mut actions: Option<(usize, usize)> = None; // (key offset, value offset)
        while let Some(k) = lx.next_key() {
            let word = names::classify(k.name);
            let Some(v) = self.value_of(&mut lx, &k, word)? else {
                actions = Some((k.at, lx.pos));
                break;
            };
            match word {
                names::Word::Field(f) => self.field(f, &k, v)?,
                _ => self.keyword(word, &k, v, cmd, &mut h)?,
            }
        }
        self.check_prereqs()?;
        let mut spec = RuleSpec::new(h.table, h.priority, self.m);
        spec.cookie = h.cookie;
        spec.idle_timeout = h.idle;
        spec.hard_timeout = h.hard;
        self.attach_actions(cmd, actions, &mut spec)?;
        Ok(ParsedFlow {
            spec,
            cookie_mask: h.cookie_mask,
            table_given: self.used & (1 << slot::TABLE) != 0,
            priority_given: self.used & (1 << slot::PRIORITY) != 0,
        })
    }

    /// The value of word `k` (empty for a protocol shorthand), or `None` for `actions=`
    /// (everything after it is the action list).
    fn value_of<'t>(
        &self,
        lx: &mut Lexer<'t>,
        k: &Key<'t>,
        word: names::Word,
    ) -> Result<Option<&'t str>, SyntaxError> {
        let text = self.text;
        if k.name.is_empty() {
            let ch = text[k.at..].chars().next().unwrap_or(' ');
            return Err(self.err(k.at, |c| {
                format!("unexpected '{ch}' at column {c}: expected a field name")
            }));
        }
        let end = k.at + k.name.len();
        let v = match (word, k.delim) {
            (names::Word::Actions, Delim::Value) => return Ok(None),
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
            (names::Word::Unknown, _) => return Err(self.unknown_field(k)),
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
        Ok(Some(v))
    }

    /// A word that is not a match field: a protocol shorthand or a flow keyword.
    fn keyword(
        &mut self,
        word: names::Word,
        k: &Key,
        v: &str,
        cmd: FlowCommand,
        h: &mut Header,
    ) -> Result<(), SyntaxError> {
        let end = k.at + k.name.len();
        match word {
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
                h.table = self.exact(k, v, 254, "a table number 0..254")? as u8;
            }
            names::Word::Priority => {
                self.claim(slot::PRIORITY, k.at, end, NO_FIELD)?;
                h.priority = self.exact(k, v, 65535, "a number 0..65535")? as u16;
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
                let n = self.exact(k, v, 65535, "a number of seconds 0..65535")? as u16;
                if idle_word {
                    h.idle = n;
                } else {
                    h.hard = n;
                }
            }
            names::Word::Cookie => {
                self.claim(slot::COOKIE, k.at, end, NO_FIELD)?;
                self.cookie(k, v, cmd, h)?;
            }
            names::Word::Field(_)
            | names::Word::Ignored
            | names::Word::Actions
            | names::Word::Unknown => {}
        }
        Ok(())
    }

    /// `cookie=V` (adding, modifying) or `cookie=V/M` (selecting when modifying or deleting).
    fn cookie(
        &self,
        k: &Key,
        v: &str,
        cmd: FlowCommand,
        h: &mut Header,
    ) -> Result<(), SyntaxError> {
        const WHAT: &str = "a 64-bit number (decimal or 0x hex)";
        let (a, m) = split_mask(v);
        let val = parse_u64(a).ok_or_else(|| self.bad_value(k, a, WHAT))?;
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
                let mask = mask.ok_or_else(|| self.bad_mask(k, m, WHAT))?;
                h.cookie = val & mask;
                h.cookie_mask = mask;
            }
            None => {
                if cmd.is_delete() {
                    return Err(self.err(k.at, |c| {
                        format!("cookie at column {c} cannot be set when deleting flows (to select by cookie, give a mask, e.g. cookie={a}/-1)")
                    }));
                }
                h.cookie = val;
                h.cookie_mask = if cmd == FlowCommand::Add { u64::MAX } else { 0 };
            }
        }
        Ok(())
    }

    /// Parse `actions=...` into `spec` when the command takes actions (and refuse them, or
    /// their absence, otherwise); a rule the store would refuse is reported at its column.
    fn attach_actions(
        &self,
        cmd: FlowCommand,
        actions: Option<(usize, usize)>,
        spec: &mut RuleSpec,
    ) -> Result<(), SyntaxError> {
        let text = self.text;
        match (cmd.takes_actions(), actions) {
            (true, None) => {
                let at = text.len();
                Err(self.err(at, |c| {
                    format!("missing actions at column {c}: end the flow with actions=..., e.g. actions=drop")
                }))
            }
            (false, Some((kat, _))) => Err(self.err(kat, |c| {
                format!("actions at column {c} are not allowed when deleting flows")
            })),
            (true, Some((_, vat))) => {
                let mut out = ActionsOut {
                    actions: Vec::new(),
                    write_actions: Vec::new(),
                    clear_actions: false,
                    goto: None,
                    cols: [0; MAX_COLS],
                };
                parse_actions(text, vat, spec.table, &mut out)?;
                let n_apply = out.actions.len();
                self.check_ct_actions(&out.actions, &out.cols[..n_apply.min(MAX_COLS)], vat)?;
                spec.actions = out.actions;
                spec.write_actions = out.write_actions;
                spec.clear_actions = out.clear_actions;
                spec.goto = out.goto.map(|(t, _)| t);
                spec.validate().map_err(|e| {
                    let at = match e {
                        RuleError::BadAction { index, .. } if index < n_apply.min(MAX_COLS) => {
                            out.cols[index]
                        }
                        RuleError::BadGoto { .. } => out.goto.map_or(vat, |(_, at)| at),
                        RuleError::BadTable(_) => self.recs[slot::TABLE].at,
                        _ => vat,
                    };
                    self.err(at, |c| format!("invalid flow at column {c}: {e}"))
                })
            }
            (false, None) => Ok(()),
        }
    }

    pub(super) fn unknown_field(&self, k: &Key) -> SyntaxError {
        let name = k.name;
        if names::UNSUPPORTED_FIELDS.contains(&name) || names::is_register(name) {
            return self.err(k.at, |c| {
                format!("'{name}' at column {c} is not supported by flowpath")
            });
        }
        let mut cands = names::match_part_names();
        cands.extend(names::UNSUPPORTED_FIELDS.iter().copied());
        let hint = did_you_mean(name, &cands);
        let name = shown(name);
        self.err(k.at, |c| {
            format!("unknown field '{name}' at column {c}{hint}")
        })
    }
}
