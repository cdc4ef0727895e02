//! The bench: drives the real datapath with generated traffic and reports Mpps and TSC
//! cycles per packet (median, min, max over repeated runs).
