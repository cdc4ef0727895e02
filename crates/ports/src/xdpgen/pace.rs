//! Rate pacing: the program's own pacing state (`gen_pace`, from [`KERNEL_PACE_FROM`] up)
//! and, below it, the bursts with sleeps between them that both transmitters use.

use super::plan::TxPlan;
use std::time::{Duration, Instant};

/// Rates (packets per second) from which the program paces itself (see [`super::live`]);
/// below, bursts of a few frames with sleeps between them, which cost little CPU and hold
/// the rate there (100k and 500k measured exact into a veth; 1M gave 0.70).
pub const KERNEL_PACE_FROM: u64 = 250_000;
/// Most frames a self-paced program sends late in a row to catch up (a call's setup, a
/// preemption): the peer's ring holds 256.
const MAX_CATCH_UP: u64 = 128;

/// The program's pacing state; must match `struct gen_pace` in `bpf/gen_tx.bpf.c`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct GenPace {
    interval_ns: u64,
    next_ns: u64,
    max_lag_ns: u64,
    interval_frac: u32,
    next_frac: u32,
}

// SAFETY: plain C struct of integers without padding.
unsafe impl aya::Pod for GenPace {}

const _: () = assert!(std::mem::size_of::<GenPace>() == 32);

impl GenPace {
    /// `rate_pps` from the first slot on (0: unpaced).
    pub(super) fn at(rate_pps: u64) -> GenPace {
        if rate_pps == 0 {
            return GenPace::default();
        }
        // The interval in 2^-32 ns, split into whole ns and the fraction.
        let fixed = (1_000_000_000u128 << 32) / u128::from(rate_pps);
        let interval_ns = (fixed >> 32) as u64;
        GenPace {
            interval_ns,
            next_ns: 0,
            max_lag_ns: interval_ns.saturating_mul(MAX_CATCH_UP),
            interval_frac: fixed as u32,
            next_frac: 0,
        }
    }
}

/// Where a burst-paced run stands before its next burst.
pub(super) enum Burst {
    /// The plan's duration is over.
    Stop,
    /// Ahead of the rate: it waited (slept when more than 200 µs ahead, else spun once);
    /// look again.
    Waited,
    /// Send now.
    Due,
}

/// [`Burst`] for a run of `plan` started at `start` that has sent `sent` packets.
pub(super) fn next_burst(plan: &TxPlan, start: Instant, sent: u64) -> Burst {
    let elapsed = start.elapsed();
    if elapsed >= plan.duration {
        return Burst::Stop;
    }
    let Some(r) = plan.rate_pps else {
        return Burst::Due;
    };
    let due = Duration::from_secs_f64(sent as f64 / r as f64);
    if due <= elapsed {
        return Burst::Due;
    }
    let ahead = due - elapsed;
    if ahead > Duration::from_micros(200) {
        std::thread::sleep(ahead - Duration::from_micros(100));
    } else {
        std::hint::spin_loop();
    }
    Burst::Waited
}
