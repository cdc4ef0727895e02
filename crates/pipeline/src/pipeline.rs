//! The pipeline: tables 0..N walked with `goto_table`, producing a megaflow.
//!
//! [`Pipeline`] is an immutable, versioned snapshot; [`RuleStore`] publishes a new one for
//! every batch of changes (copy-on-write per table), so readers never lock and a batch of
//! changes is seen all at once or not at all.

use crate::rule::{Match, Rule, RuleCounters, RuleError, RuleId, RuleSpec, MAX_TABLES};
use crate::table::{Backend, Table};
use arc_swap::ArcSwap;
use flowpath_packet::key::{ethertype, ipproto, FRAG_LATER, VLAN_PRESENT, VLAN_VID_MASK};
use flowpath_packet::{Action, Field, FlowKey};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where a rule sits in a snapshot: (table, index into that table's rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RuleRef {
    pub table: u8,
    pub index: u32,
}

/// How classification of one key ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    /// The last rule had no `goto_table`.
    Done,
    /// No rule matched in this table: the packet is dropped (OpenFlow 1.3 table-miss).
    TableMiss(u8),
    /// `dec_ttl` found TTL 0 or 1: the packet is dropped there.
    TtlExpired,
    /// A third VLAN tag was pushed: more than flowpath parses, so it is dropped there.
    TooManyVlans,
}

/// The slow path's answer for one key: a megaflow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The flattened actions, in execution order.
    pub actions: SmallVec<[Action; 4]>,
    /// Every key bit the decision depended on: any packet that agrees with the classified
    /// key on these bits gets the same actions.
    pub mask: FlowKey,
    /// The rules that matched, in table order (for counters).
    pub path: SmallVec<[RuleRef; 4]>,
    pub ending: Ending,
}

/// An immutable snapshot of all tables.
#[derive(Debug)]
pub struct Pipeline {
    tables: Vec<Arc<Table>>,
    version: u64,
    backend: Backend,
    seed: u64,
}

impl Pipeline {
    pub fn empty(backend: Backend, seed: u64) -> Pipeline {
        Pipeline {
            tables: Vec::new(),
            version: 0,
            backend,
            seed,
        }
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn table(&self, t: u8) -> Option<&Table> {
        self.tables.get(t as usize).map(|t| &**t)
    }

    pub fn n_tables(&self) -> usize {
        self.tables.len()
    }

    pub fn rule(&self, r: RuleRef) -> &Rule {
        &self.tables[r.table as usize].rules()[r.index as usize]
    }

    /// All rules, table by table.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.tables.iter().flat_map(|t| t.rules().iter())
    }

    /// Classify `key` through the tables and build its megaflow.
    pub fn translate(&self, key: &FlowKey) -> Translation {
        let mut k = *key;
        let mut wc = FlowKey::ZERO;
        // Megaflows are per ingress port: outputs depend on it (no output to in_port).
        wc.set_all(Field::InPort);
        let mut actions = SmallVec::new();
        let mut path = SmallVec::new();
        let mut t = 0u8;
        let ending = 'walk: loop {
            let Some(table) = self.tables.get(t as usize) else {
                break Ending::TableMiss(t);
            };
            let Some(i) = table.lookup(&k, &mut wc) else {
                break Ending::TableMiss(t);
            };
            path.push(RuleRef { table: t, index: i });
            let spec = &table.rules()[i as usize].spec;
            for a in &spec.actions {
                if let Some(end) = translate_action(a, &mut k, &mut wc, &mut actions) {
                    break 'walk end;
                }
            }
            match spec.goto {
                Some(g) => t = g,
                None => break Ending::Done,
            }
        };
        Translation {
            actions,
            mask: wc,
            path,
            ending,
        }
    }
}

/// Apply one action to the key being classified, recording what it depended on.
///
/// Later tables match on the key as the actions left it. Bits an action reads are
/// un-wildcarded in the original key's field; where an action moves a value between fields
/// (VLAN push/pop) both fields are un-wildcarded whole, so a later match on the moved value
/// is covered. Extra mask bits only make a megaflow narrower; a missing one would be wrong.
fn translate_action(
    a: &Action,
    k: &mut FlowKey,
    wc: &mut FlowKey,
    out: &mut SmallVec<[Action; 4]>,
) -> Option<Ending> {
    let eth_type = || k.get(Field::EthType) as u16;
    match *a {
        Action::Output(_) | Action::InPort | Action::Controller { .. } => out.push(*a),
        Action::SetTunnel(id) => {
            k.set(Field::TunId, id as u128);
            out.push(*a);
        }
        Action::SetEthSrc(m) => {
            k.set(Field::EthSrc, mac(m));
            out.push(*a);
        }
        Action::SetEthDst(m) => {
            k.set(Field::EthDst, mac(m));
            out.push(*a);
        }
        Action::SetIpv4Src(ip) | Action::SetIpv4Dst(ip) => {
            wc.set_all(Field::EthType);
            if eth_type() == ethertype::IPV4 {
                let f = if matches!(a, Action::SetIpv4Src(_)) {
                    Field::Ipv4Src
                } else {
                    Field::Ipv4Dst
                };
                k.set(f, u32::from_be_bytes(ip) as u128);
                out.push(*a);
            }
        }
        Action::SetIpv6Src(ip) | Action::SetIpv6Dst(ip) => {
            wc.set_all(Field::EthType);
            if eth_type() == ethertype::IPV6 {
                let f = if matches!(a, Action::SetIpv6Src(_)) {
                    Field::Ipv6Src
                } else {
                    Field::Ipv6Dst
                };
                k.set(f, u128::from_be_bytes(ip));
                out.push(*a);
            }
        }
        Action::SetNwTos(tos) => {
            wc.set_all(Field::EthType);
            if is_ip(eth_type()) {
                let old = k.get(Field::NwTos) as u8;
                k.set(Field::NwTos, ((tos & 0xfc) | (old & 0x03)) as u128);
                out.push(*a);
            }
        }
        Action::SetTpSrc(p) | Action::SetTpDst(p) => {
            // Applies to TCP and UDP with an L4 header (not later fragments).
            wc.set_all(Field::EthType);
            wc.set_all(Field::NwProto);
            wc.or_field(Field::NwFrag, FRAG_LATER as u128);
            let proto = k.get(Field::NwProto) as u8;
            let later = k.get(Field::NwFrag) as u8 & FRAG_LATER != 0;
            if is_ip(eth_type()) && (proto == ipproto::TCP || proto == ipproto::UDP) && !later {
                let f = if matches!(a, Action::SetTpSrc(_)) {
                    Field::TpSrc
                } else {
                    Field::TpDst
                };
                k.set(f, p as u128);
                out.push(*a);
            }
        }
        Action::PushVlan { .. } => {
            wc.set_all(Field::VlanTci);
            wc.set_all(Field::VlanInnerTci);
            let outer = k.get(Field::VlanTci) as u16;
            let inner = k.get(Field::VlanInnerTci) as u16;
            out.push(*a);
            if inner & VLAN_PRESENT != 0 {
                return Some(Ending::TooManyVlans);
            }
            k.set(Field::VlanInnerTci, outer as u128);
            k.set(Field::VlanTci, (outer | VLAN_PRESENT) as u128);
        }
        Action::PopVlan => {
            wc.set_all(Field::VlanTci);
            wc.set_all(Field::VlanInnerTci);
            if k.get(Field::VlanTci) as u16 & VLAN_PRESENT != 0 {
                let inner = k.get(Field::VlanInnerTci);
                k.set(Field::VlanTci, inner);
                k.set(Field::VlanInnerTci, 0);
                out.push(*a);
            }
        }
        Action::SetVlanVid(_) | Action::SetVlanPcp(_) => {
            wc.set_all(Field::VlanTci);
            wc.set_all(Field::VlanInnerTci);
            let mut tci = k.get(Field::VlanTci) as u16;
            if tci & VLAN_PRESENT == 0 {
                // Untagged: the action pushes an 802.1Q tag with TCI 0 first.
                tci = VLAN_PRESENT;
            }
            tci = match *a {
                Action::SetVlanVid(v) => (tci & !VLAN_VID_MASK) | (v & VLAN_VID_MASK),
                Action::SetVlanPcp(p) => (tci & 0x1fff) | ((p as u16 & 7) << 13),
                _ => unreachable!(),
            };
            k.set(Field::VlanTci, tci as u128);
            out.push(*a);
        }
        Action::DecTtl => {
            wc.set_all(Field::EthType);
            if is_ip(eth_type()) {
                wc.set_all(Field::NwTtl);
                out.push(*a);
                let ttl = k.get(Field::NwTtl) as u8;
                if ttl <= 1 {
                    return Some(Ending::TtlExpired);
                }
                k.set(Field::NwTtl, (ttl - 1) as u128);
            }
        }
    }
    None
}

fn is_ip(eth_type: u16) -> bool {
    eth_type == ethertype::IPV4 || eth_type == ethertype::IPV6
}

fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |acc, &b| (acc << 8) | b as u128)
}

/// One change to the rule set.
#[derive(Clone, Debug)]
pub enum Change {
    /// Add a rule. OpenFlow semantics: a rule in the same table with the same priority and
    /// identical match is replaced (its counters start again from zero).
    Add(RuleSpec),
    /// Remove one rule by id.
    Delete(RuleId),
    /// Remove the rule with exactly this table, priority and match (OpenFlow delete-strict).
    DeleteStrict {
        table: u8,
        priority: u16,
        matches: Match,
    },
    /// Remove every rule.
    Clear,
}

/// The owner of the rule set: applies changes and publishes versioned snapshots.
#[derive(Debug)]
pub struct RuleStore {
    current: ArcSwap<Pipeline>,
    version: AtomicU64,
    next_id: AtomicU64,
    writer: Mutex<()>,
}

impl RuleStore {
    pub fn new(backend: Backend) -> RuleStore {
        // A per-process random seed keeps crafted keys from aiming at one hash bucket.
        let seed = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x5eed);
            h.finish()
        };
        RuleStore {
            current: ArcSwap::from_pointee(Pipeline::empty(backend, seed)),
            version: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            writer: Mutex::new(()),
        }
    }

    /// The version of the newest snapshot: one atomic load, cheap enough to check per batch.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The newest snapshot.
    pub fn snapshot(&self) -> Arc<Pipeline> {
        self.current.load_full()
    }

    /// Apply `changes` atomically: either all are valid and one new snapshot is published
    /// (returning its version and the ids of added rules), or nothing changes.
    pub fn apply(&self, changes: Vec<Change>) -> Result<(u64, Vec<RuleId>), RuleError> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.current.load_full();
        let mut tables: Vec<Option<Vec<Rule>>> = vec![None; old.tables.len().max(1)];
        let mut added = Vec::new();
        for change in changes {
            match change {
                Change::Add(spec) => {
                    spec.validate()?;
                    let t = spec.table as usize;
                    let rules = edit(&mut tables, &old, t);
                    rules.retain(|r| {
                        !(r.spec.priority == spec.priority && r.spec.matches == spec.matches)
                    });
                    let id = RuleId(self.next_id.fetch_add(1, Ordering::Relaxed));
                    added.push(id);
                    rules.push(Rule {
                        id,
                        spec,
                        counters: Arc::new(RuleCounters::default()),
                    });
                }
                Change::Delete(id) => {
                    let t = (0..old.tables.len().max(tables.len()))
                        .find(|&t| current(&tables, &old, t).iter().any(|r| r.id == id))
                        .ok_or(RuleError::NoSuchRule(id))?;
                    edit(&mut tables, &old, t).retain(|r| r.id != id);
                }
                Change::DeleteStrict {
                    table,
                    priority,
                    matches,
                } => {
                    edit(&mut tables, &old, table as usize)
                        .retain(|r| !(r.spec.priority == priority && r.spec.matches == matches));
                }
                Change::Clear => {
                    for t in 0..tables.len().max(old.tables.len()) {
                        edit(&mut tables, &old, t).clear();
                    }
                }
            }
        }
        let n = tables.len().max(old.tables.len());
        let mut new_tables = Vec::with_capacity(n);
        for t in 0..n {
            match tables.get_mut(t).and_then(Option::take) {
                Some(rules) => {
                    new_tables.push(Arc::new(Table::build(rules, old.backend, old.seed)))
                }
                None => new_tables.push(match old.tables.get(t) {
                    Some(table) => table.clone(),
                    None => Arc::new(Table::build(Vec::new(), old.backend, old.seed)),
                }),
            }
        }
        while new_tables.last().is_some_and(|t| t.rules().is_empty()) {
            new_tables.pop();
        }
        let version = old.version + 1;
        self.current.store(Arc::new(Pipeline {
            tables: new_tables,
            version,
            backend: old.backend,
            seed: old.seed,
        }));
        self.version.store(version, Ordering::Release);
        Ok((version, added))
    }

    /// Convenience: add rules in one atomic change.
    pub fn add(&self, specs: impl IntoIterator<Item = RuleSpec>) -> Result<Vec<RuleId>, RuleError> {
        Ok(self.apply(specs.into_iter().map(Change::Add).collect())?.1)
    }
}

/// The rules of table `t` as the change batch currently has them.
fn current<'a>(tables: &'a [Option<Vec<Rule>>], old: &'a Pipeline, t: usize) -> &'a [Rule] {
    match tables.get(t) {
        Some(Some(r)) => r,
        _ => old.tables.get(t).map(|t| t.rules()).unwrap_or(&[]),
    }
}

/// Copy-on-write access to table `t`'s rules within a change batch.
fn edit<'a>(tables: &'a mut Vec<Option<Vec<Rule>>>, old: &Pipeline, t: usize) -> &'a mut Vec<Rule> {
    debug_assert!(t < MAX_TABLES);
    if tables.len() <= t {
        tables.resize(t + 1, None);
    }
    tables[t].get_or_insert_with(|| {
        old.tables
            .get(t)
            .map(|t| t.rules().to_vec())
            .unwrap_or_default()
    })
}
