//! [`Layered`]: two resolvers in order, for a daemon whose tunnel ports mix static hops
//! with hops routed by the kernel.

use std::net::IpAddr;
use std::sync::Arc;

use flowpath_packet::hop::{HopMiss, UnderlayHop, UnderlayResolver};

/// Two resolvers in order: `first`'s hop if it has one, else `then`'s. For a daemon whose
/// tunnel ports mix static hops (`underlay_port` + `next_hop_mac`, a `StaticUnderlay`)
/// with ports routed by the kernel (a [`NetlinkUnderlay`](crate::NetlinkUnderlay)): the static hops win for their
/// remotes. Resolution requests and miss reasons go to `then`.
pub struct Layered {
    pub first: Arc<dyn UnderlayResolver>,
    pub then: Arc<dyn UnderlayResolver>,
}

impl UnderlayResolver for Layered {
    #[inline]
    fn hop(&self, remote: IpAddr) -> Option<UnderlayHop> {
        self.first.hop(remote).or_else(|| self.then.hop(remote))
    }

    fn resolve(&self, remote: IpAddr) {
        self.then.resolve(remote)
    }

    fn generation(&self) -> u64 {
        // Both only grow, so the sum bumps whenever either does.
        self.first.generation().wrapping_add(self.then.generation())
    }

    fn miss(&self, remote: IpAddr) -> HopMiss {
        self.then.miss(remote)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_packet::hop::{StaticUnderlay, UnderlayHop};

    #[test]
    fn layered_prefers_the_static_hop_and_sums_generations() {
        let hop = |port| UnderlayHop {
            port,
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: "10.0.0.1".parse().unwrap(),
        };
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap());
        let first = Arc::new(StaticUnderlay::with(a, hop(1)));
        let then = Arc::new(StaticUnderlay::new());
        then.insert(a, hop(2));
        then.insert(b, hop(3));
        let l = Layered {
            first: first.clone(),
            then: then.clone(),
        };
        assert_eq!(l.hop(a).unwrap().port, 1);
        assert_eq!(l.hop(b).unwrap().port, 3);
        let g = l.generation();
        then.remove(b);
        assert!(l.generation() > g);
        assert_eq!(l.hop(b), None);
        l.resolve(b);
        assert_eq!(then.asked(), vec![b]);
        assert!(first.asked().is_empty());
    }
}
