//! Input echoed in messages: control and invisible characters escaped, so a message is
//! one printable line whatever its input held, and long input cut short.

use std::fmt::Write as _;

/// Characters of echoed input [`shown`] keeps (escapes counted as written) before `…`.
pub const SHOWN_CHARS: usize = 64;

/// Whether `c` is escaped: C0 and C1 controls (NUL, ESC, DEL, …) and the invisible
/// characters that reorder or hide text (zero-width, bidirectional controls, BOM).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// Append `c` to `out` as shown: `\0`, `\t`, `\n`, `\r`, else `\u{1b}` for a hidden
/// character; itself otherwise.
fn push_shown(out: &mut String, c: char) {
    match c {
        '\0' => out.push_str("\\0"),
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if hidden(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// `s` with its control and invisible characters escaped (`\0`, `\n`, `\u{1b}`), all of
/// it: for a whole message that may quote input. A backslash is kept as it is.
pub fn escape_controls(s: &str) -> String {
    if !s.chars().any(hidden) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_shown(&mut out, c);
    }
    out
}

/// `s` fit to quote in a message: [`escape_controls`], and cut after [`SHOWN_CHARS`]
/// characters with `…` (an escape is never cut in two).
pub fn shown(s: &str) -> String {
    shown_within(s, SHOWN_CHARS)
}

/// [`shown`] with at most `max` characters before the `…`.
pub fn shown_within(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    for c in s.chars() {
        let before = out.len();
        push_shown(&mut out, c);
        count += out[before..].chars().count();
        if count > max {
            out.truncate(before);
            out.push('…');
            break;
        }
    }
    out
}

/// Bytes that may not be UTF-8, as [`shown`]: each byte that is not part of a UTF-8
/// character as `\xNN`.
pub fn shown_bytes(b: &[u8]) -> String {
    let mut s = String::new();
    for chunk in b.utf8_chunks() {
        s.push_str(chunk.valid());
        for x in chunk.invalid() {
            let _ = write!(s, "\\x{x:02x}");
        }
    }
    shown(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped() {
        assert_eq!(escape_controls("a\0b"), "a\\0b");
        assert_eq!(escape_controls("\x1b[31mred"), "\\u{1b}[31mred");
        assert_eq!(escape_controls("x\ty\r\n\x7f"), "x\\ty\\r\\n\\u{7f}");
        assert_eq!(escape_controls("\u{202e}evil"), "\\u{202e}evil");
        assert_eq!(escape_controls("plain é ✓ \\0"), "plain é ✓ \\0");
    }

    #[test]
    fn long_input_is_cut_with_an_ellipsis() {
        let long = "x".repeat(1000);
        let s = shown(&long);
        assert_eq!(s.chars().count(), SHOWN_CHARS + 1);
        assert!(s.ends_with('…'));
        assert_eq!(shown("short"), "short");
        assert_eq!(shown(&"y".repeat(SHOWN_CHARS)), "y".repeat(SHOWN_CHARS));
        // An escape is not cut in two.
        assert_eq!(shown_within("abc\0", 4), "abc…");
        assert_eq!(shown_within("ab\0", 4), "ab\\0");
    }

    #[test]
    fn bytes_that_are_not_utf8_show_as_hex() {
        assert_eq!(shown_bytes(b"ok\xff\x00"), "ok\\xff\\0");
    }

    proptest::proptest! {
        #[test]
        fn shown_text_has_no_control_and_is_bounded(s in ".*", max in 1usize..80) {
            let out = shown_within(&s, max);
            proptest::prop_assert!(!out.chars().any(hidden));
            proptest::prop_assert!(out.chars().count() <= max + 1);
            if s.chars().any(hidden) { proptest::prop_assert_ne!(&out, &s); }
            if !s.chars().any(hidden) && s.chars().count() <= max {
                proptest::prop_assert_eq!(&out, &s);
            }
        }
    }
}
