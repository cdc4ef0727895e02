//! Splitting a flow into `key[=value]`, `key:value` and `key(value)` items, the way
//! OVS's `ofputil_parse_key_value` does: items are separated by commas and/or white
//! space, a value after `=` or `:` runs to the next separator outside parentheses, and a
//! value after `(` runs to the matching `)`. Only ASCII bytes delimit, so every slice
//! taken here starts and ends on a character boundary.

/// Separators between items.
#[inline]
pub(crate) fn is_sep(b: u8) -> bool {
    matches!(b, b',' | b' ' | b'\t' | b'\r' | b'\n')
}

/// What follows a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delim {
    /// A separator or the end: a bare word such as `ip` or `drop`.
    None,
    /// `=` or `:`.
    Value,
    /// `(`.
    Paren,
}

/// One key, at byte offset `at`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Key<'a> {
    pub name: &'a str,
    pub at: usize,
    pub delim: Delim,
}

pub(crate) struct Lexer<'a> {
    pub s: &'a str,
    pub pos: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(s: &'a str, pos: usize) -> Lexer<'a> {
        Lexer { s, pos }
    }

    /// The next key, after skipping separators; the delimiter (`=`, `:`, `(`) is consumed.
    pub fn next_key(&mut self) -> Option<Key<'a>> {
        let b = self.s.as_bytes();
        while self.pos < b.len() && is_sep(b[self.pos]) {
            self.pos += 1;
        }
        if self.pos >= b.len() {
            return None;
        }
        let start = self.pos;
        while self.pos < b.len()
            && !matches!(b[self.pos], b'=' | b':' | b'(')
            && !is_sep(b[self.pos])
        {
            self.pos += 1;
        }
        let name = &self.s[start..self.pos];
        let delim = match b.get(self.pos) {
            Some(b'=' | b':') => Delim::Value,
            Some(b'(') => Delim::Paren,
            _ => Delim::None,
        };
        if delim != Delim::None {
            self.pos += 1;
        }
        Some(Key {
            name,
            at: start,
            delim,
        })
    }

    /// The value after `=` or `:`: up to the next separator outside parentheses.
    pub fn value(&mut self) -> (&'a str, usize) {
        let b = self.s.as_bytes();
        let start = self.pos;
        let mut depth = 0usize;
        while self.pos < b.len() {
            let c = b[self.pos];
            if depth == 0 && is_sep(c) {
                break;
            }
            if c == b'(' {
                depth += 1;
            } else if c == b')' && depth > 0 {
                depth -= 1;
            }
            self.pos += 1;
        }
        (&self.s[start..self.pos], start)
    }

    /// The value after `(`: up to the matching `)`, which is consumed. `None` when the
    /// parenthesis is never closed.
    pub fn paren_value(&mut self) -> Option<(&'a str, usize)> {
        let b = self.s.as_bytes();
        let start = self.pos;
        let mut depth = 1usize;
        let mut i = self.pos;
        while i < b.len() {
            match b[i] {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos = i + 1;
                        return Some((&self.s[start..i], start));
                    }
                }
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// Byte offset of the next non-blank byte (spaces and tabs skipped), if any.
    pub fn peek_non_blank(&self) -> Option<(u8, usize)> {
        let b = self.s.as_bytes();
        let mut i = self.pos;
        while i < b.len() && matches!(b[i], b' ' | b'\t') {
            i += 1;
        }
        b.get(i).map(|&c| (c, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(s: &str) -> Vec<(String, Delim, String)> {
        let mut lx = Lexer::new(s, 0);
        let mut out = Vec::new();
        while let Some(k) = lx.next_key() {
            let v = match k.delim {
                Delim::None => String::new(),
                Delim::Value => lx.value().0.to_string(),
                Delim::Paren => lx
                    .paren_value()
                    .map(|v| v.0.to_string())
                    .unwrap_or("?".into()),
            };
            out.push((k.name.to_string(), k.delim, v));
        }
        out
    }

    #[test]
    fn splits_like_ovs() {
        let got = items(" ip,nw_src=1.2.3.4  tp_dst:80,resubmit(,3),controller(max_len=5) x");
        let want = [
            ("ip", Delim::None, ""),
            ("nw_src", Delim::Value, "1.2.3.4"),
            ("tp_dst", Delim::Value, "80"),
            ("resubmit", Delim::Paren, ",3"),
            ("controller", Delim::Paren, "max_len=5"),
            ("x", Delim::None, ""),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0.as_str(), g.1, g.2.as_str()), w);
        }
        assert_eq!(items("ipv6_src=fe80::1/64")[0].2, "fe80::1/64");
        assert_eq!(items("set_field:1.2.3.4->nw_src")[0].2, "1.2.3.4->nw_src");
        assert_eq!(items("a=f(x,y),b")[0].2, "f(x,y)");
        assert_eq!(items("a(b")[0].2, "?");
    }
}
