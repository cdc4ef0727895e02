//! Fuzz target `control_request`: any bytes as control requests to an in-memory switch.
//! Its check is fuzz/src/control_request.rs, which a stable corpus test also runs.
#![cfg_attr(not(feature = "afl"), no_main)]

#[cfg(not(feature = "afl"))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = flowpath_fuzz::control_request::check(data);
});

#[cfg(feature = "afl")]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = flowpath_fuzz::control_request::check(data);
    });
}
