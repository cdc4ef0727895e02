//! A frame typed as hex digits (`flowpath explain`'s and `flowpath trace`'s input).

/// Hex digits to bytes, ignoring white space, `:`, `-` and a leading `0x`; an error names
/// the character position (1-based) of the first bad digit, or says the count is odd.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let body = s.trim();
    let (skip, body) = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(b) => (s.len() - s.trim_start().len() + 2, b),
        None => (s.len() - s.trim_start().len(), body),
    };
    let mut digits = Vec::with_capacity(body.len());
    for (i, c) in body.char_indices() {
        if c.is_ascii_whitespace() || c == ':' || c == '-' {
            continue;
        }
        match c.to_digit(16) {
            Some(d) => digits.push(d as u8),
            None => {
                return Err(format!(
                    "malformed hex at character {}: '{c}' is not a hex digit",
                    skip + body[..i].chars().count() + 1
                ))
            }
        }
    }
    if digits.is_empty() {
        return Err("no hex digits: give the frame's bytes, e.g. 0200000000020200...".into());
    }
    if digits.len() % 2 != 0 {
        return Err(format!(
            "malformed hex: {} digits is an odd count (two per byte)",
            digits.len()
        ));
    }
    Ok(digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_accepts_separators_and_names_the_bad_position() {
        assert_eq!(parse_hex("0x02 00:ff-0a").unwrap(), vec![2, 0, 0xff, 0x0a]);
        let e = parse_hex("0200zz").unwrap_err();
        assert!(e.contains("character 5"), "{e}");
        assert!(parse_hex("020").unwrap_err().contains("odd"));
        assert!(parse_hex("  ").is_err());
    }
}
