//! Build-time compilation of flowpath's C XDP programs with clang, for the `build.rs` of
//! every crate that embeds one. Without clang the build still succeeds with empty objects.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compile each of `sources` (paths relative to the crate, e.g. `bpf/x.bpf.c`) into
/// `OUT_DIR/<file stem>.o` (`x.bpf.o`), for `include_bytes!`. A source that cannot be
/// built (no clang, no libbpf headers) becomes an empty object and a cargo warning that
/// ends with `fails`, what will not work at run time; loaders report empty objects.
/// `debug_info` adds `-g` (BTF, needed for CO-RE and aya's map definitions).
/// With `FLOWPATH_REQUIRE_BPF` set (not `0`), as CI sets it once clang and libbpf-dev are
/// installed, a source that does not build fails the build instead: otherwise an error in
/// a program would only leave a warning, and the tests that load it say they skip.
pub fn compile_xdp_programs(sources: &[&str], debug_info: bool, fails: &str) {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-env-changed=FLOWPATH_REQUIRE_BPF");
    let required = env::var_os("FLOWPATH_REQUIRE_BPF").is_some_and(|v| !v.is_empty() && v != "0");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    for src in sources {
        println!("cargo:rerun-if-changed={src}");
        let stem = Path::new(src)
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".c"))
            .expect("an XDP source is a .c file");
        let obj = out.join(format!("{stem}.o"));
        if let Err(why) = compile(&clang, Path::new(src), &obj, debug_info) {
            if required {
                panic!("XDP program {src} not built ({why}), and FLOWPATH_REQUIRE_BPF is set");
            }
            println!("cargo:warning=XDP program {src} not built ({why}); {fails}");
            std::fs::write(&obj, b"").expect("write an empty object");
        }
    }
}

fn compile(clang: &str, src: &Path, obj: &Path, debug_info: bool) -> Result<(), String> {
    let mut cmd = Command::new(clang);
    if debug_info {
        cmd.arg("-g");
    }
    cmd.args([
        "-O2",
        "-target",
        "bpf",
        "-D__TARGET_ARCH_x86",
        "-Wall",
        "-Ibpf",
    ]);
    // Debian/Ubuntu keep <asm/types.h> in a multiarch directory that `-target bpf` does not
    // search by itself.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    if Path::new(&multiarch).is_dir() {
        cmd.arg(format!("-I{multiarch}"));
    }
    cmd.arg("-c").arg(src).arg("-o").arg(obj);
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run {clang}: {e}"))?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        let first = err.lines().find(|l| l.contains("error")).unwrap_or("");
        return Err(format!("{clang} failed: {first}"));
    }
    Ok(())
}
