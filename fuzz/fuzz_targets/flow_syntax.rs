//! Fuzz target `flow_syntax`: any bytes as flows text: every flow-syntax parser and the printers.
//! Its check is fuzz/src/flow_syntax.rs, which a stable corpus test also runs.
#![cfg_attr(not(feature = "afl"), no_main)]

#[cfg(not(feature = "afl"))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = flowpath_fuzz::flow_syntax::check(data);
});

#[cfg(feature = "afl")]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = flowpath_fuzz::flow_syntax::check(data);
    });
}
