//! Choosing a NAT'd tuple: the candidates a `nat(src=...)`/`nat(dst=...)` range offers a
//! new connection, in the order they are tried. The table takes the first whose reply
//! tuple no connection uses (checked and claimed under the index shard's lock).
//!
//! The translated address and port are enumerated together as one number `k` (address
//! `a0 + k / P`, port `p0 + k mod P` within the ranges), so every pair is tried once. The
//! starting point is the hash of the original tuple (`hash`, the default), a draw of the
//! tracker's generator (`random`), with the address from the hash of the two addresses
//! alone under `persistent` (a client keeps its translated address). The connection's own
//! port is tried first when the range allows it. At most [`MAX_TRIES`] pairs are tried.

use crate::tuple::Tuple;
use crate::InvalidReason;
use flowpath_packet::ct::{NatKind, NatSpec};
use flowpath_packet::key::ipproto;
use std::net::IpAddr;

/// The most (address, port) pairs one new connection tries.
pub const MAX_TRIES: u64 = 4096;
/// Source ports a port-keeping source NAT moves to when the connection's own is taken.
pub const EPHEMERAL: (u16, u16) = (1024, 65535);

/// The candidates for one connection.
#[derive(Clone, Copy, Debug)]
pub struct NatPlan {
    orig: Tuple,
    kind: NatKind,
    addr_lo: u128,
    addr_n: u128,
    a0: u128,
    port_lo: u16,
    port_n: u64,
    p0: u64,
    /// The connection's own port, tried first when it lies in the range.
    keep: Option<u16>,
    has_port: bool,
}

/// An address as the tuple holds it (IPv4 in the top 32 bits), and its family.
fn addr_bits(a: IpAddr) -> (u128, bool) {
    match a {
        IpAddr::V4(v) => (u128::from(u32::from(v)) << 96, false),
        IpAddr::V6(v) => (u128::from(v), true),
    }
}

impl NatPlan {
    /// The plan for `orig` under `spec` (whose kind is set); `h` is the tuple's hash,
    /// `addr_h` the hash of its addresses alone, `rand` a fresh random word.
    pub fn new(
        orig: &Tuple,
        kind: NatKind,
        spec: &NatSpec,
        h: u64,
        addr_h: u64,
        rand: u64,
    ) -> Result<NatPlan, InvalidReason> {
        let own_addr = if kind == NatKind::Src {
            orig.src
        } else {
            orig.dst
        };
        let (addr_lo, addr_n) = match spec.addrs {
            None => (own_addr, 1),
            Some((a, b)) => {
                let ((lo, f1), (hi, f2)) = (addr_bits(a), addr_bits(b));
                if f1 != orig.ipv6 || f2 != orig.ipv6 {
                    return Err(InvalidReason::NatExhausted);
                }
                let (lo, hi) = (lo.min(hi), lo.max(hi));
                let step = if orig.ipv6 { 1 } else { 1u128 << 96 };
                (lo, ((hi - lo) / step).saturating_add(1))
            }
        };
        let icmp = matches!(orig.proto, ipproto::ICMP | ipproto::ICMPV6);
        let has_port = matches!(orig.proto, ipproto::TCP | ipproto::UDP) || icmp;
        let own_port = if kind == NatKind::Src || icmp {
            orig.src_port
        } else {
            orig.dst_port
        };
        let (range, keep) = match spec.ports {
            Some((a, b)) => {
                let (lo, hi) = (a.min(b), a.max(b));
                ((lo, hi), (lo..=hi).contains(&own_port).then_some(own_port))
            }
            None if kind == NatKind::Src || icmp => (EPHEMERAL, Some(own_port)),
            None => ((own_port, own_port), Some(own_port)),
        };
        let (port_lo, port_n) = if has_port {
            (range.0, u64::from(range.1 - range.0) + 1)
        } else {
            (0, 1)
        };
        let start = if spec.flags.random { rand } else { h };
        let a_start = if spec.flags.persistent { addr_h } else { start };
        Ok(NatPlan {
            orig: *orig,
            kind,
            addr_lo,
            addr_n,
            a0: u128::from(a_start) % addr_n,
            port_lo,
            port_n,
            p0: (start >> 32) % port_n,
            keep: keep.filter(|_| has_port),
            has_port,
        })
    }

    /// The translated original-direction tuple for address offset `a`, port `port`.
    fn tuple(&self, a: u128, port: u16) -> Tuple {
        let step = if self.orig.ipv6 { 1 } else { 1u128 << 96 };
        let addr = self.addr_lo + a * step;
        let mut t = self.orig;
        match self.kind {
            NatKind::Src => t.src = addr,
            NatKind::Dst => t.dst = addr,
        }
        if self.has_port {
            if self.kind == NatKind::Src || matches!(t.proto, ipproto::ICMP | ipproto::ICMPV6) {
                t.src_port = port;
            } else {
                t.dst_port = port;
            }
        }
        t
    }

    /// The translated original-direction tuples to try, in order.
    pub fn candidates(&self) -> impl Iterator<Item = Tuple> + '_ {
        let total = u128::from(self.port_n).saturating_mul(self.addr_n);
        let n = total.min(u128::from(MAX_TRIES)) as u64;
        let first = self.keep.map(|p| self.tuple(self.a0, p));
        first.into_iter().chain((0..n).map(move |k| {
            let a = (self.a0 + u128::from(k / self.port_n)) % self.addr_n;
            let p = (self.p0 + k % self.port_n) % self.port_n;
            self.tuple(a, self.port_lo + p as u16)
        }))
    }
}
