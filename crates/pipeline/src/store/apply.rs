//! Change application: each [`Change`] of a batch carried out, in order, on the batch's
//! working copy of the tables ([`Work`]), and checked as it goes; the first refusal
//! refuses the whole batch (the caller then publishes nothing).

use super::change::{Applied, Change, RemovalReason};
use super::work::{shrunk, Work};
use crate::group::{Group, GroupSpec, GROUP_ALL};
use crate::rule::{Rule, RuleCounters, RuleError, RuleId, RuleSpec, Selector};
use std::sync::Arc;

/// Carry out `changes` in order on `work`, recording what they did in `done`; `new_id`
/// hands out the ids of added rules.
pub(super) fn apply_changes(
    work: &mut Work<'_>,
    done: &mut Applied,
    changes: Vec<Change>,
    mut new_id: impl FnMut() -> RuleId,
) -> Result<(), RuleError> {
    for change in changes {
        match change {
            Change::Add(spec) => add(work, done, spec, &mut new_id)?,
            Change::Delete(id) => {
                let (t, i) = work.find_id(id).ok_or(RuleError::NoSuchRule(id))?;
                done.gone(work.remove(t, i), RemovalReason::Delete);
            }
            Change::DeleteStrict {
                table,
                priority,
                matches,
            } => {
                if let Some(i) = work.find_exact(table as usize, priority, &matches) {
                    done.gone(work.remove(table as usize, i), RemovalReason::Delete);
                }
            }
            Change::DeleteWhere(sel) => {
                for (t, i) in work.select(&sel) {
                    done.gone(work.remove(t, i), RemovalReason::Delete);
                }
            }
            Change::Modify {
                selector,
                actions,
                goto,
                write_actions,
                clear_actions,
                reset_counts,
            } => {
                let instructions = |spec: &mut RuleSpec| {
                    spec.actions.clone_from(&actions);
                    spec.goto = goto;
                    spec.write_actions.clone_from(&write_actions);
                    spec.clear_actions = clear_actions;
                };
                modify(work, done, &selector, instructions, reset_counts)?;
            }
            Change::Clear => {
                for r in work.clear() {
                    done.gone(Some(r), RemovalReason::Delete);
                }
            }
            Change::Replace(specs) => replace(work, done, specs, &mut new_id)?,
            Change::AddGroup(spec) => add_group(work, done, spec)?,
            Change::ModifyGroup(spec) => modify_group(work, done, spec)?,
            Change::DeleteGroup(id) => delete_group(work, done, id),
        }
    }
    Ok(())
}

/// [`Change::Add`]: a valid rule whose groups exist (and, with `check_overlap`, that
/// overlaps no rule of its priority) is added under a new id.
fn add(
    work: &mut Work<'_>,
    done: &mut Applied,
    spec: RuleSpec,
    new_id: &mut impl FnMut() -> RuleId,
) -> Result<(), RuleError> {
    spec.validate()?;
    work.check_groups(&spec)?;
    if spec.flags.check_overlap {
        work.check_overlap(&spec)?;
    }
    let id = new_id();
    done.removed += work.add(Rule {
        id,
        spec: Arc::new(shrunk(spec)),
        counters: Arc::new(RuleCounters::default()),
    });
    done.added.push(id);
    Ok(())
}

/// [`Change::Modify`]: every rule `selector` picks gets its instructions from
/// `instructions`, and with `reset_counts` counters from zero (its age stays).
fn modify(
    work: &mut Work<'_>,
    done: &mut Applied,
    selector: &Selector,
    instructions: impl Fn(&mut RuleSpec),
    reset_counts: bool,
) -> Result<(), RuleError> {
    for (t, i) in work.select(selector) {
        let rule = work.rule_mut(t, i);
        let mut spec = (*rule.spec).clone();
        instructions(&mut spec);
        spec.validate()?;
        rule.spec = Arc::new(spec);
        if reset_counts {
            rule.counters = Arc::new(RuleCounters {
                added_ns: rule.counters.added_ns,
                ..RuleCounters::default()
            });
        }
        let spec = rule.spec.clone();
        work.check_groups(&spec)?;
        done.modified += 1;
    }
    Ok(())
}

/// [`Change::Replace`]: every spec valid and its groups there, then the rule set becomes
/// exactly these rules.
fn replace(
    work: &mut Work<'_>,
    done: &mut Applied,
    specs: Vec<RuleSpec>,
    new_id: &mut impl FnMut() -> RuleId,
) -> Result<(), RuleError> {
    for spec in &specs {
        spec.validate()?;
        work.check_groups(spec)?;
    }
    let (added, modified, removed) = work.replace(specs, new_id);
    done.added.extend(added);
    done.modified += modified;
    for r in removed {
        done.gone(Some(r), RemovalReason::Delete);
    }
    Ok(())
}

/// [`Change::AddGroup`]: a valid group under an id not taken.
fn add_group(work: &mut Work<'_>, done: &mut Applied, spec: GroupSpec) -> Result<(), RuleError> {
    spec.validate()?;
    let groups = work.groups();
    if groups.contains_key(&spec.id) {
        return Err(RuleError::GroupExists(spec.id));
    }
    groups.insert(spec.id, Group::new(spec));
    done.groups_added += 1;
    Ok(())
}

/// [`Change::ModifyGroup`]: a valid group in place of the one with its id.
fn modify_group(work: &mut Work<'_>, done: &mut Applied, spec: GroupSpec) -> Result<(), RuleError> {
    spec.validate()?;
    let groups = work.groups();
    let Some(g) = groups.get_mut(&spec.id) else {
        return Err(RuleError::NoSuchGroup(spec.id));
    };
    *g = g.modified(spec);
    done.groups_modified += 1;
    Ok(())
}

/// [`Change::DeleteGroup`]: the group (or every group), and every rule naming one gone.
fn delete_group(work: &mut Work<'_>, done: &mut Applied, id: u32) {
    let groups = work.groups();
    let gone: Vec<u32> = if id == GROUP_ALL {
        groups.drain().map(|(id, _)| id).collect()
    } else {
        groups.remove(&id).map(|_| id).into_iter().collect()
    };
    done.groups_removed += gone.len();
    if !gone.is_empty() {
        let names = |s: &RuleSpec| s.groups().any(|g| gone.contains(&g));
        for (t, i) in work.select_where(None, names) {
            done.gone(work.remove(t, i), RemovalReason::GroupDelete);
        }
    }
}
