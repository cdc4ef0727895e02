//! `memory::give_back`: it trims only after enough rule churn, and only when the
//! allocator holds enough free memory to be worth it (its own process: the churn count is
//! process-wide, and other tests' rule stores would add to it).

use flowpath_pipeline::memory::{
    allocator_free_bytes, give_back, note_churn, CHURN, WORTH_TRIMMING,
};

/// Resident pages of this process (`/proc/self/statm`), where Linux says.
fn resident_pages() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    s.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn trims_after_churn_when_much_is_free() {
    if allocator_free_bytes().is_none() {
        eprintln!("skipped: the allocator gives no statistics here (not glibc)");
        return;
    }
    // Little churn: nothing, whatever is free.
    note_churn(CHURN - 1);
    assert_eq!(give_back(), None);
    // 32 MB of small blocks, every 64th kept: the freed ones (runs of 16 KB) sit between live
    // ones, where malloc keeps them.
    let mut blocks: Vec<Box<[u8; 240]>> = (0..140_000).map(|i| Box::new([i as u8; 240])).collect();
    let mut i = 0;
    blocks.retain(|_| {
        i += 1;
        i % 64 == 0
    });
    let before = resident_pages();
    note_churn(1);
    let free = give_back().expect("a trim after the churn");
    assert!(free >= WORTH_TRIMMING, "{free} bytes free");
    if let (Some(b), Some(a)) = (before, resident_pages()) {
        assert!(a < b, "resident pages {b} before the trim, {a} after");
    }
    // The churn is spent.
    assert_eq!(give_back(), None);
    drop(blocks);
}
