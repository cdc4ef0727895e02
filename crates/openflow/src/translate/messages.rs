//! Messages: a flow_mod as a rule ([`flow_mod_to_spec`]) or a selector of rules
//! ([`flow_mod_selector`]), a group_mod as a group ([`group_mod_to_spec`]), a rule store's
//! refusal as an OpenFlow error ([`rule_error`]), and rules, groups and tables as the
//! bodies of FLOW_REMOVED and multipart replies.

use super::actions::{
    actions_to_of_actions, instructions_to_rule, of_actions_to_actions, rule_to_instructions,
    ActionContext, SETTABLE_FIELDS,
};
use super::error::OfError;
use super::matches::{match_to_oxm, oxm_to_match, METADATA_BITS, SUPPORTED_FIELDS};
use crate::codec::{Bucket as OfBucket, FlowMod, FlowRemoved, GroupMod};
use crate::consts::*;
use crate::multipart::{FlowStats, GroupDesc, TableFeatureProp, TableFeatures};
use crate::oxm::OxmField;
use flowpath_packet::Action;
use flowpath_pipeline::{
    Bucket, FlowFlags, GroupSpec, GroupType, Match, RuleError, RuleSpec, Selector, MAX_TABLES,
};

/// The rule an ADD (or the new instructions a MODIFY) flow_mod describes. Refused:
/// table OFPTT_ALL or above the last table (OFPFMFC_BAD_TABLE_ID), unknown flag bits
/// (OFPFMFC_BAD_FLAGS), and whatever the match and instructions are refused for. The
/// buffer_id is the caller's (flowpath keeps no buffers: answer a set one with
/// OFPBRC_BUFFER_UNKNOWN after applying the flow_mod).
pub fn flow_mod_to_spec(fm: &FlowMod) -> Result<RuleSpec, OfError> {
    if fm.table_id as usize >= MAX_TABLES {
        return Err(OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_TABLE_ID));
    }
    if fm.flags & !0x1f != 0 {
        return Err(OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_FLAGS));
    }
    let matches = oxm_to_match(&fm.match_)?;
    let parts = instructions_to_rule(fm.table_id, &fm.instructions, &matches)?;
    let mut spec = RuleSpec::new(fm.table_id, fm.priority, matches)
        .actions(parts.actions)
        .write_actions(parts.write_actions)
        .clear_actions(parts.clear_actions)
        .flags(FlowFlags::from_bits(fm.flags))
        .cookie(fm.cookie);
    spec.goto = parts.goto;
    spec.idle_timeout = fm.idle_timeout;
    spec.hard_timeout = fm.hard_timeout;
    spec.validate().map_err(|e| rule_error(&e))?;
    Ok(spec)
}

/// Which rules a MODIFY/MODIFY_STRICT/DELETE/DELETE_STRICT flow_mod selects (table
/// OFPTT_ALL is every table; out_port/out_group filter deletes only, as OF 1.3 says).
pub fn flow_mod_selector(fm: &FlowMod) -> Result<Selector, OfError> {
    let strict = matches!(fm.command, OFPFC_MODIFY_STRICT | OFPFC_DELETE_STRICT);
    let delete = matches!(fm.command, OFPFC_DELETE | OFPFC_DELETE_STRICT);
    if !matches!(fm.command, OFPFC_MODIFY | OFPFC_MODIFY_STRICT) && !delete {
        return Err(OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_COMMAND));
    }
    let table = match fm.table_id {
        OFPTT_ALL => None,
        t if t as usize >= MAX_TABLES => {
            return Err(OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_TABLE_ID))
        }
        t => Some(t),
    };
    let mut sel = Selector::all();
    sel.table = table;
    sel.matches = oxm_to_match(&fm.match_)?;
    sel.priority = strict.then_some(fm.priority);
    sel.cookie = fm.cookie;
    sel.cookie_mask = fm.cookie_mask;
    if delete {
        sel.out_port = (fm.out_port != OFPP_ANY).then_some(fm.out_port);
        sel.out_group = (fm.out_group != OFPG_ANY).then_some(fm.out_group);
    }
    Ok(sel)
}

/// The OpenFlow error for a rule store's refusal.
pub fn rule_error(e: &RuleError) -> OfError {
    match e {
        RuleError::BadTable(_) => OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_TABLE_ID),
        RuleError::BadGoto { .. } => OfError::bad_inst(bic::BAD_TABLE_ID),
        RuleError::BadAction { action, .. } => match action {
            Action::Output(_) => OfError::bad_action(bac::BAD_OUT_PORT),
            Action::Group(_) => OfError::bad_action(bac::BAD_OUT_GROUP),
            _ => OfError::bad_action(bac::BAD_ARGUMENT),
        },
        RuleError::NoSuchRule(_) => OfError::new(et::FLOW_MOD_FAILED, fmfc::UNKNOWN),
        // A field the pipeline sets for itself (recirc_id): no controller may match it.
        RuleError::InternalField(_) => OfError::bad_match(crate::consts::bmc::BAD_FIELD),
        RuleError::Overlap { .. } => OfError::new(et::FLOW_MOD_FAILED, fmfc::OVERLAP),
        RuleError::UnknownGroupRef { .. } => OfError::bad_action(bac::BAD_OUT_GROUP),
        RuleError::GroupExists(_) => OfError::new(et::GROUP_MOD_FAILED, gmfc::GROUP_EXISTS),
        RuleError::NoSuchGroup(_) => OfError::new(et::GROUP_MOD_FAILED, gmfc::UNKNOWN_GROUP),
        RuleError::BadGroupId(_) => OfError::new(et::GROUP_MOD_FAILED, gmfc::INVALID_GROUP),
        RuleError::BadGroup { what, .. } => {
            let code = if what.contains("fast-failover") {
                gmfc::BAD_TYPE
            } else if what.contains("chaining") {
                gmfc::CHAINING_UNSUPPORTED
            } else if what.contains("indirect") {
                gmfc::INVALID_GROUP
            } else {
                gmfc::BAD_BUCKET
            };
            OfError::new(et::GROUP_MOD_FAILED, code)
        }
    }
}

/// The group an ADD or MODIFY group_mod describes (bucket actions as in a rule with an
/// empty match, so set_field prerequisites must hold for any packet). Unknown group type:
/// OFPGMFC_BAD_TYPE; id above OFPG_MAX: OFPGMFC_INVALID_GROUP.
pub fn group_mod_to_spec(gm: &GroupMod) -> Result<GroupSpec, OfError> {
    let kind = GroupType::from_code(gm.group_type)
        .ok_or(OfError::new(et::GROUP_MOD_FAILED, gmfc::BAD_TYPE))?;
    if gm.group_id > OFPG_MAX {
        return Err(OfError::new(et::GROUP_MOD_FAILED, gmfc::INVALID_GROUP));
    }
    let any = Match::any();
    let mut buckets = Vec::with_capacity(gm.buckets.len());
    for b in &gm.buckets {
        buckets.push(Bucket {
            weight: b.weight,
            watch_port: b.watch_port,
            watch_group: b.watch_group,
            actions: of_actions_to_actions(&b.actions, &any, ActionContext::Rule)?,
        });
    }
    let spec = GroupSpec::new(gm.group_id, kind, buckets);
    spec.validate().map_err(|e| rule_error(&e))?;
    Ok(spec)
}

/// A group as a GROUP_DESC reply entry.
pub fn group_desc(spec: &GroupSpec) -> GroupDesc {
    let any = Match::any();
    GroupDesc {
        group_type: spec.kind.code(),
        group_id: spec.id,
        buckets: spec
            .buckets
            .iter()
            .map(|b| OfBucket {
                weight: b.weight,
                watch_port: b.watch_port,
                watch_group: b.watch_group,
                actions: actions_to_of_actions(&b.actions, &any),
            })
            .collect(),
    }
}

/// Split nanoseconds into (seconds, nanoseconds) as OpenFlow durations are.
pub fn duration(ns: u64) -> (u32, u32) {
    (
        (ns / 1_000_000_000).min(u32::MAX as u64) as u32,
        (ns % 1_000_000_000) as u32,
    )
}

/// A rule as a FLOW stats reply entry.
pub fn flow_stats(spec: &RuleSpec, packets: u64, bytes: u64, age_ns: u64) -> FlowStats {
    let (duration_sec, duration_nsec) = duration(age_ns);
    FlowStats {
        table_id: spec.table,
        duration_sec,
        duration_nsec,
        priority: spec.priority,
        idle_timeout: spec.idle_timeout,
        hard_timeout: spec.hard_timeout,
        flags: spec.flags.bits(),
        cookie: spec.cookie,
        packet_count: packets,
        byte_count: bytes,
        match_: match_to_oxm(&spec.matches),
        instructions: rule_to_instructions(spec),
    }
}

/// A removed rule as a FLOW_REMOVED message body (`reason`: OFPRR_*).
pub fn flow_removed(
    spec: &RuleSpec,
    reason: u8,
    packets: u64,
    bytes: u64,
    age_ns: u64,
) -> FlowRemoved {
    let (duration_sec, duration_nsec) = duration(age_ns);
    FlowRemoved {
        cookie: spec.cookie,
        priority: spec.priority,
        reason,
        table_id: spec.table,
        duration_sec,
        duration_nsec,
        idle_timeout: spec.idle_timeout,
        hard_timeout: spec.hard_timeout,
        packet_count: packets,
        byte_count: bytes,
        match_: match_to_oxm(&spec.matches),
    }
}

/// What flowpath's tables support, as a TABLE_FEATURES reply body for tables
/// `0..n_tables` (each allowing goto to every later table). Long: send it with
/// [`crate::encode_multipart_reply`], which splits it.
pub fn table_features(n_tables: u8, max_entries: u32) -> Vec<TableFeatures> {
    let ids = FeatureIds::new();
    (0..n_tables)
        .map(|t| TableFeatures {
            table_id: t,
            name: format!("table{t}"),
            metadata_match: METADATA_BITS,
            metadata_write: METADATA_BITS,
            config: 0,
            max_entries,
            properties: ids.properties(t, n_tables),
        })
        .collect()
}

/// The instructions, actions and OXM fields every table lists.
struct FeatureIds {
    insts: Vec<u16>,
    acts: Vec<u16>,
    /// The fields a match may hold (masked where they take a mask).
    fields: Vec<u32>,
    /// The fields a match may leave out.
    wild: Vec<u32>,
    /// The fields set_field may write.
    sets: Vec<u32>,
}

impl FeatureIds {
    fn new() -> FeatureIds {
        FeatureIds {
            insts: vec![
                inst::GOTO_TABLE,
                inst::WRITE_METADATA,
                inst::WRITE_ACTIONS,
                inst::APPLY_ACTIONS,
                inst::CLEAR_ACTIONS,
            ],
            acts: vec![
                act::OUTPUT,
                act::PUSH_VLAN,
                act::POP_VLAN,
                act::GROUP,
                act::DEC_NW_TTL,
                act::SET_FIELD,
            ],
            fields: SUPPORTED_FIELDS
                .iter()
                .map(|f| oxm_id(*f, f.maskable()))
                .collect(),
            wild: SUPPORTED_FIELDS.iter().map(|f| oxm_id(*f, false)).collect(),
            sets: SETTABLE_FIELDS.iter().map(|f| oxm_id(*f, false)).collect(),
        }
    }

    /// Table `t`'s properties: the last table has no goto and no next tables.
    fn properties(&self, t: u8, n_tables: u8) -> Vec<TableFeatureProp> {
        let last = t as usize + 1 >= n_tables as usize;
        let mut insts = self.insts.clone();
        if last {
            insts.retain(|i| *i != inst::GOTO_TABLE);
        }
        let next: Vec<u8> = (t.saturating_add(1)..n_tables).collect();
        let mut props = Vec::new();
        for miss in [false, true] {
            props.push(TableFeatureProp::Instructions {
                miss,
                ids: insts.clone(),
            });
            props.push(TableFeatureProp::NextTables {
                miss,
                tables: if last { Vec::new() } else { next.clone() },
            });
            props.push(TableFeatureProp::WriteActions {
                miss,
                ids: self.acts.clone(),
            });
            props.push(TableFeatureProp::ApplyActions {
                miss,
                ids: self.acts.clone(),
            });
        }
        props.push(TableFeatureProp::Match(self.fields.clone()));
        props.push(TableFeatureProp::Wildcards(self.wild.clone()));
        for miss in [false, true] {
            props.push(TableFeatureProp::WriteSetfield {
                miss,
                oxms: self.sets.clone(),
            });
            props.push(TableFeatureProp::ApplySetfield {
                miss,
                oxms: self.sets.clone(),
            });
        }
        props
    }
}

/// The OXM id of `f`: its header, with the mask bit and doubled length when `masked`.
fn oxm_id(f: OxmField, masked: bool) -> u32 {
    let h = f.header();
    if masked {
        (h & !0xff) | 0x100 | (2 * f.width() as u32)
    } else {
        h
    }
}
