//! Fuzz target `packet_parse`: any bytes as an Ethernet frame: parse, strip VXLAN, every rewrite.
//! Its check is fuzz/src/packet_parse.rs, which a stable corpus test also runs.
#![cfg_attr(not(feature = "afl"), no_main)]

#[cfg(not(feature = "afl"))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = flowpath_fuzz::packet_parse::check(data);
});

#[cfg(feature = "afl")]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = flowpath_fuzz::packet_parse::check(data);
    });
}
