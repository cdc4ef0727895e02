//! The suite's outputs: terminal tables, findings in sentences, a self-contained HTML
//! report (inline SVG charts, no scripts, nothing fetched), `results.json` and one SVG
//! file per chart.

mod html;
mod tables;

pub use html::{chart_files, html};
pub use tables::tables;

use crate::suite::SuiteResults;
pub use flowpath_report::{escape, pct, thousands};
use std::path::{Path, PathBuf};

/// Days since 1970-01-01 → (year, month, day) (H. Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn utc_parts(unix: u64) -> (i64, u32, u32, u64, u64, u64) {
    let (y, mo, d) = civil((unix / 86_400) as i64);
    let s = unix % 86_400;
    (y, mo, d, s / 3600, s / 60 % 60, s % 60)
}

/// `2026-05-01 12:34:56 UTC`.
pub fn utc(unix: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_parts(unix);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

/// `./flowpath-suite-20260501-123456` (UTC) for the given time.
pub fn default_out_dir(unix: u64) -> PathBuf {
    let (y, mo, d, h, mi, s) = utc_parts(unix);
    PathBuf::from(format!(
        "flowpath-suite-{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}"
    ))
}

/// Write `results.json`, `report.html` and every chart as its own `.svg` into `dir`
/// (created if missing). Returns the paths written.
pub fn write_outputs(r: &SuiteResults, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut put = |name: &str, body: &str| -> std::io::Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, body)?;
        written.push(p);
        Ok(())
    };
    put(
        "results.json",
        &(serde_json::to_string_pretty(r).map_err(std::io::Error::other)? + "\n"),
    )?;
    put("report.html", &html(r))?;
    for (name, _, svg) in chart_files(r) {
        put(&name, &svg)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_percentages() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_777_640_096), "2026-05-01 12:54:56 UTC");
        assert_eq!(
            default_out_dir(1_777_640_096),
            PathBuf::from("flowpath-suite-20260501-125456")
        );
        assert_eq!(pct(0.1), "10 %");
        assert_eq!(pct(0.005), "0.50 %");
        assert_eq!(pct(1.0), "100 %");
        assert_eq!(thousands(50_000.4), "50,000");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
