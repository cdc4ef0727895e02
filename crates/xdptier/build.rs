//! Compiles `bpf/flow_tier.bpf.c` with clang into OUT_DIR (as crates/ports/build.rs does).
//! Without clang (or the libbpf headers) the build still succeeds with an empty object, and
//! `FlowTier::load` reports why at run time.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-changed=bpf/flow_tier.bpf.c");
    println!("cargo:rerun-if-changed=bpf/flowkey.h");
    println!("cargo:rerun-if-env-changed=CLANG");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    let src = Path::new("bpf/flow_tier.bpf.c");
    let obj = out.join("flow_tier.bpf.o");
    if let Err(why) = compile(&clang, src, &obj) {
        println!(
            "cargo:warning=XDP program bpf/flow_tier.bpf.c not built ({why}); the XDP tier \
             will fail at run time. Install clang and libbpf-dev and rebuild."
        );
        std::fs::write(&obj, b"").expect("write empty object");
    }
}

fn compile(clang: &str, src: &Path, obj: &Path) -> Result<(), String> {
    let mut cmd = Command::new(clang);
    cmd.args([
        "-g",
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
