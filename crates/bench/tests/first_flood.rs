//! `flowpath bench --first-flood`: a fresh datapath's first flood, batch by batch.

use flowpath_base::BATCH;
use flowpath_bench::{measure_first_flood, BenchConfig};

/// `runs` runs on a megaflow cache of 1,024.
fn small_cache(runs: usize) -> BenchConfig {
    BenchConfig {
        runs,
        megaflow_max: 1024,
        flows: 64,
        ..BenchConfig::default()
    }
}

#[test]
fn the_first_flood_is_timed_batch_by_batch_on_fresh_datapaths() {
    let r = measure_first_flood(&small_cache(3), 2048);
    assert_eq!(r.runs, 3);
    assert_eq!(r.packets, 2048, "twice the megaflow cache");
    assert!(r.cycles_per_packet > 0.0 && r.make_cycles > 0.0);
    // Medians of per-run percentiles keep their order, and no run's worst exceeds the
    // worst of all runs.
    assert!(r.batch_p50 > 0.0);
    assert!(r.batch_p50 <= r.batch_p99 && r.batch_p99 <= r.batch_p999);
    assert!(r.batch_p999 <= r.batch_max && r.batch_max <= r.worst_batch as f64);
    let full = r.batch_max_full.expect("twice the cache fills it");
    assert!(full > 0.0 && full <= r.worst_batch as f64);
    assert!(r.worst_batch_at < r.packets);
    assert_eq!(r.worst_batch_at % BATCH as u64, 0, "a batch's start");
    // The five longest, longest first, the worst among them; each at a batch's start
    // within the flood, in one of the runs.
    assert_eq!(r.longest_batches.len(), 5);
    assert_eq!(
        r.longest_batches[0],
        (r.worst_batch, r.worst_batch_at, r.longest_batches[0].2)
    );
    assert!(r.longest_batches.windows(2).all(|w| w[0].0 >= w[1].0));
    for &(c, at, run) in &r.longest_batches {
        assert!(c > 0 && at < r.packets && at % BATCH as u64 == 0 && run < 3);
    }
}

#[test]
fn a_flood_too_short_to_fill_the_cache_has_no_full_cache_batch() {
    let r = measure_first_flood(&small_cache(1), 1024);
    assert_eq!(r.batch_max_full, None);
    assert!(r.batch_max > 0.0);
}
