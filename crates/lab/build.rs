//! Compiles the two tiny XDP programs in bpf/ with clang (see flowpath-bpfbuild); without
//! clang the objects are empty and the lab runs without them (and says so).

fn main() {
    flowpath_bpfbuild::compile_xdp_programs(
        &["bpf/xdp_sink.c", "bpf/xdp_pass.c"],
        // BTF: the sink's map is declared the libbpf way (`.maps`), which needs it.
        true,
        "the lab runs without it.",
    );
}
