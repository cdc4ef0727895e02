//! Fuzz target `ct_tcp`: any bytes as TCP segments both ways through one tracked connection.
//! Its check is fuzz/src/ct_tcp.rs, which a stable corpus test also runs.
#![cfg_attr(not(feature = "afl"), no_main)]

#[cfg(not(feature = "afl"))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = flowpath_fuzz::ct_tcp::check(data);
});

#[cfg(feature = "afl")]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = flowpath_fuzz::ct_tcp::check(data);
    });
}
