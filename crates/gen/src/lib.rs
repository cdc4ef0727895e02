//! Traffic generation: packets built from a spec with lengths and checksums right, and an
//! in-memory source that hands the datapath batches without copying.
