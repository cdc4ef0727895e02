//! Fast traffic transmission for `flowpath gen` (XDP live frames via BPF_PROG_RUN).
//! (stub: helper fills in)
