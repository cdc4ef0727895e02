//! How every flowpath report writes numbers and text: digit grouping, percentages, escaping,
//! aligned columns, Markdown result tables ([`markdown`]) and the one SVG chart engine ([`chart`]).

pub mod chart;
pub mod markdown;

/// `digits` (ASCII digits, no sign) with a comma every three from the right.
fn group(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `12,346` from 12345.6: rounded to an integer, digits grouped; `-0` is `0`.
pub fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.abs());
    if x < 0.0 && digits != "0" {
        format!("-{}", group(&digits))
    } else {
        group(&digits)
    }
}

/// `1,234,567`: an exact integer with its digits grouped.
pub fn grouped(n: u64) -> String {
    group(&n.to_string())
}

/// A share as a percentage: `5 %`, `12.3 %`, and two decimals below 1 % (`0.50 %`), so a
/// small share never reads as zero.
pub fn pct(share: f64) -> String {
    let p = share * 100.0;
    if p != 0.0 && p.abs() < 1.0 {
        format!("{p:.2} %")
    } else if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0} %")
    } else {
        format!("{p:.1} %")
    }
}

/// Text made safe for HTML and SVG, in content and in attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Rows under a header as aligned text columns: the first left-aligned, the others right-
/// aligned, two spaces apart, one line each (trailing blanks trimmed).
pub fn columns<const N: usize>(head: &[String; N], rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([head[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String; N]| -> String {
        let mut s = String::new();
        for (c, cell) in cells.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if c == 0 {
                s.push_str(cell);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str("  ");
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(head);
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_grouped_by_three() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(-0.2), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(12345.6), "12,346");
        assert_eq!(thousands(-1234567.0), "-1,234,567");
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(4600.0), "4,600");
        assert_eq!(thousands(6450.0), "6,450");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(-1234.0), "-1,234");
        assert_eq!(thousands(-4000.0), "-4,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn shares_read_as_percentages() {
        assert_eq!(pct(0.0), "0 %");
        assert_eq!(pct(0.05), "5 %");
        assert_eq!(pct(0.1234), "12.3 %");
        assert_eq!(pct(0.005), "0.50 %");
        assert_eq!(pct(1.0), "100 %");
    }

    #[test]
    fn columns_line_up() {
        let head = ["name".to_string(), "n".to_string()];
        let rows = [["a".to_string(), "1234".to_string()]];
        assert_eq!(columns(&head, &rows), "name     n\na     1234\n");
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape("<a href='x'>\"&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;&quot;&lt;/a&gt;"
        );
    }
}
