//! The fast path: per-worker exact-match cache and megaflow cache in front of the slow
//! path, processing batches of up to 32 packets with per-tier counters and TSC cycles.
