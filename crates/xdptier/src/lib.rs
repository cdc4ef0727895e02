//! The XDP tier: `bpf/flow_tier.bpf.c` parses frames into flowpath's `FlowKey`, looks them up
//! in BPF maps of cached flows and runs their actions; this crate mirrors its types and loads it.
//!
//! The map contract (names, key and value layouts, versions) is in `docs/xdp-tier.md`; the C
//! definitions are `bpf/flowkey.h`, and every size and offset below is asserted against the
//! same numbers at compile time.

mod actions;
mod flowtier;
mod layout;
pub mod table;
pub use actions::{actions_from, offerable};
pub use flowpath_xdpattach::{ifindex, Attached, XdpMode};
pub use flowtier::{bpf_available, FlowTier, RunResult};
pub use layout::*;
pub use table::{FlowTable, TABLE_ENTRIES};

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_packet::key::{FRAG_ANY, VLAN_PRESENT};
    use flowpath_packet::{Action, Field, FlowKey};

    #[test]
    fn key_is_the_same_bytes() {
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 7);
        k.set(Field::EthType, 0x0800);
        k.set(Field::VlanTci, u128::from(VLAN_PRESENT | 5));
        k.set(Field::TpDst, 80);
        k.set(Field::NwFrag, u128::from(FRAG_ANY));
        k.set(Field::Ipv4Dst, 0x0a00_0001);
        let f = key_from_flowkey(&k);
        assert_eq!(f.in_port, [0, 0, 0, 7]);
        assert_eq!(f.eth_type, [8, 0]);
        assert_eq!(f.vlan_tci, [0x10, 5]);
        assert_eq!(f.tp_dst, [0, 80]);
        assert_eq!(f.nw_frag, FRAG_ANY);
        assert_eq!(f.ip_dst[..4], [10, 0, 0, 1]);
        assert_eq!(flowkey_from_key(&f), k);
    }

    #[test]
    fn tunnel_megaflows_are_not_offered() {
        let tunnel = |p: u32| p == 10;
        let plain = FlowKey::ZERO;
        assert!(offerable(&plain, &[Action::Output(2)], tunnel));
        assert!(!offerable(&plain, &[Action::Output(10)], tunnel), "encap");
        assert!(!offerable(
            &plain,
            &[Action::SetTunnel(3), Action::Output(2)],
            tunnel
        ));
        assert!(!offerable(
            &plain,
            &[
                Action::set_tunnel_dst("192.0.2.9".parse().unwrap()),
                Action::Output(2)
            ],
            tunnel
        ));
        let mut decap = FlowKey::ZERO;
        decap.set(Field::TunFlags, flowpath_packet::key::TUN_PRESENT as u128);
        decap.set(Field::InPort, 10);
        assert!(!offerable(&decap, &[Action::Output(2)], tunnel), "decap");
        assert!(actions_from(
            &[Action::set_tunnel_dst("2001:db8::1".parse().unwrap())],
            Some
        )
        .is_none());
    }

    #[test]
    fn actions_conversion_accepts_and_refuses() {
        let dev = |p: u32| (p < 10).then_some(p + 100);
        let a = actions_from(
            &[
                Action::SetEthDst([1, 2, 3, 4, 5, 6]),
                Action::DecTtl,
                Action::Output(3),
            ],
            dev,
        )
        .unwrap();
        assert_eq!(a.flags, act::SET_ETH_DST | act::DEC_TTL | act::OUTPUT);
        assert_eq!((a.out_port, a.out_dev), (3, 103));
        assert_eq!(actions_from(&[], dev).unwrap().flags, 0); // drop
        for bad in [
            vec![Action::Output(1), Action::Output(2)],
            vec![Action::controller(64)],
            vec![Action::Normal],
            vec![Action::Flood],
            vec![Action::All],
            vec![Action::InPort],
            vec![Action::SetTunnel(5), Action::Output(1)],
            vec![Action::Output(11)],
            vec![Action::Output(1), Action::SetEthSrc([0; 6])],
            vec![Action::DecTtl, Action::DecTtl],
            vec![Action::PushVlan { tpid: 0x8100 }, Action::PopVlan],
            vec![Action::SetVlanVid(3), Action::PushVlan { tpid: 0x8100 }],
            vec![Action::SetIpv4Src([1; 4]), Action::SetIpv6Src([1; 16])],
        ] {
            assert!(actions_from(&bad, dev).is_none(), "{bad:?} accepted");
        }
        let v = actions_from(
            &[
                Action::PopVlan,
                Action::PushVlan { tpid: 0x88a8 },
                Action::SetVlanVid(0x123),
                Action::SetVlanPcp(5),
                Action::SetVlanVid(0x456),
            ],
            dev,
        )
        .unwrap();
        assert_eq!(v.pop_vlans, 1);
        assert_eq!(v.push_tpid, [0x88, 0xa8]);
        assert_eq!(v.vlan_keep, 0x1000);
        assert_eq!(v.vlan_set, 0xa456);
    }
}
