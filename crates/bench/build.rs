//! Records the source revision this binary is built from (`git rev-parse --short HEAD`,
//! "-dirty" when tracked files differ from it) as `FLOWPATH_BUILD_REV`, so that a copied
//! or older binary reports its own revision, not that of wherever it runs.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR")])
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let rev = git(&["rev-parse", "--short", "HEAD"]).map(|rev| {
        let clean = Command::new("git")
            .args(["-C", env!("CARGO_MANIFEST_DIR"), "diff", "--quiet", "HEAD"])
            .status()
            .is_ok_and(|s| s.success());
        if clean {
            rev
        } else {
            rev + "-dirty"
        }
    });
    println!(
        "cargo:rustc-env=FLOWPATH_BUILD_REV={}",
        rev.as_deref().unwrap_or("")
    );
    // Again when HEAD moves (a commit, a checkout), the index changes, or any source in the
    // workspace's crates does (so "-dirty" follows edits; this crate depends on most of
    // them and is rebuilt then anyway). Only paths that exist: Cargo reruns a script on
    // every build for a path that does not.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=..");
    let mut watch = vec!["HEAD".to_string(), "index".into(), "packed-refs".into()];
    watch.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for p in watch {
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &p]) {
            if PathBuf::from(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}
