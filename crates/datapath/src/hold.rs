//! `NeighbourHoldQueue`: packets for a tunnel whose underlay next hop is still being
//! resolved, held a short while instead of dropped.
//!
//! The kernel's ARP-queue rule: while a neighbour is unresolved, keep the first few
//! packets to it (here [`HOLD_PER_REMOTE`] per remote VTEP, [`HOLD_TOTAL`] per worker),
//! send them once the resolver answers, and drop what waits longer than
//! [`HOLD_MAX_AGE_SECS`]. Everything past those bounds is dropped and counted
//! (`tunnel_neigh_unresolved`), so a remote that never answers costs a bounded amount of
//! memory and no per-packet work beyond one compare.

use std::net::IpAddr;

/// Packets held per unresolved remote (Linux's historical `unres_qlen` of 3).
pub const HOLD_PER_REMOTE: usize = 3;
/// Packets held per worker over all remotes.
pub const HOLD_TOTAL: usize = 64;
/// How long a held packet waits for its neighbour before it is dropped.
pub const HOLD_MAX_AGE_SECS: f64 = 1.0;
/// Headroom in front of a held frame, for the outer headers.
pub const HOLD_HEADROOM: usize = 128;

/// One held packet: the inner frame (after `HOLD_HEADROOM` bytes of headroom) and what
/// its encapsulation needs besides the hop.
#[derive(Debug)]
pub struct HeldPacket {
    /// The tunnel port it was output to.
    pub port: u32,
    pub remote: IpAddr,
    pub vni: u32,
    pub flow_hash: u32,
    /// TSC when it was held.
    pub since: u64,
    pub buf: Vec<u8>,
    pub len: usize,
}

/// The worker's held packets, oldest first.
#[derive(Debug, Default)]
pub struct NeighbourHoldQueue {
    pub(crate) packets: Vec<HeldPacket>,
    /// The underlay generation the queue was last tried at.
    pub(crate) tried_at_gen: u64,
}

impl NeighbourHoldQueue {
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    pub fn len(&self) -> usize {
        self.packets.len()
    }

    /// Hold a copy of `frame` for `remote`; false (hold nothing) when the remote already
    /// has [`HOLD_PER_REMOTE`] packets waiting or the queue holds [`HOLD_TOTAL`].
    pub fn hold(
        &mut self,
        port: u32,
        remote: IpAddr,
        vni: u32,
        flow_hash: u32,
        frame: &[u8],
        now: u64,
    ) -> bool {
        if self.packets.len() >= HOLD_TOTAL
            || self.packets.iter().filter(|h| h.remote == remote).count() >= HOLD_PER_REMOTE
        {
            return false;
        }
        let mut buf = vec![0u8; HOLD_HEADROOM + frame.len()];
        buf[HOLD_HEADROOM..].copy_from_slice(frame);
        self.packets.push(HeldPacket {
            port,
            remote,
            vni,
            flow_hash,
            since: now,
            buf,
            len: frame.len(),
        });
        true
    }

    /// Is anything older than `max_age` TSC ticks at `now`?
    pub fn any_expired(&self, now: u64, max_age: u64) -> bool {
        self.packets
            .first()
            .is_some_and(|h| now.saturating_sub(h.since) > max_age)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_per_remote_and_in_all() {
        let mut q = NeighbourHoldQueue::default();
        let a: IpAddr = "192.0.2.2".parse().unwrap();
        for i in 0..HOLD_PER_REMOTE {
            assert!(q.hold(10, a, 42, 0, &[i as u8; 60], 0));
        }
        assert!(
            !q.hold(10, a, 42, 0, &[9; 60], 0),
            "a fourth for one remote"
        );
        let mut n = q.len();
        for r in 0..100u32 {
            let b = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + r));
            if q.hold(10, b, 42, 0, &[1; 60], 0) {
                n += 1;
            }
        }
        assert_eq!(n, HOLD_TOTAL);
        assert_eq!(q.len(), HOLD_TOTAL);
        assert_eq!(&q.packets[0].buf[HOLD_HEADROOM..], &[0u8; 60]);
        assert!(!q.any_expired(10, 10));
        assert!(q.any_expired(11, 10));
    }
}
