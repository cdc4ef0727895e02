//! Time-stamp counter reads: the cycle clock of every measurement (there is no PMU here).

/// Read the TSC. On non-x86 targets this falls back to nanoseconds since an arbitrary
/// epoch, so the code still runs (with "cycles" meaning ns).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC has no preconditions on x86_64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static T0: OnceLock<Instant> = OnceLock::new();
        T0.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// TSC ticks per second: the kernel's `tsc` frequency when it states one
/// (`tsc_known_freq`), else measured against the monotonic clock over 50 ms.
pub fn tsc_hz() -> f64 {
    use std::sync::OnceLock;
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let t0 = std::time::Instant::now();
        let c0 = rdtsc();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let c1 = rdtsc();
        let dt = t0.elapsed().as_secs_f64();
        (c1 - c0) as f64 / dt
    })
}
