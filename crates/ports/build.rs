//! Compiles the XDP programs in `bpf/` with clang into OUT_DIR (see flowpath-bpfbuild).

fn main() {
    flowpath_bpfbuild::compile_xdp_programs(
        &["bpf/xsk_redirect.bpf.c", "bpf/gen_tx.bpf.c"],
        true,
        "AF_XDP ports and `flowpath gen --tx` will fail at run time. Install clang and \
         libbpf-dev and rebuild.",
    );
}
