//! Compiles `bpf/flow_tier.bpf.c` (and its header `bpf/flowkey.h`) with clang into OUT_DIR
//! (see flowpath-bpfbuild); `FlowTier::load` reports an object that could not be built.

fn main() {
    println!("cargo:rerun-if-changed=bpf/flowkey.h");
    flowpath_bpfbuild::compile_xdp_programs(
        &["bpf/flow_tier.bpf.c"],
        true,
        "the XDP tier will fail at run time. Install clang and libbpf-dev and rebuild.",
    );
}
