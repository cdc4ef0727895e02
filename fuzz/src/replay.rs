//! Replaying a fuzz target's checked-in inputs in a stable `cargo test`: every file of
//! `fuzz/corpus-seed/<target>/` and `fuzz/regressions/<target>/` against its expected outcome.
//!
//! Each directory's `expected.txt` holds one `<file name>\t<outcome>` line per input. Run a
//! test with `FLOWPATH_FUZZ_BLESS=1` to write it anew after adding inputs (then read the diff).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The directories that hold `target`'s inputs, below the `fuzz` directory `fuzz_dir`.
pub fn input_dirs(fuzz_dir: &Path, target: &str) -> [PathBuf; 2] {
    [
        fuzz_dir.join("corpus-seed").join(target),
        fuzz_dir.join("regressions").join(target),
    ]
}

/// Run `check` over every input of `target` (panicking on the first one that breaks an
/// invariant, naming it) and compare the outcomes with the `expected.txt` files. Returns
/// the outcomes, file name first. Fails if the seed corpus is empty.
pub fn replay(
    fuzz_dir: &Path,
    target: &str,
    check: impl Fn(&[u8]) -> String,
) -> Vec<(String, String)> {
    let bless = std::env::var_os("FLOWPATH_FUZZ_BLESS").is_some();
    let mut all = Vec::new();
    let mut mismatches = String::new();
    for dir in input_dirs(fuzz_dir, target) {
        let mut names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(rd) => rd
                .map(|e| e.expect("reading a corpus directory"))
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "expected.txt" && !n.starts_with('.'))
                .collect(),
            Err(_) => continue, // no regressions yet
        };
        names.sort();
        let manifest = dir.join("expected.txt");
        let expected = std::fs::read_to_string(&manifest).unwrap_or_default();
        let expected: Vec<(&str, &str)> = expected
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .collect();
        let mut written = String::new();
        for (n, _) in &expected {
            if !names.iter().any(|name| name == n) {
                let _ = writeln!(mismatches, "{n}: in {} but missing", manifest.display());
            }
        }
        for name in names {
            let data = std::fs::read(dir.join(&name)).expect("reading a corpus file");
            let run = std::panic::AssertUnwindSafe(|| check(&data));
            let Ok(outcome) = std::panic::catch_unwind(run) else {
                panic!(
                    "{}: the check failed (see above)",
                    dir.join(&name).display()
                );
            };
            let _ = writeln!(written, "{name}\t{outcome}");
            match expected.iter().find(|(n, _)| *n == name) {
                Some((_, want)) if *want == outcome => {}
                Some((_, want)) => {
                    let _ = writeln!(mismatches, "{name}: expected {want:?}, got {outcome:?}");
                }
                None => {
                    let _ = writeln!(mismatches, "{name}: not in {}", manifest.display());
                }
            }
            all.push((name, outcome));
        }
        if bless {
            std::fs::write(&manifest, written).expect("writing expected.txt");
        }
    }
    let seeds = input_dirs(fuzz_dir, target)[0].clone();
    assert!(!all.is_empty(), "no inputs in {}", seeds.display());
    assert!(
        bless || mismatches.is_empty(),
        "{target}: outcomes differ from expected.txt (FLOWPATH_FUZZ_BLESS=1 rewrites it):\n{mismatches}"
    );
    all
}
