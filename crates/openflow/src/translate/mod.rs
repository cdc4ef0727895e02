//! Translation between OpenFlow 1.3 and flowpath's rule types, with the specification's
//! error codes for everything flowpath cannot express ([`OfError`]).
//!
//! **Match fields.** Every OXM field the flow key holds maps to a `flowpath_pipeline::Match`:
//! in_port, eth_dst/eth_src (masked), eth_type, vlan_vid (OFPVID_PRESENT, OFPVID_NONE and
//! the present-only 0x1000/0x1000; the key's TCI keeps bit 0x1000 as "present"), vlan_pcp,
//! ip_dscp and ip_ecn (the key's `nw_tos`), ip_proto, ipv4_src/dst (masked), tcp and udp
//! ports (masks accepted, as OVS does), icmpv4/icmpv6 type and code (the key's transport
//! ports), arp_op (the key keeps the opcode's low byte: an opcode above 255 is BAD_VALUE),
//! arp_spa/arp_tpa (the key's IPv4 addresses, masked), ipv6_src/dst (masked), tunnel_id
//! (masked; the key's 24-bit VNI: a value above 24 bits is BAD_VALUE) and metadata
//! (masked; the key keeps 24 bits, [`METADATA_BITS`]: the rest are always zero, so a value
//! needing one of them is BAD_VALUE and a write_metadata setting one is UNSUP_METADATA).
//!
//! Fields the key lacks are OFPBMC_BAD_FIELD: in_phy_port, sctp_src/sctp_dst
//! (the parser does not read SCTP, so the key's ports are zero for it), arp_sha/arp_tha,
//! ipv6_flabel, ipv6_nd_target/sll/tll, mpls_label/tc/bos, pbb_isid, ipv6_exthdr, and every
//! other class but the Nicira connection-tracking fields.
//!
//! **Connection tracking** speaks OVS's Nicira extensions as `ovs-ofctl -O OpenFlow13`
//! sends them: the NXM_1 ct match fields (`nxm`: ct_state, ct_zone, ct_mark, ct_label
//! and the original-direction tuple, which needs a ct_state that establishes a valid
//! connection: OFPBMC_BAD_PREREQ without one) and the `ct`/`nat`/`ct_clear` actions (`ct`:
//! decoded into an interned `CtSpec`, encoded back for flow stats; `crate::nx` has their
//! wire layout). A zone may come from in_port, eth_src/eth_dst, eth_type, vlan_tci,
//! tun_id, metadata, ct_zone, ct_mark or ct_label (not from registers: flowpath has none);
//! a `ct` whose zone comes from another key field is left out of flow stats.
//!
//! Key fields with no OF 1.3 OXM (nw_ttl, nw_frag, tcp_flags, the inner VLAN, tunnel flags
//! and endpoints) and port ranges (flow syntax `tp_dst=LO-HI` that are not one prefix) are
//! left out of [`match_to_oxm`]: such a rule dumps with a wider match than it has.
//!
//! `matches` holds the match fields (one table row a field), `nxm` the ct match fields,
//! `actions` the actions and instructions, `ct` the Nicira ct actions, `messages`
//! flow_mods, group_mods and the reply bodies made from rules, groups and tables, `error`
//! [`OfError`].

mod actions;
mod ct;
mod error;
mod matches;
mod messages;
mod nxm;

pub use actions::{
    actions_to_of_actions, instructions_to_rule, of_actions_to_actions, rule_to_instructions,
    ActionContext, RuleInstructions, SETTABLE_FIELDS,
};
pub use error::OfError;
pub use matches::{match_to_oxm, oxm_to_match, METADATA_BITS, SUPPORTED_FIELDS};
pub use messages::{
    duration, flow_mod_selector, flow_mod_to_spec, flow_removed, flow_stats, group_desc,
    group_mod_to_spec, rule_error, table_features,
};
pub use nxm::{NxmField, CT_FIELDS};
