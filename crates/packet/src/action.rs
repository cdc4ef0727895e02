//! `Action`: what the datapath does to a packet once its flow is known.
//!
//! The slow path flattens a rule pipeline (apply-actions across `goto_table`s) into one
//! list of these, which a megaflow carries. `Output`, `InPort`, `Controller`, `Normal`,
//! `Flood`, `All` and `Table` are carried out by the datapath; every other action rewrites
//! the packet (see [`crate::rewrite`]).

/// Why a packet went to the controller (OpenFlow 1.3 `ofp_packet_in_reason`).
pub mod packet_in_reason {
    /// A table-miss rule (priority 0, every field wildcarded) sent it.
    pub const NO_MATCH: u8 = 0;
    /// An explicit controller action sent it.
    pub const ACTION: u8 = 1;
    /// A TTL expired (not produced by flowpath yet).
    pub const INVALID_TTL: u8 = 2;
}

/// `max_len` meaning "the whole frame, unbuffered" (OpenFlow's `OFPCML_NO_BUFFER`).
pub const CONTROLLER_NO_BUFFER: u16 = 0xffff;

/// One datapath action. Addresses and numbers are in host representation; rewrites store
/// them in network byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send a copy of the packet, as it is now, to port N. OpenFlow semantics: output to
    /// the packet's own ingress port is skipped (use [`Action::InPort`] for that).
    Output(u32),
    /// Send the packet back out of the port it came in on.
    InPort,
    /// Queue a copy (at most `max_len` bytes; 0xffff: all of it) for the controller
    /// application, with what an OpenFlow PACKET_IN says about it. A rule carries only
    /// `max_len` (build it with [`Action::controller`]); the slow path fills `reason`,
    /// `table` and `cookie` from the rule that ran it (see [`Action::cookie`]). The cookie
    /// is two halves (high, low) so that `Action` stays 4-aligned and 20 bytes.
    Controller {
        max_len: u16,
        reason: u8,
        table: u8,
        cookie: [u32; 2],
    },
    /// OpenFlow `NORMAL`: the switch's own L2 forwarding, a per-VLAN MAC-learning switch
    /// (learn the source; a known destination goes to its port, anything else floods).
    /// The slow path resolves it with the datapath's MAC learning table into `Output`s or
    /// `Flood`; a megaflow holding it depends on in_port, the VLAN and both MACs.
    Normal,
    /// OpenFlow `FLOOD`: every port of the switch but the ingress port.
    Flood,
    /// OpenFlow `ALL`: every port of the switch but the ingress port.
    All,
    /// OpenFlow `TABLE`: run the packet through the pipeline from table 0 as if it had
    /// arrived on its in_port. Valid only in a packet-out's actions (a rule's are refused).
    Table,
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
    /// Set the tunnel destination (the remote VTEP) carried with the packet as metadata,
    /// as `set_field:…->tun_dst` / `tun_ipv6_dst` (OVS): later tables match the new
    /// `tun_dst`, and a tunnel port with `remote_ip = "flow"` sends to it. An IPv4 address
    /// is held IPv4-mapped (`::ffff:a.b.c.d`, see [`Action::tunnel_dst`]); the packet's
    /// bytes are not changed.
    SetTunnelDst([u8; 16]),
    /// OpenFlow `group:N`: run group N's buckets (each on its own copy of the packet).
    /// Only rules and buckets hold it: the slow path expands it into the buckets' actions
    /// (`flowpath_pipeline`'s group.rs), so a megaflow never carries it and the datapath
    /// and the XDP tier do nothing for it.
    Group(u32),
    /// OpenFlow's write-metadata instruction: `metadata = (metadata & !mask) | (value &
    /// mask)` for the tables after this rule (24 bits, see `Field::Metadata`). A rule holds
    /// it as the last of its apply-actions, which is where the instruction runs (after
    /// apply-actions, clear-actions and write-actions, before goto_table); the slow path
    /// applies it to the key it classifies, so a megaflow never carries it.
    WriteMetadata {
        value: u32,
        mask: u32,
    },
    /// OVS's `ct(...)`: run the packet through the connection tracker as its interned
    /// [`crate::CtSpec`] says (zone, commit, NAT, ct_mark/ct_label); with `table=T` a copy
    /// is tracked and recirculated into table T with its ct fields set, and the packet
    /// itself goes on with the next action untracked (OVS's fork).
    Ct(crate::CtId),
    /// OVS's `ct_clear`: clear the packet's ct fields (it is untracked again).
    CtClear,
}

impl Action {
    /// A controller action as a rule holds it (reason, table and cookie are the slow
    /// path's to fill).
    pub const fn controller(max_len: u16) -> Action {
        Action::Controller {
            max_len,
            reason: packet_in_reason::ACTION,
            table: 0,
            cookie: [0, 0],
        }
    }

    /// The cookie of a `Controller` action (0 for any other).
    pub fn cookie(&self) -> u64 {
        match *self {
            Action::Controller { cookie, .. } => ((cookie[0] as u64) << 32) | cookie[1] as u64,
            _ => 0,
        }
    }

    /// Split a cookie into the halves `Controller` stores.
    pub const fn cookie_halves(cookie: u64) -> [u32; 2] {
        [(cookie >> 32) as u32, cookie as u32]
    }

    /// `SetTunnelDst` for an IPv4 or IPv6 remote.
    pub fn set_tunnel_dst(addr: std::net::IpAddr) -> Action {
        Action::SetTunnelDst(match addr {
            std::net::IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            std::net::IpAddr::V6(a) => a.octets(),
        })
    }

    /// The address a `SetTunnelDst` holds (IPv4-mapped addresses as IPv4).
    pub fn tunnel_dst(bytes: [u8; 16]) -> std::net::IpAddr {
        let a = std::net::Ipv6Addr::from(bytes);
        match a.to_ipv4_mapped() {
            Some(v4) => std::net::IpAddr::V4(v4),
            None => std::net::IpAddr::V6(a),
        }
    }

    /// Does this action write packet bytes?
    pub fn is_rewrite(&self) -> bool {
        !matches!(
            self,
            Action::Output(_)
                | Action::InPort
                | Action::Controller { .. }
                | Action::SetTunnel(_)
                | Action::SetTunnelDst(_)
                | Action::Group(_)
                | Action::WriteMetadata { .. }
                | Action::CtClear
                | Action::Normal
                | Action::Flood
                | Action::All
                | Action::Table
        )
    }

    /// Does this action send the packet somewhere (a port, ports, or the controller)?
    pub fn is_output(&self) -> bool {
        matches!(
            self,
            Action::Output(_)
                | Action::InPort
                | Action::Controller { .. }
                | Action::Normal
                | Action::Flood
                | Action::All
                | Action::Table
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_stays_small() {
        assert_eq!(std::mem::size_of::<Action>(), 20);
        assert_eq!(std::mem::align_of::<Action>(), 4);
    }

    #[test]
    fn cookie_halves_round_trip() {
        let c = 0x0123_4567_89ab_cdefu64;
        let a = Action::Controller {
            max_len: 1,
            reason: packet_in_reason::ACTION,
            table: 3,
            cookie: Action::cookie_halves(c),
        };
        assert_eq!(a.cookie(), c);
    }
}
