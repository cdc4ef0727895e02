//! Fuzz target `openflow_decode`: any bytes as an OpenFlow 1.3 message: decode, re-encode,
//! translate flow_mods, packet_outs and group_mods. Its check is fuzz/src/openflow_decode.rs,
//! which a stable corpus test also runs.
#![cfg_attr(not(feature = "afl"), no_main)]

#[cfg(not(feature = "afl"))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = flowpath_fuzz::openflow_decode::check(data);
});

#[cfg(feature = "afl")]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = flowpath_fuzz::openflow_decode::check(data);
    });
}
