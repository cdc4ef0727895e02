//! Errors with a 1-based character column, and "did you mean" suggestions.

use std::fmt;

pub(crate) use flowpath_base::text::{escape_controls, shown};

/// A flow that does not parse. `message` already names the column, e.g.
/// `unknown field 'nw_sr' at column 14; did you mean nw_src?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// 1-based character (not byte) column of the offending token; one past the end of the
    /// text when something is missing at the end.
    pub column: usize,
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SyntaxError {}

/// A line of a flows file that does not parse. Displays as `line 7: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// 1-based line number.
    pub line: usize,
    /// 1-based character column within the line.
    pub column: usize,
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for FileError {}

/// The 1-based character column of byte offset `at` in `text`.
pub(crate) fn column(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text[..at].chars().count() + 1
}

/// Build an error at byte offset `at`; `msg` receives the column to embed. Control
/// characters the message quotes from the text are escaped (a NUL shows as `\0`); the
/// quoted tokens themselves go through [`shown`], which also cuts long ones.
pub(crate) fn err_at(text: &str, at: usize, msg: impl FnOnce(usize) -> String) -> SyntaxError {
    let column = column(text, at);
    SyntaxError {
        column,
        message: escape_controls(&msg(column)),
    }
}

/// The closest of `candidates` to `word`, if it is close enough to be a plausible typo
/// (or the shortest name it is the start of, for words of 4 characters or more):
/// at most 2 edits (1 for words of up to 3 characters; a swap of neighbours is one edit)
/// after lower-casing, or a
/// Jaro-Winkler similarity of at least 0.92 for longer words.
pub(crate) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    suggest_among(word, candidates, true)
}

/// [`suggest`]; `skip_far`: skip the names whose length alone rules them out (false only
/// in the test that holds the skipping to measuring every name).
fn suggest_among<'a>(word: &str, candidates: &[&'a str], skip_far: bool) -> Option<&'a str> {
    // No name is longer than 16 characters: a long word is not a typo of one (and would
    // make a garbage line slow to reject).
    if word.len() > 24 {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    // A truncated name (`goto` for `goto_table`) first: the shortest name it begins.
    if lower.len() >= 4 {
        let prefixed = candidates
            .iter()
            .filter(|c| c.starts_with(lower.as_str()) && c.len() > lower.len())
            .min_by_key(|c| c.len());
        if let Some(c) = prefixed {
            return Some(c);
        }
    }
    let len = lower.chars().count();
    let limit = if len <= 3 { 1 } else { 2 };
    // Names whose length differs by more than the limit are that many edits away at least,
    // so they can neither be suggested nor beat one that can: skipped (the distance is
    // quadratic, and most names are skipped so).
    let near = |c: &&str| !skip_far || c.chars().count().abs_diff(len) <= limit;
    let mut best: Option<(&'a str, usize)> = None;
    for c in candidates.iter().copied().filter(near) {
        let d = strsim::osa_distance(&lower, c);
        if best.is_none_or(|(_, bd)| d < bd) {
            best = Some((c, d));
        }
    }
    if let Some((c, d)) = best {
        if d <= limit {
            return Some(c);
        }
    }
    if len >= 6 {
        // Jaro-Winkler is at most 0.4 + 0.6 * (2 + r) / 3 for lengths in the ratio r
        // (shorter / longer): below 0.92 when r < 0.6, so those names are skipped too.
        let alike = |c: &&str| {
            let n = c.chars().count();
            !skip_far || 5 * n.min(len) >= 3 * n.max(len)
        };
        let mut best: Option<(&'a str, f64)> = None;
        for c in candidates.iter().copied().filter(alike) {
            let s = strsim::jaro_winkler(&lower, c);
            if best.is_none_or(|(_, bs)| s > bs) {
                best = Some((c, s));
            }
        }
        if let Some((c, s)) = best {
            if s >= 0.92 {
                return Some(c);
            }
        }
    }
    None
}

/// `"; did you mean X?"` or nothing.
pub(crate) fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    match suggest(word, candidates) {
        Some(s) => format!("; did you mean {s}?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters() {
        assert_eq!(column("abc", 0), 1);
        assert_eq!(column("abc", 3), 4);
        assert_eq!(column("abc", 99), 4);
        assert_eq!(column("é,x", 3), 3);
        // Inside a character: the column of that character.
        assert_eq!(column("é,x", 1), 1);
    }

    #[test]
    fn suggestions() {
        let names = ["nw_src", "nw_dst", "tcp", "tp_dst", "goto_table", "output"];
        let s = |w| suggest(w, &names);
        assert_eq!(s("nw_sr"), Some("nw_src"));
        assert_eq!(s("NW_SRC"), Some("nw_src"));
        assert_eq!(s("tpc"), Some("tcp"));
        assert_eq!(s("tp_dts"), Some("tp_dst"));
        assert_eq!(s("outptu"), Some("output"));
        assert_eq!(s("goto"), Some("goto_table"));
        assert_eq!(s("xyz"), None);
        assert_eq!(s("destination"), None);
        assert_eq!(s(&"nw_src".repeat(5)), None);
        assert_eq!(did_you_mean("nw_dts", &names), "; did you mean nw_dst?");
        assert_eq!(did_you_mean("zzzz", &names), "");
    }

    proptest::proptest! {
        // Many cases, and up to 8 edits a word: the words that tell a bound apart (3 or
        // more edits, lengths in a ratio near 0.6) are a small share of them. With up to 3
        // edits, a ratio bound of 0.7 passed.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(5000))]

        /// The length filters change no suggestion: for names of every length from 2 to 16
        /// and words made from them by edits (or of random letters), `suggest` gives what
        /// measuring every name gives (`suggest_among` without skipping).
        #[test]
        fn length_filters_change_no_suggestion(
            names in proptest::collection::vec("[a-z_]{2,16}", 1..40),
            pick in 0usize..40,
            edits in proptest::collection::vec((0usize..3, 0usize..24, "[a-z_]"), 0..9),
            random in "[a-zA-Z_]{0,26}",
            use_random in proptest::bool::ANY,
        ) {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let mut word: Vec<char> = names[pick % names.len()].chars().collect();
            for (kind, at, ch) in &edits {
                let ch = ch.chars().next().unwrap();
                let at = at % (word.len() + 1);
                match kind {
                    0 => word.insert(at, ch),
                    1 if at < word.len() => { word.remove(at); }
                    _ if at < word.len() => word[at] = ch,
                    _ => {}
                }
            }
            let word: String = if use_random { random } else { word.into_iter().collect() };
            proptest::prop_assert_eq!(suggest(&word, &refs), suggest_among(&word, &refs, false), "{:?}", word);
        }
    }
}
