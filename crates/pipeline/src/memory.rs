//! Giving memory back after big rule changes: the allocator keeps what a change freed.
//!
//! glibc's malloc returns freed memory to the kernel only from the top of a heap, and a
//! rule change frees its temporaries (the parsed flows, the old snapshot's tables, the
//! replaced rules) in the middle of heaps that still hold live rules: a switch that loaded
//! 100,000 flows and was then given 1,000 kept the ~100 MB the first set had used.
//! `malloc_trim(0)` hands back every free page of every arena. Changes note how many rules
//! they touched ([`note_churn`], called by the rule store and when a big table is
//! dropped); a housekeeping thread calls [`give_back`] now and then, which trims once the
//! churn since the last trim passes [`CHURN`] rules and the allocator holds at least
//! [`WORTH_TRIMMING`] free bytes. The trim runs on that thread, never on a datapath
//! worker that happened to drop the last snapshot, and at most once per call.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Rules added, changed or removed (or held by dropped tables) since the last trim.
static CHURN_SINCE_TRIM: AtomicUsize = AtomicUsize::new(0);

/// The churn, in rules, that makes a trim worth checking for.
pub const CHURN: usize = 4096;

/// Free bytes the allocator must hold for a trim to be worth its time.
pub const WORTH_TRIMMING: usize = 8 << 20;

/// Record that `rules` rules were added, changed or removed, or went with a dropped table.
pub fn note_churn(rules: usize) {
    CHURN_SINCE_TRIM.fetch_add(rules, Ordering::Relaxed);
}

/// Hand the allocator's free memory back to the kernel if rule changes since the last
/// call freed enough to matter. Returns the free bytes the allocator held before the
/// trim, when it trimmed.
pub fn give_back() -> Option<usize> {
    if CHURN_SINCE_TRIM.load(Ordering::Relaxed) < CHURN {
        return None;
    }
    CHURN_SINCE_TRIM.store(0, Ordering::Relaxed);
    let free = allocator_free_bytes()?;
    if free < WORTH_TRIMMING {
        return None;
    }
    trim();
    Some(free)
}

/// Bytes the allocator holds free (not handed back to the kernel), where it says.
pub fn allocator_free_bytes() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's statistics.
        let mi = unsafe { libc::mallinfo2() };
        Some(mi.fordblks + mi.fsmblks)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Return every free page of every malloc arena to the kernel (glibc; elsewhere nothing).
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory no allocation holds.
    unsafe {
        libc::malloc_trim(0);
    }
}
