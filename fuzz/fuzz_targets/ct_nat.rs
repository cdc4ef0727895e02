//! Fuzz target `ct_nat`: any bytes as a frame and a rewrite through the NAT's `apply` and
//! `apply_related`. Its check is fuzz/src/ct_nat.rs, which a stable corpus test also runs.
#![cfg_attr(not(feature = "afl"), no_main)]

#[cfg(not(feature = "afl"))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = flowpath_fuzz::ct_nat::check(data);
});

#[cfg(feature = "afl")]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = flowpath_fuzz::ct_nat::check(data);
    });
}
