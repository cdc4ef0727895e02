//! Fuzz target `pcap_read`: any bytes as a pcap/pcapng file: the capture reader and writer.
//! Its check is fuzz/src/pcap_read.rs, which a stable corpus test also runs.
#![cfg_attr(not(feature = "afl"), no_main)]

#[cfg(not(feature = "afl"))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = flowpath_fuzz::pcap_read::check(data);
});

#[cfg(feature = "afl")]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = flowpath_fuzz::pcap_read::check(data);
    });
}
