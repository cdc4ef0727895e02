//! The action words: those flowpath runs, each mapped to its [`A`], and those it knows but
//! does not run; [`Ctx::lookup`] tells which a word is, with a suggestion for a typo.

use super::ctx::Ctx;
use crate::error::{did_you_mean, shown, SyntaxError};
use crate::lex::Key;

/// An action word flowpath runs (several words may name one).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum A {
    Output,
    InPort,
    Controller,
    Drop,
    GotoTable,
    Resubmit,
    ModDlSrc,
    ModDlDst,
    ModNwSrc,
    ModNwDst,
    ModNwTos,
    ModTpSrc,
    ModTpDst,
    SetField,
    PushVlan,
    PopVlan,
    ModVlanVid,
    ModVlanPcp,
    DecTtl,
    SetTunnel,
    Group,
    Normal,
    Flood,
    All,
    WriteMetadata,
    Ct,
    CtClear,
}

/// Action names flowpath supports (matched case-insensitively, as OVS does).
const ACTIONS: &[(&str, A)] = &[
    ("output", A::Output),
    ("in_port", A::InPort),
    ("controller", A::Controller),
    ("drop", A::Drop),
    ("goto_table", A::GotoTable),
    ("resubmit", A::Resubmit),
    ("mod_dl_src", A::ModDlSrc),
    ("mod_dl_dst", A::ModDlDst),
    ("mod_nw_src", A::ModNwSrc),
    ("mod_nw_dst", A::ModNwDst),
    ("mod_nw_tos", A::ModNwTos),
    ("mod_tp_src", A::ModTpSrc),
    ("mod_tp_dst", A::ModTpDst),
    ("set_field", A::SetField),
    ("push_vlan", A::PushVlan),
    ("strip_vlan", A::PopVlan),
    ("pop_vlan", A::PopVlan),
    ("mod_vlan_vid", A::ModVlanVid),
    ("mod_vlan_pcp", A::ModVlanPcp),
    ("dec_ttl", A::DecTtl),
    ("set_tunnel", A::SetTunnel),
    ("set_tunnel64", A::SetTunnel),
    ("group", A::Group),
    ("write_metadata", A::WriteMetadata),
    ("normal", A::Normal),
    ("flood", A::Flood),
    ("all", A::All),
    ("ct", A::Ct),
    ("ct_clear", A::CtClear),
];

const SUPPORTED: &str = "output, in_port, controller, drop, goto_table, resubmit(,TABLE), \
mod_dl_src, mod_dl_dst, mod_nw_src, mod_nw_dst, mod_nw_tos, mod_tp_src, mod_tp_dst, set_field, \
push_vlan, strip_vlan, pop_vlan, mod_vlan_vid, mod_vlan_pcp, dec_ttl, set_tunnel, set_tunnel64, \
group, normal, flood, all, ct, ct_clear";

/// OVS actions (and reserved ports usable as actions) that flowpath does not have.
const UNSUPPORTED: &[&str] = &[
    "local",
    "table",
    "none",
    "any",
    "enqueue",
    "output_reg",
    "output_trunc",
    "bundle",
    "bundle_load",
    "set_vlan_vid",
    "set_vlan_pcp",
    "mod_nw_ecn",
    "mod_nw_ttl",
    "set_nw_ttl",
    "move",
    "load",
    "push",
    "pop",
    "set_mpls_label",
    "set_mpls_tc",
    "set_mpls_ttl",
    "dec_mpls_ttl",
    "push_mpls",
    "pop_mpls",
    "dec_nsh_ttl",
    "delete_field",
    "encap",
    "decap",
    "set_queue",
    "pop_queue",
    "fin_timeout",
    "learn",
    "conjunction",
    "multipath",
    "note",
    "exit",
    "sample",
    "nat",
    "clone",
    "check_pkt_larger",
    "meter",
    "write_metadata",
    "apply_actions",
];

impl Ctx<'_> {
    /// Which action `k` names, or why it is none flowpath runs.
    pub(super) fn lookup(&self, k: &Key) -> Result<A, SyntaxError> {
        if let Some(&(_, a)) = ACTIONS.iter().find(|(n, _)| n.eq_ignore_ascii_case(k.name)) {
            return Ok(a);
        }
        let lower = k.name.to_ascii_lowercase();
        if UNSUPPORTED.contains(&lower.as_str()) {
            return Err(self.err(k.at, |c| {
                format!(
                    "action '{}' at column {c} is not supported by flowpath (supported: {SUPPORTED})",
                    k.name
                )
            }));
        }
        let mut cands: Vec<&str> = ACTIONS.iter().map(|&(n, _)| n).collect();
        cands.extend(UNSUPPORTED.iter().copied());
        let hint = did_you_mean(k.name, &cands);
        let name = shown(k.name);
        Err(self.err(k.at, |c| {
            format!("unknown action '{name}' at column {c}{hint}")
        }))
    }
}
