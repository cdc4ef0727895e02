//! `Action`: what the datapath does to a packet once its flow is known.
//!
//! The slow path flattens a rule pipeline (apply-actions across `goto_table`s) into one
//! list of these, which a megaflow carries. `Output`, `InPort` and `Controller` are carried
//! out by the datapath; every other action rewrites the packet (see [`crate::rewrite`]).

/// One datapath action. Addresses and numbers are in host representation; rewrites store
/// them in network byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send a copy of the packet, as it is now, to port N. OpenFlow semantics: output to
    /// the packet's own ingress port is skipped (use [`Action::InPort`] for that).
    Output(u32),
    /// Send the packet back out of the port it came in on.
    InPort,
    /// Queue a copy (at most `max_len` bytes) for the controller application.
    Controller {
        max_len: u16,
    },
    SetEthSrc([u8; 6]),
    SetEthDst([u8; 6]),
    SetIpv4Src([u8; 4]),
    SetIpv4Dst([u8; 4]),
    SetIpv6Src([u8; 16]),
    SetIpv6Dst([u8; 16]),
    /// Set the DSCP bits of the IPv4 TOS / IPv6 traffic class to `tos & 0xfc`; ECN is kept
    /// (the semantics of OVS's `mod_nw_tos`).
    SetNwTos(u8),
    /// Set the TCP/UDP source port (no-op on other protocols and on later fragments).
    SetTpSrc(u16),
    SetTpDst(u16),
    /// Push an 802.1Q (0x8100) or 802.1ad (0x88a8) tag; VID and PCP are copied from the
    /// current outer tag if there is one, else zero.
    PushVlan {
        tpid: u16,
    },
    /// Remove the outer VLAN tag (no-op when untagged).
    PopVlan,
    /// Set the outer tag's VID; pushes an 802.1Q tag when the packet has none (as OVS's
    /// `mod_vlan_vid` does).
    SetVlanVid(u16),
    /// Set the outer tag's PCP; pushes an 802.1Q tag when the packet has none.
    SetVlanPcp(u8),
    /// Decrement the IPv4 TTL / IPv6 hop limit; a packet whose TTL is 0 or 1 is dropped
    /// (counted as `ttl_expired`) and no later action runs. No-op on non-IP packets.
    DecTtl,
    /// Set the tunnel ID (the VXLAN VNI, 24 bits) carried with the packet as metadata:
    /// later tables match the new `tun_id`, and a tunnel output port encapsulates with it.
    /// The packet's bytes are not changed (OVS's `set_tunnel`).
    SetTunnel(u32),
}

impl Action {
    /// Does this action write packet bytes?
    pub fn is_rewrite(&self) -> bool {
        !matches!(
            self,
            Action::Output(_) | Action::InPort | Action::Controller { .. } | Action::SetTunnel(_)
        )
    }
}
